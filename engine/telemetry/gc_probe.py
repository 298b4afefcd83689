"""GC pause probe (``gc.parquet``): one row per garbage collection of this process, via ``gc.callbacks``.

The callback only reads the clock and appends to lists, so it adds ~1 µs to each collection.
CPython runs one collection at a time (under the GIL), so a single pending start time suffices.
"""

from __future__ import annotations

import gc
import os
import time

import pyarrow as pa

from engine.telemetry.table_buffer import TableBuffer

GC_SCHEMA = pa.schema(
    [
        ("pid", pa.int32()),
        ("rank", pa.int32()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("generation", pa.int8()),
        ("collected", pa.int64()),
    ]
)


class GcProbe:
    def __init__(self, rank: int = 0):
        self.rank = rank
        self.pid = os.getpid()
        self.buffer = TableBuffer(GC_SCHEMA)
        self._start_ns = 0
        self._installed = False

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start_ns = time.time_ns()
        else:
            self.buffer.append(
                self.pid,
                self.rank,
                self._start_ns,
                time.time_ns(),
                info["generation"],
                info["collected"],
            )

    def install(self) -> None:
        if not self._installed:
            self.pid = os.getpid()
            gc.callbacks.append(self._callback)
            self._installed = True

    @property
    def installed(self) -> bool:
        return self._installed

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._callback)
            self._installed = False

    def __len__(self) -> int:
        return len(self.buffer)
