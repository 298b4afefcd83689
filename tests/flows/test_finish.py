"""The one finish of a run (flows/finish.py): ingest → analyse → render → index, and
`spikelens report` re-finishing a stored run through it. Plain calls, no Prefect server."""

import json

import pytest
from typer.testing import CliRunner

from flows.finish import finish_run
from flows.paths import StatePaths
from tests.support.runbuilder import SimSpec, write_run

SPEC = SimSpec(run_id="20261201T000000Z-finish-0001", incident="gc", magnitude=60.0)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    paths = StatePaths(tmp_path_factory.mktemp("home")).ensure()
    run_dir = write_run(paths.runs, SPEC)
    return paths, finish_run(paths, SPEC.run_id, run_dir, in_flow=False)


def test_finish_ingests_finds_the_spike_renders_and_indexes(finished):
    paths, done = finished
    assert done.report == paths.reports / SPEC.run_id / "index.html" and done.report.is_file()
    assert [a.top_cause for a in done.analysis.attributions.values()] == ["memory"]
    index = (paths.reports / "index.html").read_text()
    assert SPEC.run_id in index


def test_report_command_refinishes_the_stored_run_the_same_way(finished, monkeypatch):
    from flows.cli import app

    paths, done = finished
    before = done.report.read_text()
    done.report.unlink()
    (paths.reports / "index.html").unlink()
    monkeypatch.setenv("SPIKELENS_HOME", str(paths.home))
    result = CliRunner().invoke(app, ["report", SPEC.run_id])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == str(done.report)
    assert done.report.read_text() == before and (paths.reports / "index.html").is_file()
    assert json.loads((paths.reports / SPEC.run_id / "report.json").read_text())


def test_report_of_an_unknown_run_exits_2(finished, monkeypatch):
    from flows.cli import app

    paths, _ = finished
    monkeypatch.setenv("SPIKELENS_HOME", str(paths.home))
    result = CliRunner().invoke(app, ["report", "no-such-run"])
    assert result.exit_code == 2 and "error:" in result.output
    monkeypatch.setenv("SPIKELENS_HOME", str(paths.home / "empty"))
    result = CliRunner().invoke(app, ["report", SPEC.run_id])
    assert result.exit_code == 2 and "no warehouse at" in result.output


def test_report_reanalyses_with_the_detector_asked_for_and_says_so(finished, monkeypatch):
    from flows.cli import app

    paths, done = finished
    monkeypatch.setenv("SPIKELENS_HOME", str(paths.home))
    bad = CliRunner().invoke(app, ["report", SPEC.run_id, "--detector", "eager"])
    assert bad.exit_code == 2 and "--detector: unknown preset 'eager'" in bad.output
    try:
        result = CliRunner().invoke(app, ["report", SPEC.run_id, "--detector", "thorough"])
        assert result.exit_code == 0, result.output
        page = done.report.read_text()
        assert "Spikes found by the thorough detector" in page and "1.5× it" in page
        assert "In this run a window had to reach TTFT p99 " in page
    finally:  # the module's other tests read the run as the default analysed it
        assert (
            CliRunner().invoke(app, ["report", SPEC.run_id, "--detector", "default"]).exit_code == 0
        )
    assert "Spikes found by the default detector" in done.report.read_text()
