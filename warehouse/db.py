"""Open the spikelens DuckDB warehouse with the tables and definitions this code declares.

Two files say what a warehouse is (read them rather than this module):
- `schema.sql`, the tables. While spikelens is unreleased it is edited in place, without
  migrations: a read-write `connect()` creates the tables a file lacks and adds the columns its
  tables lack (nullable ones, with their defaults), in one transaction, so a file written by an
  older spikelens opens with today's tables. What cannot be done by adding (a column whose type
  changed, a new NOT NULL column) is refused with a SchemaError that gives the way out: move the
  file aside and ingest the runs again (their files in runs/<run_id>/ are unchanged).
- `macros.sql`, the views and macros the queries use, among them the one definition of each
  measurement. Every connection creates them in its temporary schema, read-only ones included,
  so they are always this code's: nothing stored in a file decides how a query measures.

A read-only connection never changes the file: it refuses one that lacks a declared table or
column ("open it read-write once"), instead of failing later on a missing table. Tables or
columns a file has beyond the declared ones (a newer spikelens') are left alone.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import ClassVar

import duckdb

_HERE = Path(__file__).parent
SCHEMA_FILE = _HERE / "schema.sql"
MACROS_FILE = _HERE / "macros.sql"

# What a warehouse written before schema.sql was edited in place may still hold: the version
# table of the migrations, and views and macros stored in the file (now in macros.sql, created per
# connection). A read-write open drops them.
_LEGACY_TABLES = ("schema_version",)
# Catalogue rows of the file itself (temporary objects are in database 'temp', schema 'main' too).
_IN_FILE = "database_name = current_database() AND schema_name = 'main'"


class SchemaError(RuntimeError):
    """The database's tables do not match what this code can use."""


@dataclass(frozen=True)
class _Column:
    table: str
    name: str
    data_type: str
    default: str | None
    nullable: bool


@dataclass(frozen=True)
class _Declared:
    """The tables schema.sql creates: their CREATE statements and their columns."""

    tables: dict[str, str]  # name -> CREATE TABLE statement
    columns: tuple[_Column, ...]


@cache
def declared() -> _Declared:
    """schema.sql applied to an empty in-memory database, read back from its catalogue."""
    with duckdb.connect() as conn:
        conn.execute(SCHEMA_FILE.read_text())
        tables = dict(
            conn.execute(
                f"SELECT table_name, sql FROM duckdb_tables() WHERE {_IN_FILE} ORDER BY 1"
            ).fetchall()
        )
        return _Declared(tables, _columns(conn))


def _columns(conn: DbConnection) -> tuple[_Column, ...]:
    """The columns of the file's tables (not of the temporary views and macros)."""
    rows = conn.execute(
        "SELECT table_name, column_name, data_type, column_default, is_nullable "
        f"FROM duckdb_columns() WHERE {_IN_FILE} AND NOT internal AND table_name IN "
        f"(SELECT table_name FROM duckdb_tables() WHERE {_IN_FILE}) "
        "ORDER BY table_name, column_index"
    ).fetchall()
    return tuple(_Column(*row) for row in rows)


@dataclass(frozen=True)
class _Drift:
    """How a file's tables differ from the declared ones."""

    missing_tables: list[str]
    missing_columns: list[_Column]
    changed: list[str]  # "table.column: TYPE, declared TYPE"

    @property
    def additions(self) -> bool:
        return bool(self.missing_tables or self.missing_columns)


def _drift(conn: DbConnection) -> _Drift:
    want = declared()
    have = {(c.table, c.name): c for c in _columns(conn)}
    have_tables = {table for table, _ in have}
    missing_tables = [t for t in want.tables if t not in have_tables]
    missing_columns, changed = [], []
    for col in want.columns:
        if col.table in missing_tables:
            continue
        found = have.get((col.table, col.name))
        if found is None:
            missing_columns.append(col)
        elif found.data_type != col.data_type:
            changed.append(f"{col.table}.{col.name}: {found.data_type}, declared {col.data_type}")
    return _Drift(missing_tables, missing_columns, changed)


def _reingest(path: Path | str, why: str) -> SchemaError:
    return SchemaError(
        f"warehouse {path}: {why}. Move the file aside and ingest the runs again "
        "(their files in runs/<run_id>/ are unchanged)"
    )


def apply_schema(conn: DbConnection, path: Path | str = "(in memory)") -> list[str]:
    """Bring a read-write connection's file to schema.sql by adding what it lacks, in one
    transaction; drop what older code stored in it (see _LEGACY_TABLES). Returns what was added
    ("table" or "table.column"), [] when the file was up to date. Idempotent."""
    drift = _drift(conn)
    if drift.changed:
        raise _reingest(path, "columns changed type: " + "; ".join(drift.changed))
    stuck = [f"{c.table}.{c.name}" for c in drift.missing_columns if not c.nullable]
    if stuck:
        raise _reingest(path, "NOT NULL columns cannot be added: " + ", ".join(stuck))
    legacy = _legacy_objects(conn)
    if not drift.additions and not legacy:
        return []
    conn.execute("BEGIN TRANSACTION")
    try:
        for statement in legacy:
            conn.execute(statement)
        for table in drift.missing_tables:
            conn.execute(declared().tables[table])
        for col in drift.missing_columns:
            default = f" DEFAULT {col.default}" if col.default is not None else ""
            conn.execute(
                f'ALTER TABLE "{col.table}" ADD COLUMN "{col.name}" {col.data_type}{default}'
            )
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise
    return drift.missing_tables + [f"{c.table}.{c.name}" for c in drift.missing_columns]


