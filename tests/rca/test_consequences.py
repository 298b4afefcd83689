"""rca.consequences: causes kept apart from their consequences, on simulated runs of several kinds.

Each principle is tested on fault kinds other than the vLLM GC storm / load burst it came from:
  1. CPU conservation: a process whose CPU went to a sibling of the engine's tree is not host
     (GC storm, slow penalty path, load burst; step traces and /metrics alike), while the same
     wait with nobody in the tree gaining it still is (host contention).
  2. Collectives: a single-rank engine's wait on a sibling is not communication (GC storm, load
     burst), while an engine with several ranks keeps its collective evidence.
  3. Work-proportional series: GC objects collected rise with load but do not vote memory (load
     burst, repetition loops), while a GC storm's extra garbage per token still does.
  4. Client vs server time: a late client is named only while the engine's step time (the
     server-side inter-token time) stays flat (GC stall, CPU wait, penalty slow path).
  5. Demand is what the client pushed, not what it managed to send: a closed loop's users in
     flight, an open loop's schedule (a burst of users, a client's catch-up after a stall).
"""

from __future__ import annotations

import numpy as np
import pytest

from rca.analyze import analyze_run
from rca.attribute import attribute_spike
from rca.consequences import (
    ARRIVALS_SLACK,
    CpuWait,
    Workload,
    carried,
    cpu_given_to_siblings,
    has_collectives,
    intensity,
    lookback_windows,
    per_work,
    series_role,
    sojourn_masks,
    work_asked,
)
from rca.metric_rank import cause_of
from tests.support.spikesignals import SpikeRun, spike_signals

VLLM_ONE_RANK = '{"kind": "vllm", "model": "m", "tensor_parallel_size": 1}'  # run.json engine
VLLM_TWO_RANKS = '{"kind": "vllm", "model": "m", "tensor_parallel_size": 2}'


def _analysis(warehouse_with, **spec):
    db, run_id = warehouse_with(**spec)
    return analyze_run(db, run_id)


def _main(analysis):
    """The attribution of the run's largest reported spike."""
    spikes = sorted(analysis.spikes, key=lambda s: -(s.peak_ms - s.baseline_ms))
    assert spikes, "the run should have a reported spike"
    return analysis.attributions[spikes[0].spike_id]


def _shares(attr) -> dict[str, float]:
    return {c.cause: c.share for c in attr.causes}


# --- 1. CPU conservation in the engine's process tree ----------------------------------------


def test_cpu_given_to_a_sibling_is_not_lost_outside_the_engine():
    n = 10
    spike = np.arange(n) >= 7
    cpu = {
        1: ("Worker", np.where(spike, 300.0, 600.0)),
        2: ("EngineCore", np.where(spike, 900.0, 600.0)),
        3: ("api_server", np.full(n, 50.0)),
    }
    went = cpu_given_to_siblings(cpu, 1, 300.0, spike, ~spike)
    assert went.siblings_gain == pytest.approx(300.0) and went.outside == 0.0
    assert went.gainer == "EngineCore (pid 2)" and "sibling" in went.note()
    hogs = {p: (r, np.where(spike, 500.0, 600.0)) for p, (r, v) in cpu.items()}
    went = cpu_given_to_siblings(hogs, 1, 300.0, spike, ~spike)
    assert went.outside_fraction == 1.0 and "outside the engine" in went.note()
    assert CpuWait(300.0, 100.0, "x").outside_fraction == pytest.approx(2 / 3)


@pytest.mark.parametrize("incident", ["gc", "penalty"])
def test_a_wait_for_cpu_a_sibling_took_is_not_host(warehouse_with, incident):
    """Step traces: the same run-queue wait gives host a share only when the CPU left the tree."""
    common = dict(incident=incident, collectors=True, cpu_theft_ms_per_s=250.0)
    inside = _main(_analysis(warehouse_with, cpu_theft="sibling", **common))
    outside = _main(_analysis(warehouse_with, cpu_theft="outside", **common))
    cause = "memory" if incident == "gc" else "penalty"
    assert inside.top_cause == cause and "host" not in _shares(inside)
    assert _shares(outside).get("host", 0.0) > 0.05
    host_ev = [e for c in inside.causes for e in c.evidence if e.signal == "runq_wait_ms_per_s"]
    assert not host_ev  # host has no share, so no evidence row is listed for it


