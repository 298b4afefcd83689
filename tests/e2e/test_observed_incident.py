"""`spikelens incident --prometheus` for real: our engine serves, a real Prometheus (Debian's)
scrapes its /metrics every second, Locust drives it through `spikelens run` (`target:`) with a 3x
load burst, and then the incident is explained from Prometheus alone: no run directory, no
client samples. Bad input is refused in one line before any work."""

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from engine.server.launch import free_port
from tests.support.engine_cli import SPIKELENS, engine_env, wait_healthy
from tests.support.prometheus_server import PrometheusServer, prometheus_binary

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
BURST = (20.0, 30.0)  # the scenario's load.burst, seconds from load start
TOLERANCE_S = 5.0


def _cli(args, home: Path, timeout=600) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    if prometheus_binary() is None:
        pytest.skip("Debian prometheus not installed (scripts/setup-prometheus.sh)")
    root = tmp_path_factory.mktemp("observed")
    port = free_port()
    engine = subprocess.Popen(
        [SPIKELENS, "engine", "--model", "small", "--port", str(port), "--max-num-seqs", "32"],
        env=engine_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    prom = PrometheusServer(root, {"engine": f"127.0.0.1:{port}"})
    try:
        wait_healthy(engine, f"http://127.0.0.1:{port}")
        prom.start()
        prom.scraped("engine")
        scenario = root / "burst.yaml"
        scenario.write_text(
            (HERE / "scenarios" / "observed-burst.yaml")
            .read_text()
            .replace("TARGET_URL", f"http://127.0.0.1:{port}")
        )
        load = _cli(["run", str(scenario)], root / "load-home")
        assert load.returncode == 0, load.stderr[-3000:]
        run_id = Path(load.stdout.strip().splitlines()[-1]).parent.name
        manifest = json.loads((root / "load-home" / "runs" / run_id / "run.json").read_text())
        start_s = manifest["load_started_ns"] / 1e9
        end_s = start_s + manifest["duration_s"]
        proc = _cli(
            [
                "incident",
                "--prometheus",
                prom.url,
                "--from",
                f"{start_s:.3f}",
                "--to",
                f"{end_s:.3f}",
                "--step",
                "1",
            ],
            root / "home",
        )
        yield {"proc": proc, "home": root / "home", "prom": prom, "window": (start_s, end_s)}
    finally:
        prom.stop()
        os.killpg(engine.pid, 15)
        engine.wait(60)


def test_the_burst_is_found_from_prometheus_alone_and_named_load(observed):
    proc = observed["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = Path(proc.stdout.strip().splitlines()[-1])
    run_id = report.parent.name
    assert "-observed-" in run_id and report.exists()
    db = duckdb.connect(str(observed["home"] / "warehouse.duckdb"), read_only=True)
    try:
        assert db.execute(
            "SELECT count(*) FROM requests WHERE run_id = ?", [run_id]
        ).fetchone() == (0,)
        spikes = db.execute(
            "SELECT spike_id, start_s, end_s, metric, top_cause FROM spikes"
            " WHERE run_id = ? AND NOT suppressed",
            [run_id],
        ).fetchall()
        window = db.execute("SELECT window_s FROM analyses WHERE run_id = ?", [run_id]).fetchone()
    finally:
        db.close()
    assert window == (1.0,)
    lo, hi = BURST
    during = [s for s in spikes if s[1] <= hi + TOLERANCE_S and s[2] >= lo - TOLERANCE_S]
    assert during, f"no spike near the burst {lo}-{hi} s: {spikes}"
    assert any(s[4] == "load" for s in during), spikes
    entry = json.loads((report.parent / "report.json").read_text())
    assert entry["run_id"] == run_id


def test_bad_input_is_one_line_before_any_work(observed, tmp_path):
    start_s, end_s = observed["window"]
    url = observed["prom"].url
    cases = [
        (
            ["--from", "2001-01-01T00:00:00Z", "--to", "2001-01-01T00:10:00Z"],
            "nothing in Prometheus",
        ),
        (["--from", f"{end_s}", "--to", f"{start_s}"], "--to must be after --from"),
        (["--from", f"{start_s}", "--to", f"{end_s}", "--step", "30"], "too coarse"),
        (["--from", f"{start_s}", "--to", f"{end_s}", "--match", '{job="nope"}'], "--match"),
    ]
    for args, message in cases:
        proc = _cli(["incident", "--prometheus", url, "--step", "1", *args], tmp_path / "home")
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr
    free = f"http://127.0.0.1:{free_port()}"
    proc = _cli(
        [
            "incident",
            "--prometheus",
            free,
            "--from",
            f"{start_s}",
            "--to",
            f"{end_s}",
            "--step",
            "1",
        ],
        tmp_path / "home",
    )
    assert proc.returncode == 2 and "cannot reach Prometheus" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "home" / "runs").exists() or not any(
        (tmp_path / "home" / "runs").iterdir()
    )
