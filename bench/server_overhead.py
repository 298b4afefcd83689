"""CPU cost of the HTTP/SSE layer per streamed token, next to the engine's, as JSON.

The server process has two busy threads: the event loop (HTTP parsing, detokenization, SSE chunks)
and the engine thread (steps). This bench streams ``--requests`` concurrent greedy completions of
``--output-tokens`` tokens (repeated until ~2k tokens) through ``python -m engine serve`` and reads each thread's CPU time from
``/proc/<pid>/task/*/stat`` before and after, so the figures are CPU-µs per token — far less sensitive
to other load on a shared machine than wall-clock throughput (also reported, with the load average).

Run: ``python bench/server_overhead.py [--model small] [--concurrency 1 32] [--output-tokens 128]`` (Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import httpx

from engine.server.launch import EngineProcess


def thread_cpu_s(pid: int) -> dict[str, float]:
    """thread name → user+system CPU seconds (threads of the same name summed)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        name = "event-loop" if int(tid) == pid else stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out


async def stream_batch(url: str, concurrency: int, output_tokens: int) -> None:
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one(i: int):
            body = {
                "prompt": [10 + i + j for j in range(64)],
                "max_tokens": output_tokens,
                "temperature": 0,
                "ignore_eos": True,
                "stream": True,
            }
            async with client.stream("POST", "/v1/completions", json=body) as r:
                async for _ in r.aiter_bytes():
                    pass

        await asyncio.gather(*(one(i) for i in range(concurrency)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--output-tokens", type=int, default=128)
    a = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        config = {
            "engine": {"model": a.model, "max_num_seqs": max(a.concurrency), "kv_blocks": 2048}
        }
        with EngineProcess(config, tmp) as proc:
            asyncio.run(stream_batch(proc.url, 1, 4))  # warm-up
            for c in a.concurrency:
                # /proc counts CPU in 10 ms ticks: stream at least ~2k tokens per figure.
                rounds = max(1, 2048 // (c * a.output_tokens))
                before = thread_cpu_s(proc.proc.pid)
                t0 = time.perf_counter()
                for _ in range(rounds):
                    asyncio.run(stream_batch(proc.url, c, a.output_tokens))
                wall = time.perf_counter() - t0
                after = thread_cpu_s(proc.proc.pid)
                tokens = rounds * c * a.output_tokens
                cpu_us = {
                    k: round((after[k] - before.get(k, 0.0)) / tokens * 1e6, 1)
                    for k in after
                    if after[k] - before.get(k, 0.0) > 0
                }
                loop_us, engine_us = cpu_us.get("event-loop", 0.0), cpu_us.get("engine-step", 0.0)
                results.append(
                    {
                        "concurrency": c,
                        "tokens": tokens,
                        "tok_s": round(tokens / wall, 1),
                        "event_loop_cpu_us_per_token": loop_us,
                        "engine_cpu_us_per_token": engine_us,
                        "server_share_of_cpu": round(loop_us / (loop_us + engine_us), 3)
                        if loop_us + engine_us
                        else None,
                        "cpu_us_per_token_by_thread": cpu_us,
                    }
                )
    print(
        json.dumps(
            {
                "bench": "server_overhead",
                "model": a.model,
                "output_tokens": a.output_tokens,
                "loadavg_1m": round(os.getloadavg()[0], 2),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