@pytest.mark.parametrize("incident,cause", [("gc", "memory"), ("load", "load")])
def test_worker_waiting_on_its_engine_core_is_neither_host_nor_communication(
    warehouse_with, incident, cause
):
    """/metrics (a vLLM-like engine, one rank): the Worker's CPU went to its EngineCore and it
    sat in collective_wait-like code; neither its run-queue wait nor that region votes."""
    a = _main(
        _analysis(
            warehouse_with,
            incident=incident,
            step_trace=False,
            collectors=True,
            engine=VLLM_ONE_RANK,
            cpu_theft="sibling",
            waiting_role="Worker",
            wait_region="collective_wait",
        )
    )
    assert a.method == "metric_rank" and a.top_cause == cause
    assert not {"host", "communication"} & set(_shares(a))


def test_outside_cpu_contention_on_metrics_is_still_host(warehouse_with):
    a = _main(
        _analysis(
            warehouse_with,
            incident="host",
            step_trace=False,
            collectors=True,
            engine=VLLM_ONE_RANK,
            cpu_theft="outside",
            waiting_role="Worker",
        )
    )
    assert a.top_cause == "host"
    assert any("outside the engine" in e.note for c in a.causes for e in c.evidence)


# --- 2. collectives ---------------------------------------------------------------------------


def test_collectives_come_from_the_step_trace_or_the_engine_settings():
    one = {"t_s": np.arange(3.0), "n_ranks": np.ones(3), "comm_ms": np.zeros(3)}
    two = {**one, "n_ranks": np.full(3, 2.0)}
    assert has_collectives(None, one) is False and has_collectives(None, two) is True
    assert has_collectives(VLLM_ONE_RANK, {}) is False
    assert has_collectives(VLLM_TWO_RANKS, {}) is True
    assert has_collectives({"kind": "vllm", "extra_args": ["--data-parallel-size", "2"]}, {})
    assert has_collectives('{"model": "tiny", "tp": 1}', None) is False
    assert has_collectives(None, None) is None  # a target: not known


def test_an_engine_with_ranks_keeps_its_collective_evidence(warehouse_with):
    """The same Worker wait on a two-rank engine: collective_wait is a real collective there."""
    from rca.metric_rank import rank_process_series, without_collectives

    db, run_id = warehouse_with(
        incident="gc",
        step_trace=False,
        collectors=True,
        engine=VLLM_TWO_RANKS,
        cpu_theft="sibling",
        waiting_role="Worker",
        wait_region="collective_wait",
    )
    analysis = analyze_run(db, run_id)
    spike = analysis.spikes[0]
    n = len(analysis.signals.windows)
    idx = np.arange(n)
    in_spike = (idx >= spike.first_window) & (idx <= spike.last_window)
    ranked = rank_process_series(analysis.signals, in_spike, ~in_spike)
    comm = [r for r in ranked if r.cause == "communication"]
    assert comm and all(r.votes for r in without_collectives(comm, True))
    assert not any(r.votes for r in without_collectives(comm, False))


# --- 3. work-proportional series --------------------------------------------------------------


