"""Metric definitions on hand-built requests/tokens tables (numbers worked out in comments)."""

import pyarrow as pa
import pytest

from loadgen.errors import SpecError
from loadgen.metrics import SLO, itl_gaps, per_request, stats, summarize
from loadgen.recorder import REQUESTS_SCHEMA, TOKENS_SCHEMA
from tests.support.sample_tables import MS, requests_table, tokens_table


def req(rid, intended, sent, first, done, out, status="ok", phase="measure", prompt=10):
    return {
        "request_id": rid,
        "intended_send_ns": intended * MS,
        "sent_ns": sent * MS,
        "first_token_ns": None if first is None else first * MS,
        "done_ns": done * MS,
        "output_tokens": out,
        "prompt_tokens": prompt,
        "status": status,
        "phase": phase,
        "token_count_source": "usage",
    }


# a: sent 0, chunks at 100, 110, 130, 160 (4 tokens), done 161
# b: intended 0 but sent 50 (client behind), chunks 250, 300 (2 tokens), done 300
# c: sent 0, one chunk at 40, done 40;  d: error;  e: cancelled;  w: warm-up
REQUESTS = requests_table(
    [
        req("a", 0, 0, 100, 161, 4),
        req("b", 0, 50, 250, 300, 2),
        req("c", 0, 0, 40, 40, 1),
        req("d", 10, 10, None, 20, 0, status="error"),
        req("e", 20, 20, 60, 1000, 1, status="cancelled"),
        req("w", -500, -500, -400, -300, 2, phase="warmup"),
    ]
)
TOKENS = tokens_table(
    {"a": [100, 110, 130, 160], "b": [250, 300], "c": [40], "e": [60], "w": [-400, -390]}
)


def test_per_request_definitions():
    m = {r["request_id"]: r for r in per_request(REQUESTS, TOKENS).to_pylist()}
    a, b, c = m["a"], m["b"], m["c"]
    # E2E ends at the last token (160), not at the end of the stream (161)
    assert (a["ttft_ms"], a["e2e_ms"], a["stream_ms"]) == (100, 160, 161)
    assert a["tpot_ms"] == pytest.approx((160 - 100) / 3)  # vLLM: (E2E − TTFT)/(n − 1)
    assert a["mean_itl_ms"] == pytest.approx((160 - 100) / 3)  # GuideLLM/genai-perf: last − first
    assert a["guidellm_tpot_ms"] == pytest.approx(160 / 4)  # includes TTFT, over all tokens
    assert (b["ttft_ms"], b["ttft_intended_ms"], b["send_lag_ms"]) == (200, 250, 50)
    assert b["e2e_intended_ms"] == 300
    assert c["tpot_ms"] is None and c["mean_itl_ms"] is None  # one token: undefined, not inf
    assert m["d"]["ttft_ms"] is None


def test_itl_is_every_gap_within_a_request():
    gaps = itl_gaps(TOKENS).to_pylist()
    by_request = {}
    for g in gaps:
        by_request.setdefault(g["request_id"], []).append(g["itl_ms"])
    assert by_request == {"a": [10, 20, 30], "b": [50], "w": [10]}  # no gap across requests


def test_summary_counts_throughput_and_conventions():
    s = summarize(REQUESTS, TOKENS, duration_s=2.0)
    assert (s["requests"], s["completed"], s["failed"], s["cancelled"]) == (5, 3, 1, 1)
    assert s["output_tokens"] == 7 and s["prompt_tokens"] == 30
    assert s["request_throughput"] == 1.5 and s["output_throughput"] == 3.5
    assert s["token_count_source"] == {"usage": 3}
    assert s["vllm"]["itl_ms"]["count"] == 4  # a's 3 gaps + b's 1, pooled
    assert s["vllm"]["itl_ms"]["mean"] == pytest.approx((10 + 20 + 30 + 50) / 4)
    assert s["guidellm"]["itl_ms"]["mean"] == pytest.approx((20 + 50) / 2)  # per-request means
    assert s["vllm"]["ttft_ms"]["p50"] == 100  # of 40, 100, 200
    assert s["intended"]["ttft_ms"]["max"] == 250
    assert s["genai_perf"]["e2e_ms"]["max"] == 250  # b: last chunk at 300, sent at 50
    assert summarize(REQUESTS, TOKENS, phase="warmup")["completed"] == 1


def test_goodput_counts_requests_meeting_every_slo():
    s = summarize(REQUESTS, TOKENS, duration_s=2.0, slo=SLO(ttft_ms=150, e2e_ms=200))
    assert s["good_requests"] == 2 and s["goodput"] == 1.0  # a and c; b misses TTFT
    with pytest.raises(SpecError, match="slo: unknown key 'itl_ms'"):
        SLO.from_dict({"itl_ms": 5})
    with pytest.raises(SpecError, match="slo.ttft_ms must be a number > 0"):
        SLO.from_dict({"ttft_ms": 0})


def test_stats_percentiles_interpolate_linearly():
    s = stats(pa.array([1.0, 2.0, 3.0, 4.0, None]))
    assert s["count"] == 4 and s["p50"] == 2.5 and s["p90"] == pytest.approx(3.7)
    assert stats(pa.array([], pa.float64()))["p99"] is None


def test_an_empty_run_summarises_to_nulls_not_errors():
    s = summarize(REQUESTS_SCHEMA.empty_table(), TOKENS_SCHEMA.empty_table())
    assert s["completed"] == 0 and s["request_throughput"] is None
    assert s["vllm"]["ttft_ms"]["count"] == 0 and s["vllm"]["itl_ms"]["p99"] is None
