"""Two flows at once: two processes ingesting different runs into one warehouse while a
third reads it. One writer at a time; nobody fails, nothing is lost or duplicated."""

import subprocess
import sys
import textwrap

from tests.support.runbuilder import SimSpec, write_run
from warehouse.db import connect

WRITER = textwrap.dedent("""
    import sys
    from warehouse.ingest import ingest_run
    from rca.analyze import analyze_run
    db, run_dir, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for _ in range(rounds):          # re-ingesting replaces: rows must not double
        ingest_run(db, run_dir)
        analyze_run(db, run_dir.rsplit("/", 1)[1])
""")
READER = textwrap.dedent("""
    import sys, time
    from warehouse.db import connect
    db, seconds = sys.argv[1], float(sys.argv[2])
    end, reads = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        with connect(db, read_only=True) as conn:
            conn.execute("SELECT count(*) FROM requests").fetchone()
        reads += 1
    print(reads)
""")


def test_two_writers_and_a_reader(tmp_path):
    db = tmp_path / "w.duckdb"
    connect(db).close()  # create and migrate first, so the reader can open from the start
    runs = [
        write_run(tmp_path / "runs", SimSpec(run_id=f"conc-{i}", duration_s=20, seed=i))
        for i in range(2)
    ]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(r), "3"], stderr=subprocess.PIPE, text=True
        )
        for r in runs
    ]
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db), "8"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for w in writers:
        assert w.wait(300) == 0, w.stderr.read()[-2000:]
    assert reader.wait(300) == 0, reader.stderr.read()[-2000:]
    assert int(reader.stdout.read()) > 0
    with connect(db, read_only=True) as conn:
        per_run = dict(conn.execute("SELECT run_id, count(*) FROM runs GROUP BY 1").fetchall())
        requests = dict(conn.execute("SELECT run_id, count(*) FROM requests GROUP BY 1").fetchall())
        analysed = conn.execute("SELECT count(DISTINCT run_id) FROM analyses").fetchone()[0]
    assert per_run == {"conc-0": 1, "conc-1": 1}
    for r in runs:
        import pyarrow.parquet as pq

        assert requests[r.name] == pq.read_metadata(r / "requests.parquet").num_rows
    assert analysed == 2


def test_writer_lock_is_reentrant_within_a_process(tmp_path):
    db = tmp_path / "w.duckdb"
    with connect(db) as outer:
        with connect(db, timeout_s=2) as inner:  # would deadlock on a non-reentrant lock
            inner.execute("SELECT 1").fetchone()
        outer.execute("SELECT 1").fetchone()
    with connect(db, timeout_s=2):  # released: a new writer gets in at once
        pass