def test_series_roles_classify_work_and_its_by_products():
    assert series_role('python_gc_objects_collected_total{"generation": "0"}')[0] == "per_work"
    assert series_role("python_gc_collections_total")[0] == "per_work"
    assert series_role("vllm:prompt_tokens_total")[0] == "demand"
    assert series_role('vllm:request_num_preemptions_count{"e": "0"}')[0] == "demand"
    assert series_role("vllm:e2e_request_latency_seconds_sum")[0] == "symptom"
    # a request's phase times restate its latency; the queue's stays load's evidence
    for phase in ("prefill", "decode", "inference"):
        assert series_role(f'vllm:request_{phase}_time_seconds_sum{{"m": "x"}}')[0] == "symptom"
    assert cause_of('vllm:request_queue_time_seconds_sum{"m": "x"}') == "load"
    assert series_role('http_response_size_bytes_count{"handler": "/v1"}')[0] == "demand"
    assert series_role("vllm:num_preemptions_total")[0] == "cause"
    assert cause_of("vllm:generation_tokens_total") == "load"
    # a count of tokens processed is work, whatever cache its name mentions
    assert cause_of('vllm:request_prefill_kv_computed_tokens_sum{"m": "x"}') == "load"
    assert cause_of("vllm:kv_cache_usage_perc") == "memory"
    assert cause_of("vllm:num_preemptions_total") == "memory"
    per = per_work(np.array([40.0, 80.0, 5.0]), np.array([1.0, 2.0, 0.0]))
    assert per[0] == per[1] == 40.0 and np.isnan(per[2])


@pytest.mark.parametrize("incident,cause", [("load", "load"), ("penalty", "unexplained")])
def test_garbage_that_moves_with_the_work_is_not_memory(warehouse_with, incident, cause):
    """More requests collect more objects (load: before, memory from python_gc_collections_total
    at z 22.7); a slower engine collects fewer (penalty: /metrics has no penalty series, so it
    stays unexplained). Per token generated neither moves, so neither votes memory."""
    a = _main(_analysis(warehouse_with, incident=incident, step_trace=False, engine=VLLM_ONE_RANK))
    assert a.top_cause == cause
    gc = [e for c in a.causes if c.cause == "memory" for e in c.evidence if "gc_" in e.signal]
    assert not gc, [e.signal for e in gc]


@pytest.mark.parametrize(
    "collectors, speaks",
    [
        (False, lambda signal: signal.endswith(" per token")),  # more garbage per token
        (True, lambda signal: "gc_ms_per_s" in signal),  # the GC hook's pauses
    ],
    ids=["per-token-counts", "gc-hook-pauses"],
)
def test_a_gc_storm_is_memory_with_or_without_the_gc_hook(warehouse_with, collectors, speaks):
    """Without the GC hook, more garbage per token speaks for memory; with its pause times in the
    run, the storm is named by the pauses of the process that collected, and /metrics' GC counts
    are shown beside them and do not vote."""
    a = _main(
        _analysis(
            warehouse_with,
            incident="gc",
            step_trace=False,
            engine=VLLM_ONE_RANK,
            collectors=collectors,
            gc_objects_per_token=2.0,
        )
    )
    if collectors:
        assert a.top_cause == "memory"
    memory = next(c for c in a.causes if c.cause == "memory")
    assert any(speaks(e.signal) for e in memory.evidence)


def test_gc_counts_do_not_vote_where_the_gc_hook_measured_the_pauses():
    from rca.consequences import GC_PAUSES_MEASURED_NOTE
    from rca.metric_rank import RankedSeries, gc_counts_as_context

    def ranked(name, cause):
        return RankedSeries(name, cause, 20.0, 1.0, 0.0, np.zeros(3))

    series = [
        ranked('python_gc_objects_collected_total{"generation": "0"} per token', "memory"),
        ranked("python_gc_collections_total per token", "memory"),
        ranked("vllm:request_queue_time_seconds_sum", "load"),
    ]
    assert gc_counts_as_context(series, pauses_measured=False) == series
    shown = gc_counts_as_context(series, pauses_measured=True)
    assert [r.votes for r in shown] == [False, False, True]
    assert all(r.note == GC_PAUSES_MEASURED_NOTE for r in shown[:2])


# --- 4. client vs server-side time ------------------------------------------------------------


