"""All of one engine rank's telemetry, and where it goes on ``flush``.

Rank 0 writes ``steps.parquet``, ``gc.parquet``, ``engine_requests.parquet``; rank r > 0 writes
``steps.rank{r}.parquet`` and ``gc.rank{r}.parquet`` (same columns, ``rank`` set), so ranks never
race on one file. With ``run_dir=None`` everything is still recorded in memory but nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from engine.telemetry.gc_probe import GcProbe
from engine.telemetry.request_log import RequestLog
from engine.telemetry.step_trace import StepTrace


class Telemetry:
    def __init__(self, run_dir: str | Path | None, rank: int = 0):
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.rank = rank
        self.steps = StepTrace(rank)
        self.gc = GcProbe(rank)
        self.requests = RequestLog()
        self.gc.install()

    def _name(self, stem: str) -> str:
        return f"{stem}.parquet" if self.rank == 0 else f"{stem}.rank{self.rank}.parquet"

    def flush(self) -> list[Path]:
        """Rewrite every file with everything recorded so far (atomic per file); safe to repeat."""
        if self.run_dir is None:
            return []
        written = [self.steps.buffer.write(self.run_dir / self._name("steps")),
                   self.gc.buffer.write(self.run_dir / self._name("gc"))]
        if self.rank == 0:
            written.append(self.requests.buffer.write(self.run_dir / "engine_requests.parquet"))
        return written

    def close(self) -> None:
        self.gc.uninstall()
