"""`make lint` (ruff check, ruff format --check, mypy with pyproject.toml's settings) fails on a
lint, format or type error and passes on the real tree.

Each failing case runs the tool on a temporary copy of one small module (templates/ci_bars.py,
which imports nothing from the project) with one injected error, and checks first that the
untouched copy passes, so the failure is the injected error's. The real-tree check reuses the
tree's mypy cache, which `make lint` warms just before pytest runs (then it takes seconds).
"""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "pyproject.toml"
PROBE = REPO / "templates" / "ci_bars.py"


def _run(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _ruff(*args: str | Path) -> subprocess.CompletedProcess:
    return _run("ruff", *args, "--config", CONFIG, "--no-cache")


def _mypy(path: Path, cache: Path) -> subprocess.CompletedProcess:
    return _run("mypy", "--config-file", CONFIG, "--cache-dir", cache, path, cwd=path.parent)


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    """A copy of the probe module under a name no override in pyproject.toml matches."""
    copy = tmp_path / "lint_probe.py"
    copy.write_text(PROBE.read_text())
    return copy


def _inject(path: Path, after: str, text: str) -> None:
    source = path.read_text()
    assert after in source, f"{PROBE} no longer contains {after!r}"
    path.write_text(source.replace(after, after + text, 1))


def test_ruff_check_fails_on_a_lint_error(probe: Path) -> None:
    assert _ruff("check", probe).returncode == 0
    _inject(probe, "from __future__ import annotations\n", "\nimport os\n")
    result = _ruff("check", probe)
    assert result.returncode == 1
    assert "F401" in result.stdout  # `os` imported but unused


def test_ruff_format_check_fails_on_unformatted_code(probe: Path) -> None:
    assert _ruff("format", "--check", probe).returncode == 0
    _inject(probe, "PAD = 6\n", "EXTRA=[1,2 ,3]\n")
    result = _ruff("format", "--check", probe)
    assert result.returncode == 1
    assert "lint_probe.py" in result.stdout
    assert "1 file would be reformatted" in result.stdout


def test_mypy_fails_on_a_type_error(probe: Path, tmp_path: Path) -> None:
    cache = tmp_path / "mypy-cache"
    assert _mypy(probe, cache).returncode == 0
    _inject(probe, "PAD = 6\n", '\n\ndef _width() -> int:\n    return "wide"\n')
    result = _mypy(probe, cache)
    assert result.returncode == 1
    assert "lint_probe.py:" in result.stdout
    assert "[return-value]" in result.stdout


@pytest.mark.timeout(600)  # a cold mypy cache takes minutes on 2 cores; `make lint` warms it
def test_the_tree_passes_lint_and_types() -> None:
    for args in (("ruff", "check", "."), ("ruff", "format", "--check", "."), ("mypy",)):
        result = _run(*args)
        assert result.returncode == 0, f"{' '.join(args)}:\n{result.stdout}{result.stderr}"
