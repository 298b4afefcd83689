"""rca.outside_causes: client, network and host found from their own signals and named."""

import numpy as np
import pytest

from rca.analyze import analyze_run
from rca.attribute import attribute_spike
from rca.outside_causes import server_timed_metric, steal_step_fraction
from tests.support.spikesignals import SpikeRun, spike_signals


def _attribute(**fields):
    spike, signals = spike_signals(SpikeRun(**fields))
    return attribute_spike(spike, [spike], signals)


def _cause(attr, name):
    return next(c for c in attr.causes if c.cause == name)


def test_transit_growth_with_a_healthy_client_is_network():
    attr = _attribute(transit_rise_ms=90.0)
    assert attr.top_cause == "network" and _cause(attr, "network").share >= 0.8
    assert attr.summary.startswith("transit between client and engine up 9")
    signals = {e.signal for e in _cause(attr, "network").evidence}
    assert {"client_ttft_p99_minus_server_ms", "server_ttft_p99_ms"} <= signals


def test_transit_growth_with_a_late_client_is_client():
    attr = _attribute(metric="e2e_p99", transit_rise_ms=90.0, client_lag_rise_ms=120.0)
    assert attr.top_cause == "client" and _cause(attr, "client").share >= 0.8
    lag = next(e for e in _cause(attr, "client").evidence if e.signal == "client_lag_p99_ms")
    assert lag.value > 50 > lag.baseline


def test_client_lag_alone_does_not_explain_an_engine_side_rise():
    # the client lagged a little but its times agree with the server's: the engine got slower
    attr = _attribute(client_lag_rise_ms=8.0)
    assert attr.top_cause == "unexplained" and attr.uncovered >= 0.9


def test_run_queue_wait_of_the_engine_is_host():
    attr = _attribute(
        metric="itl_p99", base_latency_ms=22.0, latency_rise_ms=14.0, runq_rise_ms_per_s=400.0
    )
    assert attr.top_cause == "host" and _cause(attr, "host").share >= 0.5
    assert "pid 41" in attr.summary
    host = {e.signal for e in _cause(attr, "host").evidence}
    assert {"runq_wait_ms_per_s", "involuntary_switches_per_s"} <= host


def test_cpu_lost_between_the_steps_is_host_where_the_server_timed_its_writes():
    # 200 ms/s more run-queue wait: the steps 1.25x slower, the server's ITL p99 3.4x (its
    # writes and the gaps between steps wait for a CPU too, which no step timer sees)
    run = dict(metric="itl_p99", base_latency_ms=25.0, latency_rise_ms=60.0)
    stamped = _attribute(**run, runq_rise_ms_per_s=200.0, itl_stamped=True)
    assert stamped.top_cause == "host" and _cause(stamped, "host").share >= 0.9
    assert stamped.coverage < 0.15  # the steps alone cover a tenth
    # without the server's own chunk times the rest is not known to be the engine's: uncovered
    unstamped = _attribute(**run, runq_rise_ms_per_s=200.0)
    assert unstamped.top_cause == "unexplained" and _cause(unstamped, "host").share < 0.15


def test_engine_causes_cover_at_most_what_the_server_saw():
    # the server's own TTFT p99 rose by 20 of the 100 ms; its penalty stage rose too
    attr = _attribute(transit_rise_ms=80.0, stage_rise_ms={"penalty_ms": 10.0})
    assert attr.top_cause == "network"
    penalty = next((c.share for c in attr.causes if c.cause == "penalty"), 0.0)
    assert 0.05 < penalty <= 0.25


def test_a_little_client_lag_does_not_take_a_large_transit_growth():
    # the client lagged 15 ms more in the window, but the gap grew by 90 ms: mostly the path
    attr = _attribute(transit_rise_ms=90.0, client_lag_rise_ms=15.0)
    assert attr.top_cause == "network" and _cause(attr, "network").share >= 0.6
    assert 0.1 <= _cause(attr, "client").share <= 0.2


# ITL seen from both ends: the server stamped each text chunk's write (engine/server/wire_clock.py)


def test_a_late_reader_stretches_the_clients_gaps_not_the_servers():
    attr = _attribute(
        metric="itl_p99",
        base_latency_ms=25.0,
        latency_rise_ms=60.0,
        transit_rise_ms=60.0,
        client_lag_rise_ms=60.0,
        itl_stamped=True,
    )
    assert attr.top_cause == "client" and _cause(attr, "client").share >= 0.8
    assert "client − server time up 60" in attr.summary  # the ITL gap, not only the lag


def test_a_client_blocked_longer_than_its_lag_p99_shows_takes_the_gap_it_made():
    """A client blocked 330 ms each second: one probe fires late per block, so its lag p99 rose
    only 70 ms, but the gaps it held back grew by its block. With an engine GC stall beside it,
    the client − server growth is the client's, not the network's."""
    attr = _attribute(
        metric="itl_p99",
        base_latency_ms=25.0,
        latency_rise_ms=300.0,
        transit_rise_ms=150.0,
        stage_rise_ms={"gc_ms": 150.0},
        client_lag_rise_ms=70.0,
        client_block_ms=330.0,
        itl_stamped=True,
    )
    assert _cause(attr, "client").share >= 0.4
    assert next((c.share for c in attr.causes if c.cause == "network"), 0.0) < 0.05
    assert "client_lag_max_ms" in {e.signal for e in _cause(attr, "client").evidence}
    # a healthy client whose one timer fired late is not marked late by that alone
    attr = _attribute(transit_rise_ms=90.0, client_block_ms=40.0)
    assert attr.top_cause == "network" and "client" not in {c.cause for c in attr.causes}


