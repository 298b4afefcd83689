"""rca.metric_rank: attribution from /metrics samples when a target has no step traces."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rca.analyze import analyze_run
from rca.metric_rank import MIN_Z, cause_of, metric_series, rank_series
from tests.support.runbuilder import SimSpec, write_run
from warehouse.ingest import ingest_run


def _scrape(run_dir, every_ns=500_000_000):
    """metrics.parquet as a /metrics scraper would have written it, from the engine's step trace;
    then the step trace and GC log are removed (an external engine has neither)."""
    steps = pq.read_table(run_dir / "steps.parquet").to_pydict()
    end = np.array(steps["end_ns"])
    preempt_total = np.cumsum(steps["preempted"])
    rows = []
    for ts in range(int(end[0]), int(end[-1]), every_ns):
        i = int(np.searchsorted(end, ts, side="right")) - 1
        for name, value in (
            ("vllm:num_requests_running", steps["batch_size"][i]),
            ("vllm:num_requests_waiting", steps["waiting"][i]),
            ("vllm:gpu_cache_usage_perc", steps["kv_blocks_used"][i] / steps["kv_blocks_total"][i]),
            ("vllm:num_preemptions_total", preempt_total[i]),
            ("process_resident_memory_bytes", 1e9),
        ):
            rows.append(
                {
                    "ts_ns": ts,
                    "name": name,
                    "labels": json.dumps({"model_name": "m"}),
                    "value": float(value),
                }
            )
    pq.write_table(pa.Table.from_pylist(rows), run_dir / "metrics.parquet")
    (run_dir / "steps.parquet").unlink()
    (run_dir / "gc.parquet").unlink()


@pytest.mark.parametrize("incident,cause", [("kv", "memory"), ("load", "load")])
def test_metric_ranking_attributes_external_targets(tmp_path, incident, cause):
    run_dir = write_run(tmp_path / "runs", SimSpec(run_id=f"ext-{incident}", incident=incident))
    _scrape(run_dir)
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    analysis = analyze_run(db, f"ext-{incident}")
    assert len(analysis.spikes) == 1
    attr = analysis.attributions[1]
    assert attr.method == "metric_rank" and attr.top_cause == cause
    assert attr.causes[0].share >= 0.5 and attr.causes[0].evidence


def test_counters_become_rates_and_names_map_to_causes():
    rows = [
        {"window": w, "name": "vllm:num_preemptions_total", "labels": "{}", "last_value": v}
        for w, v in enumerate([0, 0, 4, 10, 10])
    ]
    rate = metric_series(rows, 5, 2.0)["vllm:num_preemptions_total"]
    assert np.isnan(rate[0]) and list(rate[1:]) == [0.0, 2.0, 3.0, 0.0]
    assert cause_of("vllm:gpu_cache_usage_perc") == "memory"
    assert cause_of("vllm:num_requests_waiting") == "load"
    assert cause_of("nvml_pcie_tx") == "communication"
    assert cause_of("process_max_fds") == "unexplained"
    # a server's open descriptors are its connections, one per request in the system: the queue
    assert cause_of("process_open_fds") == "load"
    # node_exporter's CPU counters: the stolen mode is the hypervisor's, the others say nothing
    assert cause_of('node_cpu_seconds_total{"cpu": "0", "mode": "steal"}') == "host"
    assert cause_of('node_cpu_seconds_total{"cpu": "0", "mode": "idle"}') == "unexplained"
    flat = {"a": np.array([1.0] * 8 + [9.0, 9.0]), "b": np.arange(10.0)}
    spike = np.arange(10) >= 8
    ranked = rank_series(flat, spike, ~spike)
    assert [r.name for r in ranked] == ["a", "b"] and ranked[0].z == 8.0  # a step of 8 units


def test_a_counter_with_a_zero_baseline_scores_a_finite_z():
    """One GC collection in the spike after none before: one event, not a 1e9 z."""
    from rca.metric_rank import ScoreConfig

    rows = [
        {
            "window": w,
            "name": "python_gc_collections_total",
            "labels": '{"generation": "1"}',
            "last_value": v,
        }
        for w, v in enumerate([0, 0, 0, 0, 0, 0, 0, 0, 1, 1])
    ]
    series = metric_series(rows, 10, 1.0)
    spike = np.arange(10) >= 7
    (ranked,) = rank_series(series, spike, ~spike, window_s=1.0)
    assert ranked.z == pytest.approx(1.0) and ranked.z < MIN_Z
    # a real storm (40 collections a window) still stands out
    storm = [{**r, "last_value": 40.0 * max(0, r["window"] - 7)} for r in rows]
    (ranked,) = rank_series(metric_series(storm, 10, 1.0), spike, ~spike, window_s=1.0)
    assert ranked.z == pytest.approx(40.0)
    # with 0.5-s windows one event is a rate of 2/s: the floor follows the window
    (ranked,) = rank_series(metric_series(rows, 10, 0.5), spike, ~spike, window_s=0.5)
    assert ranked.z == pytest.approx(1.0)
    with pytest.raises(ValueError, match="level_share"):
        ScoreConfig(level_share=0)


def test_flat_gauges_score_against_their_resolution_and_level():
    spike = np.arange(10) >= 8
    flat_zero_fraction = np.array([0.0] * 8 + [0.3, 0.3])  # e.g. KV cache usage from idle
    flat_count = np.array([0.0] * 8 + [2.0, 2.0])  # e.g. running requests
    flat_high = np.array([1000.0] * 8 + [1004.0, 1004.0])  # resident memory wobbling
    never_moves = np.full(10, 7.0)
    ranked = {
        r.name: r.z
        for r in rank_series(
            {
                "frac": flat_zero_fraction,
                "count": flat_count,
                "high": flat_high,
                "still": never_moves,
            },
            spike,
            ~spike,
        )
    }
    assert all(np.isfinite(z) for z in ranked.values())
    assert ranked["frac"] == pytest.approx(20.0)  # 0 → 0.3 against 5 % of its magnitude
    assert ranked["count"] == pytest.approx(2.0)  # two requests against a step of one
    assert ranked["high"] < 1.0 and ranked["still"] == 0.0


def _process_run(
    n, spike, stacks=(), gc=(), cpu=(), arrivals=None, metrics=(), engine=None, work=None
):
    """A run of `n` 1-s windows with a TTFT spike over `spike`; `arrivals`: requests sent per
    window (None: not counted), `metrics`: metric_windows rows, `work`: window → extra columns
    of query `windows` (asked_tokens_mean, scheduled) and query client_windows' in_flight."""
    from rca.attribute import RunSignals
    from rca.detect import Spike
    from rca.process_evidence import ProcessSignals

    windows = [{"window": w, "ttft_p99_ms": 90.0 if w in spike else 10.0 + w % 3} for w in range(n)]
    if arrivals is not None:
        windows = [{**row, "arrivals": arrivals(w)} for w, row in enumerate(windows)]
    extra = {w: work(w) for w in range(n)} if work else {}
    windows = [{**row, **extra.get(w, {})} for w, row in enumerate(windows)]
    client = [
        {"window": w, "in_flight": x["in_flight"]} for w, x in extra.items() if "in_flight" in x
    ]
    signals = RunSignals(
        window_s=1.0,
        windows=windows,
        step_windows=[],
        steps={},
        gc_pauses=[],
        metric_windows=list(metrics),
        client_windows=client,
        process=ProcessSignals(list(stacks), list(gc), list(cpu)),
        engine=engine,
    )
    s = Spike(
        0,
        "ttft_p99",
        ["ttft_p99"],
        spike[0],
        spike[-1],
        spike[0],
        spike[-1] + 1.0,
        90.0,
        10.0,
        "high",
        5.0,
    )
    return s, signals


