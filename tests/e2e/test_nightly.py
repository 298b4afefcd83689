"""Nightly regression for real: two clean nightlies agree; turning on penalty.slow_path
against that clean baseline is flagged as a regression, and the CLI exits 1. Thresholds sized for
a shared CI box (nightly-*/config.yaml).

Real CLI → Prefect flow → engine + Locust subprocesses → DuckDB → bootstrap verdicts.
"""

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent


def nightly(home: Path, config: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", "nightly", "--config-dir", str(HERE / config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def verdicts(home: Path) -> list[dict]:
    db = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    rows = db.execute("""SELECT v.run_id, v.metric, v.verdict, len(v.baseline_runs) AS n_base, v.run_noise
                         FROM nightly_verdicts v JOIN runs r USING (run_id)
                         ORDER BY r.started_ns, v.metric""").fetchall()
    db.close()
    return [dict(zip(("run_id", "metric", "verdict", "n_base", "run_noise"), r)) for r in rows]


def test_clean_nightlies_agree_and_the_slow_path_regresses(tmp_path):
    first = nightly(tmp_path, "nightly-clean")
    assert first.returncode == 0, first.stderr[-3000:]
    second = nightly(tmp_path, "nightly-clean")
    assert second.returncode == 0, second.stderr[-3000:]
    rows = verdicts(tmp_path)
    runs = list(dict.fromkeys(r["run_id"] for r in rows))
    assert len(runs) == 2
    assert {r["verdict"] for r in rows if r["run_id"] == runs[0]} == {
        "insufficient"
    }  # no baseline yet
    clean = [r for r in rows if r["run_id"] == runs[1]]
    assert all(r["n_base"] == 1 and r["run_noise"] is None for r in clean)  # one run: no spread yet
    assert not [r for r in clean if r["verdict"] == "regressed"], clean

    slow = nightly(tmp_path, "nightly-slow")
    assert slow.returncode == 1, slow.stderr[-3000:]
    assert "regressed" in slow.stderr
    rows = verdicts(tmp_path)
    last = [r for r in rows if r["run_id"] not in runs]
    regressed = {r["metric"] for r in last if r["verdict"] == "regressed"}
    assert all(r["n_base"] == 2 for r in last)  # both clean runs are the baseline
    assert {"itl_p50", "e2e_p50"} <= regressed, last
    itl = next(r for r in last if r["metric"] == "itl_p50")
    assert itl["run_noise"] is not None  # two clean runs: their spread is known
    page = Path(slow.stdout.strip().splitlines()[-1])
    assert page.name == "index.html" and "regressed" in page.read_text()
