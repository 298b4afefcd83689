"""Effect of ``memory.gc_storm`` on the engine, in-process (no HTTP), printed as JSON.

Keeps ``--users`` requests running (a finished one is replaced at once, like closed-loop users) for
``--duration`` seconds with the storm from ``--start`` for ``--window`` seconds, then compares the
step wall time (≈ inter-token latency: one token per request per step) and the GC pauses inside
the recorded fault window with the rest of the run.
Run: ``python bench/gc_storm.py [--model small] [--users 16] [--params '{"ballast_objects": 400000}']``.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small")
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--duration", type=float, default=12.0)
    ap.add_argument("--start", type=float, default=4.0)
    ap.add_argument("--window", type=float, default=4.0)
    ap.add_argument("--params", default="{}", help="gc_storm params as JSON (defaults otherwise)")
    a = ap.parse_args()
    fault = {
        "kind": "memory.gc_storm",
        "start_s": a.start,
        "duration_s": a.window,
        "params": json.loads(a.params),
    }
    eng = LLMEngine(EngineConfig(model=a.model, max_num_seqs=a.users), faults=[fault])
    params = SamplingParams(temperature=1.0, frequency_penalty=0.5, max_tokens=64, ignore_eos=True)
    gc.collect()
    t0 = time.time_ns()
    eng.arm_faults(t0)
    n = 0
    while time.time_ns() - t0 < a.duration * 1e9:
        while len(eng.scheduler.running) + len(eng.scheduler.waiting) < a.users:
            eng.add_request(f"r{n}", [(n * 31 + j) % 30000 + 10 for j in range(32)], params)
            n += 1
        eng.step()
    eng.faults.shutdown(eng)
    win = eng.faults.records()[0]
    ws, we = win["start_ns"], win["end_ns"]
    steps = [
        r
        for r in eng.telemetry.steps.buffer.to_table().to_pylist()
        if r["decode_tokens"] and r["start_ns"] >= t0
    ]
    pauses = [p for p in eng.telemetry.gc.buffer.to_table().to_pylist() if p["start_ns"] >= t0]
    eng.telemetry.close()

    def summary(inside: bool) -> dict:
        st = [
            (r["end_ns"] - r["start_ns"]) / 1e6
            for r in steps
            if (ws <= r["start_ns"] <= we) == inside
        ]
        gp = [p for p in pauses if (ws <= p["start_ns"] <= we) == inside]
        secs = (we - ws) / 1e9 if inside else a.duration - (we - ws) / 1e9
        g2 = [(p["end_ns"] - p["start_ns"]) / 1e6 for p in gp if p["generation"] == 2]
        return {
            "steps": len(st),
            "step_ms_p50": pct(st, 0.5),
            "step_ms_p99": pct(st, 0.99),
            "gc_per_s": round(len(gp) / secs, 1),
            "gen2_per_s": round(len(g2) / secs, 2),
            "gen2_pause_ms_p50": pct(g2, 0.5),
            "gen2_pause_ms_max": pct(g2, 1.0),
            "gc_ms_per_s": round(sum((p["end_ns"] - p["start_ns"]) / 1e6 for p in gp) / secs, 1),
        }

    print(
        json.dumps(
            {
                "model": a.model,
                "users": a.users,
                "params": json.loads(win["params"]),
                "window_s": round((we - ws) / 1e9, 2),
                "outside": summary(False),
                "inside": summary(True),
            }
        )
    )


if __name__ == "__main__":
    main()
