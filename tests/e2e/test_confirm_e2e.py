"""`spikelens confirm` for real: a short GC-storm run on spikelens' engine, then its spike's stretch
replayed as recorded and with GC off (confirmed, exit 0), and again with the verdict forced to
penalty (penalties off changes nothing a GC storm does: not confirmed, exit 1).

No part is mocked: each arm is a full run (engine, Locust, collectors, warehouse). K=1 keeps it
to five short runs (about 5 minutes on 2 cores).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.slow_e2e import slow_e2e

pytestmark = [pytest.mark.e2e, slow_e2e]  # 7 min: five runs of our engine

HERE = Path(__file__).parent


def spikelens(env, *args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def gc_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("state")
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        # Reuse the suite's Prefect database: a cold ephemeral server costs ~15 s more.
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }
    proc = spikelens(env, "run", str(HERE / "scenarios" / "gc-storm-short.yaml"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    run_id = Path(proc.stdout.strip().splitlines()[-1]).parent.name
    return {"home": home, "env": env, "run_id": run_id}


def confirm(gc_run, *extra):
    proc = spikelens(gc_run["env"], "confirm", gc_run["run_id"], "--repeats", "1", *extra)
    report = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    name = report.parent.name if report else "confirm-1"  # confirm-<spike>-<cause>
    result_file = gc_run["home"] / "runs" / gc_run["run_id"] / f"{name}.json"
    result = json.loads(result_file.read_text()) if result_file.is_file() else None
    print(json.dumps(result, indent=1)[:3000])  # the figures, for the record (-s)
    return proc, result, report


def test_gc_off_confirms_a_gc_storm_and_a_forced_penalty_verdict_is_not_confirmed(gc_run):
    proc, result, report = confirm(gc_run)
    assert result is not None, proc.stderr[-4000:]
    assert result["cause"] == "memory" and result["intervention"]["name"] == "gc_off"
    assert [a["arm"] for a in result["arms"]] == ["recorded", "removed"]
    assert result["arms"][0]["reproduced"], result["arms"]
    assert (result["verdict"], proc.returncode) == ("confirmed", 0), proc.stderr[-3000:]
    assert result["share"]["point"] >= 0.5
    assert report is not None and "confirmed" in report.read_text()

    proc, result, _ = confirm(gc_run, "--cause", "penalty")
    assert result is not None, proc.stderr[-4000:]
    assert result["cause"] == "penalty" and result["stored_cause"] == "memory"
    assert result["intervention"]["name"] == "penalties_off"
    assert (result["verdict"], proc.returncode) == ("not confirmed", 1), result["reason"]
