"""rca.evidence: a row is evidence only when its signal moved the way its cause would move it."""

import pytest

from rca.attribute import attribute_spike
from rca.evidence import CONTEXT, FALL, NOT_RISE, RISE, Evidence, supports
from tests.support.spikesignals import SpikeRun, spike_signals


def _row(value, baseline, direction):
    return Evidence("s", value, baseline, "ms", "", None, direction)


@pytest.mark.parametrize(
    "value, baseline, direction, kept",
    [
        (12.0, 10.0, RISE, True),
        (10.0, 10.0, RISE, False),  # "0 vs 0 before": no rise, no evidence
        (0.19, 0.38, RISE, False),  # a falling share is no support for what it rises with
        (1200.0, 1500.0, FALL, True),  # a GPU clock that dropped: throttling
        (1500.0, 1500.0, FALL, False),
        (31.0, 30.0, NOT_RISE, True),  # the server's own p99 within its noise: flat
        (45.0, 30.0, NOT_RISE, False),  # the server saw the rise itself: not network's support
        (600.0, 900.0, NOT_RISE, True),  # a process that got less CPU did no more work
        (3.0, None, CONTEXT, True),
        (None, 5.0, RISE, True),  # cannot be judged: shown as measured
    ],
)
def test_supports_follows_the_signals_direction(value, baseline, direction, kept):
    assert supports(_row(value, baseline, direction)) is kept


def _evidence(**fields):
    spike, signals = spike_signals(SpikeRun(**fields))
    attr = attribute_spike(spike, [spike], signals)
    return attr, {c.cause: c.evidence for c in attr.causes}


def test_a_gc_stall_lists_the_gc_signals_not_the_flat_preemptions():
    attr, evidence = _evidence(
        metric="itl_p99", base_latency_ms=22.0, latency_rise_ms=15.0, stage_rise_ms={"gc_ms": 15.0}
    )
    assert attr.top_cause == "memory"
    signals = {e.signal for e in evidence["memory"]}
    assert "gc_overlap_ms_per_step" in signals
    assert "preemptions_per_window" not in signals  # 0 vs 0: it did not move
    assert all(supports(e) for rows in evidence.values() for e in rows)


def test_network_keeps_the_flat_server_time_that_supports_it():
    attr, evidence = _evidence(transit_rise_ms=90.0)
    assert attr.top_cause == "network"
    server = next(e for e in evidence["network"] if e.signal == "server_ttft_p99_ms")
    assert server.direction == NOT_RISE and server.value <= 1.1 * server.baseline


def test_host_keeps_the_fallen_own_cpu_time_that_supports_it():
    attr, evidence = _evidence(
        metric="itl_p99", base_latency_ms=22.0, latency_rise_ms=14.0, runq_rise_ms_per_s=400.0
    )
    assert attr.top_cause == "host"
    own = next(e for e in evidence["host"] if e.signal == "engine_cpu_ms_per_s")
    assert own.value < own.baseline
