"""Where spikelens keeps its state: one directory, `$SPIKELENS_HOME` or `./.spikelens`.

Only this module knows the defaults; every other folder takes paths as arguments, so a test or a
user can point a whole run at another directory by setting one variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StatePaths:
    """The state directory and the fixed places inside it."""

    home: Path

    @classmethod
    def from_env(cls) -> StatePaths:
        return cls(Path(os.environ.get("SPIKELENS_HOME", ".spikelens")).resolve())

    @property
    def runs(self) -> Path:
        """Raw run directories, `runs/<run_id>/` (the engine/loadgen → warehouse contract)."""
        return self.home / "runs"

    @property
    def warehouse(self) -> Path:
        """The DuckDB file every run is ingested into."""
        return Path(os.environ.get("SPIKELENS_DB", self.home / "warehouse.duckdb"))

    @property
    def reports(self) -> Path:
        """Rendered HTML reports, one folder per run plus the index."""
        return self.home / "reports"

    @property
    def prefect_home(self) -> Path:
        """PREFECT_HOME: Prefect's SQLite database and settings stay inside the project."""
        return self.home / "prefect"

    def run_dir(self, run_id: str) -> Path:
        return self.runs / run_id

    def ensure(self) -> StatePaths:
        for p in (self.home, self.runs, self.reports, self.prefect_home):
            p.mkdir(parents=True, exist_ok=True)
        return self
