"""Each engine fault kind at its default magnitude: the steps.parquet signals inside its window vs
outside, in-process (no HTTP), printed as one JSON line per kind.

Closed loop: ``--users`` requests kept in flight; the fault runs from ``--start`` for ``--window`` s
of a ``--duration`` s run. comm.* kinds run with tp: 2 (gloo) and report per rank.
Run: ``python bench/fault_signal.py [--kinds penalty.slow_path memory.kv_pressure ...] [--model small]
[--device cuda]`` (scripts/gpu-check.sh runs the single-rank kinds on a GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import dataclass

import pyarrow.parquet as pq

from engine.config import EngineConfig
from engine.faults import ENGINE_KINDS
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

SIGNALS = (
    "step_ms",
    "schedule_ms",
    "forward_ms",
    "penalty_ms",
    "sample_ms",
    "comm_ms",
    "page_faults",
    "kv_blocks_used",
    "kv_blocks_total",
    "prefill_tokens",
)


@dataclass(frozen=True)
class FaultRun:
    """How each kind is run: the engine's model and device, the load, and the fault's window."""

    model: str = "small"
    device: str = "cpu"
    users: int = 16  # requests kept in flight
    duration: float = 9.0  # s of load
    start: float = 3.0  # s from arming to the window
    window: float = 3.0  # s the fault lasts


def run_kind(kind: str, run: FaultRun) -> dict:
    tp = 2 if kind.startswith("comm.") else 1
    run_dir = tempfile.mkdtemp(prefix="spikelens-fault-")
    eng = LLMEngine(
        EngineConfig(model=run.model, tp=tp, max_num_seqs=run.users, device=run.device),
        run_dir=run_dir,
        faults=[{"kind": kind, "start_s": run.start, "duration_s": run.window}],
    )
    users, duration = run.users, run.duration
    params = SamplingParams(temperature=1.0, frequency_penalty=0.5, max_tokens=64, ignore_eos=True)
    # warm up before arming: the first steps pay lazy init (on CUDA, seconds of kernel builds),
    # which would otherwise be the "outside" steps of the first kind run
    for i in range(2):
        eng.add_request(f"warm{i}", list(range(10, 74)), params)
    while eng.scheduler.has_unfinished():
        eng.step()
    t0 = time.time_ns()
    eng.arm_faults(t0)
    n = 0
    try:
        while time.time_ns() - t0 < duration * 1e9:
            while len(eng.scheduler.running) + len(eng.scheduler.waiting) < users:
                eng.add_request(f"r{n}", [(n * 31 + j) % 30000 + 10 for j in range(64)], params)
                n += 1
            eng.step()
    finally:
        eng.close()
    w = pq.read_table(f"{run_dir}/faults.parquet").to_pylist()[0]
    steps = pq.read_table(f"{run_dir}/steps.parquet").to_pylist()
    r0 = {r["step"]: r for r in steps if r["rank"] == 0}
    out = {
        "kind": kind,
        "model": run.model,
        "device": run.device,
        "tp": tp,
        "users": users,
        "params": json.loads(w["params"]),
        "window_s": round((w["start_ns"] and (w["end_ns"] - w["start_ns"])) / 1e9, 2),
    }
    for rank in sorted({r["rank"] for r in steps}):
        for where in ("outside", "inside"):
            rows = []
            for r in steps:
                if r["rank"] != rank or r["start_ns"] < t0:
                    continue
                s0 = r0[r["step"]]
                inside = w["start_ns"] <= s0["start_ns"] and s0["end_ns"] <= w["end_ns"]
                touches = s0["start_ns"] <= w["end_ns"] and w["start_ns"] <= s0["end_ns"]
                if (where == "inside" and inside) or (where == "outside" and not touches):
                    rows.append(dict(r, step_ms=(r["end_ns"] - r["start_ns"]) / 1e6))
            summary = {"steps": len(rows), "preempted": sum(r["preempted"] for r in rows)}
            for k in SIGNALS:
                xs = [r[k] for r in rows if r[k] is not None]
                summary[f"{k}_p50"] = round(statistics.median(xs), 2) if xs else None
            xs = sorted(r["step_ms"] for r in rows)
            summary["step_ms_p99"] = (
                round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 2) if xs else None
            )
            out[f"rank{rank}_{where}"] = summary
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kinds", nargs="+", default=sorted(k for k in ENGINE_KINDS if k != "memory.gc_storm")
    )
    ap.add_argument("--model", default="small")
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--duration", type=float, default=9.0)
    ap.add_argument("--start", type=float, default=3.0)
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = ap.parse_args()
    run = FaultRun(a.model, a.device, a.users, a.duration, a.start, a.window)
    for kind in a.kinds:
        print(json.dumps(run_kind(kind, run)), flush=True)


if __name__ == "__main__":
    main()
