"""A whole incident, for real: the CLI runs the Prefect flow, which starts the engine server and
Locust as subprocesses and writes a DuckDB file; the GC storm must be found and blamed on memory.

No part is mocked. One run serves every assertion: the session's GC-storm run on embedded Prefect,
as `make demo` runs it (tests/e2e/conftest.py), which test_confirm_e2e then confirms.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
TOLERANCE_S = 2.0


@pytest.fixture(scope="module")
def gc_storm_run(gc_storm_confirmed):
    """The session's GC-storm run (tests/e2e/conftest.py; `run --confirm` then replayed its
    spike, which test_confirm_e2e checks)."""
    proc, report = gc_storm_confirmed["proc"], gc_storm_confirmed["report"]
    assert report is not None and report.name == "index.html", proc.stderr[-4000:]
    home = gc_storm_confirmed["home"]
    db = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    yield {"home": home, "report": report, "run_id": report.parent.name, "db": db}
    db.close()


def fault_window(db, run_id):
    start, end = db.execute(
        """SELECT (f.start_ns - r.load_started_ns) / 1e9, (f.end_ns - r.load_started_ns) / 1e9
           FROM faults f JOIN runs r USING (run_id)
           WHERE run_id = ? AND f.kind = 'memory.gc_storm'""",
        [run_id],
    ).fetchone()
    return start, end


def test_spike_overlaps_the_injected_window_and_is_memory(gc_storm_run):
    db, run_id = gc_storm_run["db"], gc_storm_run["run_id"]
    f_start, f_end = fault_window(db, run_id)
    # the storm ends after its last collection, which on a loaded box can run ~1 s past the
    # scheduled end (2M ballast objects: 27.09 s seen in CI)
    assert 15 <= f_start <= 17 and 25 <= f_end <= 28, (f_start, f_end)
    spikes = db.execute(
        "SELECT spike_id, start_s, end_s, top_cause FROM spikes WHERE run_id = ?", [run_id]
    ).fetchall()
    assert spikes, "no spike found during a GC storm"
    inside = [s for s in spikes if s[1] <= f_end + TOLERANCE_S and s[2] >= f_start - TOLERANCE_S]
    assert inside, f"no spike overlaps {f_start:.1f}-{f_end:.1f} s: {spikes}"
    for spike_id, *_ in inside:
        share = db.execute(
            "SELECT share FROM attributions WHERE run_id = ? AND spike_id = ? AND cause = 'memory'",
            [run_id, spike_id],
        ).fetchone()
        assert share is not None and share[0] >= 0.5, (spike_id, share)


def test_the_storm_is_not_blamed_outside_its_window(gc_storm_run):
    """Outside the storm's window, no spike is blamed on memory.

    The box is shared, so a quiet baseline is not the test's to promise: in two CI runs
    (2026-12-03) the engine slowed for two seconds before the storm (its CPU fell to 460 of
    850 ms/s; in the other, ITL p99 97 vs 45 ms, a major spike), real spikes the storm did not
    cause. How often a quiet run alarms is the evaluation's controls' figure."""
    db, run_id = gc_storm_run["db"], gc_storm_run["run_id"]
    f_start, f_end = fault_window(db, run_id)
    spikes = db.execute(
        "SELECT start_s, end_s, metric, severity, top_cause, peak_ms, baseline_ms FROM spikes"
        " WHERE run_id = ? AND NOT suppressed",
        [run_id],
    ).fetchall()
    outside = [s for s in spikes if s[1] < f_start - TOLERANCE_S or s[0] > f_end + TOLERANCE_S]
    wrong = [s for s in outside if s[4] == "memory"]
    assert not wrong, f"spikes outside the fault window {f_start:.1f}-{f_end:.1f}: {outside}"


def test_every_request_locust_sent_is_in_the_warehouse(gc_storm_run):
    db, run_id = gc_storm_run["db"], gc_storm_run["run_id"]
    manifest = json.loads((gc_storm_run["home"] / "runs" / run_id / "run.json").read_text())
    sent = manifest["extra"]["locust"]["requests_sent"]
    rows = db.execute("SELECT count(*) FROM requests WHERE run_id = ?", [run_id]).fetchone()[0]
    assert sent > 50 and rows == sent, (sent, rows)
    # invalid only by the client's own health verdict (a fresh-clone CI run on 2 shared cores:
    # 3 of 127 first tokens merged, 2.4 % > 1 %); never by an error
    assert manifest["status"] in ("ok", "invalid") and manifest["errors"] == [], manifest
    # our engine shares every CPU: py-spy keeps the flow's priority, or a busy engine starves it
    assert manifest["extra"]["collectors"]["pyspy"]["nice"] == 0


def test_report_shows_the_spike_and_its_cause(gc_storm_run):
    html = gc_storm_run["report"].read_text()
    assert gc_storm_run["run_id"] in html
    assert "memory" in html and "<svg" in html


def test_real_reports_open_in_a_browser(gc_storm_run):
    """The real run's incident report and the index, from file:// and through the
    report server, in headless Chromium: no console errors, charts drawn, links resolve."""
    import shutil

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian chromium/chromedriver not installed (scripts/setup-browser.sh)")
    reports = gc_storm_run["home"] / "reports"
    assert (reports / "index.html").exists()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(HERE.parent / "templates" / "test_browser.py") + "::test_a_real_reports_folder",
        ],
        env={**os.environ, "SPIKELENS_REPORTS_DIR": str(reports)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:]


def test_collectors_saw_the_storm_from_outside_the_engine(gc_storm_run):
    """The GC hook, py-spy and the /proc sampler ran beside the engine; the memory attribution
    names the process and its GC ms/s."""
    db, run_id = gc_storm_run["db"], gc_storm_run["run_id"]
    roles = dict(
        db.execute(
            "SELECT role, count(*) FROM process_gc WHERE run_id = ? GROUP BY role", [run_id]
        ).fetchall()
    )
    assert roles.get("engine", 0) > 0, roles
    regions = {
        r
        for (r,) in db.execute(
            "SELECT DISTINCT region FROM process_stacks WHERE run_id = ?", [run_id]
        ).fetchall()
    }
    assert {"model_forward", "idle"} <= regions, regions
    assert (
        db.execute(
            "SELECT count(DISTINCT ts_ns) FROM process_cpu WHERE run_id = ?", [run_id]
        ).fetchone()[0]
        > 100
    )
    assert db.execute("SELECT count(*) FROM metrics WHERE run_id = ?", [run_id]).fetchone()[0] > 0
    value, baseline, note = db.execute(
        "SELECT value, baseline, note FROM evidence WHERE run_id = ? AND cause = 'memory' "
        "AND signal = 'gc_ms_per_s.process' ORDER BY spike_id LIMIT 1",
        [run_id],
    ).fetchone()
    # the baseline may hold storm windows the spike does not (the ITL spike can start late in it)
    assert value > 2 * max(baseline, 1.0) and note.startswith("engine (pid "), (
        value,
        baseline,
        note,
    )
    # the CPU steal over the load (collectors.cpu_steal): measured on a Linux box, a share
    steal = json.loads(
        db.execute(
            "SELECT json_extract(run_json, '$.extra.cpu_steal') FROM runs WHERE run_id = ?",
            [run_id],
        ).fetchone()[0]
    )
    assert steal["available"] and steal["scope"] == "engine", steal
    assert 0.0 <= steal["share"] <= 1.0 and 0.0 <= steal["worst_second_share"] <= 1.0
    assert steal["seconds"] > 20 and steal["cpus"] == sorted(os.sched_getaffinity(0))
    # ... and at the /proc sampler's ticks, per CPU the engine may use: what the host rule reads
    ticks, cpus, bad = db.execute(
        "SELECT count(DISTINCT ts_ns), list(DISTINCT cpu ORDER BY cpu), "
        "count(*) FILTER (WHERE steal_ns + idle_ns > total_ns) FROM cpu_ticks WHERE run_id = ?",
        [run_id],
    ).fetchone()
    assert ticks > 100 and cpus == steal["cpus"] and bad == 0, (ticks, cpus, bad)
