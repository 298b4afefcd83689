"""Export runs from the warehouse as hive-partitioned Parquet: <out>/<table>/date=YYYY-MM-DD/run_id=<id>/data.parquet.

The path for users who outgrow one DuckDB file: DuckDB (or any engine) reads the tree back with
`read_parquet('<out>/<table>/*/*/*.parquet', hive_partitioning = true)`, locally or on object
storage. `date` is the UTC day the run started; partition columns are not repeated inside the files
(hive convention). Re-exporting a run replaces its files; each file is written under a temporary
name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from warehouse.db import connect
from warehouse.tables import run_tables

_SAFE_RUN_ID = re.compile(r"^[A-Za-z0-9._-]+$")


def _day(started_ns: int | None) -> str:
    if started_ns is None:
        return "unknown"
    return datetime.fromtimestamp(started_ns / 1e9, tz=UTC).strftime("%Y-%m-%d")


def export_runs(
    db_path: str | Path, out_dir: str | Path, run_ids: list[str] | None = None
) -> list[Path]:
    """Write every per-run table of the given runs (default: all) under out_dir; returns the files.

    Tables where a run has no rows get no file for it. Raises KeyError for an unknown run id and
    ValueError for a run id that is unsafe as a path component.
    """
    out = Path(out_dir)
    conn = connect(db_path, read_only=True)
    try:
        known = dict(conn.execute("SELECT run_id, started_ns FROM runs").fetchall())
        wanted = sorted(known) if run_ids is None else list(run_ids)
        for rid in wanted:
            if rid not in known:
                raise KeyError(f"run {rid!r} is not in the warehouse {db_path}")
            if not _SAFE_RUN_ID.match(rid):
                raise ValueError(
                    f"run id {rid!r} has characters unsafe in a path (allowed: A-Z a-z 0-9 . _ -)"
                )
        written = []
        for table in run_tables(conn):
            for rid in wanted:
                target = out / table / f"date={_day(known[rid])}" / f"run_id={rid}" / "data.parquet"
                count = conn.execute(
                    f'SELECT count(*) FROM "{table}" WHERE run_id = ?', [rid]
                ).fetchone()[0]
                if target.exists():
                    target.unlink()
                if not count:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name("data.parquet.tmp")
                escaped = str(tmp).replace("'", "''")
                conn.execute(
                    f'COPY (SELECT * EXCLUDE (run_id) FROM "{table}" WHERE run_id = $run_id) '
                    f"TO '{escaped}' (FORMAT parquet, COMPRESSION zstd)",
                    {"run_id": rid},
                )
                tmp.replace(target)
                written.append(target)
        return written
    finally:
        conn.close()


def read_back_sql(out_dir: str | Path, table: str) -> str:
    """A DuckDB table expression reading one exported table back (with date and run_id columns)."""
    pattern = str(Path(out_dir) / table / "*" / "*" / "*.parquet").replace("'", "''")
    return f"read_parquet('{pattern}', hive_partitioning = true)"
