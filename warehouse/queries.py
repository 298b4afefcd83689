"""Run a named query from warehouse/queries/<name>.sql with named parameters ($run_id, …).

SQL lives in .sql files (one query per file, a chain of CTEs) so it can be read, reviewed and run
in the DuckDB shell as is. Results come back as a list of dicts (column name → value), or as
an Arrow table (`query_table`) where a caller turns long results into arrays.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pyarrow as pa

from warehouse.db import DbConnection

QUERIES_DIR = Path(__file__).parent / "queries"
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_STRING_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*")


@cache
def load_sql(name: str) -> str:
    """The text of queries/<name>.sql; a clear error lists the known names."""
    path = QUERIES_DIR / f"{name}.sql"
    if not re.fullmatch(r"[a-z0-9_]+", name) or not path.is_file():
        known = ", ".join(sorted(p.stem for p in QUERIES_DIR.glob("*.sql")))
        raise KeyError(f"unknown query {name!r}; known: {known}")
    return path.read_text()


def parameters(name: str) -> set[str]:
    """The $names a query needs (outside strings and comments)."""
    return set(_PARAM.findall(_STRING_OR_COMMENT.sub("", load_sql(name))))


def _checked(name: str, params: dict) -> str:
    """The query's text, after checking `params` against its $names (DuckDB's own message
    does not say which query lacks what)."""
    needed = parameters(name)
    missing, extra = needed - params.keys(), params.keys() - needed
    if missing or extra:
        raise TypeError(
            f"query {name!r} takes ${', $'.join(sorted(needed))}; "
            f"missing {sorted(missing)}, unexpected {sorted(extra)}"
        )
    return load_sql(name)


def query(conn: DbConnection, name: str, **params) -> list[dict]:
    """Run queries/<name>.sql with `params` bound to its $names; returns rows as dicts.

    Missing or unexpected parameters are an error naming them.
    """
    cursor = conn.execute(_checked(name, params), params)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def query_table(conn: DbConnection, name: str, **params) -> pa.Table:
    """Like `query`, as an Arrow table: no Python object per value, for results of many rows
    that a caller turns into numpy arrays (a run's steps, its requests' outputs). It runs on
    `conn` itself: macros.sql's definitions live in the connection's temporary schema, which a
    cursor (a connection of its own) does not see. (`sql`, not `execute`: Arrow from an
    `execute` result copies the rows once more.)"""
    return conn.sql(_checked(name, params), params=params).to_arrow_table()
