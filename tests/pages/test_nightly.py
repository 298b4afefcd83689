"""pages.nightly: the nightly and replay pages from stored verdicts; rows validate themselves."""

import math

import pytest

from pages.fields import ContextError
from pages.nightly import MetricRow, build_nightly_context, build_replay_context
from rca.analyze import analyze_run
from rca.compare import MetricVerdict, store_verdicts


def _verdict(metric: str, delta: float, verdict: str) -> MetricVerdict:
    return MetricVerdict(
        metric, 20.0, 20.0 + delta, delta, delta - 1, delta + 1, delta / 20.0, verdict, 9, 9
    )


def test_nightly_page_reads_the_stored_verdicts(warehouse_with):
    db, run_id = warehouse_with(incident=None)
    analyze_run(db, run_id)
    store_verdicts(
        db,
        run_id,
        "sim-control",
        [_verdict("itl_p99", 4.0, "regressed"), _verdict("throughput", 0.0, "unchanged")],
        ["a", "b"],
    )
    ctx = build_nightly_context(db, run_id)
    assert ctx.kind == "nightly" and ctx.title == "Nightly regression: sim-control"
    assert ctx.baseline_label == "2 earlier nightly run(s)" and ctx.verdict == "regressed"
    assert [(m.metric, m.unit, m.verdict) for m in ctx.metrics] == [
        ("itl_p99", "ms", "regressed"),
        ("throughput", "tokens/s per window", "unchanged"),
    ]
    assert ctx.metrics[0].run_noise is None  # NaN (fewer than 2 baseline runs) stored as NULL
    assert ctx.trend == ()  # only runs of kind "nightly" make a trend
    assert ctx.run.scenario_yaml == "" and ctx.incident_href == "../index.html"
    assert ctx.confirmation is None


def test_a_confirmed_worst_spike_is_shown_and_linked(warehouse_with, tmp_path):
    """The nightly confirms a regressed run's worst spike (confirm_repeats): its page says so."""
    from templates.render import render_nightly
    from warehouse.db import connect
    from warehouse.store import replace_rows

    db, run_id = warehouse_with(incident=None)
    analyze_run(db, run_id)
    store_verdicts(db, run_id, "sim-control", [_verdict("itl_p99", 4.0, "regressed")], ["a"])
    row = {
        "run_id": run_id,
        "spike_id": 1,
        "cause": "memory",
        "verdict": "confirmed",
        "reason": "removing the cause took 95% of the excess away",
        "intervention": "GC off",
        "share_removed": 0.95,
        "share_low": 0.9,
        "share_high": 0.97,
        "pairs": 1,
        "confirmed_ns": 1,
        "page": "confirm-1-memory/index.html",
    }
    with connect(db) as conn:
        replace_rows(conn, ("run_id",), (run_id,), {"confirmations": [row]})
    ctx = build_nightly_context(db, run_id)
    words = "spike 1, memory: confirmed: 95% [90%, 97%] of the excess went away"
    assert ctx.confirmation == words
    assert ctx.confirmation_href == "../confirm-1-memory/index.html"
    html = render_nightly(ctx, tmp_path, index_href="../../index.html").read_text()
    assert f'<a href="../confirm-1-memory/index.html">{words}</a>' in html


def test_first_nightly_and_replay_pages(warehouse_with):
    db, run_id = warehouse_with(incident=None)
    store_verdicts(db, run_id, "sim-control", [], [])
    ctx = build_nightly_context(db, run_id)
    assert ctx.metrics == () and ctx.verdict == "insufficient"
    assert ctx.baseline_label.startswith("no earlier passing nightly")
    replay = build_replay_context(
        db, run_id, "orig-1", [_verdict("ttft_p99", -3.0, "improved").to_dict()]
    )
    assert (replay.kind, replay.verdict, replay.baseline_label) == (
        "replay",
        "improved",
        "original run orig-1",
    )


def test_a_metric_row_checks_itself():
    row = MetricRow("itl_p99", 10.0, 12.0, 2.0, 1.0, 3.0, "regressed")
    assert row.rel_delta == pytest.approx(0.2)
    with pytest.raises(ContextError, match=r"^ci_low: 3.0 is above ci_high 1.0$"):
        MetricRow("itl_p99", 10.0, 12.0, 2.0, 3.0, 1.0, "regressed")
    with pytest.raises(ContextError, match=r"^verdict: must be one of"):
        MetricRow("itl_p99", 10.0, 12.0, 2.0, 1.0, 3.0, "worse")
    assert MetricRow("x", math.nan, None, None, None, None, "insufficient").rel_delta is None


def test_the_trend_lists_every_nightly_of_the_scenario(tmp_path):
    import json

    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    db = tmp_path / "w.duckdb"
    for night, run_id in enumerate(("n1", "n2")):
        run_dir = write_run(
            tmp_path / "runs",
            SimSpec(
                run_id=run_id, duration_s=10, t0_ns=1_800_000_000 * 10**9 + night * 86_400 * 10**9
            ),
        )
        manifest = json.loads((run_dir / "run.json").read_text())
        manifest.update(kind="nightly", scenario_name="sim-nightly")
        (run_dir / "run.json").write_text(json.dumps(manifest))
        ingest_run(db, run_dir)
        store_verdicts(
            db, run_id, "sim-nightly", [_verdict("itl_p99", float(night), "unchanged")], []
        )
    ctx = build_nightly_context(db, "n2")
    assert [(t.run_id, t.metric, t.value) for t in ctx.trend] == [
        ("n1", "itl_p99", 20.0),
        ("n2", "itl_p99", 21.0),
    ]
    assert ctx.trend[0].started_at.endswith("+00:00")
