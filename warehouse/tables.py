"""What the warehouse's tables are, read from the database itself: which hold per-run rows, their
columns, and the Arrow schema rows must have to be inserted into one.

Why from the database: schema.sql is the one statement of every table; a table or column added
there is covered here without a second list to keep in step.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from warehouse.db import DbConnection

# The file's own tables (the views and macros of macros.sql live in the temporary database).
_IN_FILE = "table_catalog = current_database() AND table_schema = 'main'"


def run_tables(conn: DbConnection) -> list[str]:
    """Every table holding per-run rows (a `run_id` column), by name."""
    rows = conn.execute(
        "SELECT DISTINCT c.table_name FROM information_schema.columns c "
        "JOIN information_schema.tables t USING (table_catalog, table_schema, table_name) "
        f"WHERE c.column_name = 'run_id' AND t.table_type = 'BASE TABLE' AND c.{_IN_FILE} "
        "ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def table_columns(conn: DbConnection, table: str) -> list[tuple[str, str]]:
    """(name, SQL type) of a table's columns, in table order."""
    return conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_name = ? AND {_IN_FILE} ORDER BY ordinal_position",
        [table],
    ).fetchall()


def arrow_schema(conn: DbConnection, table: str, columns: Iterable[str] | None = None) -> pa.Schema:
    """The Arrow schema DuckDB gives the table's columns (all, or `columns` in table order).

    Raises KeyError naming a column the table does not have."""
    if not table.isidentifier():
        raise ValueError(f"table name {table!r} is not an identifier")
    schema = conn.sql(f'SELECT * FROM "{table}" LIMIT 0').to_arrow_table().schema
    if columns is None:
        return schema
    wanted = set(columns)
    unknown = wanted - set(schema.names)
    if unknown:
        raise KeyError(f"table {table!r} has no column {', '.join(sorted(unknown))}")
    return pa.schema([f for f in schema if f.name in wanted])
