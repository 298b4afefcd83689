"""`spikelens evaluate` for real on a two-case suite: a GC storm and a control.

The full suite (scenarios/eval/, ~20 runs) is too long for CI; its figures are in the README.
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
    assert scores["runs"] == 2 and scores["faults"] == 1
    assert scores["detection"]["tp"] == 1 and scores["detection"]["fn"] == 0
    assert scores["controls"]["runs"] == 1
    assert scores["attribution"]["confusion"]["memory"]["memory"] == 1
    assert set(scores["peers"]) == {"baro", "nsigma", "random"}
    html = page.read_text()
    assert "baro" in html.lower() and "memory" in html
