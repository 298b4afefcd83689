"""Write derived per-run rows (rca results) into the warehouse, replacing the run's earlier ones.

rca reads and writes only through the warehouse package; this is its write path. All tables are
replaced in one transaction through Arrow, so a reader never sees half an analysis.
"""

from __future__ import annotations

import pyarrow as pa

from warehouse.db import DbConnection


def replace_run_rows(conn: DbConnection, run_id: str, tables: dict[str, pa.Table]) -> None:
    """For each {table: rows}: delete the run's rows, insert `rows` (columns matched by name).

    Every given Arrow table with rows must carry a `run_id` column equal to `run_id` on each
    row; an empty one (any columns) only deletes.
    """
    replace_rows(conn, "run_id", run_id, tables)


def replace_rows(conn: DbConnection, key: str, value: str, tables: dict[str, pa.Table]) -> None:
    """replace_run_rows for rows keyed by another column (e.g. a capacity sweep's sweep_id):
    for each {table: rows}, delete the rows whose `key` is `value`, insert `rows`, all in one
    transaction. Rows must carry `key` equal to `value`; an empty table only deletes."""
    if not key.isidentifier():
        raise ValueError(f"key column {key!r} is not an identifier")
    for name, rows in tables.items():
        if rows.num_rows and key not in rows.column_names:
            raise ValueError(f"rows for table {name!r} need a {key} column")
        if not name.isidentifier():
            raise ValueError(f"table name {name!r} is not an identifier")
        ids = set(rows.column(key).to_pylist()) if rows.num_rows else set()
        if ids - {value}:
            raise ValueError(
                f"rows for table {name!r} carry {key} {sorted(ids - {value})}, expected {value!r}"
            )
    views: list[str] = []
    conn.execute("BEGIN TRANSACTION")
    try:
        for name, rows in tables.items():
            conn.execute(f'DELETE FROM "{name}" WHERE "{key}" = ?', [value])
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
        for view in views:  # after COMMIT/ROLLBACK: an aborted transaction refuses it
            conn.unregister(view)
