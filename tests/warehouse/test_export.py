"""warehouse.export: hive-partitioned Parquet that DuckDB reads back identically."""

import duckdb
import pytest

from warehouse.db import connect
from warehouse.export import export_runs, read_back_sql
from warehouse.ingest import ingest_run


def test_export_reads_back_identically(tmp_path, make_run):
    db_path = tmp_path / "w.duckdb"
    ingest_run(
        db_path,
        make_run(
            run_id="run-a",
            duration_s=5.0,
            incident="gc",
            incident_start_s=1.0,
            incident_duration_s=2.0,
        ),
    )
    ingest_run(db_path, make_run(run_id="run-b", duration_s=4.0, seed=3))
    out = tmp_path / "export"
    files = export_runs(db_path, out)
    assert (out / "tokens" / "date=2027-01-15" / "run_id=run-a" / "data.parquet") in files
    export_runs(db_path, out, ["run-a"])  # re-export replaces, never duplicates

    conn = connect(db_path)
    reader = duckdb.connect()
    for table in ("tokens", "steps", "requests", "faults"):
        cols = [
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND column_name <> 'run_id' "
                "ORDER BY ordinal_position",
                [table],
            ).fetchall()
        ]
        col_list = ", ".join(f'"{c}"' for c in cols)
        original = conn.execute(f"SELECT run_id, {col_list} FROM {table} ORDER BY ALL").fetchall()
        back = reader.execute(
            f"SELECT run_id, {col_list} FROM {read_back_sql(out, table)} ORDER BY ALL"
        ).fetchall()
        assert back == original, table
    conn.close()


def test_unknown_run_is_an_error(tmp_path, make_run):
    db_path = tmp_path / "w.duckdb"
    ingest_run(db_path, make_run(run_id="run-a", duration_s=3.0))
    with pytest.raises(KeyError, match="'nope'"):
        export_runs(db_path, tmp_path / "out", ["nope"])
