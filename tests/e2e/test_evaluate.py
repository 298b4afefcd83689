"""`spikelens evaluate` for real on a small suite: a GC storm starting off the window grid, a
control, and a case of a fault kind that is not registered, which is skipped (not run) and listed.

The full suite (scenarios/eval/) is too long for CI; its figures are in the README.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent


def test_evaluate_scores_a_small_suite_against_ground_truth_and_peers(tmp_path):
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(tmp_path),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "evaluate", str(HERE / "eval-smoke")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = Path(proc.stdout.strip().splitlines()[-1])
    scores = json.loads((page.parent / "evaluation.json").read_text())
    assert scores["skipped"] == [
        {"scenario": "unregistered-kind.yaml", "unregistered_kinds": ["no.such_kind"]}
    ]
    assert scores["runs"] == 2 and scores["faults"] == 1
    assert scores["detection"]["tp"] >= 1
    assert scores["controls"]["runs"] == 1
    assert scores["attribution"]["confusion"]["memory"]["memory"] == 1, scores["per_run"]
    assert set(scores["peers"]) == {"baro", "nsigma", "circa", "random"}
    for method in ("baro", "nsigma", "circa"):
        peer = scores["peers"][method]
        assert peer["events"] == scores["detection"]["tp"] and peer["failures"] == 0
        assert peer["accuracy_interval"]["reps"] == 2000
    fa = scores["intervals"]["false_alarms_per_hour"]
    assert fa["method"] == "poisson-exact" and fa["high"] > 0
    assert scores["spikelens"]["ac_at_1"] == scores["spikelens"]["accuracy"]
    html = page.read_text()
    assert "baro" in html.lower() and "circa" in html.lower() and "memory" in html
