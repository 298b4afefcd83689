"""rca.attribute: cause shares on simulated incidents and on hand-built step arrays."""

from dataclasses import replace

import numpy as np
import pytest

from rca.analyze import analyze
from rca.attribute import attribute_spike, baseline_exclusions, window_masks
from rca.config import AttributeConfig
from rca.detect import Spike
from rca.evidence import pearson
from rca.stepcost import STEP_COLUMNS, StepCostModel, decompose_step_excess
from tests.support.spikesignals import SpikeRun, spike_signals
from warehouse.db import connect


def _analysis(warehouse_with, **spec):
    db, run_id = warehouse_with(**spec)
    conn = connect(db)
    try:
        return analyze(conn, run_id)
    finally:
        conn.close()


def _only_spike(analysis):
    assert len(analysis.spikes) == 1, analysis.spikes
    s = analysis.spikes[0]
    return s, analysis.attributions[s.spike_id]


def _shares(attribution):
    return {c.cause: c.share for c in attribution.causes}


def test_gc_storm_is_memory(warehouse_with):
    spike, attr = _only_spike(_analysis(warehouse_with, incident="gc"))
    assert 18.0 <= spike.start_s <= 21.0 and 27.0 <= spike.end_s <= 30.0
    assert attr.top_cause == "memory" and _shares(attr)["memory"] >= 0.5
    assert sum(_shares(attr).values()) <= 1.0 + 1e-9
    assert attr.summary.startswith("GC gen-2 pauses")
    memory = next(c for c in attr.causes if c.cause == "memory")
    gc_ev = next(e for e in memory.evidence if e.signal == "gc_overlap_ms_per_step")
    assert gc_ev.value > 10 * max(gc_ev.baseline, 0.01) and gc_ev.pearson_r > 0.5


def test_penalty_slow_path_is_penalty(warehouse_with):
    _, attr = _only_spike(_analysis(warehouse_with, incident="penalty"))
    assert attr.top_cause == "penalty" and _shares(attr)["penalty"] >= 0.5


def test_more_users_is_load(warehouse_with):
    _, attr = _only_spike(_analysis(warehouse_with, incident="load"))
    assert attr.top_cause == "load" and _shares(attr)["load"] >= 0.5


@pytest.mark.parametrize("late_rank", [1, 0])
def test_straggler_rank_is_communication(warehouse_with, late_rank):
    _, attr = _only_spike(_analysis(warehouse_with, incident="comm", tp=2, late_rank=late_rank))
    assert attr.top_cause == "communication" and _shares(attr)["communication"] >= 0.5
    assert attr.summary.endswith(f"rank {late_rank} arrives last")
    comm = next(c for c in attr.causes if c.cause == "communication")
    assert next(e for e in comm.evidence if e.signal == "straggler_rank").value == float(late_rank)


def test_kv_preemption_is_memory(warehouse_with):
    _, attr = _only_spike(_analysis(warehouse_with, incident="kv"))
    assert attr.top_cause == "memory" and _shares(attr)["memory"] >= 0.5
    assert attr.summary.startswith("KV cache exhausted")


def test_repetition_loops_are_penalty(warehouse_with):
    spike, attr = _only_spike(_analysis(warehouse_with, incident="repetition"))
    assert spike.metric == "e2e_p99"
    assert attr.top_cause == "penalty" and _shares(attr)["penalty"] >= 0.5
    penalty = {e.signal: e for e in next(c for c in attr.causes if c.cause == "penalty").evidence}
    assert penalty["repeated_3gram_rate"].value > 0.5 > penalty["repeated_3gram_rate"].baseline
    assert penalty["hit_max_tokens"].value > penalty["hit_max_tokens"].baseline


def test_allocation_churn_is_memory(warehouse_with):
    _, attr = _only_spike(_analysis(warehouse_with, incident="alloc"))
    assert attr.top_cause == "memory" and _shares(attr)["memory"] >= 0.5
    assert attr.summary.startswith("allocation churn:")


def test_control_run_has_no_spike(warehouse_with):
    for seed, tp in ((0, 1), (1, 1), (2, 2)):
        assert _analysis(warehouse_with, seed=seed, tp=tp).spikes == []


def _steps(n, **cols):
    base = {c: np.zeros(n) for c in STEP_COLUMNS}
    base.update({k: np.asarray(v, dtype=np.float64) for k, v in cols.items()})
    return base


