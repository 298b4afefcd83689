"""Accumulating a penalty 1000 times in fp32, fp16 and bf16 vs the engine's fp32 path.

The experiment: an engine that keeps penalized logits and subtracts the frequency penalty f once per
occurrence, in the model's dtype, computes x_n = round(x_{n-1} - f). The exact value is x0 - n f.
Low precision loses the small decrement against a large logit (bf16 has 8 bits of mantissa: at
|x| = 10 its spacing is 0.0625, so x - 0.01 rounds back to x and the penalty never takes effect).
For each dtype and f this prints the error after 1000 steps, the largest error, the first step whose
error exceeds `--tolerance`, and the step at which x crosses the threshold x0 - f * `--cross-at`
(exact: that step; `null`: never).

The engine's path (engine.sampling.penalties.apply_frequency_presence_penalties) instead keeps an
int32 count and recomputes x0 - f * count in fp32 from the fresh logit every step (bf16/fp16 model
logits are promoted first), so its error is one fp32 rounding at every step: it does not drift.

Run: ``python bench/precision.py [--x0 10] [--penalties 0.01 0.1 0.5] [--steps 1000]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json

import torch

from engine.sampling.penalties import apply_frequency_presence_penalties

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def summarize(
    values: list[float], x0: float, penalty: float, tolerance: float, cross_at: int
) -> dict:
    """Error figures of a trajectory values[n-1] = value after n penalties (n = 1..steps)."""
    errors = [abs(v - (x0 - penalty * n)) for n, v in enumerate(values, start=1)]
    threshold = x0 - penalty * cross_at
    return {
        "final_value": values[-1],
        "exact_final_value": x0 - penalty * len(values),
        "final_abs_error": errors[-1],
        "max_abs_error": max(errors),
        "first_step_error_above_tolerance": next(
            (n for n, e in enumerate(errors, 1) if e > tolerance), None
        ),
        "crosses_threshold_at_step": next(
            (n for n, v in enumerate(values, 1) if v <= threshold), None
        ),
    }


def accumulated(dtype: torch.dtype, x0: float, penalty: float, steps: int) -> list[float]:
    """x_n = dtype(x_{n-1} - f): the penalty accumulated into stored logits of `dtype`."""
    x = torch.tensor([x0], dtype=dtype)
    f = torch.tensor([penalty], dtype=dtype)
    out = []
    for _ in range(steps):
        x = x - f
        out.append(float(x))
    return out


def engine_path(model_dtype: torch.dtype, x0: float, penalty: float, steps: int) -> list[float]:
    """The engine: fresh model logit (in the model dtype) -> fp32, minus f * int32 count, every step."""
    logit = torch.tensor([[x0]], dtype=model_dtype).float()
    frequency = torch.tensor([penalty], dtype=torch.float32)
    presence = torch.zeros(1)
    return [
        float(
            apply_frequency_presence_penalties(
                logit, torch.tensor([[n]], dtype=torch.int32), frequency, presence
            )
        )
        for n in range(1, steps + 1)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--x0",
        type=float,
        default=10.0,
        help="starting logit (exactly representable in all dtypes)",
    )
    parser.add_argument("--penalties", type=float, nargs="+", default=[0.01, 0.1, 0.5])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--cross-at", type=int, default=500, help="threshold = x0 - f * this")
    args = parser.parse_args()
    results = []
    for penalty in args.penalties:
        row = {"penalty": penalty, "accumulated": {}, "engine_fp32_path": {}}
        for name, dtype in DTYPES.items():
            row["accumulated"][name] = summarize(
                accumulated(dtype, args.x0, penalty, args.steps),
                args.x0,
                penalty,
                args.tolerance,
                args.cross_at,
            )
            row["engine_fp32_path"][f"model_{name}"] = summarize(
                engine_path(dtype, args.x0, penalty, args.steps),
                args.x0,
                penalty,
                args.tolerance,
                args.cross_at,
            )
        results.append(row)
    print(
        json.dumps(
            {
                "bench": "precision",
                "x0": args.x0,
                "steps": args.steps,
                "tolerance": args.tolerance,
                "threshold_step_exact": args.cross_at,
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
