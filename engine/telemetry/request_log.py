"""Engine-side request log (``engine_requests.parquet``): one row per finished request."""

from __future__ import annotations

import pyarrow as pa

from engine.telemetry.table_buffer import TableBuffer

REQUEST_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("arrival_ns", pa.int64()),
        ("first_token_ns", pa.int64()),
        ("done_ns", pa.int64()),
        ("prompt_tokens", pa.int32()),
        ("output_tokens", pa.int32()),
        ("finish_reason", pa.string()),
        ("output_token_ids", pa.list_(pa.int32())),  # additive: for repetition-loop evidence
    ]
)


class RequestLog:
    def __init__(self):
        self.buffer = TableBuffer(REQUEST_SCHEMA)

    def record(
        self,
        request_id: str,
        arrival_ns: int,
        first_token_ns: int | None,
        done_ns: int,
        prompt_tokens: int,
        output_tokens: int,
        finish_reason: str,
        output_token_ids: list[int] | None = None,
    ) -> None:
        self.buffer.append(
            request_id,
            arrival_ns,
            first_token_ns,
            done_ns,
            prompt_tokens,
            output_tokens,
            finish_reason,
            output_token_ids,
        )

    def __len__(self) -> int:
        return len(self.buffer)
