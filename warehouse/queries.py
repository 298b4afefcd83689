"""Run a named query from warehouse/queries/<name>.sql with named parameters ($run_id, …).

SQL lives in .sql files (one query per file, a chain of CTEs) so it can be read, reviewed and run
in the DuckDB shell as is. Results come back as a list of dicts (column name → value).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

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


def query(conn: DbConnection, name: str, **params) -> list[dict]:
    """Run queries/<name>.sql with `params` bound to its $names; returns rows as dicts.

    Missing or unexpected parameters are an error naming them (DuckDB's own message does not
    say which query).
    """
    needed = parameters(name)
    missing, extra = needed - params.keys(), params.keys() - needed
    if missing or extra:
        raise TypeError(
            f"query {name!r} takes ${', $'.join(sorted(needed))}; "
            f"missing {sorted(missing)}, unexpected {sorted(extra)}"
        )
    cursor = conn.execute(load_sql(name), params)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]
