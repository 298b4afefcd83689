"""All of one engine rank's telemetry, and where it goes on ``flush``.

Rank 0 writes ``steps.parquet``, ``gc.parquet``, ``engine_requests.parquet``. A tensor-parallel
worker rank r writes ``.tp_ranks/steps.rank{r}.parquet`` and ``.tp_ranks/gc.rank{r}.parquet`` (same
columns, ``rank`` set), and rank 0's flush (after the workers') merges them into its own files, so
the run directory keeps one ``steps.parquet`` / ``gc.parquet`` with a ``rank`` column. With
``run_dir=None`` everything is still recorded in memory but nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.telemetry.gc_probe import GcProbe
from engine.telemetry.request_log import RequestLog
from engine.telemetry.step_trace import StepTrace
from engine.telemetry.table_buffer import TableBuffer, write_table_atomic

RANKS_DIR = ".tp_ranks"  # worker ranks' own files, merged by rank 0


class Telemetry:
    def __init__(self, run_dir: str | Path | None, rank: int = 0):
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.rank = rank
        self.steps = StepTrace(rank)
        self.gc = GcProbe(rank)
        self.requests = RequestLog()
        self.gc.install()

    def flush(self) -> list[Path]:
        """Rewrite every file with everything recorded so far (atomic per file); safe to repeat."""
        if self.run_dir is None:
            return []
        if self.rank > 0:
            ranks_dir = self.run_dir / RANKS_DIR
            return [
                self.steps.buffer.write(ranks_dir / f"steps.rank{self.rank}.parquet"),
                self.gc.buffer.write(ranks_dir / f"gc.rank{self.rank}.parquet"),
            ]
        return [
            self._write_merged(self.steps.buffer, "steps", self.run_dir),
            self._write_merged(self.gc.buffer, "gc", self.run_dir),
            self.requests.buffer.write(self.run_dir / "engine_requests.parquet"),
        ]

    def _write_merged(self, buffer: TableBuffer, stem: str, run_dir: Path) -> Path:
        """Rank 0's rows plus every worker rank's file, as one table."""
        parts = [buffer.to_table()]
        parts += [
            pq.read_table(p).cast(buffer.schema)
            for p in sorted((run_dir / RANKS_DIR).glob(f"{stem}.rank*.parquet"))
        ]
        return write_table_atomic(pa.concat_tables(parts), run_dir / f"{stem}.parquet")

    def close(self) -> None:
        self.gc.uninstall()
