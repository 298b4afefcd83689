"""Write derived per-run rows (rca results) into the warehouse, replacing the run's earlier ones.

rca reads and writes only through the warehouse package; this is its write path. All tables are
replaced in one transaction through Arrow, so a reader never sees half an analysis.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa


def replace_run_rows(conn: duckdb.DuckDBPyConnection, run_id: str, tables: dict[str, pa.Table]) -> None:
    """For each {table: rows}: delete the run's rows, insert `rows` (columns matched by name).

    Every given Arrow table with rows must carry a `run_id` column equal to `run_id` on each
    row; an empty one (any columns) only deletes.
    """
    for name, rows in tables.items():
        if rows.num_rows and "run_id" not in rows.column_names:
            raise ValueError(f"rows for table {name!r} need a run_id column")
        if not name.isidentifier():
            raise ValueError(f"table name {name!r} is not an identifier")
        ids = set(rows.column("run_id").to_pylist()) if rows.num_rows else set()
        if ids - {run_id}:
            raise ValueError(f"rows for table {name!r} carry run_id {sorted(ids - {run_id})}, expected {run_id!r}")
    views: list[str] = []
    conn.execute("BEGIN TRANSACTION")
    try:
        for name, rows in tables.items():
            conn.execute(f'DELETE FROM "{name}" WHERE run_id = ?', [run_id])
            if rows.num_rows:
                view = f"_store_{name}"
                conn.register(view, rows)
                views.append(view)
                conn.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM {view}')
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        for view in views:      # after COMMIT/ROLLBACK: an aborted transaction refuses it
            conn.unregister(view)
