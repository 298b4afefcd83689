"""Reading an OpenAI-compatible SSE stream into per-request timings.

What: `StreamState.feed_line(line, arrival_ns)` takes one SSE line as it arrives and keeps what
the recorder needs: the arrival of every chunk carrying content (vLLM bench serve's definition:
a chunk whose `delta.content`, or `text` for /v1/completions, is non-empty), the `usage` the
server reports (and its per-request `metrics`, where vLLM sends them), the finish reason, and
whether `data: [DONE]` came; `failure()` then says whether
the request failed, by vLLM bench serve's rules. Pure Python, no I/O, so it is tested without a
server (tests/loadgen/test_peer_vectors.py feeds it vLLM's, SGLang's and TGI's own streams) and
shared by the Locust user and the plain asyncio client of the benchmark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class StreamState:
    """Everything learned from one response stream so far."""

    chunk_arrivals_ns: list[int] = field(default_factory=list)  # one per content chunk
    chunk_tokens: list[int] = field(default_factory=list)  # tokens each content chunk carried
    usage_prompt_tokens: int | None = None
    usage_completion_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False  # saw `data: [DONE]`
    error: str | None = None  # an error object sent inside the stream, or an unparsable line
    # The server's own times of this request, where it reported them in the stream (vLLM's
    # `--enable-per-request-metrics`: a `metrics` object on the final usage chunk), in ms
    reported_queue_ms: float | None = None  # queued → scheduled
    reported_ttft_ms: float | None = None  # scheduled → first token (vLLM's, not the client's)
    reported_mean_itl_ms: float | None = None  # (last − first token) / (tokens − 1)
    _usage_seen_completion: int = 0  # running completion_tokens of continuous usage stats

    @property
    def first_token_ns(self) -> int | None:
        return self.chunk_arrivals_ns[0] if self.chunk_arrivals_ns else None

    @property
    def counted_tokens(self) -> int:
        return sum(self.chunk_tokens)

    def failure(self) -> str | None:
        """Why a finished HTTP 200 stream is a failed request; None when it succeeded. As vLLM
        bench serve judges it: an `error` event inside the stream (generation failed after the
        200 was sent), a stream cut before `data: [DONE]`, or a stream that carried no content at
        all (only a usage chunk: no first token, so no TTFT; counting it as a success would put
        a zero-length request into the statistics)."""
        if self.error:
            return self.error
        if not self.done:
            return "stream ended before data: [DONE]"
        if not self.chunk_arrivals_ns:
            return "the stream carried no content: no first token (TTFT)"
        return None

    def output_tokens(self) -> tuple[int, str]:
        """(output tokens, where the count came from): `usage` when the server sent it, else the
        tokens counted from content chunks."""
        if self.usage_completion_tokens is not None:
            return self.usage_completion_tokens, "usage"
        return self.counted_tokens, "chunks"

    def feed_line(self, line: bytes | str, arrival_ns: int) -> None:
        """Take one line of the stream (with or without its newline). Mutates self."""
        if not isinstance(line, str):  # bytes, or the bytearray geventhttpclient's readline returns
            line = line.decode("utf-8", errors="replace")
        line = line.strip()
        if not line.startswith("data:"):
            return  # blank separators, comments (": ping"), `event:`/`id:` fields
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return
        try:
            event = json.loads(payload)
        except json.JSONDecodeError:
            self.error = f"unparsable SSE data: {payload[:200]}"
            return
        if not isinstance(event, dict):
            self.error = f"SSE data is not an object: {payload[:200]}"
            return
        if "error" in event:
            self.error = json.dumps(event["error"])[:500]
            return
        self._take_usage(event.get("usage"))
        self._take_metrics(event.get("metrics"))
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content") if "delta" in choice else choice.get("text")
            if content:
                self.chunk_arrivals_ns.append(arrival_ns)
                self.chunk_tokens.append(self._tokens_in_chunk(event))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _take_usage(self, usage) -> None:
        if not usage:
            return
        if usage.get("prompt_tokens") is not None:
            self.usage_prompt_tokens = int(usage["prompt_tokens"])
        if usage.get("completion_tokens") is not None:
            self.usage_completion_tokens = int(usage["completion_tokens"])

    def _take_metrics(self, metrics) -> None:
        if not isinstance(metrics, dict):
            return
        for key, attr in (
            ("queue_time_ms", "reported_queue_ms"),
            ("time_to_first_token_ms", "reported_ttft_ms"),
            ("mean_itl_ms", "reported_mean_itl_ms"),
        ):
            value = metrics.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                setattr(self, attr, float(value))

    def _tokens_in_chunk(self, event: dict) -> int:
        """Tokens in this content chunk: the rise of `usage.completion_tokens` when the server
        sends usage on every chunk (vLLM's continuous_usage_stats), else 1 (one token a chunk,
        as vLLM, SGLang and TGI stream)."""
        usage = event.get("usage")
        if usage and usage.get("completion_tokens") is not None:
            now = int(usage["completion_tokens"])
            n, self._usage_seen_completion = now - self._usage_seen_completion, now
            return max(n, 1)
        return 1