@pytest.mark.parametrize(
    "engine,lag_ms,rise_ms,cause",
    [
        ({"stage_rise_ms": {"gc_ms": 15.0}}, 20.0, 20.0, "memory"),  # was client 0.93
        ({"stage_rise_ms": {"penalty_ms": 15.0}}, 20.0, 20.0, "penalty"),  # was client 0.93
        ({"runq_rise_ms_per_s": 400.0}, 10.0, 15.0, "host"),  # was client 0.61
    ],
)
def test_a_late_client_does_not_take_what_the_engine_step_time_shows(
    engine, lag_ms, rise_ms, cause
):
    """ITL: the engine's step is the server-side inter-token time. When its rise accounts for the
    latency rise, the engine cause keeps it however late the client read at the same time."""
    spike, signals = spike_signals(
        SpikeRun(metric="itl_p99", client_lag_rise_ms=lag_ms, latency_rise_ms=rise_ms, **engine)
    )
    a = attribute_spike(spike, [spike], signals)
    assert a.top_cause == cause and _shares(a)[cause] > 0.9
    assert _shares(a).get("client", 0.0) < 0.05


def test_a_late_client_with_flat_engine_times_is_client():
    spike, signals = spike_signals(
        SpikeRun(metric="itl_p99", client_lag_rise_ms=20.0, latency_rise_ms=20.0)
    )
    a = attribute_spike(spike, [spike], signals)
    assert a.top_cause == "client" and _shares(a)["client"] > 0.9


def _load(arrivals, scheduled=None, in_flight=None) -> Workload:
    n = len(arrivals)
    flat = np.full(n, 32.0)
    return Workload(
        np.asarray(arrivals, dtype=float),
        flat,
        flat,
        None if scheduled is None else np.asarray(scheduled, dtype=float),
        None if in_flight is None else np.asarray(in_flight, dtype=float),
    )


_SPIKE = np.array([False] * 10 + [True] * 5 + [False] * 5)


def _asked(load: Workload) -> bool:
    return work_asked(
        load, (_SPIKE, ~_SPIKE), (_SPIKE, ~_SPIKE), load_rise=0.2, inflation=1.5
    ).more_requests


def test_a_closed_loop_burst_is_more_work_though_its_sends_stay_flat():
    # 7 users became 23 with the batch full: as many requests a second went out (the engine's
    # pace), but three times as many users waited for their answers
    sends = [6.0] * 20
    users = [7.0] * 10 + [23.0] * 5 + [7.0] * 5
    assert intensity(np.array(sends), None, np.array(users))[0] == "closed"
    assert _asked(_load(sends, in_flight=users))
    assert not _asked(_load(sends, in_flight=[7.0] * 20))


def test_users_a_calm_window_carried_are_not_more_work():
    # 4 users stepped to 11 five windows before the spike and stayed: the spike holds more users
    # than the baseline's mean, but the calm windows after it carried as many
    sends = [4.0] * 20
    stepped = [4.0] * 5 + [11.0] * 15
    assert carried("closed", np.array(stepped)[~_SPIKE]) == 11.0
    assert not _asked(_load(sends, in_flight=stepped))
    # the same step with a burst on top: more users than any calm window held
    burst = [4.0] * 5 + [11.0] * 5 + [18.0] * 5 + [11.0] * 5
    assert _asked(_load(sends, in_flight=burst))
    # an open loop's schedule is a random count: its baseline is the mean, not its noisy maximum
    noisy = [2.0, 6.0] * 5 + [6.0] * 5 + [2.0, 6.0, 2.0, 6.0, 2.0]
    assert carried("open", np.array(noisy)[~_SPIKE]) == pytest.approx(3.87, abs=0.01)
    assert _asked(_load(sends, scheduled=noisy))


def test_a_burst_that_ended_as_its_queue_peaked_is_still_the_work_asked():
    """An open loop scheduled 5× its rate over windows 15-22; the queue it built peaked at 8 s
    of TTFT over windows 22-32. The spike's own windows hold one window of the burst, and the
    burst's first windows (calm latency, the queue still short) sat in the baseline."""
    n = 40
    scheduled = np.array([60.0 if 15 <= w <= 22 else 12.0 for w in range(n)])
    in_spike = (np.arange(n) >= 22) & (np.arange(n) <= 32)
    in_base = np.arange(n) < 20  # the guard's 2 windows before the spike; nothing after it
    load = _load(scheduled, scheduled=scheduled)
    spike_only = (in_spike, in_base)
    assert not work_asked(load, spike_only, spike_only, 0.2, 1.5).more_requests
    sent = sojourn_masks(spike_only, 8000.0, 1.0, 4)
    assert lookback_windows(8000.0, 1.0) == 8 and sent[0][14:33].all() and not sent[0][:14].any()
    assert not (sent[0] & sent[1]).any() and sent[1].sum() == 14  # 0-13 stay the baseline
    found = work_asked(load, spike_only, sent, 0.2, 1.5)
    # windows 14-32: 8 of the burst's 60 and 11 of 12, over the baseline's 12
    assert found.more_requests and found.factor == pytest.approx((8 * 60 + 11 * 12) / 19 / 12)