def test_process_signals_vote_beside_metrics_and_name_the_process_and_region():
    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]
    stacks = [
        {"window": w, "pid": 41, "role": "EngineCore", "region": region, "busy_share": share}
        for w in range(n)
        for region, share in (
            ("sampling_penalties", 0.38 if w in spike else 0.02 + 0.005 * (w % 2)),
            ("model_forward", 0.62 if w in spike else 0.98 - 0.005 * (w % 2)),
        )
    ]
    gc = [
        {"window": w, "pid": 40, "role": "api_server", "pause_ms": 3.0 if w in (5, 16) else 0.0}
        for w in range(n)
    ]
    s, signals = _process_run(n, spike, stacks, gc)
    a = attribute_by_metrics(s, [s], signals)
    assert a.top_cause == "penalty" and a.method == "metric_rank"
    ev = next(c for c in a.causes if c.cause == "penalty").evidence[0]
    assert ev.signal == "EngineCore (pid 41) stack_share.sampling_penalties"
    assert ev.note.startswith(
        "EngineCore (pid 41): 38% of its non-idle stack samples in sampling_penalties "
        "during the spike vs 2% before"
    )
    assert "memory" not in {c.cause for c in a.causes}  # a 3 ms/s GC blip is below the marked floor


def test_a_gc_storm_in_engine_core_is_memory_and_outside_cpu_contention_says_host():
    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]
    gc = [
        {
            "window": w,
            "pid": 7,
            "role": "EngineCore",
            "pause_ms": 240.0 if w in spike else 2.0 * (w % 2),
        }
        for w in range(n)
    ]
    s, signals = _process_run(n, spike, gc=gc)
    a = attribute_by_metrics(s, [s], signals)
    assert a.top_cause == "memory"
    assert a.causes[0].evidence[0].note.startswith("EngineCore (pid 7): 240 ms/s of GC pauses")
    cpu = [
        {
            "window": w,
            "pid": 7,
            "role": "EngineCore",
            "runq_wait_ms_per_s": 300.0 if w in spike else 5.0,
            "cpu_ms_per_s": 400.0 if w in spike else 600.0,
            "involuntary_switches_per_s": 10.0,
        }
        for w in range(n)
    ]
    s, signals = _process_run(n, spike, cpu=cpu)
    a = attribute_by_metrics(s, [s], signals)
    assert a.top_cause == "host"
    note = a.causes[0].evidence[0].note
    assert "CPU contention from outside the process" in note
    assert (
        "no other process of the engine gained CPU time: it went outside the engine (host)" in note
    )
    # the same wait while the process did more work itself (a KV-pressure recompute on vLLM):
    # its own threads may be competing, so the wait is shown but does not vote for host
    busy = [{**r, "cpu_ms_per_s": 1600.0 if r["window"] in spike else 600.0} for r in cpu]
    s, signals = _process_run(n, spike, gc=gc, cpu=busy)
    a = attribute_by_metrics(s, [s], signals)
    assert a.top_cause == "memory" and "host" not in {c.cause for c in a.causes}


