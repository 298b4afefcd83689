"""The peers' own test vectors for the metric definitions, re-derived and run through loadgen's
parser (loadgen.sse), recorder and metrics (loadgen.metrics), as a recorded run is.

Each test names the peer file its inputs and expected numbers come from. Where spikelens keeps a
different definition, docs/loadgen.md ("Metric definitions") names the difference.
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from loadgen.metrics import itl_gaps, per_request
from loadgen.sse import StreamState
from tests.support.streams import (
    DONE,
    MS,
    Stream,
    record,
    sse,
    token_chunk,
    usage_chunk,
)

FIXTURES = Path(__file__).parent / "fixtures" / "inference_perf"
TICK = MS  # one tick of vLLM's scripted clock, here 1 ms
START = 1000 * MS


def _metrics(streams: dict[str, Stream]) -> dict[str, dict]:
    requests, tokens = record(streams)
    return {r["request_id"]: r for r in per_request(requests, tokens).to_pylist()}


def _requests(streams: dict[str, Stream]) -> dict[str, dict]:
    requests, _ = record(streams)
    return {r["request_id"]: r for r in requests.to_pylist()}


def _vllm_stream(n: int, chat: bool, ttft=TICK, itl=TICK, usage_delay=TICK) -> Stream:
    """vLLM's stream of n tokens: one content chunk each, then the usage trailer, then [DONE].
    With the default delays each read is one tick after the one before, as on vLLM's scripted
    clock: the send at START, token i at START + (i + 1) ticks, the usage chunk one tick later."""
    lines, t = [], START
    for i in range(n):
        t += ttft if i == 0 else itl
        lines.append((token_chunk(i, chat), t))
    t += usage_delay
    lines += [(usage_chunk(n), t), (DONE, t)]
    return Stream(START, lines)


# --- vLLM tests/benchmarks/test_endpoint_request_func_timing.py -----------------------------


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_vllm_e2e_minus_ttft_is_the_sum_of_itl_gaps(chat):
    """vLLM test_endpoint_request_func_timing.py, test_decode_span_identity_is_exact and
    ..._holds_with_real_clock: latency − TTFT equals the sum of the ITL gaps exactly (TPOT is
    derived from it), with one-tick reads and with uneven delays (TTFT 20, ITL 10, usage 20 ms)."""
    streams = {
        "ticks": _vllm_stream(5, chat),
        "uneven": _vllm_stream(4, chat, ttft=20 * MS, itl=10 * MS, usage_delay=20 * MS),
    }
    requests, tokens = record(streams)
    metrics = {r["request_id"]: r for r in per_request(requests, tokens).to_pylist()}
    gaps = itl_gaps(tokens).to_pylist()
    for request_id, n in (("ticks", 5), ("uneven", 4)):
        m = metrics[request_id]
        own = [g["itl_ms"] for g in gaps if g["request_id"] == request_id]
        assert m["status"] == "ok" and m["output_tokens"] == n
        assert len(own) == n - 1
        assert m["e2e_ms"] - m["ttft_ms"] == pytest.approx(sum(own), abs=1e-9)
        assert m["tpot_ms"] == pytest.approx(sum(own) / (n - 1), abs=1e-9)


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_vllm_e2e_ends_at_the_last_token_not_at_the_usage_trailer(chat):
    """vLLM test_endpoint_request_func_timing.py, test_trailing_usage_chunk_does_not_extend_latency:
    with 5 tokens on the one-tick clock, latency is 5 ticks (the last token), not 6 (the usage
    chunk). The stream itself (GuideLLM's request latency) does end at the trailer."""
    m = _metrics({"r": _vllm_stream(5, chat)})["r"]
    assert m["e2e_ms"] == 5 * TICK / MS
    assert m["stream_ms"] == 6 * TICK / MS


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_vllm_a_usage_only_stream_fails(chat):
    """vLLM test_endpoint_request_func_timing.py, test_usage_only_stream_is_not_reported_as_success:
    a stream with nothing but a usage chunk (0 tokens) and [DONE] is a failure naming TTFT, with
    no ITL, never a zero-length success."""
    stream = Stream(START, [(usage_chunk(0), START + TICK), (DONE, START + TICK)])
    requests, tokens = record({"r": stream})
    row = requests.to_pylist()[0]
    assert row["status"] == "error" and "TTFT" in row["error"]
    assert itl_gaps(tokens).num_rows == 0


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_vllm_an_error_event_inside_an_http_200_stream_fails(chat):
    """vLLM test_endpoint_request_func_timing.py, test_error_event_stream_is_not_reported_as_success:
    two tokens, then the error envelope the server sends inside the 200 (an `error` object, no
    choices), then [DONE]: the request failed, with the server's message."""
    message = "internal server error during generation"
    error = {"message": message, "type": "InternalServerError", "param": None, "code": 500}
    lines = [(token_chunk(i, chat), START + i) for i in range(2)]
    lines += [(sse({"error": error}), START + 2), (DONE, START + 2)]
    row = _requests({"r": Stream(START, lines)})["r"]
    assert row["status"] == "error" and message in row["error"]


# --- AIPerf tests/unit/metrics/test_inter_token_latency_metric.py ---------------------------


def _aiperf_record(start, responses, tokens_per_response, first_chunk_usage=None):
    """AIPerf's create_record: content responses at the given times (here ms), each carrying
    tokens_per_response tokens. first_chunk_usage: the completion_tokens the server reports with
    the first chunk (continuous usage stats); None: no per-chunk usage, so only the trailer's
    total is known and the first chunk counts as one token (AIPerf's "not reported")."""
    total = tokens_per_response * len(responses)
    lines = []
    for i, t in enumerate(responses):
        usage = None
        if first_chunk_usage is not None:
            seen = first_chunk_usage + tokens_per_response * i
            usage = {"prompt_tokens": 7, "completion_tokens": min(seen, total)}
        lines.append((token_chunk(i, chat=True, usage=usage), t * MS))
    lines += [(usage_chunk(total), responses[-1] * MS), (DONE, responses[-1] * MS)]
    return Stream(start * MS, lines)


def test_aiperf_itl_vectors():
    """AIPerf test_inter_token_latency_metric.py: ITL = (request latency − TTFT) / (OSL − first
    chunk's tokens), falling back to OSL − 1.
    - basic: start 100, responses 120 and 200, 3 tokens each: (100 − 20) / (6 − 1) = 16;
    - streaming: start 1000, responses 1040, 1080, 1120, 3 tokens each: (120 − 40) / 8 = 10;
    - a first chunk bundling 3 tokens: 80 / (6 − 3) = 26.67 (vLLM's TPOT stays 16);
    - first chunk count unknown (no per-chunk usage): 16; equal to OSL (6, inconsistent): 16;
    - fewer than two tokens: no ITL."""
    m = _metrics(
        {
            "basic": _aiperf_record(100, [120, 200], 3),
            "streaming": _aiperf_record(1000, [1040, 1080, 1120], 3),
            "bundled": _aiperf_record(100, [120, 200], 3, first_chunk_usage=3),
            "count_is_osl": _aiperf_record(100, [120, 200], 3, first_chunk_usage=6),
            "one_token": _aiperf_record(100, [120], 1),
        }
    )
    assert (m["basic"]["ttft_ms"], m["basic"]["e2e_ms"], m["basic"]["output_tokens"]) == (
        20,
        100,
        6,
    )
    assert m["basic"]["aiperf_itl_ms"] == pytest.approx(16.0)
    assert m["streaming"]["aiperf_itl_ms"] == pytest.approx(10.0)
    assert m["bundled"]["aiperf_itl_ms"] == pytest.approx(80.0 / 3.0)
    assert m["bundled"]["tpot_ms"] == pytest.approx(16.0)  # vLLM's divisor: n − 1
    assert m["count_is_osl"]["aiperf_itl_ms"] == pytest.approx(16.0)
    assert m["one_token"]["aiperf_itl_ms"] is None and m["one_token"]["tpot_ms"] is None


# --- GuideLLM tests/unit/schemas/test_request_stats.py --------------------------------------


def _guidellm_stream(start_s, ttft_ms, output_tokens, chunks, itl_ms, end_after_ms):
    """A request as GuideLLM's fixture lays it out: first token ttft_ms after the start, the last
    one (output_tokens − 1) × itl_ms later, `chunks` chunks evenly between them (the tokens spread
    over them), the request ending end_after_ms after the last token."""
    first = start_s * 1e3 + ttft_ms
    last = first + (output_tokens - 1) * itl_ms
    times = np.linspace(first, last, num=chunks) if chunks > 1 else np.array([first])
    lines = [(token_chunk(i, chat=True), round(t * MS)) for i, t in enumerate(times)]
    end = round((last + end_after_ms) * MS)
    lines += [(usage_chunk(output_tokens), end), (DONE, end)]
    return Stream(round(start_s * 1e3 * MS), lines, done_ns=end)


def test_guidellm_tpot_and_itl_per_request():
    """GuideLLM test_request_stats.py (GenerativeRequestStats), its fixture's cases with values
    picked inside its random ranges:
    - short_completion: start 0, TTFT 200 ms, 20 tokens, 50 ms apart, end 100 ms after the last:
      TPOT = (last − start) / 20 = 1150 / 20 = 57.5; ITL = (last − first) / 19 = 50;
      request latency = end − start = 1250;
    - long_chat: start 10 s, TTFT 2500 ms, 256 tokens in 30 chunks, 50 ms apart: ITL = 50,
      TPOT = (2500 + 255 × 50) / 256;
    - single_token_output: start 5 s, TTFT 100 ms, 1 token: TPOT = 100, ITL None."""
    m = _metrics(
        {
            "short": _guidellm_stream(0, 200, 20, 6, 50, 100),
            "long": _guidellm_stream(10, 2500, 256, 30, 50, 200),
            "single": _guidellm_stream(5, 100, 1, 1, 50, 75),
        }
    )
    assert m["short"]["guidellm_tpot_ms"] == pytest.approx(57.5)
    assert m["short"]["mean_itl_ms"] == pytest.approx(50.0)
    assert m["short"]["stream_ms"] == pytest.approx(1250.0)  # GuideLLM's request latency
    assert m["long"]["mean_itl_ms"] == pytest.approx(50.0)
    assert m["long"]["guidellm_tpot_ms"] == pytest.approx((2500 + 255 * 50) / 256)
    assert m["single"]["guidellm_tpot_ms"] == pytest.approx(100.0)
    assert m["single"]["mean_itl_ms"] is None


def test_guidellm_no_timings_give_none():
    """GuideLLM test_request_stats.py, no_iterations_fallback / test_none_paths_for_latency_and_rates:
    without a first token there is no TTFT, TPOT or ITL (None, not 0 or an error)."""
    from tests.support.sample_tables import requests_table, tokens_table

    requests = requests_table(
        [{"request_id": "x", "sent_ns": 0, "done_ns": 50 * MS, "output_tokens": 7, "status": "ok"}]
    )
    m = per_request(requests, tokens_table({})).to_pylist()[0]
    assert m["ttft_ms"] is None and m["e2e_ms"] is None
    assert m["tpot_ms"] is None and m["mean_itl_ms"] is None and m["guidellm_tpot_ms"] is None


# --- inference-perf tests/required/client/modelserver/fixtures/ -----------------------------


@pytest.mark.parametrize(
    "server,kind,prompt,completion,finish",
    [
        ("vllm", "chat", 12, 7, "stop"),
        ("vllm", "completion", 7, 8, "length"),
        ("sglang", "chat", 12, 7, "stop"),
        ("sglang", "completion", 7, 8, "length"),
        ("tgi", "chat", 12, 7, "stop"),
        ("tgi", "completion", 7, 8, "length"),
    ],
)
def test_inference_perf_streams_parse_and_count_tokens_from_usage(
    server, kind, prompt, completion, finish
):
    """inference-perf tests/required/client/modelserver/fixtures/<server>/<kind>_stream.sse
    (stored in fixtures/inference_perf/): every line parses, the stream succeeds, its three
    content chunks carry several words each (a leading role chunk with empty content is not
    one), and the token counts are the usage chunk's, not the chunks counted."""
    state = StreamState()
    text = (FIXTURES / f"{server}_{kind}_stream.sse").read_bytes()
    for t, line in enumerate(text.splitlines(keepends=True)):
        state.feed_line(line, t)
    assert state.failure() is None and state.done
    assert len(state.chunk_arrivals_ns) == 3
    assert state.output_tokens() == (completion, "usage")
    assert state.usage_prompt_tokens == prompt
    assert state.finish_reason == finish


def test_every_stored_capture_is_exercised():
    assert len(list(FIXTURES.glob("*_stream.sse"))) == 6


def test_tables_come_back_typed():
    """The recorded tables are the run files' own (a guard for the helper above)."""
    requests, tokens = record({"r": _vllm_stream(2, chat=True)})
    assert isinstance(requests, pa.Table) and tokens.column("n_tokens").to_pylist() == [1, 1]
