"""The per-step trace (``steps.parquet``): one row per engine step per rank."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from engine.telemetry.table_buffer import TableBuffer

STEP_SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("rank", pa.int32()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("batch_size", pa.int32()),
        ("prefill_tokens", pa.int32()),
        ("decode_tokens", pa.int32()),
        ("schedule_ms", pa.float64()),
        ("forward_ms", pa.float64()),
        ("penalty_ms", pa.float64()),
        ("sample_ms", pa.float64()),
        ("comm_ms", pa.float64()),
        ("kv_blocks_used", pa.int32()),
        ("kv_blocks_total", pa.int32()),
        ("preempted", pa.int32()),
        ("waiting", pa.int32()),
        # Additive columns (beyond docs/design.md's list): memory-pressure evidence.
        (
            "page_faults",
            pa.int64(),
        ),  # page faults (minor + major) of the stepping thread during the step
        (
            "alloc_retries",
            pa.int64(),
        ),  # CUDA caching-allocator retries so far (cumulative); null on CPU
    ]
)


@dataclass
class StepRecord:
    """One step's figures (times: ``time.time_ns()``; stage durations in ms)."""

    step: int
    start_ns: int
    end_ns: int
    batch_size: int
    prefill_tokens: int
    decode_tokens: int
    schedule_ms: float
    forward_ms: float
    penalty_ms: float
    sample_ms: float
    comm_ms: float
    kv_blocks_used: int
    kv_blocks_total: int  # the usable budget (shrinks under memory.kv_pressure)
    preempted: int  # sequences preempted while scheduling this step
    waiting: int  # queue length after scheduling
    page_faults: int = 0
    alloc_retries: int | None = None


class StepTrace:
    def __init__(self, rank: int = 0):
        self.rank = rank
        self.buffer = TableBuffer(STEP_SCHEMA)

    def record(self, r: StepRecord) -> None:
        self.buffer.append(
            r.step,
            self.rank,
            r.start_ns,
            r.end_ns,
            r.batch_size,
            r.prefill_tokens,
            r.decode_tokens,
            r.schedule_ms,
            r.forward_ms,
            r.penalty_ms,
            r.sample_ms,
            r.comm_ms,
            r.kv_blocks_used,
            r.kv_blocks_total,
            r.preempted,
            r.waiting,
            r.page_faults,
            r.alloc_retries,
        )

    def __len__(self) -> int:
        return len(self.buffer)