def _ranked(name: str, cause: str, z: float, spike: float = 1.0, base: float = 0.0):
    from rca.metric_rank import RankedSeries

    return RankedSeries(name, cause, z, spike, base, np.zeros(3))


def test_preemptions_turn_queueing_into_memory_and_say_why_but_work_stays_load():
    from rca.metric_rank import TOP_K, read_preemption_effects

    ranked = [
        _ranked("vllm:request_queue_time_seconds_sum", "load", 20.0),
        _ranked("vllm:prompt_tokens_total", "load", 12.0),
        _ranked("vllm:prefix_cache_queries_total", "load", 12.0),
        _ranked("vllm:num_requests_running", "load", 11.0),
        _ranked("process_cpu_seconds_total", "unexplained", 10.0),
        _ranked("process_open_fds", "unexplained", 9.0),
        _ranked("vllm:num_preemptions_total", "memory", 7.0, 7.0, 0.0),
    ]
    out = read_preemption_effects(ranked)
    by_name = {r.name: r for r in out}
    queue = by_name["vllm:request_queue_time_seconds_sum"]
    assert queue.cause == "memory"
    assert "preempted" in queue.note and "cannot split" in queue.note
    # prompt tokens and prefix-cache queries count the work asked (rca.consequences): a burst of
    # long prompts is load whether or not the engine also preempted
    for name in ("vllm:prompt_tokens_total", "vllm:prefix_cache_queries_total"):
        assert by_name[name].cause == "load" and not by_name[name].note
    # running requests and unrelated series keep their cause; the reason joins the voters
    assert by_name["vllm:num_requests_running"].cause == "load"
    # the KV occupancy that made vLLM preempt is memory too, even when its window mean is < 0.9
    kv = [_ranked("vllm:kv_cache_usage_perc", "load", 20.0, 0.75, 0.0), *ranked]
    assert read_preemption_effects(kv)[0].cause == "memory"
    assert by_name["process_open_fds"].cause == "unexplained"
    assert [r.name for r in out].index("vllm:num_preemptions_total") == TOP_K - 1
    assert len(out) == len(ranked)
    # one preemption a window more than before is enough; less is not
    few = ranked[:-1] + [_ranked("vllm:num_preemptions_total", "memory", 2.0, 2.0, 0.0)]
    assert read_preemption_effects(few)[0].cause == "memory"
    # a per-request histogram's count is requests, not preemptions: no reading, and it is load
    burst = ranked[:-1] + [_ranked('vllm:request_num_preemptions_count{"e": "0"}', "load", 9.0)]
    assert read_preemption_effects(burst) == burst
    assert cause_of('vllm:request_num_preemptions_count{"e": "0"}') == "load"
    assert cause_of('vllm:request_num_preemptions_sum{"e": "0"}') == "memory"
    quiet = ranked[:-1] + [_ranked("vllm:num_preemptions_total", "memory", 0.5)]
    assert read_preemption_effects(quiet) == quiet


def test_engine_latency_series_do_not_vote():
    import re

    from rca.metric_rank import SYMPTOMS

    for name in (
        "vllm:time_to_first_token_seconds_sum",
        "vllm:inter_token_latency_seconds_sum",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_time_per_output_token_seconds_sum",
        "http_request_duration_seconds_sum",
        # a request's phases of its own latency: every symptom pattern counts, not only the first
        "vllm:request_prefill_time_seconds_sum",
        "vllm:request_decode_time_seconds_sum",
        "vllm:request_inference_time_seconds_count",
    ):
        assert re.search(SYMPTOMS, name)
    assert not re.search(SYMPTOMS, "vllm:request_queue_time_seconds_sum")
    from rca.consequences import SERIES_ROLES

    assert all(p in SYMPTOMS for p, role, _ in SERIES_ROLES if role == "symptom")


