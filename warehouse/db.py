"""Open the spikelens DuckDB warehouse with its schema at the latest version.

Why a function and not a bare `duckdb.connect`: every writer must see the same schema, so opening
a database also brings it forward — `schema.sql` on an empty file (version BASE_VERSION: the
pre-release history squashed into one file), then each `migrations/NNNN_name.sql` whose number is
above the stored version, in order, each in its own transaction together with its
`schema_version` row (a crash mid-migration leaves the previous version intact, and the next
connect() retries it). Migrations are numbered from BASE_VERSION + 1 (0016) on.

A read-only connection never migrates: it refuses a database older than this code, naming the
versions, instead of failing later on a missing table.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import duckdb

_HERE = Path(__file__).parent
SCHEMA_FILE = _HERE / "schema.sql"
MIGRATIONS_DIR = _HERE / "migrations"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
BASE_VERSION = 15  # the version schema.sql creates; a database below it predates the squash


class SchemaError(RuntimeError):
    """The database's schema version does not match what this code can use."""


def migrations() -> list[tuple[int, Path]]:
    """The forward migrations shipped with the code, as (version, path), in version order.

    Versions start at BASE_VERSION + 1 (schema.sql is BASE_VERSION) and must be contiguous: a gap
    means a file is missing.
    """
    found = []
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise SchemaError(f"{path}: migration files are named NNNN_lowercase_name.sql")
        found.append((int(match.group(1)), path))
    first = BASE_VERSION + 1
    expected = list(range(first, first + len(found)))
    if [v for v, _ in found] != expected:
        raise SchemaError(
            f"{MIGRATIONS_DIR}: migration versions {[v for v, _ in found]} "
            f"must be contiguous from {first} ({expected})"
        )
    return found


def latest_version() -> int:
    """The schema version this code expects after all migrations."""
    return BASE_VERSION + len(migrations())


def schema_version(conn: DbConnection) -> int:
    """The version stored in the database; 0 for a database without the schema."""
    exists = _scalar(
        conn, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    )
    if not exists:
        return 0
    return int(_scalar(conn, "SELECT coalesce(max(version), 0) FROM schema_version"))


def _scalar(conn: DbConnection, sql: str) -> Any:
    """The one value of an aggregate query (which always returns one row)."""
    row = conn.execute(sql).fetchone()
    if row is None:
        raise SchemaError(f"no row from {sql!r}")
    return row[0]


def _apply(conn: DbConnection, sql: str, version: int, name: str) -> None:
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(sql)
        if version > BASE_VERSION:  # schema.sql records its own version
            conn.execute(
                "INSERT INTO schema_version (version, name) VALUES (?, ?)", [version, name]
            )
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


def migrate(conn: DbConnection) -> int:
    """Bring the schema to the latest version; returns the version reached. Idempotent."""
    current = schema_version(conn)
    if current == 0:
        _apply(conn, SCHEMA_FILE.read_text(), BASE_VERSION, SCHEMA_FILE.name)
        current = BASE_VERSION
    elif current < BASE_VERSION:
        raise SchemaError(
            f"database schema version {current} predates version {BASE_VERSION}, "
            "from which this code's migrations start: move the file aside and "
            "ingest the runs again (their files in runs/<run_id>/ are unchanged)"
        )
    for version, path in migrations():
        if version > current:
            _apply(conn, path.read_text(), version, path.name)
            current = version
    if current > latest_version():
        raise SchemaError(
            f"database schema version {current} is newer than this code "
            f"({latest_version()}): upgrade spikelens"
        )
    return current


def connect(
    db_path: str | Path, read_only: bool = False, timeout_s: float | None = None
) -> Connection:
    """Open `db_path` (created if missing, parent folders included) with the schema up to date.

    read_only=True opens without migrating and raises SchemaError if the stored version is not the
    latest (open it once read-write to migrate).

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
        version = schema_version(conn)
        if version != latest_version():
            conn.close()
            raise SchemaError(
                f"warehouse {path} is at schema version {version}, this code needs "
                f"{latest_version()}: open it read-write once to migrate"
            )
        return conn
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _WriterLock.acquire(path, deadline)
    try:
        conn = Connection(_open(path, False, deadline), lock)
    except BaseException:
        lock.release()
        raise
    try:
        migrate(conn)
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
