"""The capacity flow's pieces without an engine: SLO resolution, load overrides, what the page says
per step, the warehouse rows and the baseline query, the page itself, and the CLI's usage errors."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.capacity import (
    CapacityError,
    CapacityOptions,
    SweepRecord,
    _rows,
    load_override,
    resolve_slo,
    store,
)
from pages.capacity import build_capacity_context
from rca.capacity import StepOutcome
from templates.render import render_capacity
from warehouse.db import connect
from warehouse.queries import query

SCENARIO = """name: cap
duration_s: 5
engine: {model: tiny, max_num_seqs: 2}
load: {shape: constant, users: 2}
"""


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    return path


def step(load, passed, ttft):
    metrics = {
        "request_throughput": 3.0,
        "goodput": 2.9 if passed else 0.3,
        "ttft_p50_ms": ttft,
        "ttft_p99_ms": ttft * 2,
        "e2e_p99_ms": 900.0,
    }
    return StepOutcome(
        float(load),
        f"run-{load}",
        20,
        19 if passed else 2,
        0.95 if passed else 0.1,
        passed,
        metrics,
    )


QUEUED = {"steps": 400, "waiting_p50": 4.0, "waiting_p90": 4.0, "batch_mean": 2.0}
IDLE = {"steps": 400, "waiting_p50": 0.0, "waiting_p90": 0.0, "batch_mean": 1.8}


def evidence(queue, spikes=()):
    from rca.capacity import queueing_reading

    return {
        "spikes": list(spikes),
        "spike_count": len(spikes),
        "queue": queue,
        "queueing": queueing_reading(queue),
    }


def stored_sweep(db, steps, ev, loads, sweep_id="sw-1", command="cmd", spikes=None, started=100):
    """The sweep stored as the flow stores it, and `spikes` ({run_id: [(cause, share, summary)]})
    stored as analysed spikes of the step runs; returns the warehouse path."""
    connect(db).close()
    record = SweepRecord(sweep_id, "cap", {"ttft_ms": 150}, started, command)
    store.fn(db, _rows(record, CapacityOptions(loads=loads), steps, ev))
    with connect(db) as conn:
        for run_id, found in (spikes or {}).items():
            for i, (cause, share, summary) in enumerate(found, start=1):
                conn.execute(
                    "INSERT INTO spikes (run_id, spike_id, metric, detector, start_s, end_s, "
                    "severity_score, top_cause, summary) VALUES (?, ?, 'ttft_p99', 'mad', 1, 3, ?, ?, ?)",
                    [run_id, i, 10.0 - i, cause, summary],
                )
                conn.execute(
                    "INSERT INTO attributions (run_id, spike_id, cause, share, confidence) "
                    "VALUES (?, ?, ?, ?, 0.9)",
                    [run_id, i, cause, share],
                )
    return db


def test_slo_comes_from_the_cli_or_the_scenario_and_is_required(scenario, tmp_path):
    with pytest.raises(CapacityError, match=r"slo: a capacity sweep needs an SLO"):
        resolve_slo(str(scenario), CapacityOptions())
    assert resolve_slo(str(scenario), CapacityOptions(slo={"ttft_ms": 100})) == {"ttft_ms": 100}
    with_slo = tmp_path / "t.yaml"
    with_slo.write_text(SCENARIO + "slo: {e2e_ms: 900}\n")
    assert resolve_slo(str(with_slo), CapacityOptions()) == {"e2e_ms": 900}
    with pytest.raises(ValueError, match="slo: unknown key 'p99'"):
        resolve_slo(str(scenario), CapacityOptions(slo={"p99": 1}))
    with pytest.raises(CapacityError, match="attainment"):
        resolve_slo(str(with_slo), CapacityOptions(attainment=0))


def test_load_overrides():
    assert load_override("users", 6.0) == {"shape": "constant", "users": 6}
    assert load_override("rate", 2.5) == {"shape": "poisson", "rate": 2.5}


def test_past_the_knee_the_worst_spike_names_the_cause_else_the_queue_or_nothing(tmp_path):
    steps = [step(2, True, 20), step(4, False, 600), step(6, False, 900), step(8, False, 1200)]
    ev = {
        "run-2": evidence(IDLE),
        "run-4": evidence(QUEUED),
        "run-6": evidence(IDLE),
        "run-8": evidence(QUEUED),
    }
    gc = ("memory", 0.8, "GC gen-2 pauses, 200 ms on average")
    db = stored_sweep(tmp_path / "w.duckdb", steps, ev, (2, 4, 6, 8), spikes={"run-8": [gc]})
    ctx = build_capacity_context(db, "sw-1")
    assert (ctx.knee.capacity, ctx.knee.first_fail, ctx.knee.status) == (2, 4, "found")
    assert (ctx.knee.capacity_run_id, ctx.knee.first_fail_run_id) == ("run-2", "run-4")
    by_load = {x.load: x.cause for x in ctx.steps}
    assert not by_load[2].past_knee
    assert by_load[4].cause == "load" and by_load[4].label == "load (queueing)"
    assert by_load[4].note.startswith("no spike detected; load/queueing: median 4")
    assert by_load[6].cause is None and by_load[6].label == "no spike detected"
    assert by_load[8].cause == "memory" and by_load[8].label == "memory (80% of the excess)"
    assert by_load[8].note.startswith("GC gen-2 pauses, 200 ms on average; load/queueing: median 4")
    assert by_load[8].spikes == 1 and ctx.steps[1].report_href == "../run-4/index.html"
    assert build_capacity_context(db, "sw-1", reports_root=tmp_path).steps[1].report_href is None


def test_steps_are_stored_and_found_again_as_a_baseline(tmp_path):
    db = tmp_path / "w.duckdb"
    connect(db).close()  # schema at the latest version, capacity_steps included
    steps = [step(2, True, 20), step(6, False, 900)]
    ev = {"run-2": evidence(IDLE), "run-6": evidence(QUEUED)}
    opts = CapacityOptions(loads=(2, 6))
    for sweep_id, started in (("sw-old", 100), ("sw-new", 200)):
        record = SweepRecord(sweep_id, "cap", {"ttft_ms": 150}, started)
        store.fn(db, _rows(record, opts, steps, ev))
    record = SweepRecord("sw-new", "cap", {"ttft_ms": 150}, 200)
    store.fn(db, _rows(record, opts, steps, ev))  # replaces, no duplicate
    with connect(db, read_only=True) as conn:
        rows = conn.execute(
            "SELECT sweep_id, step, knee, capacity FROM capacity_steps ORDER BY ALL"
        ).fetchall()
        base = query(
            conn,
            "capacity_baseline",
            scenario_name="cap",
            load_kind="users",
            before_ns=300,
            last_n=5,
        )
        older = query(
            conn,
            "capacity_baseline",
            scenario_name="cap",
            load_kind="users",
            before_ns=150,
            last_n=5,
        )
    assert rows == [
        ("sw-new", 0, True, 2.0),
        ("sw-new", 1, False, 2.0),
        ("sw-old", 0, True, 2.0),
        ("sw-old", 1, False, 2.0),
    ]
    assert [b["sweep_id"] for b in base] == ["sw-new", "sw-old"] and base[0]["capacity"] == 2.0
    assert base[0]["loads"] == [2.0, 6.0] and [b["sweep_id"] for b in older] == ["sw-old"]


def test_the_page_marks_the_knee_and_links_each_step(tmp_path):
    late = "client p1 read 7.7% of first tokens late"
    steps = [replace(step(2, True, 20), run_status="invalid", run_note=late), step(6, False, 900)]
    ev = {"run-2": evidence(IDLE), "run-6": evidence(QUEUED)}
    db = stored_sweep(
        tmp_path / "w.duckdb", steps, ev, (2, 6), command="spikelens capacity s.yaml --users 2,6"
    )
    ctx = build_capacity_context(db, "sw-1")
    assert ctx.run.command == "spikelens capacity s.yaml --users 2,6" and not ctx.search
    page = render_capacity(ctx, tmp_path / "sw-1", index_href="../index.html")
    html = page.read_text()
    assert "Capacity 2 users: the SLO (TTFT ≤ 150 ms for ≥ 90% of requests) holds up to 2" in html
    assert 'href="../run-6/index.html"' in html and "load (queueing)" in html
    assert "status-invalid" in html and late in html  # a flagged step's reason is on the page
    manifest = json.loads((page.parent / "report.json").read_text())
    assert manifest["kind"] == "capacity" and manifest["top_cause"] == "load"


def test_cli_usage_errors_name_the_option(scenario):
    from flows.cli import app

    runner = CliRunner()
    none = runner.invoke(app, ["capacity", str(scenario)])
    assert none.exit_code == 2 and "exactly one of --users" in none.output
    bad = runner.invoke(app, ["capacity", str(scenario), "--users", "2,x"])
    assert bad.exit_code == 2 and "--users: a comma-separated list" in bad.output
    no_slo = runner.invoke(app, ["capacity", str(scenario), "--users", "2,4"])
    assert no_slo.exit_code == 2 and "needs an SLO" in no_slo.output
    bad_slo = runner.invoke(app, ["capacity", str(scenario), "--users", "2,4", "--slo", "ttft=5"])
    assert bad_slo.exit_code == 2 and "unknown key 'ttft'" in bad_slo.output
    bad_search = runner.invoke(
        app, ["capacity", str(scenario), "--search", "qps", "--slo", "ttft_ms=5"]
    )
    assert bad_search.exit_code == 2 and "kind" in bad_search.output


def test_publish_leaves_a_table_and_a_markdown_artifact_in_prefect(tmp_path):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.testing.utilities import prefect_test_harness

    from flows.capacity import publish

    steps = [step(2, True, 20), step(6, False, 900)]
    ev = {"run-2": evidence(IDLE), "run-6": evidence(QUEUED)}
    sweep_id = "20261201T000000Z-capacity-cap-0001"
    db = stored_sweep(tmp_path / "w.duckdb", steps, ev, (2, 6), sweep_id=sweep_id)
    sweep = build_capacity_context(db, sweep_id)

    @flow
    def publish_sweep(sweep, report: Path) -> None:
        publish(sweep, report)

    with prefect_test_harness(server_startup_timeout=120):
        publish_sweep(sweep, tmp_path / "page.html")
        with get_client(sync_client=True) as client:
            table = client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    key=ArtifactFilterKey(any_=["capacity-20261201t000000z-capacity-cap-0001"])
                )
            )
            summary = client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["capacity-summary"]))
            )
    assert table and table[0].type == "table"
    rows = json.loads(table[0].data)
    assert [r["load"] for r in rows] == ["2", "6"] and rows[1]["cause"] == "load (queueing)"
    assert summary and "capacity **2 users**" in summary[0].data


def test_a_step_whose_run_failed_is_a_failed_step_not_the_end_of_the_sweep(tmp_path):
    from flows.capacity import failed_step, newest_run_since

    runs = tmp_path / "runs"
    for name, kind, started in (
        ("old", "capacity", 100),
        ("other", "incident", 300),
        ("died", "capacity", 250),
    ):
        (runs / name).mkdir(parents=True)
        errors = ["engine exited with code -9"] if name == "died" else []
        (runs / name / "run.json").write_text(
            json.dumps(
                {"run_id": name, "kind": kind, "started_ns": started, "errors": errors, "extra": {}}
            )
        )
    assert newest_run_since(runs, 200).name == "died" and newest_run_since(runs, 400) is None
    s = failed_step(runs / "died", 8, 0.9, RuntimeError("boom"))
    assert (s.run_id, s.passed, s.run_status, s.run_note) == (
        "died",
        False,
        "failed",
        "engine exited with code -9",
    )
    assert s.attainment is None and s.metrics["ttft_p99_ms"] is None
    meta = json.loads((runs / "died" / "run.json").read_text())
    meta["extra"]["summary"] = {"completed": 10, "failed": 0, "good_requests": 10}
    (runs / "died" / "run.json").write_text(json.dumps(meta))
    judged = failed_step(runs / "died", 8, 0.9, RuntimeError("boom"))
    assert judged.passed and judged.run_status == "failed"  # judged on what it measured, flagged
