"""Operations: a flow killed mid-run leaves no orphan process, and what it collected is still
ingested and reported, with the failure written down.

Real CLI, Prefect, engine and Locust; the flow process gets SIGTERM (what `kill` and most
supervisors send) while Locust is driving the engine.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from tests.support.slow_e2e import slow_e2e
from tests.support.terminal import terminal_like

pytestmark = pytest.mark.e2e
# the embedded default: a kill must leave no ephemeral Prefect server behind either
EMBEDDED_PREFECT = True

HERE = Path(__file__).parent


def _wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _cmdline(p: psutil.Process) -> list[str]:
    """A process's command line; [] for one that already exited (e.g. the NVML sampler, which
    ends at once without a GPU and is reaped when the flow stops it)."""
    try:
        return p.cmdline()
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return []


def _collected_and_reported(tmp_path: Path, run_dir: Path) -> None:
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "failed" and any("interrupted" in e for e in manifest["errors"])
    db = duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
    rows = db.execute("SELECT count(*) FROM requests WHERE run_id = ?", [run_dir.name]).fetchone()[
        0
    ]
    status = db.execute("SELECT status FROM runs WHERE run_id = ?", [run_dir.name]).fetchone()[0]
    db.close()
    assert rows > 0 and status == "failed"
    report = tmp_path / "reports" / run_dir.name / "index.html"
    assert report.exists() and "interrupted" in report.read_text()


# who: the CLI process the user started, the supervised child that runs the flow, or the CLI's
# whole process group (what a terminal's Ctrl-C signals).
@pytest.mark.parametrize(
    "who,sig",
    [
        # opt-in: the CLI handles SIGTERM as it does the group's SIGINT (ctrl-c below)
        pytest.param("cli", signal.SIGTERM, marks=slow_e2e),
        ("flow", signal.SIGKILL),
        ("cli", signal.SIGKILL),
        ("group", signal.SIGINT),
    ],
    ids=["sigterm-cli", "sigkill-flow", "sigkill-cli", "ctrl-c"],
)
def test_killed_flow_leaves_no_orphans(tmp_path, who, sig):
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(tmp_path),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "run", str(HERE / "scenarios" / "steady-long.yaml")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=terminal_like,
    )
    try:
        run_dir = _wait_for(
            lambda: next(
                (
                    p
                    for p in (tmp_path / "runs").glob("*")
                    if (p / "loadgen" / "config.json").exists()
                ),
                None,
            ),
            180,
            "Locust to start",
        )
        time.sleep(4)  # past the 2 s warm-up: measured requests are in flight
        cli = psutil.Process(proc.pid)
        everyone = cli.children(recursive=True)
        names = " ".join(" ".join(_cmdline(c)) for c in everyone)
        assert "engine" in names and "locust" in names, names
        flow = next(c for c in cli.children() if "flows.cli" in " ".join(_cmdline(c)))
        if who == "group":
            os.killpg(proc.pid, sig)
        else:
            (cli if who == "cli" else flow).send_signal(sig)
        if who == "cli" and sig == signal.SIGKILL:
            proc.wait(30)
            psutil.wait_procs([flow], timeout=120)  # the orphaned flow tears down by itself
        else:
            proc.wait(120)
        _, alive = psutil.wait_procs(everyone, timeout=60)
        alive = [c for c in alive if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        assert not alive, [_cmdline(c) for c in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
    if who == "flow":
        assert proc.returncode == 128 + signal.SIGKILL
        return  # nothing runs in a SIGKILLed process: no orphans is the promise
    if sig != signal.SIGKILL:
        assert proc.returncode == 130, proc.stderr.read()[-3000:]
    _collected_and_reported(tmp_path, run_dir)