def test_gc_time_is_taken_out_of_the_stage_it_landed_in():
    # Spike steps: 100 ms of GC inside forward, and 5 ms more penalty time.
    n = 20
    spike = np.arange(n) >= 10
    forward = np.where(spike, 110.0, 10.0)
    penalty = np.where(spike, 6.0, 1.0)
    gc = np.where(spike, 100.0, 0.0)
    steps = _steps(
        n, forward_ms=forward, penalty_ms=penalty, gc_ms=gc, decode_tokens=np.full(n, 8.0)
    )
    dec = decompose_step_excess(
        steps, spike, ~spike, StepCostModel(2.0, 1.0, 0.0), AttributeConfig()
    )
    assert dec.components_ms["memory"] == pytest.approx(100.0)
    assert dec.components_ms["penalty"] == pytest.approx(5.0)
    assert dec.components_ms["unexplained"] == pytest.approx(0.0)
    assert dec.components_ms["load"] == pytest.approx(0.0)


def test_forward_growth_from_batch_is_load_and_the_rest_unexplained():
    n = 20
    spike = np.arange(n) >= 10
    decode = np.where(spike, 20.0, 8.0)
    forward = (
        2.0 + 1.0 * decode + np.where(spike, 3.0, 0.0)
    )  # 12 ms from the batch, 3 ms unexplained
    steps = _steps(n, forward_ms=forward, decode_tokens=decode)
    model = StepCostModel.fit(steps, np.ones(n, dtype=bool) & ~spike | (np.arange(n) == 19))
    dec = decompose_step_excess(
        steps, spike, ~spike, StepCostModel(2.0, 1.0, 0.0), AttributeConfig()
    )
    assert dec.components_ms["load"] == pytest.approx(12.0)
    assert dec.components_ms["unexplained"] == pytest.approx(3.0)
    assert model.per_decode >= 0


def test_cost_model_recovers_coefficients():
    rng = np.random.default_rng(0)
    decode = rng.integers(1, 30, 200).astype(float)
    prefill = rng.integers(0, 500, 200).astype(float)
    batch = decode + (prefill > 0)
    steps = _steps(
        200,
        decode_tokens=decode,
        prefill_tokens=prefill,
        batch_size=batch,
        forward_ms=3.0 + 0.5 * decode + 0.02 * prefill,
        penalty_ms=0.2 + 0.05 * batch,
    )
    model = StepCostModel.fit(steps, np.ones(200, dtype=bool))
    assert (
        model.intercept,
        model.per_decode,
        model.per_prefill,
        model.penalty_per_seq,
    ) == pytest.approx((3.0, 0.5, 0.02, 0.05))


def test_penalty_growth_from_batch_is_load():
    n = 20
    spike = np.arange(n) >= 10
    batch = np.where(spike, 24.0, 6.0)
    steps = _steps(n, batch_size=batch, decode_tokens=batch, penalty_ms=0.4 + 0.05 * batch)
    dec = decompose_step_excess(
        steps, spike, ~spike, StepCostModel(0.0, 0.0, 0.0, 0.05), AttributeConfig()
    )
    assert dec.components_ms["load"] == pytest.approx(0.9)
    assert dec.components_ms["penalty"] == pytest.approx(0.0)


def test_pearson_handles_gaps_and_constants():
    a = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    assert pearson(a, 2 * a) == pytest.approx(1.0)
    assert pearson(a, np.ones(5)) is None
    assert pearson(a[:2], a[:2]) is None


def test_every_stage_slower_alike_is_unexplained_not_penalty():
    n = 20
    spike = np.arange(n) >= 10
    slow = np.where(spike, 1.6, 1.0)
    steps = _steps(
        n,
        forward_ms=10.0 * slow,
        penalty_ms=3.0 * slow,
        sample_ms=6.0 * slow,
        schedule_ms=0.2 * slow,
        batch_size=np.full(n, 8.0),
        decode_tokens=np.full(n, 8.0),
    )
    steps["dur_ms"] = (
        steps["forward_ms"] + steps["penalty_ms"] + steps["sample_ms"] + steps["schedule_ms"]
    )
    dec = decompose_step_excess(
        steps, spike, ~spike, StepCostModel(2.0, 1.0, 0.0), AttributeConfig()
    )
    assert dec.uniform_slowdown == pytest.approx(1.6)
    assert dec.components_ms["penalty"] == 0.0
    assert dec.components_ms["unexplained"] == pytest.approx(0.6 * 19.2)
    # penalty alone slower: not uniform, penalty keeps its time
    steps["forward_ms"] = np.full(n, 10.0)
    steps["sample_ms"] = np.full(n, 6.0)
    dec = decompose_step_excess(
        steps, spike, ~spike, StepCostModel(2.0, 1.0, 0.0), AttributeConfig()
    )
    assert dec.uniform_slowdown is None and dec.components_ms["penalty"] == pytest.approx(1.8)


def _early_spike(first: int, last: int) -> Spike:
    return Spike(
        2, "itl_p99", ["itl_p99"], first, last, float(first), last + 1.0, 90.0, 45.0, "minor", 1.0
    )


