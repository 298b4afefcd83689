"""warehouse.ingest under kill -9: a process killed mid-transaction leaves the earlier state."""

import os
import signal
import subprocess
import sys
import textwrap

from tests.support.runbuilder import SimSpec, write_run
from warehouse.db import connect
from warehouse.ingest import ingest_run

# Ingest in a child that stops (and announces it) after the DELETE and the first file's INSERT,
# inside the open transaction; the parent kills it there with SIGKILL.
CHILD = textwrap.dedent("""
    import sys, time
    import warehouse.ingest as ingest
    real = ingest._insert_select
    calls = []
    def slow(*args):
        calls.append(1)
        if len(calls) == 2:
            print("in-transaction", flush=True)
            time.sleep(120)
        return real(*args)
    ingest._insert_select = slow
    ingest.ingest_run(sys.argv[1], sys.argv[2])
""")


def _counts(db_path, run_id):
    conn = connect(db_path)
    try:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchone()[0]
            for t in ("runs", "requests", "tokens", "steps", "gc")
        }
    finally:
        conn.close()


def test_kill_9_mid_ingest_keeps_earlier_state_and_rerun_completes(tmp_path):
    db_path = tmp_path / "w.duckdb"
    old = write_run(tmp_path / "old", SimSpec(run_id="run-k", duration_s=6.0, seed=1))
    ingest_run(db_path, old)
    before = _counts(db_path, "run-k")
    new = write_run(tmp_path / "new", SimSpec(run_id="run-k", duration_s=12.0, seed=2))

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path), str(new)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "in-transaction"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL

    assert _counts(db_path, "run-k") == before  # nothing of the killed ingest is visible
    after = ingest_run(db_path, new)  # and running it again completes
    assert _counts(db_path, "run-k") == {
        t: after[t] for t in ("runs", "requests", "tokens", "steps", "gc")
    }
    assert after["tokens"] > before["tokens"]
