"""flows.confirm's tasks on a real warehouse (a simulated GC-storm run): the arms' files are
valid scenarios replaying the stretch, the measure reads the spike back from the warehouse, and
a cause without an intervention is judged inconclusive and rendered without running anything."""

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from flows.confirm import (
    _judge,
    baseline_facts,
    confirmation_row,
    measure,
    render,
    store_confirmation,
    write_arm,
)
from flows.confirm_source import read_source
from flows.interventions import Stretch, intervention_for, plan_stretch
from flows.paths import StatePaths
from flows.scenario import load_scenario
from rca.analyze import analyze_run
from tests.support.runbuilder import SimSpec, write_run
from warehouse.db import connect
from warehouse.ingest import ingest_run

RUN = "20261201T000000Z-incident-gc-0001"


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    home = tmp_path_factory.mktemp("state")
    spec = SimSpec(run_id=RUN, incident="gc", magnitude=150.0, duration_s=40, users=6)
    run_dir = write_run(home / "runs", spec)
    # the simulated run.json has no scenario: give it the one a real run records
    meta = json.loads((run_dir / "run.json").read_text())
    meta["scenario"] = {
        "name": "sim-gc",
        "duration_s": 40,
        "warmup_s": 3,
        "engine": {"model": "tiny", "kv_blocks": 256},
        "load": {"shape": "constant", "users": 6},
        "faults": [{"kind": "memory.gc_storm", "start_s": 20, "duration_s": 8, "params": {}}],
    }
    (run_dir / "run.json").write_text(json.dumps(meta))
    # … and the prompt length loadgen records for a replay (the simulation keeps only the count)
    requests = pq.read_table(run_dir / "requests.parquet")
    requests = requests.append_column("prompt_tokens_target", requests["prompt_tokens"])
    pq.write_table(requests, run_dir / "requests.parquet")
    ingest_run(home / "warehouse.duckdb", run_dir)
    analyze_run(home / "warehouse.duckdb", RUN)
    paths = StatePaths(home)
    source = read_source(paths.warehouse, run_dir, RUN, None, None)
    stretch = plan_stretch(
        source.spike_start_s, source.spike_end_s, source.t0_offset_s, 3.0, source.trace_end_s
    )
    return paths, source, stretch


def test_each_arm_is_a_valid_scenario_replaying_the_stretch(state, tmp_path):
    paths, source, stretch = state
    facts = baseline_facts.fn(paths.warehouse, source, stretch)
    assert facts.median_output_tokens and 20 <= facts.median_output_tokens <= 40
    assert facts.arrivals_per_s and facts.arrivals_per_s > 0
    files = {}
    looped = intervention_for("penalty", "engine", loops=True)
    for label, change in (("recorded", None), ("removed", looped)):
        files[label] = write_arm.fn(source, stretch, change, facts, tmp_path, label)
    recorded, removed = (load_scenario(files[k]) for k in ("recorded", "removed"))
    assert recorded.duration_s == pytest.approx(stretch.duration_s, abs=1e-3)
    assert recorded.faults[0].start_s == pytest.approx(20 - stretch.shift_s, abs=1e-3)
    assert removed.faults == recorded.faults and removed.runtime == recorded.runtime
    rows = [
        [json.loads(line) for line in (tmp_path / f"{k}.jsonl").read_text().splitlines()]
        for k in ("recorded", "removed")
    ]
    assert len(rows[0]) == len(rows[1]) > 20
    assert [r["t_s"] for r in rows[0]] == [r["t_s"] for r in rows[1]]
    assert all(r["sampling"]["frequency_penalty"] == 0.0 for r in rows[1])
    assert max(r["max_tokens"] for r in rows[1]) <= round(facts.median_output_tokens)
    assert yaml.safe_load(files["recorded"].read_text())["load"]["shape"] == "replay"
    # the recorded run was 6 users in a closed loop: the arms replay them as such, each request
    # naming its user, users who ran on to the end (or past the stretch) never stopping early
    assert recorded.load.replay_loop == "closed"
    assert len({r["user"] for r in rows[0]}) == 6
    assert all(r.get("until_s", math.inf) >= r["t_s"] for r in rows[0])


def test_a_closed_loops_load_verdict_caps_its_users(state, tmp_path):
    paths, source, stretch = state
    facts = baseline_facts.fn(paths.warehouse, source, stretch)
    load = intervention_for("load", "engine", closed_loop=True)
    path = write_arm.fn(source, stretch, load, facts, tmp_path, "removed")
    assert load_scenario(path).load.replay_loop == "closed"
    # a constant 6 users: nobody joined during the spike, so nobody is dropped
    recorded = write_arm.fn(source, stretch, None, facts, tmp_path, "recorded")
    read = [(tmp_path / f"{k}.jsonl").read_text() for k in ("recorded", "removed")]
    assert recorded.exists() and read[0] == read[1]


def test_measure_reads_the_recorded_spike_back_from_the_warehouse(state):
    paths, source, _ = state
    # the recorded run measured against its own spike times: it reproduces itself
    own = Stretch(0.0, 50.0, 0.0, source.spike_start_s, source.spike_end_s)
    m = measure.fn(paths.warehouse, RUN, source, own, "recorded", 1)
    assert m["reproduced"] and m["excess_ms"] > 0 and m["baseline_ms"] > 0


