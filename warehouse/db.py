"""Open the spikelens DuckDB warehouse with its schema at the latest version.

Why a function and not a bare `duckdb.connect`: every writer must see the same schema, so opening
a database also brings it forward — `schema.sql` on an empty file (version 1), then each
`migrations/NNNN_name.sql` whose number is above the stored version, in order, each in its own
transaction together with its `schema_version` row (a crash mid-migration leaves the previous
version intact, and the next connect() retries it).

A read-only connection never migrates: it refuses a database older than this code, naming the
versions, instead of failing later on a missing table.
"""
from __future__ import annotations

import re
from pathlib import Path

import duckdb

_HERE = Path(__file__).parent
SCHEMA_FILE = _HERE / "schema.sql"
MIGRATIONS_DIR = _HERE / "migrations"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class SchemaError(RuntimeError):
    """The database's schema version does not match what this code can use."""


def migrations() -> list[tuple[int, Path]]:
    """The forward migrations shipped with the code, as (version, path), in version order.

    Versions start at 2 (1 is schema.sql) and must be contiguous: a gap means a file is missing.
    """
    found = []
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise SchemaError(f"{path}: migration files are named NNNN_lowercase_name.sql")
        found.append((int(match.group(1)), path))
    expected = list(range(2, 2 + len(found)))
    if [v for v, _ in found] != expected:
        raise SchemaError(f"{MIGRATIONS_DIR}: migration versions {[v for v, _ in found]} "
                          f"must be contiguous from 2 ({expected})")
    return found


def latest_version() -> int:
    """The schema version this code expects after all migrations."""
    return 1 + len(migrations())


def schema_version(conn: duckdb.DuckDBPyConnection) -> int:
    """The version stored in the database; 0 for a database without the schema."""
    exists = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()[0]
    if not exists:
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0])


def _apply(conn: duckdb.DuckDBPyConnection, sql: str, version: int, name: str) -> None:
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(sql)
        if version > 1:  # schema.sql records version 1 itself
            conn.execute("INSERT INTO schema_version (version, name) VALUES (?, ?)", [version, name])
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


def migrate(conn: duckdb.DuckDBPyConnection) -> int:
    """Bring the schema to the latest version; returns the version reached. Idempotent."""
    current = schema_version(conn)
    if current == 0:
        _apply(conn, SCHEMA_FILE.read_text(), 1, SCHEMA_FILE.name)
        current = 1
    for version, path in migrations():
        if version > current:
            _apply(conn, path.read_text(), version, path.name)
            current = version
    if current > latest_version():
        raise SchemaError(f"database schema version {current} is newer than this code "
                          f"({latest_version()}): upgrade spikelens")
    return current


def connect(db_path: str | Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open `db_path` (created if missing, parent folders included) with the schema up to date.

    read_only=True opens without migrating and raises SchemaError if the stored version is not the
    latest (open it once read-write to migrate).
    """
    path = Path(db_path)
    if read_only:
        if not path.exists():
            raise FileNotFoundError(f"warehouse {path} does not exist (ingest a run first)")
        conn = duckdb.connect(str(path), read_only=True)
        version = schema_version(conn)
        if version != latest_version():
            conn.close()
            raise SchemaError(f"warehouse {path} is at schema version {version}, this code needs "
                              f"{latest_version()}: open it read-write once to migrate")
        return conn
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = duckdb.connect(str(path))
    try:
        migrate(conn)
    except Exception:
        conn.close()
        raise
    return conn
