"""Fail fast on missing optional dependencies: the table's check, and `spikelens evaluate` with
pandas and RCAEval blocked from importing (a meta-path blocker in the real CLI process)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.requirements import REQUIREMENTS, MissingExtra, Requirement, check, missing_modules

SPIKELENS = str(Path(sys.executable).parent / "spikelens")

BLOCKER = """
import sys
BLOCKED = {"pandas", "RCAEval"}
class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None
sys.meta_path.insert(0, _Blocker())
"""


def test_check_names_missing_modules_and_the_install_command():
    table = {"tool": Requirement("eval", ("json", "no_such_module_xyz"), without="or run --lite")}
    with pytest.raises(MissingExtra) as e:
        check("tool", table)
    assert str(e.value) == (
        "spikelens tool needs the 'eval' extra (missing: no_such_module_xyz); install it "
        "with: make setup-eval  (or pip install -e '.[eval]' -c constraints.txt); or run --lite"
    )
    check("tool", {"tool": Requirement("eval", ("json",))})  # everything present: no error
    check("unlisted", table)


def test_every_listed_module_is_a_real_import_name_when_installed():
    assert missing_modules(("json", "no_such_module_xyz")) == ["no_such_module_xyz"]
    assert all(r.extra in ("eval", "test", "kernels") for r in REQUIREMENTS.values())


def test_evaluate_without_the_eval_extra_stops_before_any_work(tmp_path):
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(BLOCKER)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        "COLUMNS": "60",
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"), os.environ.get("PYTHONPATH", "")]),
    }
    t0 = time.monotonic()
    proc = subprocess.run(
        [SPIKELENS, "evaluate"], env=env, capture_output=True, text=True, timeout=120
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr
    assert (
        "error: spikelens evaluate needs the 'eval' extra (missing: pandas, RCAEval); install it with: "
        "make setup-eval  (or pip install -e '.[eval]' -c constraints.txt)"
    ) in proc.stderr
    assert "--no-peers" in proc.stderr and "Traceback" not in proc.stderr
    # No work started: no state folder (runs, warehouse, Prefect home), nothing printed on stdout.
    assert not home.exists() and proc.stdout == ""
    assert elapsed < 60


def test_evaluate_no_peers_needs_no_extra(tmp_path):
    """--no-peers skips the part that needs pandas: the check lets it through (to its own errors)."""
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(BLOCKER)
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [SPIKELENS, "evaluate", "--no-peers", str(tmp_path / "no-such-suite")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "eval' extra" not in proc.stderr


def test_engine_on_a_gpu_without_triton_says_so_up_front(tmp_path):
    """The engine runs without Triton (torch reference): a note before it starts, not an error."""
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(
        BLOCKER.replace('{"pandas", "RCAEval"}', '{"triton"}')
    )
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [SPIKELENS, "engine", "--model", "tiny", "--device", "cuda", "--max-num-seqs", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        "note: spikelens engine --device cuda needs the 'kernels' extra (missing: triton); install it "
        "with: make setup-test  (or pip install -e '.[kernels]' -c constraints.txt); until then sampling "
        "runs on the torch reference (slower)"
    ) in proc.stderr
    assert (
        proc.returncode == 2 and "engine.max_num_seqs" in proc.stderr
    )  # then the server's own check
