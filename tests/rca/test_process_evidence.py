"""rca.process_evidence: process and code-region evidence from the collectors' rows."""

import numpy as np
import pytest

from rca.analyze import analyze
from rca.process_evidence import ProcessSignals, process_evidence
from warehouse.db import connect


def _attribution(warehouse_with, **spec):
    db, run_id = warehouse_with(collectors=True, **spec)
    conn = connect(db)
    try:
        analysis = analyze(conn, run_id)
    finally:
        conn.close()
    assert len(analysis.spikes) == 1, analysis.spikes
    return analysis.attributions[analysis.spikes[0].spike_id]


def _evidence(attribution, cause, signal):
    rows = next(c for c in attribution.causes if c.cause == cause).evidence
    return next(e for e in rows if e.signal == signal)


def test_penalty_spike_names_the_process_and_the_sampling_region(warehouse_with):
    attr = _attribution(warehouse_with, incident="penalty")
    ev = _evidence(attr, "penalty", "stack_share.sampling_penalties")
    # the spike's windows may reach a little past the incident: 4/9 inside it, 1/8 outside
    assert 0.35 <= ev.value <= 4 / 9 + 1e-9 and ev.baseline == pytest.approx(1 / 8, abs=0.01)
    assert ev.note.startswith(
        f"engine (pid 4242): {ev.value:.0%} of its non-idle stack samples in "
        f"sampling_penalties during the spike vs {ev.baseline:.0%} before"
    )
    assert "a share is relative" in ev.note and ev.pearson_r > 0.5
    # the step-trace evidence stays first (the report's headline)
    assert (
        next(c for c in attr.causes if c.cause == "penalty").evidence[0].signal
        == "penalty_sample_ms_per_step"
    )


def test_gc_storm_names_gc_ms_per_second_of_the_process(warehouse_with):
    attr = _attribution(warehouse_with, incident="gc")
    ev = _evidence(attr, "memory", "gc_ms_per_s.process")
    # gen-2 pauses of 150 ms twice a second inside the storm, 0.2 ms ten times a second outside
    assert 200.0 <= ev.value <= 300.0 and ev.baseline == pytest.approx(2.0, abs=0.5)
    assert ev.note.startswith(
        f"engine (pid 4242): GC {ev.value:.0f} ms/s during the spike vs 2 before"
    )
    share = _evidence(attr, "memory", "stack_share.gc")
    assert share.value > 0.1 > share.baseline


def _cpu_rows(n, spike, runq, cpu):
    return [
        {
            "window": w,
            "pid": 7,
            "role": "EngineCore",
            "runq_wait_ms_per_s": runq[w in spike],
            "cpu_ms_per_s": cpu[w in spike],
            "involuntary_switches_per_s": 10.0,
        }
        for w in range(n)
    ]


def _stack_rows(n, spike, shares):
    """A Worker's (pid 3) stack rows; `shares`: region → (busy_share in the spike, before)."""
    return [
        {
            "window": w,
            "pid": 3,
            "role": "Worker",
            "region": region,
            "busy_share": during if w in spike else before,
        }
        for w in range(n)
        for region, (during, before) in shares.items()
    ]


@pytest.mark.parametrize(
    "cpu, says",
    [
        ((500.0, 500.0), "CPU contention from outside the process"),
        ((300.0, 900.0), "run-queue delay alone cannot tell them apart"),
    ],
)
def test_runq_wait_says_whether_the_process_itself_did_more_work(cpu, says):
    n, spike = 20, range(10, 13)
    in_spike = np.isin(np.arange(n), list(spike))
    latency = np.where(in_spike, 50.0, 10.0)
    signals = ProcessSignals(cpu_windows=_cpu_rows(n, spike, (5.0, 250.0), cpu))
    ev = process_evidence(signals, latency, in_spike, ~in_spike, 1.0)["host"][0]
    assert ev.signal == "runq_wait_ms_per_s.process" and ev.value == 250.0 and ev.baseline == 5.0
    assert ev.note.startswith("EngineCore (pid 7): waited 250 ms/s for a CPU") and says in ev.note


def test_several_rises_together_are_named_not_resolved():
    n, spike = 20, range(10, 13)
    in_spike = np.isin(np.arange(n), list(spike))
    stacks = _stack_rows(n, spike, {"sampling_penalties": (0.5, 0.1), "model_forward": (0.5, 0.9)})
    gc = [
        {"window": w, "pid": 4, "role": "EngineCore", "pause_ms": 200.0 if w in spike else 0.0}
        for w in range(n)
    ]
    out = process_evidence(
        ProcessSignals(stacks, gc, []), np.where(in_spike, 9.0, 1.0), in_spike, ~in_spike, 1.0
    )
    penalty, memory = out["penalty"][0], out["memory"][0]
    assert [e.signal for e in out["memory"]] == [
        "gc_ms_per_s.process"
    ]  # no gc stack samples: no row
    assert (
        "also rose in the same windows: memory (gc_ms_per_s.process of EngineCore)" in penalty.note
    )
    assert "penalty (stack_share.sampling_penalties of Worker)" in memory.note
    assert "do not tell which caused the other" in memory.note
    # model_forward's share fell (0.9 -> 0.5): not evidence for anything
    assert "unexplained" not in out


def test_a_share_or_wait_that_fell_or_stayed_flat_is_no_evidence():
    n, spike = 20, range(10, 13)
    in_spike = np.isin(np.arange(n), list(spike))
    # http_serialization fell; scheduler stayed at 0 vs 0
    stacks = _stack_rows(n, spike, {"http_serialization": (0.19, 0.38), "scheduler": (0.0, 0.0)})
    cpu = _cpu_rows(n, spike, (250.0, 5.0), (500.0, 500.0))  # the wait fell
    out = process_evidence(
        ProcessSignals(stacks, [], cpu), np.where(in_spike, 9.0, 1.0), in_spike, ~in_spike, 1.0
    )
    assert out == {}


def test_a_run_without_collector_files_adds_nothing():
    n = 10
    mask = np.zeros(n, dtype=bool)
    assert process_evidence(ProcessSignals(), np.ones(n), mask, ~mask, 1.0) == {}
