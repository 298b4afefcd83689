"""Peers' Prometheus expositions through spikelens' /metrics parser (spikelens_common.metrics_scraper)
and the warehouse's metric queries: data-parallel engines summed as vLLM sums them, histogram
quantiles as Prometheus computes them, a quantile beyond the last finite bucket reported as
"≥ that bound" rather than interpolated, and scientific notation.

Each test names the peer file its inputs and expected numbers come from; the captures of the
peers' documentation are stored, re-typed, in fixtures/ (the source is named on their first line).
"""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spikelens_common.metrics_scraper import METRICS_SCHEMA, parse_exposition
from warehouse.db import connect
from warehouse.ingest import ingest_run
from warehouse.queries import query

T0 = 1_800_000_000_000_000_000  # the built run's load start
RUN_ID = "20261201T000000Z-test-0001"
FIXTURES = Path(__file__).parent / "fixtures"
SGLANG = (FIXTURES / "sglang_production_metrics.prom").read_text()
VLLM_DOCS = (FIXTURES / "vllm_design_metrics.prom").read_text()


def _zeroed(text: str) -> str:
    """The same exposition with every sample at 0 (the scrape before any observation)."""
    lines = [
        line if not line or line.startswith("#") else line.rsplit(" ", 1)[0] + " 0"
        for line in text.splitlines()
    ]
    return "\n".join(lines) + "\n"


def _scrapes_into_run(tmp_path, make_run, scrapes: list[tuple[float, str]]):
    """A built run whose metrics.parquet holds the given (seconds after load start, text)
    scrapes, parsed by the scraper's own parser; returns an open warehouse connection."""
    run_dir = make_run(duration_s=4.0)
    cols: dict[str, list] = {name: [] for name in METRICS_SCHEMA.names}
    for t_s, text in scrapes:
        for name, values in parse_exposition(text, T0 + int(t_s * 1e9)).items():
            cols[name].extend(values)
    pq.write_table(pa.Table.from_pydict(cols, schema=METRICS_SCHEMA), run_dir / "metrics.parquet")
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    return connect(db)


# --- vLLM tests/benchmarks/test_serve_metrics_export.py -------------------------------------

VLLM_BEFORE = """
# HELP vllm:num_requests_running Running requests.
vllm:num_requests_running{engine="0",model_name="qwen"} 2
vllm:num_requests_waiting{engine="0",model_name="qwen"} 1
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.35
vllm:available_kv_cache_memory_bytes{engine="0",model_name="qwen"} 4294967296
vllm:prefix_cache_queries{engine="0",model_name="qwen"} 100
vllm:prefix_cache_hits{engine="0",model_name="qwen"} 45
vllm:external_prefix_cache_queries{engine="0",model_name="qwen"} 10
vllm:external_prefix_cache_hits{engine="0",model_name="qwen"} 2
"""
VLLM_AFTER = """
vllm:num_requests_running{engine="0",model_name="qwen"} 5
vllm:num_requests_running{engine="1",model_name="qwen"} 3
vllm:num_requests_waiting{engine="0",model_name="qwen"} 4
vllm:num_requests_waiting{engine="1",model_name="qwen"} 2
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.72
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.64
vllm:available_kv_cache_memory_bytes{engine="0",model_name="qwen"} 8589934592
vllm:available_kv_cache_memory_bytes{engine="1",model_name="qwen"} 7516192768
vllm:prefix_cache_queries{engine="0",model_name="qwen"} 180
vllm:prefix_cache_queries{engine="1",model_name="qwen"} 40
vllm:prefix_cache_hits{engine="0",model_name="qwen"} 105
vllm:prefix_cache_hits{engine="1",model_name="qwen"} 20
vllm:external_prefix_cache_queries{engine="0",model_name="qwen"} 25
vllm:external_prefix_cache_hits{engine="0",model_name="qwen"} 8
"""


def test_metrics_of_data_parallel_engines_are_summed_as_vllm_does(tmp_path, make_run):
    """vLLM test_serve_metrics_export.py (parse_benchmark_load_metrics, build_benchmark_load_result):
    a scrape of one engine, then one of two. After: running 5 + 3 = 8, waiting 4 + 2 = 6, KV cache
    usage the fuller engine's 0.72, available KV memory the larger 8589934592; the prefix cache
    hit rate from the summed counters' increases, (105 + 20 − 45) / (180 + 40 − 100) = 80 / 120,
    and the external one (8 − 2) / (25 − 10) = 6 / 15."""
    with _scrapes_into_run(tmp_path, make_run, [(0.5, VLLM_BEFORE), (1.5, VLLM_AFTER)]) as conn:
        rows = query(conn, "metric_windows", run_id=RUN_ID, window_s=1.0)
    at = {(r["window"], r["name"]): r for r in rows}
    assert {r["labels"] for r in rows} == {'{"model_name": "qwen"}'}  # one series per name

    def after(name):
        return at[(1, f"vllm:{name}")]["last_value"]

    def rise(name):
        return after(name) - at[(0, f"vllm:{name}")]["last_value"]

    assert after("num_requests_running") == 8.0
    assert after("num_requests_waiting") == 6.0
    assert after("kv_cache_usage_perc") == 0.72
    assert after("available_kv_cache_memory_bytes") == 8589934592.0
    assert rise("prefix_cache_hits") / rise("prefix_cache_queries") == pytest.approx(80 / 120)
    assert rise("external_prefix_cache_hits") / rise("external_prefix_cache_queries") == (
        pytest.approx(6 / 15)
    )


