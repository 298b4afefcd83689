"""What `spikelens agent` beside an engine costs that engine's inter-token latency, as JSON.

Goal: the agent (with the GC hook it reads) adds at most 1 % to ITL p50.
Two engine servers run side by side (as `spikelens engine` serves them: `python -m engine
serve`, started by engine.server.launch.EngineProcess): `without` is plain; `with` has the GC
hook in its processes (collectors.gc_hook.hook_env, what `spikelens agent --print-env` prints)
and, for each of its rounds, `spikelens agent --pid ENGINE` beside it at the agent's defaults
(/proc every 1 s, py-spy at 10 Hz in 10-s segments, the GC files tailed every 1 s), started
before the round and stopped after it, so it never runs during a `without` round. The same
closed-loop streaming load (bench/collector_overhead.py's `closed_loop`: `--users` concurrent
completions of `--output-tokens` tokens, back to back for `--round-s` s) goes to the arms in
turn, A B A B …, `--repeats` times each: alternating spreads a shared machine's drift over both.
ITL = each gap between consecutive content chunks, stamped by the client. Also reported: the
agent's CPU during the load (its process and its py-spy segments; its start-up excluded) per
second of load, and what it served at the end of each `with` round (collectors up, GC pauses
seen, stack seconds).

Run: ``python bench/agent_overhead.py [--model small] [--users 8] [--repeats 3] [--round-s 20]``;
``--quick``: the tiny model, 4 users, 2 repeats of 6 s (under a minute on 2 cores; a 6-s round
ends before py-spy's first 10-s segment, so its sampling is paid but its figures are not read).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from collector_overhead import _summary, closed_loop  # bench/ is on sys.path: run as a script
from prometheus_client.parser import text_string_to_metric_families

from collectors.gc_hook import hook_env
from engine.server.launch import EngineProcess, free_port


def start_agent(pid: int, gc_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """`spikelens agent --pid PID` at its defaults; returns once its /metrics shows the engine."""
    port = free_port()
    cmd = [sys.executable, "-m", "flows.cli", "agent", "--pid", str(pid), "--port", str(port)]
    with open(log, "ab") as out:
        proc = subprocess.Popen([*cmd, "--gc-dir", str(gc_dir)], stderr=out, stdout=out)
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if f'process_cpu_seconds_total{{pid="{pid}"' in httpx.get(url, timeout=2).text:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the agent did not serve {url}: see {log}")


def served(url: str) -> dict:
    """What the agent serves, in short: collectors up, GC pauses counted, stack seconds."""
    out: dict = {"up": {}, "gc_pauses": 0, "stack_s": 0.0}
    text = httpx.get(url, timeout=5).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "spikelens_agent_collector_up":
                out["up"][s.labels["collector"]] = int(s.value)
            elif s.name == "spikelens_agent_gc_pause_seconds_count":
                out["gc_pauses"] += int(s.value)
            elif s.name == "spikelens_agent_stack_seconds_total":
                out["stack_s"] = round(out["stack_s"] + s.value, 2)
    return out


def agent_cpu_s(proc: subprocess.Popen) -> float:
    """CPU seconds so far of the agent, the py-spy segments it reaped and the one running."""
    agent = psutil.Process(proc.pid)
    t = agent.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in agent.children():
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.NoSuchProcess:
            pass
    return total


def stop_agent(proc: subprocess.Popen) -> None:
    """SIGTERM the agent (it stops its py-spy) and wait for it."""
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="rounds per arm (at least 2)")
    ap.add_argument("--round-s", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true", help="tiny model, 4 users, 2 × 6 s")
    a = ap.parse_args()
    if a.quick:
        a.model, a.users, a.repeats, a.round_s = "tiny", 4, 2, 6.0
    if a.repeats < 2:
        ap.error("--repeats must be at least 2 (the arms alternate)")
    return a


def run_arms(a: argparse.Namespace, tmp: Path) -> tuple[dict, dict, list, float]:
    """The alternating rounds: gaps and tokens per arm, per-round figures, agent CPU seconds."""
    config = {"engine": {"model": a.model, "max_num_seqs": a.users, "kv_blocks": 1024}}
    gc_dir = tmp / "gc"
    plain = EngineProcess(config, tmp / "plain").start()
    hooked = EngineProcess(
        config, tmp / "hooked", env_hook=lambda env: hook_env(gc_dir, "engine", env)
    ).start()
    gaps: dict[str, list[float]] = {"without": [], "with": []}
    tokens = {"without": 0, "with": 0}
    rounds, cpu_s = [], 0.0
    try:
        for proc in (plain, hooked):  # warm-up: first requests pay one-off costs
            asyncio.run(closed_loop(proc.url, a.users, 8, 2.0))
        for r in range(a.repeats):
            for arm, engine in (("without", plain), ("with", hooked)):
                agent = (
                    start_agent(engine.running().pid, gc_dir, tmp / "agent.log")
                    if arm == "with"
                    else None
                )
                cpu0 = agent_cpu_s(agent[0]) if agent else 0.0  # its start-up is not counted
                t0 = time.perf_counter()
                g, n = asyncio.run(closed_loop(engine.url, a.users, a.output_tokens, a.round_s))
                seconds = time.perf_counter() - t0
                row = {"round": r, "arm": arm, **_summary(g, n, seconds)}
                if agent is not None:
                    cpu_s += agent_cpu_s(agent[0]) - cpu0
                    row["agent"] = served(agent[1])
                    stop_agent(agent[0])
                gaps[arm] += g
                tokens[arm] += n
                rounds.append(row)
    finally:
        plain.stop()
        hooked.stop()
    return gaps, tokens, rounds, cpu_s


def main() -> None:
    a = parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gaps, tokens, rounds, cpu_s = run_arms(a, Path(tmp))
    total_s = a.repeats * a.round_s
    out = {arm: _summary(gaps[arm], tokens[arm], total_s) for arm in gaps}
    ratios = {
        f"with_{key}_ratio": round(out["with"][key] / out["without"][key], 4)
        for key in ("itl_p50_ms", "itl_p99_ms", "tokens_per_s")
    }
    print(
        json.dumps(
            {
                "bench": "agent_overhead",
                "model": a.model,
                "users": a.users,
                "output_tokens": a.output_tokens,
                "repeats": a.repeats,
                "round_s": a.round_s,
                "loadavg_1m": round(os.getloadavg()[0], 2),
                **out,
                **ratios,
                "goal_itl_p50_ratio_max": 1.01,
                # the agent's CPU (with py-spy) per second of load: it competes for the cores
                "agent_cpu_s_per_s": round(cpu_s / total_s, 4),
                "per_round": rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
