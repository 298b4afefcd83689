"""Raw-sample recorder: one row per request and one per content chunk, written as Parquet.

What: each Locust process keeps its rows in column lists and writes them to
`<parts_dir>/requests.<tag>.parquet` and `tokens.<tag>.parquet` when its test stops;
`merge_parts` joins every process's parts into the run directory's `requests.parquet` and
`tokens.parquet` (docs/design.md columns plus a few more, below).
Why our own: Locust's --csv rewrites on a timer and undercounts, and its samples carry no
per-chunk times. A request still in flight when the recorder flushes is written with status
'cancelled', never dropped.
Imports only pyarrow and numpy: safe in the Locust process and in the Prefect/torch process alike.
"""

from __future__ import annotations

import os
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# The sampling parameters that get a column each (null where the request did not set them).
SAMPLING_COLUMNS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "seed",
)

REQUESTS_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        (
            "user",
            pa.string(),
        ),  # "<worker>-u<index>": the simulated user (closed loop), "<worker>-open"
        ("worker", pa.string()),  # the Locust process that sent it
        ("phase", pa.string()),  # 'warmup' | 'measure' (by intended send time vs load start)
        (
            "intended_send_ns",
            pa.int64(),
        ),  # when the schedule wanted it sent (== sent_ns, closed loop)
        ("sent_ns", pa.int64()),  # just before the request was written to the socket
        ("first_token_ns", pa.int64()),  # arrival of the first chunk with non-empty content
        ("done_ns", pa.int64()),  # end of the stream, of the error, or of the cancellation
        ("arrival_clock", pa.string()),  # 'kernel': arrivals are the kernel's receive times and
        # sent_ns was taken inside sendall (loadgen/timed_socket.py); 'merged': the same, but the
        # first content came in one late read with a later packet (its time known to > 1 ms only);
        # 'read': taken when read
        ("prompt_tokens", pa.int64()),  # usage.prompt_tokens when reported, else the target
        (
            "prompt_tokens_target",
            pa.int64(),
        ),  # the drawn prompt length (content, before chat template)
        ("output_tokens", pa.int64()),  # usage.completion_tokens when reported, else counted
        ("token_count_source", pa.string()),  # 'usage' | 'chunks'
        ("n_chunks", pa.int64()),  # content chunks received
        ("status", pa.string()),  # 'ok' | 'error' | 'cancelled'
        ("http_status", pa.int32()),  # 0 when no response came (connection error, cancelled early)
        ("error", pa.string()),
        ("finish_reason", pa.string()),
        # the server's own times of the request as it reported them in the stream (vLLM's
        # --enable-per-request-metrics, ms; null where it did not): queued → scheduled,
        # scheduled → first token, and its mean inter-token time
        ("reported_queue_ms", pa.float64()),
        ("reported_ttft_ms", pa.float64()),
        ("reported_mean_itl_ms", pa.float64()),
        ("max_tokens", pa.int64()),
        (
            "fault",
            pa.string(),
        ),  # the loadgen fault that shaped this request (penalty.repetition), else null
        *[
            (name, pa.int64() if name in ("top_k", "seed") else pa.float64())
            for name in SAMPLING_COLUMNS
        ],
    ]
)

TOKENS_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("index", pa.int32()),  # 0-based position of the content chunk within its request
        ("arrival_ns", pa.int64()),
        ("n_tokens", pa.int32()),
    ]
)

REQUIRED_AT_START = (
    "request_id",
    "user",
    "worker",
    "phase",
    "intended_send_ns",
    "prompt_tokens_target",
    "max_tokens",
)