def _legacy_objects(conn: DbConnection) -> list[str]:
    """DROP statements for the views, macros and version table an older spikelens stored."""
    views = conn.execute(
        f"SELECT view_name FROM duckdb_views() WHERE {_IN_FILE} AND NOT internal"
    ).fetchall()
    macros = conn.execute(
        "SELECT DISTINCT function_name, function_type FROM duckdb_functions() "
        f"WHERE {_IN_FILE} AND function_type IN ('macro', 'table_macro') AND NOT internal"
    ).fetchall()
    tables = conn.execute(f"SELECT table_name FROM duckdb_tables() WHERE {_IN_FILE}").fetchall()
    drops = [f'DROP VIEW main."{name}"' for (name,) in views]
    drops += [
        f'DROP {"MACRO TABLE" if kind == "table_macro" else "MACRO"} main."{name}"'
        for name, kind in macros
    ]
    drops += [f'DROP TABLE main."{name}"' for (name,) in tables if name in _LEGACY_TABLES]
    return drops


def check_schema(conn: DbConnection, path: Path | str) -> None:
    """Raise SchemaError unless the file has every declared table and column (read-only use)."""
    drift = _drift(conn)
    if drift.changed:
        raise _reingest(path, "columns changed type: " + "; ".join(drift.changed))
    if drift.additions:
        lacking = drift.missing_tables + [f"{c.table}.{c.name}" for c in drift.missing_columns]
        raise SchemaError(
            f"warehouse {path} lacks {', '.join(lacking)}: open it read-write once to add them"
        )


def load_macros(conn: DbConnection) -> None:
    """Create macros.sql's views and macros in the connection's temporary schema."""
    conn.execute(MACROS_FILE.read_text())


def connect(
    db_path: str | Path, read_only: bool = False, timeout_s: float | None = None
) -> Connection:
    """Open `db_path` (created if missing, parent folders included) with schema.sql's tables and
    macros.sql's definitions (module docstring).

    read_only=True changes nothing in the file and raises SchemaError if it lacks a declared table
    or column (open it once read-write to add them).

    Several processes share one file (two flows at once, a report rendered while a nightly
    ingests): writers take turns on an exclusive lock of `<db>.lock` held until `close()`, and
    whoever finds the file held by another process (DuckDB allows one writer *or* any readers)
    retries until `timeout_s` (default $SPIKELENS_DB_TIMEOUT_S or 300 s). Writers hold the file
    only for one ingest or analysis, so readers wait seconds, never fail.
    """
    path = Path(db_path)
    timeout_s = (
        float(os.environ.get("SPIKELENS_DB_TIMEOUT_S", "300")) if timeout_s is None else timeout_s
    )
    deadline = time.monotonic() + timeout_s
    if read_only:
        if not path.exists():
            raise FileNotFoundError(f"warehouse {path} does not exist (ingest a run first)")
        conn = Connection(_open(path, True, deadline), None)
        try:
            check_schema(conn, path)
            load_macros(conn)
        except Exception:
            conn.close()
            raise
        return conn
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _WriterLock.acquire(path, deadline)
    try:
        conn = Connection(_open(path, False, deadline), lock)
    except BaseException:
        lock.release()
        raise
    try:
        apply_schema(conn, path)
        load_macros(conn)
    except Exception:
        conn.close()
        raise
    return conn


class WarehouseBusy(TimeoutError):
    """Another process held the warehouse for longer than the timeout."""


def _open(path: Path, read_only: bool, deadline: float) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, retrying while another process holds the file (its lock error)."""
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as e:
            if "lock" not in str(e).lower() or time.monotonic() + delay > deadline:
                if "lock" in str(e).lower():
                    raise WarehouseBusy(
                        f"warehouse {path} is held by another process (waited for "
                        f"it to be released; raise SPIKELENS_DB_TIMEOUT_S): {e}"
                    ) from None
                raise
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


class _WriterLock:
    """Exclusive flock on `<db>.lock`, re-entrant within a process (one writer process at a time;
    one process may open several read-write connections, as DuckDB allows)."""

    _held: ClassVar[
        dict[Path, list]
    ] = {}  # path → [fd, count]; mutated under _guard, never rebound
    _guard = threading.Lock()

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def acquire(cls, db: Path, deadline: float) -> _WriterLock:
        path = db.with_name(db.name + ".lock").resolve()
        with cls._guard:
            if path in cls._held:
                cls._held[path][1] += 1
                return cls(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise WarehouseBusy(
                        f"warehouse {db}: another process has been writing for longer "
                        f"than the timeout (lock {path}; raise SPIKELENS_DB_TIMEOUT_S)"
                    ) from None
                time.sleep(0.1)
        with cls._guard:
            cls._held[path] = [fd, 1]
        return cls(path)

    def release(self) -> None:
        with self._guard:
            entry = self._held[self.path]
            entry[1] -= 1
            if entry[1]:
                return
            del self._held[self.path]
        fcntl.flock(entry[0], fcntl.LOCK_UN)
        os.close(entry[0])


class Connection:
    """A DuckDB connection that also releases the writer lock when closed (or at `with` exit).
    Everything else is the DuckDB connection's own API."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, lock: _WriterLock | None):
        self._conn, self._lock = conn, lock

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def close(self) -> None:
        try:
            self._conn.close()
        finally:
            if self._lock is not None:
                lock, self._lock = self._lock, None
                lock.release()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# What the warehouse's functions take: `connect()`'s connection or a bare DuckDB one (in-memory).
DbConnection = duckdb.DuckDBPyConnection | Connection
