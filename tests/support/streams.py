"""SSE streams recorded the way the Locust user records them, for tests of the metric definitions
against the peers' own test vectors.

`record(streams)` feeds each stream's lines, with their arrival times, to loadgen's own parser
(loadgen.sse.StreamState), judges it with `failure()` and records it with loadgen's own recorder,
as loadgen/locustfile.py does; it returns requests.parquet's and tokens.parquet's tables.
`write_run_dir` puts them in a run directory the warehouse can ingest. Builders of the event
payloads vLLM's, SGLang's and TGI's servers stream are beside them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from loadgen.recorder import Recorder
from loadgen.sse import StreamState

MS = 1_000_000


def sse(payload: dict) -> bytes:
    """One `data:` line of an event stream."""
    return f"data: {json.dumps(payload)}\n".encode()


DONE = b"data: [DONE]\n"


def token_chunk(i: int, chat: bool, usage: dict | None = None) -> bytes:
    """A content chunk as vLLM streams it: chat (`delta.content`) or completions (`text`)."""
    choice = (
        {"index": 0, "delta": {"content": f"tok{i} "}} if chat else {"index": 0, "text": f"tok{i} "}
    )
    event: dict = {"id": "cmpl-test", "object": "x", "choices": [choice]}
    if usage is not None:
        event["usage"] = usage
    return sse(event)


def usage_chunk(completion_tokens: int, prompt_tokens: int = 7) -> bytes:
    """The choice-less usage trailer `stream_options.include_usage` asks for."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return sse({"id": "cmpl-test", "object": "x", "choices": [], "usage": usage})


@dataclass
class Stream:
    """One request: when it was sent and the (line, arrival_ns) pairs of its response body."""

    sent_ns: int
    lines: list[tuple[bytes, int]]
    done_ns: int | None = None  # end of the stream; default: the last line's arrival
    extra: dict = field(default_factory=dict)  # more requests.parquet columns


def record(streams: dict[str, Stream]) -> tuple[pa.Table, pa.Table]:
    """(requests, tokens) of the streams, parsed, judged and recorded as loadgen does."""
    recorder = Recorder("/nonexistent", "test")  # tables() only: nothing is written
    for request_id, stream in streams.items():
        recorder.start(
            {
                "request_id": request_id,
                "user": "u",
                "worker": "0",
                "phase": "measure",
                "intended_send_ns": stream.sent_ns,
                "prompt_tokens_target": 7,
                "max_tokens": 16,
                "sent_ns": stream.sent_ns,
                **stream.extra,
            }
        )
        state = StreamState()
        for line, arrival_ns in stream.lines:
            state.feed_line(line, arrival_ns)
        error = state.failure()
        output_tokens, source = state.output_tokens()
        recorder.finish(
            request_id,
            chunk_arrivals_ns=state.chunk_arrivals_ns,
            chunk_tokens=state.chunk_tokens,
            first_token_ns=state.first_token_ns,
            done_ns=stream.done_ns if stream.done_ns is not None else stream.lines[-1][1],
            prompt_tokens=state.usage_prompt_tokens,
            output_tokens=output_tokens,
            token_count_source=source,
            n_chunks=len(state.chunk_arrivals_ns),
            status="error" if error else "ok",
            error=error,
            http_status=200,
            finish_reason=state.finish_reason,
        )
    return recorder.tables()


def write_run_dir(root: Path, run_id: str, requests: pa.Table, tokens: pa.Table) -> Path:
    """A run directory of these tables, measured load starting at the first send."""
    run_dir = Path(root) / run_id
    run_dir.mkdir(parents=True)
    t0 = min(requests["sent_ns"].to_pylist())
    end = max(requests["done_ns"].to_pylist())
    run = {"run_id": run_id, "load_started_ns": t0, "started_ns": t0, "ended_ns": end}
    run["duration_s"] = (end - t0) / 1e9 + 1.0
    (run_dir / "run.json").write_text(json.dumps(run))
    pq.write_table(requests, run_dir / "requests.parquet")
    pq.write_table(tokens, run_dir / "tokens.parquet")
    return run_dir