def test_the_look_back_is_the_latency_in_whole_windows_and_keeps_a_baseline():
    assert lookback_windows(90.0, 1.0) == 0  # well under a window: the spike's own windows
    assert lookback_windows(1600.0, 1.0) == 2 and lookback_windows(1600.0, 2.0) == 1
    assert lookback_windows(float("nan"), 1.0) == 0
    n = 12
    in_spike = np.arange(n) >= 8
    masks = in_spike, np.arange(n) < 6
    assert sojourn_masks(masks, 0.0, 1.0, 4) == masks
    # reaching back 3 windows leaves 5 baseline windows: fine at 4, not at 6
    assert sojourn_masks(masks, 3000.0, 1.0, 4)[1].sum() == 5
    assert sojourn_masks(masks, 3000.0, 1.0, 6) == masks


def test_outputs_are_read_where_requests_finished_not_where_they_were_sent():
    """Loops grew the outputs of the requests that finished in the spike; the windows before
    it finished requests sent before the fault. Reaching back over them is for sends only."""
    n = 20
    outputs = np.array([140.0 if w >= 10 else 40.0 for w in range(n)])
    load = Workload(np.full(n, 4.0), np.full(n, 32.0), outputs, None, np.full(n, 4.0))
    in_spike = (np.arange(n) >= 10) & (np.arange(n) <= 11)
    masks = in_spike, np.arange(n) < 8
    sent = sojourn_masks(masks, 2000.0, 1.0, 4)
    found = work_asked(load, masks, sent, 0.2, 1.5)
    assert found.outputs_grew and found.factor == pytest.approx(3.5)


def test_a_clients_catch_up_is_not_more_work():
    # an open loop whose client stalled: its backlog went out at once, its schedule did not move
    sends = [5.0] * 10 + [1.0, 14.0, 12.0, 9.0, 5.0] + [5.0] * 5
    scheduled = [5.0] * 20
    loop, series, slack = intensity(np.array(sends), np.array(scheduled), np.full(20, 3.0))
    assert loop == "open" and slack == ARRIVALS_SLACK and series.tolist() == scheduled
    assert not _asked(_load(sends, scheduled=scheduled))
    # a closed loop's sends after an engine stall: its users, not its flushed backlog
    assert not _asked(_load(sends, in_flight=[5.0] * 20))


def test_without_schedule_or_client_health_the_sends_are_the_work():
    sends = [5.0] * 10 + [9.0] * 5 + [5.0] * 5
    assert intensity(np.array(sends), None, None)[0] == "sent"
    assert _asked(_load(sends)) and _asked(_load(sends, in_flight=[np.nan] * 20))


def test_the_work_asked_says_how_many_times_it_grew():
    def asked(load):
        return work_asked(load, (_SPIKE, ~_SPIKE), (_SPIKE, ~_SPIKE), load_rise=0.2, inflation=1.5)

    users = [6.0] * 10 + [15.0] * 5 + [6.0] * 5
    assert asked(_load([6.0] * 20, in_flight=users)).factor == pytest.approx(2.5)
    # within the load rise: no growth, factor 1
    assert asked(_load([6.0] * 20, in_flight=[6.0] * 10 + [7.0] * 10)).factor == 1.0
    # prompts 3× as long on as many users: the factor is theirs
    load = _load([6.0] * 20, in_flight=[6.0] * 20)
    longer = Workload(load.arrivals, np.where(_SPIKE, 96.0, 32.0), load.output_tokens, None, None)
    found = asked(longer)
    assert found.prompts_grew and found.factor == pytest.approx(3.0)
