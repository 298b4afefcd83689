"""warehouse.observed_windows: latency windows from the engine's histograms, for runs imported from
Prometheus; and such a run analysed end to end from a metrics.parquet alone."""

from rca.analyze import analyze_run
from tests.support.observed_run import observed_run
from warehouse.ingest import ingest_run
from warehouse.observed_windows import latency_sources, observed_windows


def _hist_row(w, name, p99, n, labels="{}"):
    return {
        "window": w,
        "name": name,
        "labels": labels,
        "observations": n,
        "p50": p99 / 2,
        "p90": p99 * 0.8,
        "p99": p99,
    }


def test_the_first_named_histogram_of_each_series_feeds_it():
    rows = [
        _hist_row(0, "vllm:time_per_output_token_seconds", 0.03, 10),
        _hist_row(0, "vllm:inter_token_latency_seconds", 0.02, 50),
        _hist_row(0, "vllm:e2e_request_latency_seconds", 1.0, 3),
    ]
    assert latency_sources(rows) == {
        "itl": "vllm:inter_token_latency_seconds",
        "e2e": "vllm:e2e_request_latency_seconds",
    }


def test_windows_carry_the_busiest_label_sets_quantiles_and_every_observation():
    rows = [
        _hist_row(1, "vllm:inter_token_latency_seconds", 0.02, 40, '{"model_name": "a"}'),
        _hist_row(1, "vllm:inter_token_latency_seconds", 0.2, 5, '{"model_name": "b"}'),
        _hist_row(1, "vllm:e2e_request_latency_seconds", 1.5, 4),
    ]
    metrics = [
        {"window": 0, "name": "vllm:generation_tokens_total", "last_value": 100.0},
        {"window": 1, "name": "vllm:generation_tokens_total", "last_value": 180.0},
    ]
    out = observed_windows(rows, metrics, 3, 15.0)
    assert [w["window"] for w in out] == [0, 1, 2] and out[1]["t_s"] == 15.0
    assert out[1]["itl_p99_ms"] == 20.0 and out[1]["itl_n"] == 45
    assert out[1]["e2e_p99_ms"] == 1500.0 and out[1]["arrivals"] == 4
    assert out[1]["tokens"] == 80.0 and out[1]["output_tokens_mean"] == 20.0
    assert out[0]["ttft_p99_ms"] is None and out[0]["ttft_n"] == 0 and out[2]["tokens"] == 0.0


def test_an_observed_run_is_analysed_from_its_histograms_alone(tmp_path):
    db = tmp_path / "w.duckdb"
    ingest_run(db, observed_run(tmp_path / "runs"))
    analysis = analyze_run(db, "obs-1")
    assert analysis.window_s == 1.0
    itl = [w["itl_p99_ms"] for w in analysis.signals.windows]
    assert itl[10] is not None and itl[10] < 25 and itl[22] > 100
    assert len(analysis.spikes) == 1
    spike = analysis.spikes[0]
    assert spike.metric == "itl_p99" and 19 <= spike.start_s <= 21 and 25 <= spike.end_s <= 27
    assert analysis.attributions[spike.spike_id].top_cause == "load"


def test_the_agents_series_are_read_back_as_the_collectors_rows(tmp_path):
    """An observed run with `spikelens agent` beside the engine: process_*_windows give the rows
    the collectors' own files give in a load test, per process and window, from its counters."""
    from warehouse.db import connect
    from warehouse.queries import query

    db = tmp_path / "w.duckdb"
    ingest_run(db, observed_run(tmp_path / "runs", agent=True))
    with connect(db, read_only=True) as conn:
        gc = query(conn, "process_gc_windows", run_id="obs-1", window_s=1.0)
        cpu = query(conn, "process_cpu_windows", run_id="obs-1", window_s=1.0)
        stacks = query(conn, "process_stack_windows", run_id="obs-1", window_s=1.0)
    by_w = {r["window"]: r for r in gc}
    assert 0 not in by_w  # the first scrape has no scrape before it: no increase
    # EngineCore's pauses before and after vLLM retitled it: each series' own increases, never
    # one role's total read as a reset of the other's
    assert all(abs(by_w[w]["pause_ms"] - 10.0) < 1e-6 for w in range(1, 20)), by_w
    assert by_w[10]["pid"] == 4200 and by_w[10]["role"] == "EngineCore"
    assert abs(by_w[10]["pause_ms"] - 10.0) < 1e-6 and abs(by_w[22]["pause_ms"] - 400.0) < 1e-6
    assert by_w[22]["collections"] == 2 and by_w[22]["full_collections"] == 2
    assert by_w[22]["max_pause_ms"] is None  # a histogram keeps no longest pause
    core = next(r for r in cpu if r["pid"] == 4200 and r["window"] == 10)
    assert (
        abs(core["cpu_ms_per_s"] - 800.0) < 1e-3 and abs(core["runq_wait_ms_per_s"] - 20.0) < 1e-3
    )
    assert core["involuntary_switches_per_s"] == 5.0 and core["threads"] == 4
    assert {r["role"] for r in cpu} == {"api_server", "EngineCore"}
    w10 = {r["region"]: r for r in stacks if r["window"] == 10}
    assert abs(w10["model_forward"]["share"] - 0.5) < 1e-9
    assert abs(w10["model_forward"]["busy_share"] - 0.5 / 0.6) < 1e-9
    assert w10["idle"]["busy_share"] is None


def test_a_gc_stall_in_enginecore_is_named_memory_from_the_agent(tmp_path):
    """The agent's GC series speak for memory the way the GC hook's files do in a load test: as
    the collectors' per-process evidence, naming the process; not a second time as metrics."""
    db = tmp_path / "w.duckdb"
    ingest_run(db, observed_run(tmp_path / "runs", agent=True))
    analysis = analyze_run(db, "obs-1")
    assert len(analysis.spikes) == 1
    attribution = analysis.attributions[analysis.spikes[0].spike_id]
    assert attribution.top_cause == "memory", attribution
    notes = [e.note for c in attribution.causes for e in c.evidence if c.cause == "memory"]
    assert any("EngineCore (pid 4200)" in n for n in notes), notes
    names = [e.signal for c in attribution.causes for e in c.evidence]
    assert not any(n.startswith("spikelens_agent_") for n in names), names