def test_a_tie_goes_to_the_series_that_tracks_the_latency_or_is_said():
    from rca.attribute import CauseShare
    from rca.metric_rank import RankedSeries, settle_tie

    latency = np.array([10.0, 10.0, 50.0, 60.0, 10.0, 10.0])
    tracks = RankedSeries("gc_ms", "memory", 20.0, 1.0, 0.0, np.array([0, 0, 5, 6, 0, 0.0]))
    step = RankedSeries("penalty_share", "penalty", 20.0, 1.0, 0.0, np.array([0, 0, 5, 5, 5, 5.0]))
    causes = [CauseShare("penalty", 0.5, 0.87, 0.0), CauseShare("memory", 0.5, 0.87, 0.0)]
    top, said = settle_tie(causes, [step, tracks], latency)
    assert top == "memory"  # CAUSES order would have said penalty
    assert said.startswith("penalty and memory tie on votes; memory's strongest series tracks")
    twin = RankedSeries("gc_ms", "memory", 20.0, 1.0, 0.0, step.series.copy())
    top, said = settle_tie(causes, [step, twin], latency)
    assert top == "unexplained" and said.startswith("cannot tell penalty and memory apart")
    clear = [CauseShare("memory", 0.7, 0.87, 0.0), CauseShare("penalty", 0.3, 0.87, 0.0)]
    assert settle_tie(clear, [step, tracks], latency) == ("memory", "")


def test_a_queue_beside_free_batch_slots_is_held_by_the_kv_cache():
    """Requests waiting while fewer run than before: vLLM admits only when the cache has blocks,
    so the queue's state is memory's; a burst (more running, then waiting) is not read so, nor
    a window whose cache held less than the baseline's, and one such window is not enough."""
    from rca.metric_rank import KV_HELD_MIN_WINDOWS, kv_held_windows, read_kv_held_queue

    n = 20
    in_spike = np.zeros(n, bool)
    in_spike[10:15] = True
    in_base = ~in_spike
    running, waiting = np.full(n, 3.0), np.zeros(n)
    running[10:15], waiting[10:15] = [3, 2, 2, 1, 2], [0, 1, 1, 2, 1]
    held = {"vllm:num_requests_running": running, "vllm:num_requests_waiting": waiting}
    assert kv_held_windows(held, in_spike, in_base) == 4
    burst_running = running.copy()
    burst_running[10:15] = [4, 5, 5, 5, 5]  # more requests: the batch fills before any waits
    burst = {**held, "vllm:num_requests_running": burst_running}
    assert kv_held_windows(burst, in_spike, in_base) == 0
    assert kv_held_windows({"vllm:num_requests_running": running}, in_spike, in_base) == 0
    usage = np.full(n, 0.4)
    # in the 4 held windows (11-14): 0.6, 0.2, 0.7, 0.8, three at or above the baseline's 0.4
    usage[10:15] = [0.4, 0.6, 0.2, 0.7, 0.8]
    assert kv_held_windows({**held, "vllm:kv_cache_usage_perc": usage}, in_spike, in_base) == 3
    roomy = np.where(in_spike, 0.1, 0.4)  # the cache held less than in the baseline: it had room
    assert kv_held_windows({**held, "vllm:gpu_cache_usage_perc": roomy}, in_spike, in_base) == 0

    ranked = [
        _ranked("vllm:request_queue_time_seconds_sum", "load", 20.0),
        _ranked("vllm:num_requests_waiting", "load", 4.0),
        _ranked("vllm:prompt_tokens_total", "load", 15.0),  # the work asked stays load
        _ranked("vllm:kv_cache_usage_perc", "load", 6.0, 0.8, 0.6),  # under 0.9, still held
    ]
    out = read_kv_held_queue(ranked, KV_HELD_MIN_WINDOWS)
    assert [r.cause for r in out] == ["memory", "memory", "load", "memory"]
    assert "held by the cache" in out[0].note
    assert read_kv_held_queue(ranked, KV_HELD_MIN_WINDOWS - 1) == ranked


def _queue_rows(n, spike):
    """vLLM's waiting requests and queue time rising in the spike, flat before."""
    return [
        {"name": name, "labels": "{}", "window": w, "last_value": value}
        for w in range(n)
        for name, value in (
            ("vllm:num_requests_waiting", 6.0 if w in spike else float(w % 2)),
            ("vllm:request_queue_time_seconds_sum", 0.05 * w + (3.0 if w >= spike[0] else 0.0)),
        )
    ]


def _outside_contention(n, spike):
    """EngineCore waits for a CPU nobody in the engine took (host)."""
    return [
        {
            "window": w,
            "pid": 7,
            "role": "EngineCore",
            "runq_wait_ms_per_s": 300.0 if w in spike else 5.0 + w % 2,
            "cpu_ms_per_s": 400.0 if w in spike else 600.0,
            "involuntary_switches_per_s": 10.0,
        }
        for w in range(n)
    ]


