"""The nightly's baseline selection and comparison tasks, in a real (test-harness) Prefect, on
simulated nightly runs ingested into DuckDB: a penalty slowdown regresses ITL; a rerun of the
same engine does not; the baseline is the last passing nightlies of the same scenario."""

import json
from pathlib import Path

import pytest
from prefect import flow
from prefect.testing.utilities import prefect_test_harness

from flows.nightly import compare, find_baseline
from flows.nightly_config import NightlyConfig
from tests.support.runbuilder import SimSpec, write_run
from warehouse.ingest import ingest_run


@pytest.fixture(scope="module")
def harness():
    with prefect_test_harness(server_startup_timeout=120):
        yield


DAY_NS = 86_400 * 10**9


def nightly_run(root: Path, db: Path, run_id: str, night: int, **fields) -> tuple[str, int]:
    """A simulated nightly run on night `night`; returns (run_id, started_ns)."""
    spec = SimSpec(
        run_id=run_id, duration_s=30, t0_ns=1_800_000_000 * 10**9 + night * DAY_NS, **fields
    )
    run_dir = write_run(root, spec)
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest.update(kind="nightly", scenario_name="sim-nightly")
    (run_dir / "run.json").write_text(json.dumps(manifest))
    ingest_run(db, run_dir)
    return run_id, manifest["started_ns"]


@flow
def judge(db: Path, run: tuple[str, int], config: NightlyConfig) -> tuple[list, list]:
    run_id, started_ns = run
    baseline = find_baseline(db, "sim-nightly", started_ns, config)
    return baseline, compare(db, "sim-nightly", run_id, baseline, config)


def test_baseline_and_verdicts(harness, tmp_path):
    db = tmp_path / "w.duckdb"
    config = NightlyConfig(scenarios=(), last_n=2, bootstrap_reps=200)
    base, verdicts = judge(db, nightly_run(tmp_path, db, "n1", 0, seed=1), config)
    assert base == [] and {v["verdict"] for v in verdicts} == {"insufficient"}

    base, verdicts = judge(db, nightly_run(tmp_path, db, "n2", 1, seed=2), config)
    assert base == ["n1"]
    assert not [v for v in verdicts if v["verdict"] == "regressed"], verdicts

    # the slow penalty path throughout: every step +40 ms
    slow = nightly_run(
        tmp_path,
        db,
        "n3",
        2,
        seed=3,
        incident="penalty",
        incident_start_s=0.0,
        incident_duration_s=30.0,
    )
    base, verdicts = judge(db, slow, config)
    assert base == ["n2", "n1"]
    by_metric = {v["metric"]: v for v in verdicts}
    assert by_metric["itl_p50"]["verdict"] == "regressed" and by_metric["itl_p50"]["ci_low"] > 0
    assert by_metric["throughput"]["verdict"] == "regressed"
    noise = by_metric["itl_p50"]["run_noise"]  # two simulated clean runs: a few percent apart
    assert 0 <= noise < 0.1 and by_metric["itl_p50"]["rel_delta"] > noise

    # n3 regressed, so it never becomes a baseline of the next night
    base, _ = judge(db, nightly_run(tmp_path, db, "n4", 3, seed=4), config)
    assert base == ["n2", "n1"]


def stored_sweeps(tmp_path):
    """Four stored capacity sweeps of scenario `cap`; returns (db, check over steps 2 and 4)."""
    from flows.capacity import CapacityOptions, SweepRecord, _rows
    from flows.capacity import store as store_capacity
    from flows.nightly_config import CapacityCheck
    from rca.capacity import StepOutcome, queueing_reading
    from warehouse.db import connect

    db = tmp_path / "w.duckdb"
    connect(db).close()
    ev = {
        f"r{i}": {"spikes": [], "spike_count": 0, "queue": None, "queueing": queueing_reading(None)}
        for i in range(3)
    }
    for sweep_id, loads, started, cap in (
        ("old", (2, 4), 100, 4),
        ("other-steps", (2, 8), 150, 8),
        ("new", (2, 4), 200, 2),
        ("later", (2, 4), 900, 4),
    ):
        steps = [
            StepOutcome(
                float(x), f"r{i}", 10, 10 if x <= cap else 0, 1.0 if x <= cap else 0.0, x <= cap, {}
            )
            for i, x in enumerate(loads)
        ]
        store_capacity.fn(
            db,
            _rows(
                SweepRecord(sweep_id, "cap", {"ttft_ms": 1}, started),
                CapacityOptions(loads=loads),
                steps,
                ev,
            ),
        )
    return db, CapacityCheck(scenario=tmp_path, kind="users", loads=(2.0, 4.0), last_n=3)