def test_an_engine_gc_stall_with_some_client_lag_is_memory():
    # the case: 15 ms/step of GC and the client's lag up 20 ms; the server's gaps grew
    # as much as the client's, so none of it happened outside the engine
    for stamped in (True, False):
        attr = _attribute(
            metric="itl_p99",
            base_latency_ms=22.0,
            latency_rise_ms=15.0,
            stage_rise_ms={"gc_ms": 15.0},
            client_lag_rise_ms=20.0,
            itl_stamped=stamped,
        )
        assert attr.top_cause == "memory", stamped
        assert next((c.share for c in attr.causes if c.cause == "client"), 0.0) < 0.1


def test_client_lag_is_no_cause_of_gaps_the_server_saw_grow_too():
    # nothing the engine's stages measure rose, but the server's own gaps did: whatever it was
    # happened inside the engine, not in the late client
    attr = _attribute(
        metric="itl_p99",
        base_latency_ms=22.0,
        latency_rise_ms=30.0,
        client_lag_rise_ms=30.0,
        itl_stamped=True,
    )
    assert attr.top_cause == "unexplained"
    assert next((c.share for c in attr.causes if c.cause == "client"), 0.0) < 0.1


# --- the hypervisor's steal (collectors.cpu_steal) ----------------------------------------------


def test_steal_stretches_the_step_by_what_the_stolen_time_takes():
    in_spike = np.arange(20) >= 14
    share = np.where(in_spike, 0.41, 0.01)
    # W s of CPU took W / 0.99 before and W / 0.59 in the spike: 1 - 0.59 / 0.99 of it is steal
    assert steal_step_fraction(share, in_spike, ~in_spike, 0.02) == pytest.approx(1 - 0.59 / 0.99)
    small = np.where(in_spike, 0.025, 0.01)  # 1.5 points: under the 2-point floor
    assert steal_step_fraction(small, in_spike, ~in_spike, 0.02) == 0.0
    noisy = np.where(in_spike, 0.2, np.tile([0.0, 0.2], 10))  # within 3 std of its baseline
    assert steal_step_fraction(noisy, in_spike, ~in_spike, 0.02) == 0.0
    unmeasured = np.full(20, np.nan)
    assert steal_step_fraction(unmeasured, in_spike, ~in_spike, 0.02) == 0.0


def _main(analysis):
    spikes = sorted(analysis.spikes, key=lambda s: -(s.peak_ms - s.baseline_ms))
    assert spikes, "the run should have a reported spike"
    return analysis.attributions[spikes[0].spike_id]


def test_hypervisor_steal_with_a_step_trace_is_host(warehouse_with):
    # every stage 1 / 0.5 slower for 8 s, no process waited for a CPU: only /proc/stat saw it
    db, run_id = warehouse_with(incident="steal", collectors=True)
    attr = _main(analyze_run(db, run_id))
    assert attr.top_cause == "host" and _cause(attr, "host").share >= 0.5
    assert attr.summary.startswith("the hypervisor stole the engine's CPUs")
    steal = next(e for e in _cause(attr, "host").evidence if e.signal == "cpu_steal_share")
    assert steal.value == pytest.approx(0.5, abs=0.05) and steal.baseline == pytest.approx(0.005)


def test_hypervisor_steal_without_a_step_trace_is_host(warehouse_with):
    db, run_id = warehouse_with(
        incident="steal",
        collectors=True,
        step_trace=False,
        engine='{"kind": "vllm", "model": "m", "tensor_parallel_size": 1}',
    )
    attr = _main(analyze_run(db, run_id))
    assert attr.method == "metric_rank" and attr.top_cause == "host"
    steal = next(e for e in _cause(attr, "host").evidence if e.signal == "cpu_steal_share")
    assert "the hypervisor ran another guest" in steal.note


def test_a_run_queue_wait_without_more_steal_is_not_the_hypervisors(warehouse_with):
    # every stage slower because an engine process waited for a CPU; steal flat at 0.5 %
    db, run_id = warehouse_with(incident="host", collectors=True)
    attr = _main(analyze_run(db, run_id))
    assert attr.top_cause == "host" and "hypervisor" not in attr.summary
    # a steal that did not rise supports nothing, so it is not listed (rca.evidence.supports)
    assert "cpu_steal_share" not in {e.signal for e in _cause(attr, "host").evidence}


def test_the_server_timed_metric_is_the_spikes_own_else_another_that_spiked_with_it():
    n = 10
    in_spike = np.arange(n) >= 7
    masks = (in_spike, ~in_spike)
    ttft_only = [{"window": w, "server_ttft_p99_ms": 15.0} for w in range(n)]
    assert server_timed_metric("itl_p99", ["itl_p99", "ttft_p99"], ttft_only, masks) == "ttft_p99"
    assert server_timed_metric("ttft_p99", ["ttft_p99"], ttft_only, masks) == "ttft_p99"
    # TTFT did not spike with it, or the server timed no window of the baseline: its own stays
    assert server_timed_metric("itl_p99", ["itl_p99"], ttft_only, masks) == "itl_p99"
    late_only = [r for r in ttft_only if r["window"] >= 7]
    assert server_timed_metric("itl_p99", ["itl_p99", "ttft_p99"], late_only, masks) == "itl_p99"
    both = [{**r, "server_itl_p99_ms": 5.0} for r in ttft_only]
    assert server_timed_metric("itl_p99", ["itl_p99", "ttft_p99"], both, masks) == "itl_p99"