def test_a_queue_that_grew_without_more_arrivals_is_the_consequence_of_a_slower_service():
    """Little's law: the same arrivals served more slowly make a longer queue. With host CPU
    contention beside it the queue takes no share; with more users in flight load takes what
    the work asked predicts (rca.work_model), host the rest."""
    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]
    queue, cpu = _queue_rows(n, spike), _outside_contention(n, spike)

    def shares(**kw):
        s, signals = _process_run(n, spike, metrics=queue, **kw)
        a = attribute_by_metrics(s, [s], signals)
        return a, {c.cause: c.share for c in a.causes}

    a, flat = shares(cpu=cpu, arrivals=lambda w: 4.0, work=lambda w: {"in_flight": 4})
    assert a.top_cause == "host" and "load" not in flat
    users = {"in_flight": 4}, {"in_flight": 9}
    a, more = shares(cpu=cpu, arrivals=lambda w: 4.0, work=lambda w: users[w in spike])
    predicted = (9 / 4 - 1) / (90.0 / 10.0 - 1)  # of the excess: the rest the votes divide
    assert more["load"] > predicted + 0.1 and more["host"] > 0.2  # the grown queue votes too
    assert any("users in flight" in e.signal for c in a.causes for e in c.evidence)
    # not counted (a target watched through /metrics): the queue keeps its vote, as before
    a, unknown = shares(cpu=cpu)
    assert unknown.get("load", 0.0) > 0.2 and unknown.get("host", 0.0) > 0.2
    # an observed run's 'arrivals' are finished requests, not demand: not read as such
    observed = {"kind": "observed"}
    a, obs = shares(cpu=cpu, arrivals=lambda w: 4.0, engine=observed)
    assert obs.get("load", 0.0) == pytest.approx(unknown["load"])
    # nothing else moved: a closed loop at capacity sends no more requests a second, however many
    # users wait, so the queue alone still says load
    a, alone = shares(arrivals=lambda w: 4.0)
    assert a.top_cause == "load" and alone["load"] == pytest.approx(1.0)


def test_the_work_a_queue_was_built_from_counts_though_the_burst_ended_as_it_peaked():
    """An open loop scheduled 5× over windows 15-22; TTFT peaked at 8 s over windows 22-32, as
    the burst's queue drained. The work the spike's requests queued behind arrived within their
    time in the system (rca.consequences.sojourn_masks): the burst counts. The server's open
    descriptors (its connections) rose with the queue and vote load."""
    from dataclasses import replace

    from rca.metric_rank import attribute_by_metrics

    n, spike = 40, list(range(22, 33))
    sched = (
        {"scheduled": 12, "asked_tokens_mean": 40.0},
        {"scheduled": 60, "asked_tokens_mean": 40.0},
    )
    fds = [
        {"name": "process_open_fds", "labels": "{}", "window": w, "last_value": v}
        for w, v in enumerate([30.0 + (w % 2) if w < 22 or w > 32 else 180.0 for w in range(n)])
    ]

    def attribution(peak_ms, metrics=()):
        s, signals = _process_run(
            n, spike, metrics=metrics, arrivals=lambda w: 12.0, work=lambda w: sched[15 <= w <= 22]
        )
        return attribute_by_metrics(replace(s, peak_ms=peak_ms), [s], signals)

    load_share = {c.cause: c.share for c in attribution(8000.0).causes}.get("load", 0.0)
    predicted = ((8 * 60 + 11 * 12) / 19 / 12 - 1) / (90.0 / 10.0 - 1)
    assert load_share == pytest.approx(predicted, abs=0.01)
    # the spike's own windows alone hold one window of the burst: no more work asked
    assert {c.cause: c.share for c in attribution(90.0).causes}.get("load", 0.0) == 0.0
    a = attribution(8000.0, fds)
    assert a.top_cause == "load"
    assert any("process_open_fds" in e.signal for c in a.causes for e in c.evidence)


def test_the_work_asked_takes_what_it_predicts_and_the_rest_goes_to_what_else_rose():
    """Long prompts against a tight KV cache (vLLM's KV pressure): requests asked 4× the tokens,
    latency rose 9×, and vLLM preempted. Load takes the 3/8 the work predicts, memory the rest;
    an open loop's schedule counts as its intensity the same way."""
    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]
    preempt = [
        {"name": name, "labels": "{}", "window": w, "last_value": v * per}
        for name, per in (("vllm:num_preemptions_total", 6.0), ("vllm:prompt_tokens_total", 400.0))
        for w, v in zip(range(n), np.cumsum([1.0 if w in spike else 0.1 for w in range(n)]))
    ]
    tokens = {"asked_tokens_mean": 40.0}, {"asked_tokens_mean": 160.0}

    def shares(work, metrics=preempt):
        s, signals = _process_run(n, spike, metrics=metrics, arrivals=lambda w: 4.0, work=work)
        a = attribute_by_metrics(s, [s], signals)
        return a, {c.cause: c.share for c in a.causes}

    a, kv = shares(lambda w: {**tokens[w in spike], "in_flight": 2})
    assert kv["load"] == pytest.approx(3 / 8, abs=0.01) and a.top_cause == "memory"
    assert kv["memory"] == pytest.approx(5 / 8, abs=0.01)
    # the prompt tokens counted the same work as the prediction: shown for load, no vote
    load = next(c for c in a.causes if c.cause == "load")
    assert "vllm:prompt_tokens_total" in {e.signal.split("{")[0] for e in load.evidence}
    # the open loop: 3× the requests scheduled a window, as many tokens each
    sched = {"scheduled": 4}, {"scheduled": 12}
    a, burst = shares(lambda w: {**sched[w in spike], "asked_tokens_mean": 40.0})
    assert burst["load"] == pytest.approx(2 / 8, abs=0.01)
    # the work asked rose and nothing else moved: load takes its prediction, the rest is
    # unexplained (no series claims it)
    a, alone = shares(lambda w: {**tokens[w in spike], "in_flight": 2}, metrics=())
    assert alone["load"] == pytest.approx(3 / 8, abs=0.01)
    assert a.uncovered == pytest.approx(5 / 8, abs=0.01)