def test_no_intervention_is_inconclusive_and_says_why(state):
    paths, source, stretch = state
    comm = intervention_for("communication", "engine")
    result = _judge(source, comm, stretch, [])
    assert (result.verdict, result.exit_code) == ("inconclusive", 3)
    assert "no intervention: no knob" in result.reason
    page = render.fn(paths, result)
    html = page.read_text()
    assert "Nothing was run" in html and "no knob" in html
    entry = json.loads((page.parent / "report.json").read_text())
    assert entry["kind"] == "confirm" and entry["verdict"] == "inconclusive"


def test_the_cli_runs_the_flow_and_exits_3_when_the_cause_has_no_intervention(state):
    """The whole command without an engine: a communication verdict has no knob, so nothing
    runs, the result and page say why, and the exit code is 3 (inconclusive)."""
    paths, _, _ = state
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(paths.home),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "confirm", RUN, "--cause", "communication"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "inconclusive" in proc.stderr and "no knob" in proc.stderr
    page = Path(proc.stdout.strip().splitlines()[-1])
    assert page.is_file() and page.parent.name == "confirm-1-communication"
    stored = json.loads((paths.run_dir(RUN) / "confirm-1-communication.json").read_text())
    assert stored["verdict"] == "inconclusive" and stored["arms"] == []


def arm(kind: str, repeat: int, excess_ms: float) -> dict:
    return {
        "arm": kind,
        "repeat": repeat,
        "run_id": f"{kind}-{repeat}",
        "baseline_ms": 50.0,
        "threshold_ms": 80.0,
        "spike_ms": 50.0 + excess_ms,
        "excess_ms": excess_ms,
        "windows_above": 3 if excess_ms > 30 else 0,
        "reproduced": excess_ms > 30,
    }


def test_a_confirmation_is_stored_linked_from_its_incident_and_kept_by_a_reingest(state):
    """The result lands in `confirmations` and in the run's folder; the incident page links its
    page and its report.json (so the index) carries it beside the verdict; a re-ingest of the
    run (which replaces every row of it) reads it back from the folder."""
    paths, source, stretch = state
    memory = intervention_for("memory", "engine", gc_paused=True)
    arms = [arm("recorded", 1, 200.0), arm("removed", 1, 20.0)]
    arms += [arm("recorded", 2, 180.0), arm("removed", 2, 10.0)]
    result = _judge(source, memory, stretch, arms)
    assert result.verdict == "confirmed"
    result.report = str(render.fn(paths, result))
    row = confirmation_row(result, 1)
    assert row["share_removed"] == pytest.approx(1 - 15 / 190)
    assert (row["share_low"], row["share_high"]) == pytest.approx((1 - 20 / 180, 1 - 10 / 200))
    page = store_confirmation.fn(paths, result)

    words = "confirmed: 92% [89%, 95%] of the excess went away"
    html = page.read_text()
    link = f'href="confirm-{result.spike_id}-memory/index.html"'
    assert link in html and words in html
    entry = json.loads((page.parent / "report.json").read_text())
    assert entry["confirmation"] == words
    assert words in (paths.reports / "index.html").read_text()

    ingest_run(paths.warehouse, paths.run_dir(RUN))  # replaces the run's rows
    with connect(paths.warehouse, read_only=True) as conn:
        kept = conn.execute(
            "SELECT spike_id, cause, verdict, round(share_removed, 3), page FROM confirmations "
            "WHERE run_id = ? AND cause = 'memory'",
            [RUN],
        ).fetchall()
    assert kept == [
        (result.spike_id, "memory", "confirmed", round(row["share_removed"], 3), row["page"])
    ]
    analyze_run(paths.warehouse, RUN)  # the re-ingest dropped the analysis: back for other tests


def test_a_network_verdict_is_judged_by_measurement_without_a_rerun(state):
    """A client or network cause on our engine: no arm, the client vs server excess decides,
    and the stored row says it was measured (pairs 0)."""
    paths, source, stretch = state
    network = intervention_for("network", "engine")
    outside = {
        "compared": "TTFT",
        "client_baseline_ms": 40.0,
        "client_excess_ms": 200.0,
        "server_baseline_ms": 30.0,
        "server_excess_ms": 4.0,
        "windows_above": 8,
        "reproduced": True,
    }
    result = _judge(source, network, stretch, [], outside)
    assert (result.verdict, result.exit_code, result.arms) == ("confirmed", 0, [])
    assert result.share is not None and result.share["point"] == pytest.approx(0.98)
    assert confirmation_row(result, 1)["pairs"] == 0
    html = render.fn(paths, result).read_text()
    assert "outside the engine" in html and 'data-side="client"' in html


def test_the_arms_are_judged_and_replayed_with_the_recorded_runs_detector(state, tmp_path):
    """A run analysed with the `thorough` preset: each arm's spike is measured against that
    preset's threshold, and the arms' scenarios name it (their own analysis uses it too)."""
    paths, source, stretch = state
    own = Stretch(0.0, 50.0, 0.0, source.spike_start_s, source.spike_end_s)
    thorough = dataclasses.replace(source, scenario={**source.scenario, "detector": "thorough"})
    default = measure.fn(paths.warehouse, RUN, source, own, "recorded", 1)
    judged = measure.fn(paths.warehouse, RUN, thorough, own, "recorded", 1)
    assert judged["baseline_ms"] == default["baseline_ms"]
    assert judged["threshold_ms"] < default["threshold_ms"]
    facts = baseline_facts.fn(paths.warehouse, thorough, stretch)
    arm = write_arm.fn(thorough, stretch, None, facts, tmp_path, "recorded")
    assert load_scenario(arm).detector == "thorough"