# --- SGLang docs/references/production_metrics.md, vLLM docs/design/metrics.md --------------


def test_scientific_notation_parses():
    """SGLang's example /metrics: counters and histogram sums in scientific notation."""
    cols = parse_exposition(SGLANG, 0)
    value = dict(zip(cols["name"], cols["value"]))
    assert value["sglang:prompt_tokens_total"] == 8128902.0  # 8.128902e+06
    assert value["sglang:generation_tokens_total"] == 7557572.0
    assert value["sglang:time_to_first_token_seconds_sum"] == 2351897.9474117756
    assert value["sglang:time_per_output_token_seconds_count"] == 7400757.0  # 7.400757e+06
    assert value["sglang:cache_hit_rate"] == 0.007507552643049313


def _histograms(tmp_path, make_run, text: str) -> dict[str, dict]:
    """Window 1's quantiles of each histogram when its observations are the capture's (a scrape
    of zeros in window 0, the capture in window 1)."""
    with _scrapes_into_run(tmp_path, make_run, [(0.5, _zeroed(text)), (1.5, text)]) as conn:
        rows = query(conn, "metric_histogram_windows", run_id=RUN_ID, window_s=1.0)
    return {r["name"]: r for r in rows if r["window"] == 1}


def test_quantiles_beyond_the_last_bound_are_that_bound_and_flagged(tmp_path, make_run):
    """SGLang's example /metrics: of 11,008 TTFT observations only 2,513 are ≤ 30 s, the last
    finite bound, so p50, p90 and p99 all lie in +Inf: each is reported as "≥ 30 s", not
    interpolated towards infinity nor presented as 30 s; E2E likewise "≥ 60 s" (1,513 of 11,228
    ≤ 60 s). TPOT's quantiles lie inside finite buckets and are interpolated linearly."""
    h = _histograms(tmp_path, make_run, SGLANG)
    ttft = h["sglang:time_to_first_token_seconds"]
    assert ttft["observations"] == 11008
    assert (ttft["p50"], ttft["p90"], ttft["p99"]) == (30.0, 30.0, 30.0)
    assert ttft["p50_at_least"] and ttft["p90_at_least"] and ttft["p99_at_least"]
    e2e = h["sglang:e2e_request_latency_seconds"]
    assert (e2e["p50"], e2e["p99"], e2e["p50_at_least"], e2e["p99_at_least"]) == (
        60.0,
        60.0,
        True,
        True,
    )
    tpot = h["sglang:time_per_output_token_seconds"]
    n = 7400757
    assert tpot["observations"] == n
    # rank q·n falls in (lo, hi] holding buckets [below, at]: lo + (hi − lo)(q·n − below)/(at − below)
    assert tpot["p50"] == pytest.approx(0.075 + 0.025 * (0.5 * n - 433413) / (4950195 - 433413))
    assert tpot["p90"] == pytest.approx(0.1 + 0.05 * (0.9 * n - 4950195) / (7039435 - 4950195))
    assert tpot["p99"] == pytest.approx(0.5 + 0.25 * (0.99 * n - 7312226) / (7339675 - 7312226))
    assert not (tpot["p50_at_least"] or tpot["p90_at_least"] or tpot["p99_at_least"])
    func = h["sglang:func_latency_seconds"]  # all but one in the first bucket: from 0 to 0.05
    assert func["p99"] == pytest.approx(0.05 * (0.99 * 14007) / 14006)


def test_vllm_docs_histogram_interpolates_inside_its_buckets(tmp_path, make_run):
    """vLLM's example /metrics (docs/design/metrics.md): TTFT of 140 requests, 13 ≤ 0.02 s,
    97 ≤ 0.04, 123 ≤ 0.06, 138 ≤ 0.08, 140 ≤ 0.1: p50 = 0.02 + 0.02 (70 − 13)/(97 − 13),
    p90 = 0.06 + 0.02 (126 − 123)/(138 − 123) = 0.064, p99 = 0.08 + 0.02 (138.6 − 138)/2 = 0.086.
    (The example shows no +Inf bucket: the largest bucket then holds every observation.)"""
    ttft = _histograms(tmp_path, make_run, VLLM_DOCS)["vllm:time_to_first_token_seconds"]
    assert ttft["observations"] == 140
    assert ttft["p50"] == pytest.approx(0.02 + 0.02 * (70 - 13) / (97 - 13))
    assert ttft["p90"] == pytest.approx(0.064)
    assert ttft["p99"] == pytest.approx(0.086)
    assert not ttft["p99_at_least"]
