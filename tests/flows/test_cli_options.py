"""Command-line option strings (flows/cli_options.py): parsed, or exit 2 with one line naming
the flag before any flow starts."""

import io
from pathlib import Path

import pytest
import typer
from rich.console import Console

from flows import cli_run
from flows.cli_options import CapacityFlags, detector_option, json_option, slo_option


@pytest.fixture
def screen(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(cli_run, "console", Console(file=out, width=300, color_system=None))
    return out


def _exit_line(screen, call) -> tuple[int, str]:
    with pytest.raises(typer.Exit) as e:
        call()
    return e.value.exit_code, screen.getvalue().splitlines()[-1]


def test_json_option(screen):
    assert json_option("--engine", None) is None
    assert json_option("--engine", '{"max_num_seqs": 8}') == {"max_num_seqs": 8}
    code, line = _exit_line(screen, lambda: json_option("--engine", "[1]"))
    assert (code, line) == (2, "error: --engine: must be a JSON object")
    code, line = _exit_line(screen, lambda: json_option("--overrides", "{"))
    assert code == 2 and line.startswith("error: --overrides: not valid JSON")


def test_detector_option(screen):
    assert detector_option(None) is None and detector_option("thorough") == "thorough"
    code, line = _exit_line(screen, lambda: detector_option("eager"))
    assert (code, line) == (
        2,
        "error: --detector: unknown preset 'eager'; valid: default, thorough, sensitive, p99, p50, local",
    )


def test_slo_option(screen):
    assert slo_option(None) is None
    assert slo_option("ttft_ms=500, tpot_ms=50") == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    code, line = _exit_line(screen, lambda: slo_option("ttft_ms=fast"))
    assert (code, line) == (2, "error: --slo: 'ttft_ms=fast': expected NAME=MS, e.g. ttft_ms=500")


SCENARIO = """\
duration_s: 10
engine: {model: tiny}
slo: {ttft_ms: 500}
"""


def _flags(**given) -> CapacityFlags:
    base = dict(
        users=None,
        rates=None,
        search=None,
        start=1.0,
        max_load=256.0,
        max_steps=8,
        slo=None,
        attainment=0.9,
    )
    return CapacityFlags(**{**base, **given})


def test_capacity_flags_make_steps_or_a_search(tmp_path: Path, screen):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    steps = _flags(users="2,4,8").options(scenario)
    assert (steps.kind, steps.loads, steps.attainment) == ("users", (2.0, 4.0, 8.0), 0.9)
    search = _flags(search="rate", start=2.0, slo="ttft_ms=300").options(scenario)
    assert search.kind == "rate" and search.search.resolution == 0.5
    assert search.slo == {"ttft_ms": 300.0}
    code, line = _exit_line(screen, lambda: _flags(users="2", rates="4").options(scenario))
    assert code == 2 and "give exactly one of --users" in line
    scenario.write_text(SCENARIO.replace("slo: {ttft_ms: 500}\n", ""))
    code, line = _exit_line(screen, lambda: _flags(users="2").options(scenario))
    assert code == 2 and "a capacity sweep needs an SLO" in line
