"""warehouse.ingest: atomic, replacing ingest of run directories."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.db import connect
from warehouse.ingest import IngestError, ingest_run

RAW_TABLES = ("requests", "tokens", "steps", "gc", "engine_requests", "faults")


def _counts(db_path, run_id):
    conn = connect(db_path)
    try:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchone()[0]
            for t in ("runs", *RAW_TABLES)
        }
    finally:
        conn.close()


def test_ingest_counts_match_files_and_reingest_replaces(tmp_path, make_run):
    run_dir = make_run(
        incident="gc", duration_s=12.0, incident_start_s=5.0, incident_duration_s=3.0
    )
    db_path = tmp_path / "w.duckdb"
    first = ingest_run(db_path, run_dir)
    files = {t: pq.read_metadata(run_dir / f"{t}.parquet").num_rows for t in RAW_TABLES}
    assert first == {"runs": 1, **files}
    second = ingest_run(db_path, run_dir)
    assert second == first
    stored = _counts(db_path, json.loads((run_dir / "run.json").read_text())["run_id"])
    assert stored == first  # not doubled


def test_corrupt_file_names_it_and_keeps_earlier_data(tmp_path, make_run):
    run_dir = make_run(duration_s=8.0)
    db_path = tmp_path / "w.duckdb"
    before = ingest_run(db_path, run_dir)
    (run_dir / "steps.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(IngestError, match="steps.parquet"):
        ingest_run(db_path, run_dir)
    assert _counts(db_path, "20261201T000000Z-test-0001") == {**before, "faults": 0}


def test_rows_that_do_not_fit_roll_back(tmp_path, make_run):
    run_dir = make_run(duration_s=8.0)
    db_path = tmp_path / "w.duckdb"
    before = ingest_run(db_path, run_dir)
    # A readable file whose values cannot be cast fails inside the transaction: all rolled back.
    gc = pq.read_table(run_dir / "gc.parquet")
    gc = gc.set_column(
        gc.column_names.index("start_ns"), "start_ns", pa.array(["soon"] * gc.num_rows)
    )
    pq.write_table(gc, run_dir / "gc.parquet")
    with pytest.raises(IngestError, match="gc.parquet"):
        ingest_run(db_path, run_dir)
    assert _counts(db_path, "20261201T000000Z-test-0001") == {**before, "faults": 0}


def test_missing_optional_files_are_fine(tmp_path, make_run):
    run_dir = make_run(duration_s=6.0)
    (run_dir / "gc.parquet").unlink()
    (run_dir / "engine_requests.parquet").unlink()
    counts = ingest_run(tmp_path / "w.duckdb", run_dir)
    assert "gc" not in counts and "nvml" not in counts and counts["steps"] > 0


def test_missing_required_column_is_named(tmp_path, make_run):
    run_dir = make_run(duration_s=6.0)
    pq.write_table(
        pq.read_table(run_dir / "tokens.parquet").drop_columns(["arrival_ns"]),
        run_dir / "tokens.parquet",
    )
    with pytest.raises(IngestError, match=r"tokens.parquet: missing required column 'arrival_ns'"):
        ingest_run(tmp_path / "w.duckdb", run_dir)


def test_all_fault_files_feed_one_table(tmp_path, make_run):
    run_dir = make_run(
        incident="penalty", duration_s=6.0, incident_start_s=2.0, incident_duration_s=2.0
    )
    pq.write_table(
        pa.Table.from_pylist(
            [{"kind": "load.burst", "cause": "load", "start_ns": 1, "end_ns": 2, "params": "{}"}]
        ),
        run_dir / "faults.loadgen.parquet",
    )
    ingest_run(tmp_path / "w.duckdb", run_dir)
    conn = connect(tmp_path / "w.duckdb")
    rows = conn.execute("SELECT kind, source_file FROM faults ORDER BY kind").fetchall()
    conn.close()
    assert rows == [
        ("load.burst", "faults.loadgen.parquet"),
        ("penalty.slow_path", "faults.parquet"),
    ]


def test_run_json_is_required_and_checked(tmp_path, make_run):
    run_dir = make_run(duration_s=6.0)
    (run_dir / "run.json").write_text("{not json")
    with pytest.raises(IngestError, match="run.json: not valid JSON"):
        ingest_run(tmp_path / "w.duckdb", run_dir)
    (run_dir / "run.json").unlink()
    with pytest.raises(IngestError, match="run.json: missing"):
        ingest_run(tmp_path / "w.duckdb", run_dir)


def test_run_fields_land_in_runs(tmp_path, make_run):
    run_dir = make_run(duration_s=6.0)
    ingest_run(tmp_path / "w.duckdb", run_dir)
    conn = connect(tmp_path / "w.duckdb")
    row = conn.execute(
        "SELECT scenario_name, load_started_ns, duration_s, engine->>'model' FROM runs"
    ).fetchone()
    conn.close()
    assert row == ("sim-control", 1_800_000_000_000_000_000, 6.0, "sim")


def test_collector_files_land_in_their_tables(tmp_path, make_run):
    run_dir = make_run(
        incident="gc",
        duration_s=6.0,
        incident_start_s=2.0,
        incident_duration_s=2.0,
        collectors=True,
    )
    counts = ingest_run(tmp_path / "w.duckdb", run_dir)
    collect = run_dir / "collect"
    assert (
        counts["process_stacks"]
        == pq.read_metadata(next(collect.glob("stacks-*.parquet"))).num_rows
    )
    assert counts["process_cpu"] == pq.read_metadata(next(collect.glob("proc-*.parquet"))).num_rows
    assert counts["process_gc"] == len(next(collect.glob("gc-*.jsonl")).read_text().splitlines())
    conn = connect(tmp_path / "w.duckdb")
    try:
        roles = conn.execute("SELECT DISTINCT role, source_file FROM process_gc").fetchall()
        assert roles == [("engine", "gc-4242.jsonl")]
    finally:
        conn.close()


def test_a_truncated_gc_line_is_dropped_with_a_warning_naming_the_file(tmp_path, make_run, caplog):
    run_dir = make_run(duration_s=4.0, collectors=True, collectors_truncated=True)
    lines = (run_dir / "collect" / "gc-4242.jsonl").read_text().splitlines()
    counts = ingest_run(tmp_path / "w.duckdb", run_dir)
    assert counts["process_gc"] == len(lines) - 1
    assert "gc-4242.jsonl: dropped 1 line(s)" in caplog.text


def test_an_unreadable_collector_file_is_skipped_and_the_rest_is_stored(tmp_path, make_run, caplog):
    run_dir = make_run(duration_s=4.0, collectors=True)
    stacks = run_dir / "collect" / "stacks-4242.parquet"
    stacks.write_bytes(stacks.read_bytes()[:200])  # cut short, as by a kill mid-write
    pq.write_table(pa.table({"pid": [1]}), run_dir / "collect" / "proc-77.parquet")  # lacks ts_ns
    counts = ingest_run(tmp_path / "w.duckdb", run_dir)
    assert "process_stacks" not in counts and counts["process_gc"] > 0 and counts["requests"] > 0
    assert (
        counts["process_cpu"]
        == pq.read_metadata(run_dir / "collect" / "proc-4242.parquet").num_rows
    )
    assert "skipped" in caplog.text and "stacks-4242.parquet: cannot read as parquet" in caplog.text
    assert "proc-77.parquet: missing required column 'ts_ns'" in caplog.text
