"""The warehouse's one write path: replace the rows one key owns (a run's, a sweep's) in one
transaction.

Every writer goes through `replacing`: ingest (a run's files into every per-run table) and the
derived rows (`replace_rows`: rca's analysis, the nightly's verdicts, a capacity sweep's steps).
Inside one transaction the key's old rows are deleted and the new ones inserted through Arrow
(never row by row); any failure rolls all of it back, and a process killed mid-way leaves the
committed state of before (DuckDB writes a transaction to its WAL only at commit), so a reader
never sees half a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeAlias

import pyarrow as pa

from warehouse.db import DbConnection
from warehouse.tables import arrow_schema

Rows: TypeAlias = "pa.Table | list[dict]"  # an Arrow table, or rows as dicts
# The column(s) that own the rows: "run_id", or a composite such as ("run_id", "spike_id", "cause")
Key: TypeAlias = "str | tuple[str, ...]"


def _pairs(key: Key, value: object) -> list[tuple[str, object]]:
    """(column, value) per key column; a composite key takes a tuple of as many values."""
    if isinstance(key, str):
        return [(key, value)]
    values = tuple(value) if isinstance(value, tuple | list) else (value,)
    if len(values) != len(key):
        raise ValueError(f"key {key!r} needs {len(key)} values, got {value!r}")
    return list(zip(key, values, strict=True))


@contextmanager
def replacing(
    conn: DbConnection, key: Key, value: object, tables: Iterable[str]
) -> Iterator[Callable[[pa.Table], str]]:
    """One transaction that deletes the rows whose `key` is `value` from each of `tables`, then
    runs the body, which inserts the new rows. The body reads Arrow tables through the view name
    the yielded `register(rows)` returns. Commits when the body ends; rolls back if it raises."""
    names = list(tables)
    pairs = _pairs(key, value)
    for name in [*(k for k, _ in pairs), *names]:
        if not name.isidentifier():
            raise ValueError(f"{name!r} is not an identifier")
    where = " AND ".join(f'"{k}" = ?' for k, _ in pairs)
    views: list[str] = []

    def register(rows: pa.Table) -> str:
        view = f"_replace_rows_{len(views)}"
        conn.register(view, rows)
        views.append(view)
        return view

    conn.execute("BEGIN TRANSACTION")
    try:
        for name in names:
            conn.execute(f'DELETE FROM "{name}" WHERE {where}', [v for _, v in pairs])
        yield register
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        for view in views:  # after COMMIT/ROLLBACK: an aborted transaction refuses it
            conn.unregister(view)


def replace_run_rows(conn: DbConnection, run_id: str, tables: Mapping[str, Rows]) -> None:
    """replace_rows keyed by run_id: for each {table: rows}, the run's rows become `rows`."""
    replace_rows(conn, "run_id", run_id, tables)


def replace_rows(conn: DbConnection, key: Key, value: object, tables: Mapping[str, Rows]) -> None:
    """For each {table: rows}: delete the rows whose `key` is `value`, insert `rows` (columns
    matched by name; the table's defaults fill the others), all in one transaction.

    `rows` is an Arrow table, or a list of dicts converted with the table's own column types
    (warehouse.tables.arrow_schema), so a writer restates no schema. Every row must carry `key`
    equal to `value` (each column of a composite key); empty rows only delete.
    """
    arrow = {name: _as_arrow(conn, name, rows) for name, rows in tables.items()}
    for name, rows in arrow.items():
        for column, expected in _pairs(key, value):
            if rows.num_rows and column not in rows.column_names:
                raise ValueError(f"rows for table {name!r} need a {column} column")
            ids = set(rows.column(column).to_pylist()) if rows.num_rows else set()
            if ids - {expected}:
                raise ValueError(
                    f"rows for table {name!r} carry {column} {sorted(ids - {expected})},"
                    f" expected {expected!r}"
                )
    with replacing(conn, key, value, arrow) as register:
        for name, rows in arrow.items():
            if rows.num_rows:
                conn.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM {register(rows)}')


def _as_arrow(conn: DbConnection, table: str, rows: Rows) -> pa.Table:
    if isinstance(rows, pa.Table):
        return rows
    columns = {name: None for row in rows for name in row}  # first-seen order, deduplicated
    if not columns:
        return pa.table({})
    return pa.Table.from_pylist(rows, schema=arrow_schema(conn, table, columns))