class Recorder:
    """Collects rows in memory; not thread-safe (one per gevent process is fine: greenlets
    switch only on I/O, never inside these methods)."""

    def __init__(self, parts_dir: str | Path, tag: str):
        self.parts_dir = Path(parts_dir)
        self.tag = tag
        self.in_flight: dict[str, dict] = {}
        self.requests: dict[str, list] = {name: [] for name in REQUESTS_SCHEMA.names}
        # one entry per content chunk: numbers in typed arrays (~24 bytes a chunk with the id
        # reference, instead of ~60 as Python ints), so long runs stay small in memory
        self.tokens: dict[str, Any] = {  # request ids in a list, numbers in typed arrays
            "request_id": [],
            "index": array("i"),
            "arrival_ns": array("q"),
            "n_tokens": array("i"),
        }

    def start(self, row: dict) -> None:
        """Register a request about to be sent; `row` has at least REQUIRED_AT_START."""
        missing = [k for k in REQUIRED_AT_START if k not in row]
        if missing:
            raise ValueError(f"recorder.start: missing {', '.join(missing)}")
        unknown = set(row) - set(REQUESTS_SCHEMA.names)
        if unknown:
            raise ValueError(f"recorder.start: unknown columns {', '.join(sorted(unknown))}")
        self.in_flight[row["request_id"]] = dict(row)

    def finish(self, request_id: str, chunk_arrivals_ns=(), chunk_tokens=(), **columns) -> None:
        """Complete a request's row with `columns` and append its chunks."""
        row = self.in_flight.pop(request_id)
        row.update(columns)
        for name, values in self.requests.items():
            values.append(row.get(name))
        n = len(chunk_arrivals_ns)
        self.tokens["request_id"].extend([request_id] * n)
        self.tokens["index"].extend(range(n))
        self.tokens["arrival_ns"].extend(chunk_arrivals_ns)
        self.tokens["n_tokens"].extend(chunk_tokens)

    def cancel_in_flight(self, reason: str) -> int:
        """Record every request still in flight as 'cancelled' now; returns how many."""
        now = time.time_ns()
        ids = list(self.in_flight)
        for request_id in ids:
            http_status = self.in_flight[request_id].get("http_status") or 0
            self.finish(
                request_id, status="cancelled", error=reason, done_ns=now, http_status=http_status
            )
        return len(ids)

    @property
    def n_requests(self) -> int:
        return len(self.requests["request_id"])

    def tables(self) -> tuple[pa.Table, pa.Table]:
        tokens = {
            "request_id": self.tokens["request_id"],
            **{
                name: np.frombuffer(
                    self.tokens[name], dtype=np.int64 if name == "arrival_ns" else np.int32
                )
                for name in ("index", "arrival_ns", "n_tokens")
            },
        }  # zero-copy views
        return (
            pa.Table.from_pydict(self.requests, schema=REQUESTS_SCHEMA),
            pa.Table.from_pydict(tokens, schema=TOKENS_SCHEMA),
        )

    def flush(self) -> tuple[Path, Path]:
        """Write this process's parts (in-flight requests as 'cancelled'); returns their paths.
        Writes to a temporary name first so a half-written part is never merged."""
        self.cancel_in_flight("in flight when the test stopped")
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        requests, tokens = self.tables()
        paths = []
        for name, table in (("requests", requests), ("tokens", tokens)):
            path = self.parts_dir / f"{name}.{self.tag}.parquet"
            tmp = path.with_suffix(".parquet.tmp")
            pq.write_table(table, tmp)
            os.replace(tmp, path)
            paths.append(path)
        return paths[0], paths[1]


def merge_parts(parts_dir: str | Path, run_dir: str | Path) -> tuple[int, int]:
    """Concatenate every process's parts into run_dir/requests.parquet and tokens.parquet,
    sorted by intended send time and (request, index); returns (request rows, token rows)."""
    parts_dir, run_dir = Path(parts_dir), Path(run_dir)
    merged = {}
    for name, schema, keys in (
        (
            "requests",
            REQUESTS_SCHEMA,
            [("intended_send_ns", "ascending"), ("request_id", "ascending")],
        ),
        ("tokens", TOKENS_SCHEMA, [("request_id", "ascending"), ("index", "ascending")]),
    ):
        parts = sorted(parts_dir.glob(f"{name}.*.parquet"))
        tables = [pq.read_table(p, schema=schema) for p in parts]
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        merged[name] = table.sort_by(keys)
        pq.write_table(merged[name], run_dir / f"{name}.parquet")
    return merged["requests"].num_rows, merged["tokens"].num_rows