def test_the_queue_reads_as_a_consequence_only_when_work_did_not_rise_and_another_cause_did():
    from rca.metric_rank import queue_without_demand
    from rca.work_model import WorkPrediction

    ranked = [
        _ranked("vllm:num_requests_waiting", "load", 12.0),
        _ranked("vllm:kv_cache_usage_perc", "load", 8.0),
        _ranked("vllm:prompt_tokens_total", "load", 6.0),  # work asked: keeps its vote
        _ranked("EngineCore (pid 7) runq_wait_ms_per_s", "host", 5.0),
    ]

    def work(intensity, demand):
        return WorkPrediction("closed", (4, 4), (30, 30), intensity, demand, 5.0)

    flat = work(1.0, 1.0)
    out = {r.name: r for r in queue_without_demand(ranked, flat)}
    assert not out["vllm:num_requests_waiting"].votes
    assert not out["vllm:kv_cache_usage_perc"].votes
    assert "Little's law" in out["vllm:num_requests_waiting"].note
    assert (
        out["vllm:prompt_tokens_total"].votes and out["EngineCore (pid 7) runq_wait_ms_per_s"].votes
    )
    for rose in (work(2.0, 1.0), work(1.0, 2.0)):
        assert queue_without_demand(ranked, rose) == ranked
    assert queue_without_demand(ranked, None) == ranked
    weak = [*ranked[:3], _ranked("EngineCore (pid 7) runq_wait_ms_per_s", "host", 2.0)]
    assert queue_without_demand(weak, flat) == weak  # the other cause stayed under MIN_Z


def _reported_transit(n, spike, rise_ms=120.0):
    """Client TTFT p99 rising by `rise_ms` in the spike while the engine's reported TTFT stays
    flat (query transit_windows' columns, reported times)."""
    return [
        {
            "window": w,
            "client_ttft_p99_ms": 40.0 + (w % 3) + (rise_ms if w in spike else 0.0),
            "server_ttft_p99_ms": 15.0 + (w % 2),
            "merged_first_share": 0.0,
        }
        for w in range(n)
    ]


def _front_end(n, spike, busy=False):
    """vLLM's API server: its CPU time, doubled in the spike when `busy`."""
    return [
        {
            "window": w,
            "pid": 5,
            "role": "api_server",
            "runq_wait_ms_per_s": 3.0 + w % 2,
            "cpu_ms_per_s": 400.0 if busy and w in spike else 200.0 + w % 3,
            "involuntary_switches_per_s": 2.0,
        }
        for w in range(n)
    ]


def test_client_minus_reported_server_time_names_the_network_while_the_front_end_stays_flat():
    """vLLM reports its own queue + first-token time per request: client − that time rising is
    outside the engine, unless the front end it does not cover (the API server) moved."""
    import dataclasses

    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]

    def attribute(transit, cpu, **kw):
        s, signals = _process_run(n, spike, cpu=cpu, arrivals=lambda w: 4.0, **kw)
        signals = dataclasses.replace(signals, transit_windows=transit, transit_source="reported")
        return attribute_by_metrics(s, [s], signals)

    a = attribute(_reported_transit(n, spike), _front_end(n, spike))
    assert a.top_cause == "network" and a.causes[0].share > 0.8, a.summary
    assert "server's own time did not" in a.summary
    signals_shown = {e.signal for e in a.causes[0].evidence}
    assert "client_ttft_p99_minus_server_ms" in signals_shown
    # the front end did more work: the gap may be its own, so the network takes nothing
    a = attribute(_reported_transit(n, spike), _front_end(n, spike, busy=True))
    assert "network" not in {c.cause for c in a.causes}
    assert "front end (pid 5) did more work" in a.summary
    # nobody measured the front end: the gap cannot be shown to lie outside the engine
    a = attribute(_reported_transit(n, spike), [])
    assert "network" not in {c.cause for c in a.causes}
    assert "front end was not measured" in a.summary
    # EngineCore paused for GC: a token stamped before a pause leaves after it, so the gap may
    # be the pause's
    gc = [
        {"window": w, "pid": 7, "role": "EngineCore", "pause_ms": 300.0 if w in spike else 1.0}
        for w in range(n)
    ]
    a = attribute(_reported_transit(n, spike), _front_end(n, spike), gc=gc)
    assert "network" not in {c.cause for c in a.causes}
    assert "EngineCore (pid 7) paused longer for GC" in a.summary
    # socket stamps (spikelens' engine) need no front-end check
    s, signals = _process_run(n, spike, arrivals=lambda w: 4.0)
    signals = dataclasses.replace(signals, transit_windows=_reported_transit(n, spike))
    assert attribute_by_metrics(s, [s], signals).top_cause == "network"


