"""Which file of a run directory lands in which warehouse table (docs/design.md "Files in a run directory").

The warehouse knows file formats, not who wrote them. Each entry names the table, the file
patterns that feed it, and the columns without which a row means nothing (a file lacking one is
rejected with an error naming the file and the column). Other columns are optional: missing ones
become NULL, columns the table does not know are skipped (files may grow; so may schema.sql).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunFile:
    table: str  # warehouse table the rows go to
    patterns: tuple[str, ...]  # globs in the run directory: Parquet, Arrow IPC or JSON lines
    required: tuple[str, ...]  # columns a file must have
    several: bool = False  # many files may feed the table (faults*.parquet)
    # An unreadable file is skipped with a warning naming it instead of failing the ingest
    # (the collectors' files: a process killed mid-write must not cost the run its other data).
    skip_unreadable: bool = False

    def find(self, run_dir: Path) -> list[Path]:
        """The files present for this table, sorted by name (none is fine: every file is optional)."""
        found: set[Path] = set()
        for pattern in self.patterns:
            found.update(p for p in run_dir.glob(pattern) if p.is_file())
        files = sorted(found)
        if len(files) > 1 and not self.several:
            names = ", ".join(p.name for p in files)
            raise ValueError(
                f"{run_dir}: several files for table {self.table!r} ({names}); keep one"
            )
        return files


RUN_JSON = "run.json"

RUN_FILES: tuple[RunFile, ...] = (
    RunFile("requests", ("requests.parquet", "requests.arrow"), ("request_id",)),
    RunFile("tokens", ("tokens.parquet", "tokens.arrow"), ("request_id", "index", "arrival_ns")),
    RunFile("steps", ("steps.parquet", "steps.arrow"), ("step", "start_ns", "end_ns")),
    RunFile("gc", ("gc.parquet", "gc.arrow"), ("start_ns", "end_ns")),
    RunFile("nvml", ("nvml.parquet", "nvml.arrow"), ("ts_ns",)),
    RunFile("metrics", ("metrics.parquet", "metrics.arrow"), ("ts_ns", "name")),
    RunFile("client_health", ("client_health.parquet", "client_health.arrow"), ("ts_ns",)),
    RunFile(
        "engine_requests", ("engine_requests.parquet", "engine_requests.arrow"), ("request_id",)
    ),
    RunFile(
        "server_requests", ("server_requests.parquet", "server_requests.arrow"), ("request_id",)
    ),
    # faults.parquet (engine) and faults.loadgen.parquet (loadgen): one ground-truth table.
    RunFile("faults", ("faults*.parquet", "faults*.arrow"), ("kind",), several=True),
    # The collectors' files (collect/): GC pauses from the hook inside each process (JSON lines,
    # appended while it runs), py-spy stack segments and /proc counters per process tree, /proc/stat per CPU.
    RunFile(
        "process_gc",
        ("collect/gc-*.jsonl",),
        ("pid", "start_ns", "end_ns"),
        several=True,
        skip_unreadable=True,
    ),
    RunFile(
        "process_stacks",
        ("collect/stacks-*.parquet",),
        ("pid", "tid", "start_ns", "end_ns", "region"),
        several=True,
        skip_unreadable=True,
    ),
    # `spikelens confirm`'s results, one JSON line per spike and cause it removed.
    RunFile(
        "confirmations",
        ("confirmations/*.jsonl",),
        ("spike_id", "cause", "verdict"),
        several=True,
    ),
    RunFile(
        "process_cpu",
        ("collect/proc-*.parquet",),
        ("ts_ns", "pid"),
        several=True,
        skip_unreadable=True,
    ),
    RunFile(
        "cpu_ticks",
        ("collect/cpu-*.parquet",),
        ("ts_ns", "cpu"),
        several=True,
        skip_unreadable=True,
    ),
)

# Defaults for columns a file may leave out but that are NOT NULL in the schema.
DEFAULTS = {("steps", "rank"): "0"}