def test_capacity_baseline_is_earlier_sweeps_over_the_same_steps(tmp_path):
    """The optional capacity check's baseline: same scenario, kind and steps, before the sweep."""
    from flows.nightly import capacity_baseline

    db, check = stored_sweeps(tmp_path)
    base = capacity_baseline.fn(db, "cap", check, before_ns=500)
    assert [(b["sweep_id"], b["capacity"]) for b in base] == [("new", 2.0), ("old", 4.0)]


def test_a_capacity_drop_is_a_nightly_regression(harness, tmp_path):
    """Below the lowest earlier sweep is a regression; as low as one is not; no sweep: insufficient."""
    from flows.capacity import CapacityResult
    from flows.nightly import NightlyResult, judge_capacity

    db, check = stored_sweeps(tmp_path)

    def judged(capacity, before_ns=500):
        sweep = CapacityResult("sw-x", "cap", "users", [], {"capacity": capacity}, "page.html")
        return flow(judge_capacity)(db, sweep, check, before_ns)

    dropped = judged(None)  # even 2 users failed: below both earlier sweeps
    assert dropped.scenario_name == "capacity-cap" and dropped.regressed == ["capacity_users"]
    assert dropped.baseline_runs == ["new", "old"] and NightlyResult([dropped]).regressed
    assert judged(2.0).regressed == [] and judged(2.0).verdicts[0]["verdict"] == "unchanged"
    first = judged(2.0, before_ns=50)  # no earlier sweep: the first one starts the baseline
    assert first.verdicts[0]["verdict"] == "insufficient" and not NightlyResult([first]).regressed


def test_a_regressions_worst_spike_is_confirmed_and_a_spikeless_one_is_not(
    harness, tmp_path, monkeypatch
):
    """confirm_regression: a run without a reported spike has nothing to confirm (no flow
    runs); one with a spike gets `spikelens confirm` of its worst (the real flow is
    test_confirm_e2e.py's; here only the hand-off)."""
    from types import SimpleNamespace

    import flows.confirm
    from flows.nightly import confirm_regression
    from flows.paths import StatePaths
    from rca.analyze import analyze_run

    paths = StatePaths(tmp_path / "home")
    paths.home.mkdir()
    calls = []

    def fake_confirm(run_id, spike, repeats, cause, state_home):
        calls.append((run_id, spike, repeats, cause, state_home))
        return SimpleNamespace(
            spike_id=1, cause="memory", verdict="confirmed", reason="95% away", report="/r"
        )

    monkeypatch.setattr(flows.confirm, "confirm_spike", fake_confirm)
    calm, _ = nightly_run(tmp_path / "runs", paths.warehouse, "calm", 1)
    analyze_run(paths.warehouse, calm)
    assert confirm_regression(paths, calm, 1) is None and calls == []
    gc, _ = nightly_run(tmp_path / "runs", paths.warehouse, "gc", 2, incident="gc")
    analyze_run(paths.warehouse, gc)
    proof = confirm_regression(paths, gc, 2)
    assert calls == [("gc", None, 2, None, str(paths.home))]
    assert proof == {
        "spike_id": 1,
        "cause": "memory",
        "verdict": "confirmed",
        "reason": "95% away",
        "report": "/r",
    }

    def failing_confirm(run_id, spike, repeats, cause, state_home):
        raise RuntimeError("vLLM did not start")

    monkeypatch.setattr(flows.confirm, "confirm_spike", failing_confirm)
    failed = confirm_regression(paths, gc, 2)
    assert failed is not None and failed["verdict"] == "inconclusive"
    assert failed["spike_id"] is None and "vLLM did not start" in failed["reason"]
