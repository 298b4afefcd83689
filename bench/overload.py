"""Admission control under overload: latency of admitted requests with shedding vs without, as JSON.

The server runs the ``--model`` preset with ``--max-num-seqs`` running; ``--users`` closed-loop
clients (default 3x what the server holds: max_num_seqs + max_waiting) send streaming completions of
``--output-tokens`` tokens for ``--duration-s``. Run twice: with ``max_waiting`` (shed with 429) and
with no limit (queue everything). Reports, per run, requests completed and shed, output tokens/s, and
p50/p99 of TTFT and end-to-end latency of the completed requests (client-measured, wall clock). A
shed client waits ``--shed-backoff-s`` before its next request (like a client honouring a short
Retry-After), so shedding lowers the offered load instead of turning into a tight retry loop.

Run: ``python bench/overload.py [--model tiny] [--max-num-seqs 4] [--max-waiting 4] [--duration-s 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from engine.server.launch import EngineProcess


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


async def closed_loop(
    url: str, users: int, duration_s: float, output_tokens: int, backoff_s: float
) -> dict:
    ttft_ms, e2e_ms, shed, tokens = [], [], 0, 0
    deadline = time.perf_counter() + duration_s
    limits = httpx.Limits(max_connections=users, max_keepalive_connections=users)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def user(u: int):
            nonlocal shed, tokens
            i = 0
            while time.perf_counter() < deadline:
                body = {
                    "prompt": f"user {u} request {i}: tell me something",
                    "max_tokens": output_tokens,
                    "temperature": 0.8,
                    "ignore_eos": True,
                    "stream": True,
                }
                i += 1
                t0 = time.perf_counter()
                first = None
                async with client.stream("POST", "/v1/completions", json=body) as r:
                    if r.status_code == 429:
                        shed += 1
                        await r.aread()
                        await asyncio.sleep(backoff_s)
                        continue
                    r.raise_for_status()
                    async for line in r.aiter_lines():
                        if line.startswith("data: {") and first is None:
                            first = time.perf_counter()
                        if line.startswith("data: {"):
                            tokens += 1
                ttft_ms.append((first - t0) * 1e3)
                e2e_ms.append((time.perf_counter() - t0) * 1e3)

        t_start = time.perf_counter()
        await asyncio.gather(*(user(u) for u in range(users)))
        wall = time.perf_counter() - t_start
    return {
        "completed": len(e2e_ms),
        "shed": shed,
        "output_tok_s": round(tokens / wall, 1),
        "ttft_ms_p50": percentile(ttft_ms, 0.5),
        "ttft_ms_p99": percentile(ttft_ms, 0.99),
        "e2e_ms_p50": percentile(e2e_ms, 0.5),
        "e2e_ms_p99": percentile(e2e_ms, 0.99),
        "e2e_ms_mean": round(statistics.fmean(e2e_ms), 2) if e2e_ms else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--max-num-seqs", type=int, default=4)
    ap.add_argument("--max-waiting", type=int, default=4)
    ap.add_argument(
        "--users", type=int, default=None, help="default: 3 x (max_num_seqs + max_waiting)"
    )
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--shed-backoff-s", type=float, default=0.05)
    a = ap.parse_args()
    users = a.users or 3 * (a.max_num_seqs + a.max_waiting)
    engine = {
        "model": a.model,
        "max_num_seqs": a.max_num_seqs,
        "kv_blocks": 512,
        "max_model_len": 1024,
    }
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, max_waiting in (("shedding", a.max_waiting), ("unbounded", None)):
            with EngineProcess(
                {"engine": engine, "server": {"max_waiting": max_waiting}}, Path(tmp) / name
            ) as proc:
                runs[name] = asyncio.run(
                    closed_loop(proc.url, users, a.duration_s, a.output_tokens, a.shed_backoff_s)
                )
    print(
        json.dumps(
            {
                "bench": "overload",
                "model": a.model,
                "max_num_seqs": a.max_num_seqs,
                "max_waiting": a.max_waiting,
                "users": users,
                "output_tokens": a.output_tokens,
                "duration_s": a.duration_s,
                "loadavg_1m": round(os.getloadavg()[0], 2),
                "runs": runs,
            }
        )
    )


if __name__ == "__main__":
    main()
