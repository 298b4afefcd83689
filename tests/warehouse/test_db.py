"""warehouse.db: schema creation, forward migrations, read-only checks."""

import duckdb
import pytest

from warehouse import db


def test_connect_creates_schema_at_latest_version(tmp_path):
    conn = db.connect(tmp_path / "sub" / "w.duckdb")
    versions = [
        r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    ]
    assert versions == list(range(db.BASE_VERSION, db.latest_version() + 1))
    tables = {
        r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    assert {
        "runs",
        "requests",
        "tokens",
        "steps",
        "gc",
        "nvml",
        "faults",
        "engine_requests",
        "spikes",
        "attributions",
        "evidence",
        "step_gc",
    } <= tables
    conn.close()


def test_reconnect_is_idempotent(tmp_path):
    path = tmp_path / "w.duckdb"
    db.connect(path).close()
    conn = db.connect(path)
    assert (
        conn.execute("SELECT count(*) FROM schema_version").fetchone()[0]
        == db.latest_version() - db.BASE_VERSION + 1
    )
    conn.close()


def test_old_database_is_migrated_forward(tmp_path):
    path = tmp_path / "w.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute(db.SCHEMA_FILE.read_text())  # a database left at schema.sql's version
    raw.close()
    with pytest.raises(db.SchemaError, match=f"version {db.BASE_VERSION}"):
        db.connect(path, read_only=True)
    conn = db.connect(path)
    assert db.schema_version(conn) == db.latest_version()
    conn.close()
    db.connect(path, read_only=True).close()


def test_read_only_missing_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        db.connect(tmp_path / "absent.duckdb", read_only=True)


def test_migration_gap_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "0016_a.sql").write_text("SELECT 1;")
    (tmp_path / "0018_b.sql").write_text("SELECT 1;")
    monkeypatch.setattr(db, "MIGRATIONS_DIR", tmp_path)
    with pytest.raises(db.SchemaError, match="contiguous from 16"):
        db.migrations()


def test_migrations_start_above_the_squashed_schema(tmp_path, monkeypatch):
    (tmp_path / "0002_old.sql").write_text("SELECT 1;")
    monkeypatch.setattr(db, "MIGRATIONS_DIR", tmp_path)
    with pytest.raises(db.SchemaError, match="contiguous from 16"):
        db.migrations()


def test_database_older_than_the_squash_is_refused_with_the_way_out(tmp_path):
    path = tmp_path / "w.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute("CREATE TABLE schema_version (version INTEGER, name VARCHAR)")
    raw.execute("INSERT INTO schema_version VALUES (7, '0007_attribution_method.sql')")
    raw.close()
    with pytest.raises(
        db.SchemaError, match="version 7 predates version 15.*ingest the runs again"
    ):
        db.connect(path)
    raw = duckdb.connect(str(path))  # nothing was changed in it
    assert raw.execute("SELECT version FROM schema_version").fetchall() == [(7,)]
    raw.close()
