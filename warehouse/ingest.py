"""Load one run directory into the warehouse, atomically, replacing any earlier copy of that run.

Order matters for the guarantees:
1. every file is read and checked with pyarrow *before* the database is touched, so a corrupt or
   incomplete file fails with an error naming it and nothing changes;
2. then the warehouse's one replace-rows transaction (warehouse.store.replacing) deletes the
   run's rows from every table that has a `run_id` column (raw tables and derived rca results,
   which would be stale) and inserts the new rows through Arrow, each file column cast to its
   table column's type;
3. any failure rolls the whole transaction back; a process killed mid-way leaves the committed
   state of before.
The collectors' files are the exception to 1: a process killed mid-write (the GC hook appends
JSON lines until its process dies) may leave a truncated last line, which is dropped, or a file
that cannot be read at all, which is skipped; both with a warning naming the file, so the rest of
the run is still ingested.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from warehouse.db import DbConnection, connect
from warehouse.run_files import DEFAULTS, RUN_FILES, RUN_JSON, RunFile
from warehouse.store import replacing
from warehouse.tables import run_tables, table_columns

# run.json keys copied into columns of `runs` (the whole file is kept in runs.run_json too).
_RUN_SCALARS = (
    "scenario_name",
    "scenario_path",
    "git_commit",
    "host",
    "command",
    "status",
    "started_ns",
    "ended_ns",
    "load_started_ns",
    "warmup_s",
    "duration_s",
)
_RUN_JSON_COLUMNS = {
    "scenario": "scenario",
    "engine": "engine",
    "faults_spec": "faults",
    "errors": "errors",
}


log = logging.getLogger("spikelens.warehouse")


class IngestError(RuntimeError):
    """A run directory could not be ingested; the message names the file. Nothing was changed."""


@dataclass
class _Loaded:
    spec: RunFile
    path: Path
    table: pa.Table


def read_run_json(run_dir: Path) -> dict:
    """Parse run.json; it is the one required file (it names the run)."""
    path = run_dir / RUN_JSON
    if not path.is_file():
        raise IngestError(f"{path}: missing (every run directory has a run.json)")
    try:
        run = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IngestError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(run, dict) or not isinstance(run.get("run_id"), str) or not run["run_id"]:
        raise IngestError(f"{path}: needs a non-empty string 'run_id'")
    return run


def _read_json_lines(path: Path, required: tuple[str, ...]) -> pa.Table:
    """One row per JSON object line; lines that do not parse (a truncated last line) are dropped
    with a warning naming the file and the line numbers."""
    rows, bad = [], []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad.append(number)
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad.append(number)
    if bad:
        log.warning(
            "%s: dropped %d line(s) that are not JSON objects (line %s)",
            path,
            len(bad),
            ", ".join(map(str, bad[:5])) + (" …" if len(bad) > 5 else ""),
        )
    if not rows:
        return pa.table({name: pa.array([], pa.int64()) for name in required})
    return pa.Table.from_pylist(rows)


def _read_table(path: Path, required: tuple[str, ...] = ()) -> pa.Table:
    if path.suffix == ".parquet":
        return pq.read_table(path)
    if path.suffix == ".jsonl":
        return _read_json_lines(path, required)
    return feather.read_table(path)


def _load_file(spec: RunFile, path: Path) -> _Loaded | None:
    """The file's rows, checked; None for a skipped file (spec.skip_unreadable, warned)."""
    try:
        try:
            table = _read_table(path, spec.required)
        except Exception as exc:  # pyarrow raises several types for truncated/garbled files
            raise IngestError(
                f"{path}: cannot read as {path.suffix[1:]} ({type(exc).__name__}: {exc})"
            ) from exc
        missing = [c for c in spec.required if c not in table.column_names]
        if missing:
            raise IngestError(
                f"{path}: missing required column {missing[0]!r} "
                f"(table {spec.table} needs {', '.join(spec.required)})"
            )
    except IngestError as exc:
        if not spec.skip_unreadable:
            raise
        log.warning("skipped %s", exc)
        return None
    return _Loaded(spec, path, table)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _insert_select(loaded: _Loaded, columns: list[tuple[str, str]], view: str) -> str:
    """INSERT … SELECT that casts each known file column to the table's type, NULL for absent ones."""
    present = set(loaded.table.column_names)
    names, exprs = [], []
    for name, dtype in columns:
        names.append(_quote(name))
        if name == "run_id":
            exprs.append("$run_id")
        elif name == "source_file":
            exprs.append("$source_file")
        elif name in present:
            exprs.append(f"CAST({_quote(name)} AS {dtype})")
        elif (loaded.spec.table, name) in DEFAULTS:
            exprs.append(f"CAST({DEFAULTS[(loaded.spec.table, name)]} AS {dtype})")
        else:
            exprs.append(f"CAST(NULL AS {dtype})")
    return (
        f"INSERT INTO {_quote(loaded.spec.table)} ({', '.join(names)}) "
        f"SELECT {', '.join(exprs)} FROM {view}"
    )


def _insert_run(conn: DbConnection, run: dict) -> None:
    row = {"run_id": run["run_id"], "run_json": json.dumps(run)}
    for key in _RUN_SCALARS:
        row[key] = run.get(key)
    for column, key in _RUN_JSON_COLUMNS.items():
        row[column] = json.dumps(run[key]) if key in run else None
    if row["scenario_name"] is None and isinstance(run.get("scenario"), dict):
        row["scenario_name"] = run["scenario"].get("name")
    names = list(row)
    conn.execute(
        f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
        [row[n] for n in names],
    )


def ingest_into(conn: DbConnection, run_dir: str | Path) -> dict[str, int]:
    """Ingest `run_dir` through an open read-write connection; see the module docstring.

    Returns {table: rows inserted} for `runs` and every table that had a file (0-row files count).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise IngestError(f"{run_dir}: not a directory")
    run = read_run_json(run_dir)
    loaded: list[_Loaded] = []
    for spec in RUN_FILES:
        try:
            files = spec.find(run_dir)
        except ValueError as exc:
            raise IngestError(str(exc)) from exc
        loaded.extend(
            item for item in (_load_file(spec, path) for path in files) if item is not None
        )

    counts: dict[str, int] = {"runs": 1}
    with replacing(conn, "run_id", run["run_id"], run_tables(conn)) as register:
        _insert_run(conn, run)
        for item in loaded:
            view = register(item.table)
            try:
                sql = _insert_select(item, table_columns(conn, item.spec.table), view)
                params = {"run_id": run["run_id"]}
                if "$source_file" in sql:
                    params["source_file"] = item.path.name
                conn.execute(sql, params)
            except duckdb.Error as exc:
                raise IngestError(
                    f"{item.path}: rows do not fit table {item.spec.table} ({exc})"
                ) from exc
            counts[item.spec.table] = counts.get(item.spec.table, 0) + item.table.num_rows
    return counts


def ingest_run(db_path: str | Path, run_dir: str | Path) -> dict[str, int]:
    """Ingest one run directory into the warehouse at `db_path`; returns {table: rows}.

    Re-ingesting a run replaces it (never duplicates). Raises IngestError naming the file when a
    file is unreadable or lacks a required column; the warehouse is then unchanged.
    """
    conn = connect(db_path)
    try:
        return ingest_into(conn, run_dir)
    finally:
        conn.close()