def test_a_reported_gap_under_host_contention_is_not_the_network():
    """Hogs outside the engine: its Worker waits for a CPU that no process of the engine gained,
    and the front end, on the same CPUs, is delayed too even where its own wait stays under its
    floor. The gap between the client and vLLM's reported times then holds that delay: host,
    not network. The same gap with the Worker's CPU gone to its sibling is no host contention,
    and stays the network's."""
    import dataclasses

    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]

    def worker(gave_to_sibling):
        rows = [
            {
                "window": w,
                "pid": 9,
                "role": "Worker",
                "runq_wait_ms_per_s": 1100.0 if w in spike else 400.0 + 10 * (w % 3),
                "cpu_ms_per_s": 530.0 if w in spike else 700.0 + w % 3,
                "involuntary_switches_per_s": 50.0,
            }
            for w in range(n)
        ]
        sibling = [
            {
                "window": w,
                "pid": 8,
                "role": "EngineCore",
                "runq_wait_ms_per_s": 20.0,
                "cpu_ms_per_s": (900.0 if w in spike and gave_to_sibling else 200.0) + w % 2,
                "involuntary_switches_per_s": 5.0,
            }
            for w in range(n)
        ]
        return rows + sibling

    def attribute(cpu):
        s, signals = _process_run(n, spike, cpu=cpu, arrivals=lambda w: 4.0)
        signals = dataclasses.replace(
            signals, transit_windows=_reported_transit(n, spike), transit_source="reported"
        )
        return attribute_by_metrics(s, [s], signals)

    a = attribute(_front_end(n, spike) + worker(gave_to_sibling=False))
    assert a.top_cause == "host" and "network" not in {c.cause for c in a.causes}, a.summary
    assert "the engine lost CPU outside itself (pid 9" in a.summary
    a = attribute(_front_end(n, spike) + worker(gave_to_sibling=True))
    assert a.top_cause == "network", a.summary


def test_a_late_client_without_a_server_time_is_named_only_while_the_engine_stayed_flat():
    """An ITL spike on vLLM has no server-side gap to compare with: the client's own lag names
    client only when no engine series moved."""
    import dataclasses

    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]
    lag = [
        {"window": w, "lag_p99_ms": 200.0 if w in spike else 3.0 + w % 2, "read_delay_p99_ms": 1.0}
        for w in range(n)
    ]
    s, signals = _process_run(n, spike, arrivals=lambda w: 4.0)
    signals = dataclasses.replace(signals, client_windows=lag)
    a = attribute_by_metrics(s, [s], signals)
    assert a.top_cause == "client" and "lag rose" in a.summary
    gc = [
        {"window": w, "pid": 7, "role": "EngineCore", "pause_ms": 240.0 if w in spike else 2.0}
        for w in range(n)
    ]
    s, signals = _process_run(n, spike, gc=gc, arrivals=lambda w: 4.0)
    signals = dataclasses.replace(signals, client_windows=lag)
    a = attribute_by_metrics(s, [s], signals)
    assert a.top_cause == "memory" and "client" not in {c.cause for c in a.causes}
    assert "a late client is not told from them" in a.summary
    # the only engine series that moved count the work asked (shown for load, no vote): the
    # engine moved all the same, so the late client is still not told from it
    prompts = [
        {"name": "vllm:prompt_tokens_total", "labels": "{}", "window": w, "last_value": v}
        for w, v in zip(range(n), np.cumsum([1600.0 if w in spike else 400.0 for w in range(n)]))
    ]
    asked = (
        {"asked_tokens_mean": 40.0, "in_flight": 2},
        {"asked_tokens_mean": 160.0, "in_flight": 2},
    )
    s, signals = _process_run(
        n, spike, metrics=prompts, arrivals=lambda w: 4.0, work=lambda w: asked[w in spike]
    )
    signals = dataclasses.replace(signals, client_windows=lag)
    a = attribute_by_metrics(s, [s], signals)
    assert "client" not in {c.cause for c in a.causes} and "load" in {c.cause for c in a.causes}


