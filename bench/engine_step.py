"""Decode-step cost of the engine per preset and batch size, in-process (no HTTP), printed as JSON.

For each batch size B: B requests with 64-token prompts are prefilled, then ``--steps`` decode
steps are timed; reports p50/p99 of step wall time and the mean of each stage from the step trace.
On ``--device cuda`` a step's wall time ends at its one host-device sync (the sampled ids copied to
the host); ``--sampler auto triton`` measures the engine's choice (the penalty kernel, then torch's
draw) beside both Triton kernels, at each batch size in turn.
Run: ``python bench/engine_step.py [--model small] [--batch 1 8 32] [--steps 50] [--device cpu]
[--sampler auto]``.
"""

from __future__ import annotations

import argparse
import json
import statistics

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling import Sampler
from engine.sampling_params import SamplingParams


def bench(
    model: str, batch: int, steps: int, threads: int, device: str = "cpu", sampler: str = "auto"
) -> dict:
    eng = LLMEngine(
        EngineConfig(model=model, max_num_seqs=max(batch, 1), threads=threads, device=device)
    )
    eng.sampler = Sampler(sampler)
    params = SamplingParams(
        temperature=1.0, frequency_penalty=0.5, max_tokens=steps + 2, ignore_eos=True
    )
    for i in range(batch):
        eng.add_request(f"r{i}", [(i * 97 + j) % 30000 + 10 for j in range(64)], params)
    eng.step()  # prefill
    for _ in range(steps):
        eng.step()
    rows = eng.telemetry.steps.buffer.to_table().to_pylist()[1:]
    eng.telemetry.close()
    wall = sorted((r["end_ns"] - r["start_ns"]) / 1e6 for r in rows)
    mean = lambda k: round(statistics.fmean(r[k] for r in rows), 3)  # noqa: E731
    return {
        "model": model,
        "device": str(eng.device),
        "sampler": sampler,
        "batch": batch,
        "steps": len(rows),
        "threads": threads,
        "step_ms_p50": round(wall[len(wall) // 2], 3),
        "step_ms_p99": round(wall[min(len(wall) - 1, int(len(wall) * 0.99))], 3),
        "schedule_ms": mean("schedule_ms"),
        "forward_ms": mean("forward_ms"),
        "penalty_ms": mean("penalty_ms"),
        "sample_ms": mean("sample_ms"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--sampler", nargs="+", default=["auto"], choices=["auto", "torch", "triton"])
    a = ap.parse_args()
    for b in a.batch:
        for sampler in a.sampler:
            row = bench(a.model, b, a.steps, a.threads, a.device, sampler)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
