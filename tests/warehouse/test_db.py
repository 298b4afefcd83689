"""warehouse.db: schema.sql's tables brought to any file, macros.sql per connection, read-only checks."""

import duckdb
import pytest

from warehouse import db

EXPECTED_TABLES = {
    "runs",
    "requests",
    "tokens",
    "steps",
    "gc",
    "nvml",
    "faults",
    "engine_requests",
    "server_requests",
    "metrics",
    "client_health",
    "process_gc",
    "process_stacks",
    "process_cpu",
    "cpu_ticks",
    "analyses",
    "spikes",
    "attributions",
    "evidence",
    "spike_comparison",
    "fault_verdicts",
    "confirmations",
    "nightly_verdicts",
    "capacity_steps",
}


def _file_tables(conn) -> set[str]:
    rows = conn.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
    ).fetchall()
    return {r[0] for r in rows}


def _stored_definitions(conn) -> list[str]:
    """Views and macros stored in the file itself (not the connection's temporary ones)."""
    views = conn.execute(
        "SELECT view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND NOT internal"
    ).fetchall()
    macros = conn.execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE database_name = "
        "current_database() AND function_type IN ('macro', 'table_macro') AND NOT internal"
    ).fetchall()
    return sorted(r[0] for r in views + macros)


def test_connect_creates_every_declared_table_and_the_definitions(tmp_path):
    with db.connect(tmp_path / "sub" / "w.duckdb") as conn:
        assert _file_tables(conn) == EXPECTED_TABLES == set(db.declared().tables)
        assert _stored_definitions(conn) == []  # macros.sql lives in each connection, not the file
        assert conn.execute("SELECT count(*) FROM step_gc('none')").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM latency_samples('none')").fetchone() == (0,)


def test_reconnect_changes_nothing(tmp_path):
    path = tmp_path / "w.duckdb"
    db.connect(path).close()
    with db.connect(path) as conn:
        assert db.apply_schema(conn, path) == []


def _old_layout(path):
    """A file as the migration-based code left it (schema.sql v15 + migrations 0016-0019): the same
    tables, but spikes.uncovered added last, a schema_version table, and views and macros stored
    in the file. The stored request_ok says no request is ok and the stored step_gc is another
    view, so a query that used them would visibly differ."""
    raw = duckdb.connect(str(path))
    raw.execute(db.SCHEMA_FILE.read_text())
    raw.execute("ALTER TABLE spikes DROP COLUMN uncovered")
    raw.execute("ALTER TABLE spikes ADD COLUMN uncovered DOUBLE")
    raw.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name VARCHAR)")
    raw.execute("INSERT INTO schema_version SELECT v, 'm' FROM range(15, 20) t(v)")
    raw.execute("CREATE MACRO request_ok(status, error) AS false")
    raw.execute("CREATE MACRO run_axis(rid, width_s) AS TABLE SELECT 1 AS stale")
    raw.execute("CREATE VIEW step_gc AS SELECT 'stale' AS stale")
    raw.close()


def test_a_file_of_the_migrations_era_opens_with_todays_definitions(tmp_path, make_run):
    from warehouse.ingest import ingest_into
    from warehouse.queries import query

    path = tmp_path / "w.duckdb"
    _old_layout(path)
    with db.connect(path, read_only=True) as conn:  # changes nothing, still reads today's macros
        assert "stale" not in [d[0] for d in conn.execute("SELECT * FROM step_gc('x')").description]
        assert _stored_definitions(conn) == ["request_ok", "run_axis", "step_gc"]
    with db.connect(path) as conn:  # read-write: the stored definitions and version table go
        assert _stored_definitions(conn) == []
        assert _file_tables(conn) == EXPECTED_TABLES
        ingest_into(conn, make_run(duration_s=2.0))
        totals = query(conn, "totals", run_id="20261201T000000Z-test-0001")[0]
        assert totals["requests"] > 0 and totals["e2e_p99_ms"] is not None


def test_missing_tables_and_nullable_columns_are_added(tmp_path):
    path = tmp_path / "w.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute(db.SCHEMA_FILE.read_text())
    raw.execute("DROP TABLE capacity_steps")
    raw.execute("DROP TABLE process_cpu")
    raw.execute("ALTER TABLE spikes DROP COLUMN uncovered")
    raw.execute("ALTER TABLE spikes DROP COLUMN suppressed")  # nullable, with a default
    raw.close()
    with pytest.raises(db.SchemaError, match="lacks .*capacity_steps.*open it read-write once"):
        db.connect(path, read_only=True)
    with db.connect(path) as conn:
        assert _file_tables(conn) == EXPECTED_TABLES
        conn.execute(
            "INSERT INTO spikes (run_id, spike_id, metric, detector, start_s, end_s) "
            "VALUES ('r', 1, 'itl_p99', 'mad', 0, 1)"
        )
        assert conn.execute("SELECT suppressed, uncovered FROM spikes").fetchone() == (False, None)
    db.connect(path, read_only=True).close()


def test_a_changed_type_is_refused_with_the_way_out_and_nothing_changes(tmp_path):
    path = tmp_path / "w.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute("CREATE TABLE spikes (run_id VARCHAR, spike_id VARCHAR)")
    raw.close()
    for read_only in (False, True):
        with pytest.raises(
            db.SchemaError,
            match=r"spikes.spike_id: VARCHAR, declared INTEGER.*"
            r"ingest the runs again",
        ):
            db.connect(path, read_only=read_only)
    raw = duckdb.connect(str(path))
    assert [r[0] for r in raw.execute("SELECT table_name FROM duckdb_tables()").fetchall()] == [
        "spikes"
    ]
    raw.close()


def test_a_missing_not_null_column_is_refused(tmp_path):
    path = tmp_path / "w.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute(db.SCHEMA_FILE.read_text())
    raw.execute("DROP TABLE tokens")
    raw.execute("CREATE TABLE tokens (run_id VARCHAR NOT NULL, request_id VARCHAR NOT NULL)")
    raw.close()
    with pytest.raises(db.SchemaError, match=r"NOT NULL columns cannot be added: tokens.index"):
        db.connect(path)


def test_read_only_missing_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        db.connect(tmp_path / "absent.duckdb", read_only=True)
