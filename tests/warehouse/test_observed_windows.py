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