def _itl_spike_with_ttft(n, spike, signals, server_rise_ms):
    """The run's spike read on ITL (which vLLM does not time per gap) with TTFT spiking in the
    same windows: the client's TTFT p99 up 200 ms, the server's reported one up
    `server_rise_ms`, the client's lag up 200 ms."""
    import dataclasses

    windows = [
        {
            **row,
            "itl_p99_ms": 250.0 if w in spike else 20.0 + w % 2,
            "ttft_p99_ms": 40.0 + (w % 3) + (200.0 if w in spike else 0.0),
        }
        for w, row in enumerate(signals.windows)
    ]
    transit = [
        {
            "window": w,
            "client_ttft_p99_ms": 40.0 + (w % 3) + (200.0 if w in spike else 0.0),
            "server_ttft_p99_ms": 15.0 + (w % 2) + (server_rise_ms if w in spike else 0.0),
            "merged_first_share": 0.0,
        }
        for w in range(n)
    ]
    lag = [
        {"window": w, "lag_p99_ms": 200.0 if w in spike else 3.0 + w % 2, "read_delay_p99_ms": 1.0}
        for w in range(n)
    ]
    signals = dataclasses.replace(
        signals,
        windows=windows,
        transit_windows=transit,
        transit_source="reported",
        client_windows=lag,
    )
    return signals


def test_an_itl_spike_the_server_did_not_time_is_read_through_its_ttft():
    """vLLM times each request's first token but not its gaps. When TTFT spiked in the same
    windows, the server's TTFT says whether the engine delayed them: flat while the client's
    rose is a late client, even though a queue series moved (the client's backlog sent at once);
    risen with it, under an engine GC pause, leaves the client out."""
    import dataclasses

    from rca.metric_rank import attribute_by_metrics

    n, spike = 30, [15, 16, 17]
    queue = [
        {
            "name": "vllm:request_queue_time_seconds_sum",
            "labels": "{}",
            "window": w,
            "last_value": v,
        }
        for w, v in zip(range(n), np.cumsum([0.5 if w in spike else 0.01 for w in range(n)]))
    ]
    gc = [
        {"window": w, "pid": 7, "role": "EngineCore", "pause_ms": 240.0 if w in spike else 2.0}
        for w in range(n)
    ]
    for server_rise, kw, named in (
        (0.0, {"metrics": queue}, "client"),
        (180.0, {"gc": gc}, "memory"),
    ):
        s, signals = _process_run(n, spike, cpu=_front_end(n, spike), arrivals=lambda w: 4.0, **kw)
        signals = _itl_spike_with_ttft(n, spike, signals, server_rise)
        itl = dataclasses.replace(s, metric="itl_p99", metrics=["itl_p99", "ttft_p99"])
        a = attribute_by_metrics(itl, [itl], signals)
        assert a.top_cause == named, a.summary
        if named == "client":
            assert "its ttft_p99 of the same windows stood for it" in a.summary
            assert a.causes[0].share > 0.8
        else:  # EngineCore paused: the 20 ms the gap grew may be its pauses after its stamps
            assert "client" not in {c.cause for c in a.causes}, a.summary
            assert "EngineCore (pid 7) paused longer for GC" in a.summary
    # TTFT did not spike with it: nothing stands for the ITL, and the moved queue keeps the
    # late client untold (the rule above)
    s, signals = _process_run(
        n, spike, cpu=_front_end(n, spike), arrivals=lambda w: 4.0, metrics=queue
    )
    signals = _itl_spike_with_ttft(n, spike, signals, 0.0)
    alone = dataclasses.replace(s, metric="itl_p99", metrics=["itl_p99"])
    a = attribute_by_metrics(alone, [alone], signals)
    assert "client" not in {c.cause for c in a.causes}, a.summary


def test_an_occupancy_fraction_scores_against_its_capacity_not_its_own_peak():
    # vLLM-CPU's KV usage sits near 0: a trace (0 → 0.0009 of the cache) is no rise, though it is
    # the series' own peak; a real move (0.1 → 0.6) still scores, against 5 % of the capacity
    spike = np.arange(12) >= 9
    trace = np.array([0.0] * 9 + [0.0009, 0.0004, 0.0])
    real = np.array([0.1, 0.12, 0.1, 0.11, 0.1, 0.1, 0.12, 0.1, 0.11, 0.6, 0.5, 0.3])
    ranked = {
        r.name: r
        for r in rank_series(
            {"vllm:kv_cache_usage_perc": trace, "nvml_mem_fraction": real, "frac": trace},
            spike,
            ~spike,
        )
    }
    assert ranked["vllm:kv_cache_usage_perc"].z == pytest.approx(0.0009 / 0.05)
    assert ranked["vllm:kv_cache_usage_perc"].z < MIN_Z
    assert ranked["nvml_mem_fraction"].z == pytest.approx((0.6 - 0.1) / 0.05)
    # a series of unknown range keeps its own magnitude as the floor
    assert ranked["frac"].z == pytest.approx(20.0)
