"""bench/decode.py end to end on the tiny preset: both sides on the named device, the same greedy
tokens, and the figures it prints consistent with each other."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Timed against their fault windows, and the hog test takes a CPU: `make test-fast` runs the
# "cpu_timing" group in one xdist worker, one test at a time (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("cpu_timing")

DECODE = Path(__file__).resolve().parents[2] / "bench" / "decode.py"


def test_decode_runs_both_sides_on_the_cpu_and_they_agree():
    pytest.importorskip("transformers")
    done = subprocess.run(
        [sys.executable, str(DECODE), "--preset", "tiny", "--concurrency", "2"]
        + ["--output-tokens", "4", "--repeats", "1", "--workload", "uniform", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=DECODE.parents[1],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out["device"], out["device_name"]) == ("cpu", None)
    (row,) = out["results"]
    assert (row["concurrency"], row["output_tokens"], row["greedy_match"]) == (2, 8, 1.0)
    assert row["ratio"] == pytest.approx(row["engine_tok_s"] / row["hf_tok_s"], rel=0.02)
