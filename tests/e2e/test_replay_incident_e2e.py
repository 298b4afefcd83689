"""`spikelens replay --from-incident`, for real: an incident as `spikelens incident` stores it
(a run of kind `observed`: the engine's histograms and request counters, as Prometheus returns
them, at a 1-s step) with a burst of finished requests (2 a second, 30 in the spike), replayed
from its counters against our engine started by the flow, with Locust and every collector; the
burst's spike must come back within 5 s of the production one.

The incident is built (tests/support/observed_run.py) rather than pulled from a live Prometheus,
so the test does not depend on a busy box's burst (test_observed_incident.py pulls real ones)."""

import json
import re
from pathlib import Path

import pytest

from rca.analyze import analyze_run
from tests.support.observed_run import Traffic, observed_run
from tests.support.spikelens_cli import run_cli
from warehouse.ingest import ingest_run

pytestmark = pytest.mark.e2e

SPIKE = (20, 26)  # the production spike's windows (the built histograms and counters)
SHIFT = re.compile(r"reproduced at [0-9.]+-[0-9.]+ s \(([+-][0-9.]+) s\)")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    home = tmp_path_factory.mktemp("replay-incident")
    run_dir = observed_run(
        home / "runs", spike=SPIKE, traffic=Traffic(calm=2, burst=30, prompt=48, output=24)
    )
    ingest_run(home / "warehouse.duckdb", run_dir)
    production = analyze_run(home / "warehouse.duckdb", "obs-1")
    assert production.spikes, "the built incident should have its spike"
    engine = json.dumps({"model": "tiny"})
    proc = run_cli(["replay", "--from-incident", "obs-1", "--engine", engine], home)
    return {"home": home, "proc": proc}


def test_the_burst_comes_back_within_five_seconds(replayed):
    proc = replayed["proc"]
    assert proc.returncode == 0, proc.stderr[-4000:]
    shifts = [float(m.group(1)) for m in SHIFT.finditer(proc.stderr)]
    assert shifts and abs(shifts[0]) <= 5.0, proc.stderr[-3000:]
    report = Path(proc.stdout.strip().splitlines()[-1])
    assert report.exists()
    record = json.loads(
        (replayed["home"] / "runs" / report.parent.name / "replay_of.json").read_text()
    )
    assert record["from_incident"] and record["reproduction"][0]["replay"] is not None


def test_a_recorded_run_is_not_an_incident_and_nothing_runs(replayed, tmp_path):
    for args, message in (
        (["no-such-run"], "no run.json"),
        (["obs-1"], "--engine"),
        (["obs-1", "--engine", "{}"], "--engine"),
    ):
        proc = run_cli(["replay", "--from-incident", *args], replayed["home"])
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    runs = sorted(p.name for p in (replayed["home"] / "runs").iterdir())
    assert len(runs) == 2  # the incident and its one replay: the refusals started nothing
