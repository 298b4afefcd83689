"""The ground truth of a run: one row per injected fault window, one schema, one writer.

What: every applier of a fault (the engine's fault clock, loadgen, the delaying proxy, the hog
supervisor, the GC hook's arming) records the windows it applied in its own file of the run
directory (`GROUND_TRUTH_FILES`), with the columns of `FAULTS_SCHEMA`: kind, cause, start_ns,
end_ns (wall clock ns) and params (the kind's params dataclass as JSON, keys sorted). The
warehouse reads them all (`faults*.parquet`) into one `faults` table, read only by scoring and
the report's "injected" line: never by the analysis.
Why one module: the writer existed four times with two schema definitions; a file per applier
keeps each process the only writer of its file (no locking between processes).
`Window` is one row; `scheduled_windows` turns scheduled faults (seconds after load start) into
windows clipped to the run's end; `write_windows` writes them atomically.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

FAULTS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("cause", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("params", pa.string()),  # JSON object, keys sorted
    ]
)

# Who writes which file (fault_catalogue.Applier values): the warehouse reads `faults*.parquet`.
GROUND_TRUTH_FILES = {
    "engine": "faults.parquet",
    "loadgen": "faults.loadgen.parquet",
    "gc_hook": "faults.process.parquet",
    "hogs": "faults.host.parquet",
    "proxy": "faults.network.parquet",
}


def params_json(params: Any) -> str:
    """A params dataclass (or mapping) as the `params` column holds it: JSON, keys sorted."""
    is_instance = dataclasses.is_dataclass(params) and not isinstance(params, type)
    values = dataclasses.asdict(params) if is_instance else dict(params)
    return json.dumps(values, sort_keys=True)


@dataclass(frozen=True)
class Window:
    """One row of the ground truth: a fault applied over [start_ns, end_ns)."""

    kind: str
    cause: str
    start_ns: int
    end_ns: int | None  # None: applied in a step that had not ended (the engine stopping)
    params: Any  # the kind's params dataclass (or a mapping)


@dataclass(frozen=True)
class Scheduled:
    """A fault as scheduled: seconds after load start, with its parsed params."""

    kind: str
    cause: str
    start_s: float
    duration_s: float
    params: Any


def scheduled_windows(faults: Iterable[Scheduled], t0_ns: int, duration_s: float) -> list[Window]:
    """The windows of `faults` on the run's time line (load started at `t0_ns`), clipped to its
    end; a fault that starts after the run ended is left out (nothing was applied)."""
    end_of_run = t0_ns + int(duration_s * 1e9)
    windows = []
    for f in faults:
        start = t0_ns + int(f.start_s * 1e9)
        if start >= end_of_run:
            continue
        end = min(start + int(f.duration_s * 1e9), end_of_run)
        windows.append(Window(f.kind, f.cause, start, end, f.params))
    return windows


def windows_table(windows: Iterable[Window]) -> pa.Table:
    rows: dict[str, list] = {name: [] for name in FAULTS_SCHEMA.names}
    for w in windows:
        rows["kind"].append(w.kind)
        rows["cause"].append(w.cause)
        rows["start_ns"].append(w.start_ns)
        rows["end_ns"].append(w.end_ns)
        rows["params"].append(params_json(w.params))
    return pa.Table.from_pydict(rows, schema=FAULTS_SCHEMA)


def write_windows(windows: Iterable[Window], path: str | Path) -> int:
    """Write `windows` to `path` (a tmp file and a rename: a reader never sees half a file);
    returns the number of rows. Rewriting the same path later replaces the file."""
    table = windows_table(windows)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return table.num_rows