def test_a_baseline_crowded_out_by_other_spikes_lets_their_guards_in_then_them():
    run = SpikeRun(n=24, first=10, last=21, metric="itl_p99")
    spike = run.spike()
    early = _early_spike(2, 5)
    # every spike ± 2 windows leaves nothing of 24 windows; without the early spike's guard: 0, 1, 6, 7
    spans = baseline_exclusions(24, spike, [early, spike], guard=2, min_windows=3)
    assert (2, 5) in spans and (8, 23) in spans
    _, base = window_masks(24, spike, [early, spike], 2, 3)
    assert list(np.flatnonzero(base)) == [0, 1, 6, 7]
    # five wanted: the early spike is let in too (this spike keeps its guard)
    _, base = window_masks(24, spike, [early, spike], 2, 5)
    assert list(np.flatnonzero(base)) == [0, 1, 2, 3, 4, 5, 6, 7]
    # enough calm windows: every spike stays out with its guard, as before
    _, base = window_masks(40, spike, [_early_spike(2, 5), spike], 2, 4)
    assert list(np.flatnonzero(base)) == list(range(24, 40))


def test_a_gc_storm_beside_another_spike_in_a_short_run_is_still_memory():
    """A CI run (2026-12-03): a noisy start made a second spike, the guards of both left no calm
    window, and every signal 'rose' from an empty baseline: the storm came out 'load', 1.0."""
    run = SpikeRun(
        n=24,
        first=10,
        last=21,
        metric="itl_p99",
        base_latency_ms=45.0,
        latency_rise_ms=250.0,
        stage_rise_ms={"gc_ms": 150.0},
    )
    spike, signals = spike_signals(run)
    attr = attribute_spike(spike, [_early_spike(2, 5), spike], signals)
    assert attr.top_cause == "memory", (attr.top_cause, attr.summary)


def test_a_spike_with_no_calm_window_left_is_unexplained_and_says_why():
    run = SpikeRun(n=12, first=2, last=9, metric="itl_p99", stage_rise_ms={"gc_ms": 15.0})
    spike, signals = spike_signals(run)
    attr = attribute_spike(spike, [spike], signals)
    assert attr.top_cause == "unexplained" and attr.uncovered == 1.0
    assert attr.summary.startswith("no calm baseline: 0 window(s)")
    with pytest.raises(ValueError, match="min_baseline_windows must be >= 1"):
        AttributeConfig(min_baseline_windows=0)


def _backlog_run(users_in_spike: float | None, users_stay: bool = False) -> SpikeRun:
    # a GC stall (15 ms a step) while the batch grew by 8 sequences at 1 ms of forward each
    return SpikeRun(
        latency_rise_ms=200.0,
        stage_rise_ms={"gc_ms": 15.0},
        batch_growth=8,
        forward_per_seq_ms=1.0,
        users_in_spike=users_in_spike,
        users_stay=users_stay,
    )


def test_a_batch_grown_from_a_stalls_backlog_is_the_stalls():
    # the client's 8 users stayed 8: the extra sequences are requests the stall held back
    spike, signals = spike_signals(_backlog_run(users_in_spike=None))
    attr = attribute_spike(spike, [spike], signals)
    shares = _shares(attr)
    assert attr.top_cause == "memory", (attr.top_cause, shares)
    assert shares.get("load", 0.0) == 0.0


def test_a_batch_grown_from_more_users_stays_load():
    # the same stall while the client's users doubled: the extra sequences are more work asked
    spike, signals = spike_signals(_backlog_run(users_in_spike=16.0))
    attr = attribute_spike(spike, [spike], signals)
    shares = _shares(attr)
    assert shares["load"] >= 0.3 and shares["memory"] > 0.2, shares


def test_users_that_stay_on_after_the_spike_are_not_its_load():
    # the users doubled as the stall began and stayed doubled to the run's end, with calm
    # latency after the spike: that many users make no spike, so the stall keeps the batch
    spike, signals = spike_signals(_backlog_run(users_in_spike=16.0, users_stay=True))
    attr = attribute_spike(spike, [spike], signals)
    shares = _shares(attr)
    assert attr.top_cause == "memory" and shares.get("load", 0.0) == 0.0, shares


def test_a_few_more_users_in_a_long_stall_leave_the_queue_mostly_to_the_stall():
    # users 8 → 10 while a GC stall tripled the step: the queue grew by both, the stall most
    run = SpikeRun(latency_rise_ms=300.0, stage_rise_ms={"gc_ms": 40.0}, users_in_spike=10.0)
    spike, signals = spike_signals(run)
    attr = attribute_spike(spike, [spike], signals)
    shares = _shares(attr)
    assert attr.top_cause == "memory", shares
    assert 0.0 < shares["load"] < 0.25, shares
    # users 8 → 32 over a small stall: the burst grew the queue
    burst = replace(run, stage_rise_ms={"gc_ms": 4.0}, users_in_spike=32.0)
    spike, signals = spike_signals(burst)
    assert attribute_spike(spike, [spike], signals).top_cause == "load"
