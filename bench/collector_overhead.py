"""What the collectors add to the engine's inter-token latency, as JSON: same load, with and without.

Two engine servers run side by side, one plain and one with the GC hook in its processes; the
same closed-loop streaming load (`--users` concurrent completions of `--output-tokens` tokens,
one after another for `--round-s` seconds) goes to three sides in turn, alternating for
`--rounds` rounds: `without` (plain engine), `hook_only` (the GC hook, nothing sampling) and
`with` (the GC hook plus py-spy at 100 Hz --idle --nonblocking, the /proc sampler at 10 Hz and
the /metrics scraper at 4 Hz, run in their own process as a flow runs them beside Locust, so
they do not share the client's interpreter). Alternating rounds spread the drift of a shared
machine over the sides. ITL = each gap between consecutive
content chunks of a request, stamped by the client when it reads them (the same client for both
sides). Also reported: the collectors' own CPU (their process and py-spy) per second of load.

Run: ``python bench/collector_overhead.py [--model small] [--users 8] [--rounds 3] [--round-s 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from collectors.gc_hook import hook_env
from engine.server.launch import EngineProcess


async def closed_loop(
    url: str, users: int, output_tokens: int, seconds: float
) -> tuple[list[float], int]:
    """ITL gaps in ms and tokens received, `users` streams back to back for `seconds`."""
    gaps: list[float] = []
    tokens = 0
    deadline = time.perf_counter() + seconds

    async def user(client: httpx.AsyncClient, u: int) -> None:
        nonlocal tokens
        k = 0
        while time.perf_counter() < deadline:
            body = {
                "prompt": [10 + (u * 31 + k * 7 + j) % 400 for j in range(48)],
                "max_tokens": output_tokens,
                "temperature": 0.8,
                "frequency_penalty": 0.3,
                "ignore_eos": True,
                "stream": True,
            }
            last = None
            async with client.stream("POST", "/v1/completions", json=body) as r:
                async for line in r.aiter_lines():
                    if not line.startswith("data: {"):
                        continue
                    now = time.perf_counter_ns()
                    if last is not None:
                        gaps.append((now - last) / 1e6)
                    last = now
                    tokens += 1
            k += 1

    limits = httpx.Limits(max_connections=users)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        await asyncio.gather(*(user(client, u) for u in range(users)))
    return gaps, tokens


_COLLECTOR_PROCESS = """
import os, signal, sys
from collectors import CollectorSet
signal.signal(signal.SIGTERM, lambda *a: None)
collectors = CollectorSet(sys.argv[1], int(sys.argv[2]), "engine", sys.argv[3]).start()
print("started", flush=True)
signal.sigwait({signal.SIGTERM})
status = collectors.stop()
t = os.times()   # py-spy is a reaped child by now: its CPU is in children_*
print("cpu_s", t.user + t.system + t.children_user + t.children_system, flush=True)
"""


def start_collectors(run_dir: Path, pid: int, metrics_url: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _COLLECTOR_PROCESS, str(run_dir), str(pid), metrics_url],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "started"
    return proc


def _summary(gaps: list[float], tokens: int, seconds: float) -> dict:
    x = np.array(gaps)
    return {
        "itl_p50_ms": round(float(np.percentile(x, 50)), 3),
        "itl_p99_ms": round(float(np.percentile(x, 99)), 3),
        "itl_n": len(gaps),
        "tokens_per_s": round(tokens / seconds, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round-s", type=float, default=10.0)
    a = ap.parse_args()
    config = {"engine": {"model": a.model, "max_num_seqs": a.users, "kv_blocks": 1024}}
    sides = ("without", "hook_only", "with")
    gaps: dict[str, list[float]] = {side: [] for side in sides}
    tokens = {side: 0 for side in sides}
    rounds = []
    collector_cpu_s = collector_wall_s = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        plain = EngineProcess(config, Path(tmp) / "plain").start()
        hooked_dir = Path(tmp) / "hooked"
        hooked = EngineProcess(
            config, hooked_dir, env_hook=lambda env: hook_env(hooked_dir / "collect", "engine", env)
        ).start()
        try:
            for proc in (plain, hooked):  # warm-up: first requests pay one-off costs
                asyncio.run(closed_loop(proc.url, a.users, 8, 2.0))
            for r in range(a.rounds):
                for side in sides:
                    proc = plain if side == "without" else hooked
                    collectors = (
                        start_collectors(
                            Path(tmp) / f"collect-{r}", proc.proc.pid, f"{proc.url}/metrics"
                        )
                        if side == "with"
                        else None
                    )
                    t0 = time.perf_counter()
                    g, n = asyncio.run(closed_loop(proc.url, a.users, a.output_tokens, a.round_s))
                    seconds = time.perf_counter() - t0
                    if collectors is not None:
                        collectors.terminate()
                        out = collectors.communicate(timeout=120)[0].split()
                        collector_cpu_s += float(out[out.index("cpu_s") + 1])
                        collector_wall_s += seconds
                    gaps[side] += g
                    tokens[side] += n
                    rounds.append({"round": r, "side": side, **_summary(g, n, seconds)})
        finally:
            plain.stop()
            hooked.stop()
    total_s = a.rounds * a.round_s
    out = {side: _summary(gaps[side], tokens[side], total_s) for side in gaps}
    ratios = {
        f"{side}_{key}_ratio": round(out[side][key] / out["without"][key], 3)
        for side in ("hook_only", "with")
        for key in ("itl_p50_ms", "itl_p99_ms", "tokens_per_s")
    }
    print(
        json.dumps(
            {
                "bench": "collector_overhead",
                "model": a.model,
                "users": a.users,
                "output_tokens": a.output_tokens,
                "rounds": a.rounds,
                "round_s": a.round_s,
                "loadavg_1m": round(os.getloadavg()[0], 2),
                **out,
                **ratios,
                # CPU of the collector process and py-spy per second of load (it competes for the cores)
                "collectors_cpu_s_per_s": round(collector_cpu_s / collector_wall_s, 3)
                if collector_wall_s
                else None,
                "per_round": rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
