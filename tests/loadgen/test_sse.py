"""SSE line parsing: content chunks, usage, finish reason, [DONE] and in-stream errors."""

import json

from loadgen.sse import StreamState


def data(event) -> bytes:
    return f"data: {json.dumps(event)}\n".encode()


def chat_chunk(content=None, role=None, finish=None, usage=None):
    delta = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    event = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        event["usage"] = usage
    return data(event)


def test_first_token_is_the_first_chunk_with_content():
    s = StreamState()
    s.feed_line(chat_chunk(role="assistant", content=""), 100)  # vLLM's role chunk: no content
    s.feed_line(b"\n", 101)
    s.feed_line(b": keep-alive comment\n", 102)
    s.feed_line(chat_chunk("Hel"), 200)
    s.feed_line(chat_chunk("lo"), 250)
    s.feed_line(chat_chunk("!", finish="length"), 300)
    s.feed_line(data({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3}}), 301)
    s.feed_line(b"data: [DONE]\n", 302)
    assert s.first_token_ns == 200
    assert s.chunk_arrivals_ns == [200, 250, 300]
    assert s.output_tokens() == (3, "usage")
    assert s.usage_prompt_tokens == 11
    assert s.finish_reason == "length"
    assert s.done and s.error is None


def test_without_usage_tokens_are_counted_chunks():
    s = StreamState()
    for i in range(4):
        s.feed_line(chat_chunk("x"), i)
    assert s.output_tokens() == (4, "chunks")


def test_continuous_usage_gives_tokens_per_chunk():
    s = StreamState()
    s.feed_line(chat_chunk("ab", usage={"completion_tokens": 2}), 1)
    s.feed_line(chat_chunk("c", usage={"completion_tokens": 3}), 2)
    assert s.chunk_tokens == [2, 1]


def test_completions_text_chunks_count():
    s = StreamState()
    s.feed_line(data({"choices": [{"index": 0, "text": "", "finish_reason": None}]}), 1)
    s.feed_line(data({"choices": [{"index": 0, "text": "a", "finish_reason": None}]}), 2)
    assert s.chunk_arrivals_ns == [2]


def test_error_events_and_garbage_are_errors():
    s = StreamState()
    s.feed_line(data({"error": {"message": "boom", "code": 500}}), 1)
    assert "boom" in s.error
    s = StreamState()
    s.feed_line(b"data: {not json\n", 1)
    assert s.error.startswith("unparsable SSE data")
    s = StreamState()
    s.feed_line(bytearray(b"data: [DONE]\r\n"), 1)  # geventhttpclient hands out bytearrays
    assert s.done


def test_the_servers_own_request_times_are_taken_from_the_final_usage_chunk():
    """vLLM's --enable-per-request-metrics: a `metrics` object beside `usage`; odd values (a
    string, a negative time, a bool) are not taken, absent ones stay None."""
    s = StreamState()
    s.feed_line(chat_chunk("x"), 1)
    usage = {"prompt_tokens": 5, "completion_tokens": 1}
    metrics = {"queue_time_ms": 1.5, "time_to_first_token_ms": 20, "mean_itl_ms": None}
    s.feed_line(data({"choices": [], "usage": usage, "metrics": metrics}), 2)
    assert (s.reported_queue_ms, s.reported_ttft_ms, s.reported_mean_itl_ms) == (1.5, 20.0, None)
    odd = StreamState()
    odd.feed_line(data({"choices": [], "metrics": {"queue_time_ms": "1", "mean_itl_ms": -3}}), 1)
    odd.feed_line(data({"choices": [], "metrics": {"time_to_first_token_ms": True}}), 2)
    odd.feed_line(data({"choices": [], "metrics": [1, 2]}), 3)
    assert (odd.reported_queue_ms, odd.reported_ttft_ms, odd.reported_mean_itl_ms) == (None,) * 3
    assert odd.error is None
