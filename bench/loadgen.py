"""Benchmark: how much load one Locust worker can generate, next to a plain asyncio + httpx
client doing the same work, against a no-op streaming server. Prints one JSON object.

Both clients run in their own process against `python -m tests.support.sse_server` (a third process,
zero delays, so the server answers as fast as it can); both keep `--users` streams open back to
back (closed loop), read every SSE line, and parse it with the same `loadgen.sse.StreamState`.
Figures per client, over the measured phase (after `--warmup-s`):
- requests_per_s: completed streamed requests per second;
- cpu_ms_per_request: the client process's CPU time (user + system) per completed request;
- cpu_percent: the client process's CPU use (100 = one core);
- server_cpu_percent: the no-op server's CPU over the client's whole run (startup included):
  near 100 % the server, not the client, set the request rate.
`ratio` = locust / httpx for each. `accuracy` measures loadgen's own timing error: 64 streams
against a no-op server that stamps each chunk just before writing it. The Locust figures come from run_locust's own recording
(requests.parquet) and client health (CPU over the measured phase); `locust_byte` repeats the
Locust run reading the stream with iter_content(chunk_size=1) instead of whole lines.

`peers` (needs `make setup-peers`): loadgen, GuideLLM and AIPerf one after another, each a
subprocess against its own fresh no-op server (in this process, `--server-ttft-s`, zero ITL) at
the same concurrency, prompt and output length and measured duration, `--repeats` rounds; each
tool otherwise at its defaults (loadgen keeps its `--warmup-s`; the peers have no warm-up by
default). Per tool and run:
- requests_per_s: the tool's own figure; server_requests_per_s: streams the server finished
  inside the tool's measured window, per second (the same yardstick for all three);
- active_processes: the tool's processes that used >= 5 % of a core in its measured window
  (AIPerf runs a controller, workers and record processors; loadgen its runner and one Locust
  process); requests_per_s_per_process = requests_per_s / active_processes;
- cpu_ms_per_request: CPU (user + system) of the tool's whole process tree in its measured
  window per completed request (bench/peers/process_tree.py); cpu_s_total includes start-up;
- ttft_ms_reported: the tool's own TTFT p50/p99;
- ttft_error: |tool's first-token stamp - server's stamp before writing the first chunk| over
  requests matched by an id the server saw (bench/peers/figures.py), with the server's own TTFT.
`peers.median` holds each figure's median over the rounds and `peers.ratio` loadgen's against the
best peer (raw and per process); `load_average` is os.getloadavg() before and after.

Run: .venv/bin/python bench/loadgen.py [--users 32] [--duration-s 10] [--warmup-s 2]
     [--output-tokens 16] [--prompt-tokens 16] [--skip-byte] [--skip-accuracy]
     [--peers-only | --skip-peers] [--repeats 1] [--server-ttft-s 0.005] [--peers-venv .venv-peers]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file is bench/loadgen.py: run as a script, its folder comes first on sys.path and
# `import loadgen` would find this file instead of the package. Drop that entry.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))  # the repository root: bench.peers

import httpx  # noqa: E402
import psutil  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.sse_server", "--port", str(port)],
        cwd=_HERE.parent,  # the repository root: `-m` finds the tests package from there
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("no-op server did not start")


def workload(args) -> dict:
    return {
        "prompt_tokens": {
            "mean": args.prompt_tokens,
            "min": args.prompt_tokens,
            "max": args.prompt_tokens,
        },
        "output_tokens": {
            "mean": args.output_tokens,
            "min": args.output_tokens,
            "max": args.output_tokens,
        },
    }


def run_locust_client(url: str, args, read_mode: str) -> dict:
    from loadgen.runner import LocustRunOptions, run_locust

    with tempfile.TemporaryDirectory(prefix="bench-loadgen-") as run_dir:
        result = run_locust(
            url,
            run_dir,
            LocustRunOptions(
                workload(args),
                {"shape": "constant", "users": args.users},
                duration_s=args.duration_s,
                warmup_s=args.warmup_s,
                read_mode=read_mode,
            ),
        )
        rows = pq.read_table(Path(run_dir) / "requests.parquet").to_pylist()
    ok = [r for r in rows if r["phase"] == "measure" and r["status"] == "ok"]
    worker = result.client_health["workers"][0]
    cpu_s = worker["cpu_percent"] / 100 * args.duration_s
    return {
        "requests_per_s": len(ok) / args.duration_s,
        "cpu_ms_per_request": 1e3 * cpu_s / max(len(ok), 1),
        "cpu_percent": worker["cpu_percent"],
        "completed": len(ok),
        "requests_sent": result.requests_sent,
        "client_valid": result.client_valid,
        "lag_p99_ms": worker["lag_p99_ms"],
    }


async def _httpx_main(url: str, args) -> dict:
    """The plain client: `users` tasks, each streaming one request after another."""
    from loadgen.prompts import PromptBuilder
    from loadgen.request_plan import RequestFactory
    from loadgen.spec import WorkloadSpec
    from loadgen.sse import StreamState

    factory = RequestFactory(
        WorkloadSpec.from_dict(workload(args)),
        PromptBuilder(),
        model_name="noop",
        seed=0,
        id_prefix="httpx",
    )
    start = time.monotonic()
    measure_from, end = start + args.warmup_s, start + args.warmup_s + args.duration_s
    completed = 0
    cpu_at_measure = None
    limits = httpx.Limits(max_connections=args.users, max_keepalive_connections=args.users)

    async def user(index: int, client: httpx.AsyncClient) -> None:
        nonlocal completed, cpu_at_measure
        rng = factory.user_rng(0, index)
        seq = 0
        while (now := time.monotonic()) < end:
            if now >= measure_from and cpu_at_measure is None:
                cpu_at_measure = time.process_time()
            plan = factory.plan(rng, f"httpx-{index}-{seq}")
            seq += 1
            state = StreamState()
            async with client.stream(
                "POST", plan.path, content=plan.body_bytes(), headers=plan.headers()
            ) as resp:
                async for line in resp.aiter_lines():
                    state.feed_line(line, time.time_ns())
            if state.done and time.monotonic() <= end and now >= measure_from:
                completed += 1

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        await asyncio.gather(*(user(i, client) for i in range(args.users)))
    cpu_s = time.process_time() - (cpu_at_measure or 0.0)
    return {
        "requests_per_s": completed / args.duration_s,
        "cpu_ms_per_request": 1e3 * cpu_s / max(completed, 1),
        "cpu_percent": 100 * cpu_s / args.duration_s,
        "completed": completed,
    }


def run_httpx_client(url: str, args) -> dict:
    """The plain client in its own process (as Locust is), so CPU figures are comparable."""
    cmd = [
        sys.executable,
        __file__,
        "--httpx-child",
        url,
        "--users",
        str(args.users),
        "--duration-s",
        str(args.duration_s),
        "--warmup-s",
        str(args.warmup_s),
        "--output-tokens",
        str(args.output_tokens),
        "--prompt-tokens",
        str(args.prompt_tokens),
    ]
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=True,
        timeout=args.warmup_s + args.duration_s + 120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_accuracy(args) -> dict:
    """Loadgen's own timing error: 64 streams against the no-op server (in a thread of this
    otherwise idle process, 50 ms TTFT, 20 ms ITL) that stamps each chunk just before writing it;
    |client arrival − server write| for the first chunk and for the end of the stream."""
    from loadgen.runner import LocustRunOptions, run_locust
    from tests.support.sse_server import SSEServer, SSEServerConfig

    with tempfile.TemporaryDirectory(prefix="bench-accuracy-") as run_dir:
        with SSEServer(SSEServerConfig(ttft_s=0.05, itl_s=0.02)) as server:
            result = run_locust(
                server.url,
                run_dir,
                LocustRunOptions(
                    workload(args),
                    {"shape": "constant", "users": 64},
                    duration_s=args.duration_s,
                    warmup_s=args.warmup_s,
                ),
            )
        rows = pq.read_table(Path(run_dir) / "requests.parquet").to_pylist()
    served = {s.request_id: s for s in server.served}
    pairs = [
        (r, served[r["request_id"]])
        for r in rows
        if r["status"] == "ok" and r["phase"] == "measure"
    ]
    first = sorted(abs(r["first_token_ns"] - s.first_chunk_ns) / 1e6 for r, s in pairs)
    done = sorted(abs(r["done_ns"] - s.done_ns) / 1e6 for r, s in pairs)

    def pct(values, p):
        return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else None

    return {
        "streams": 64,
        "requests": len(pairs),
        "first_chunk_abs_diff_ms": {
            "p50": pct(first, 50),
            "p99": pct(first, 99),
            "max": first[-1] if first else None,
        },
        "done_abs_diff_ms": {
            "p50": pct(done, 50),
            "p99": pct(done, 99),
            "max": done[-1] if done else None,
        },
        "client_valid": result.client_valid,
        "client_reasons": result.client_health["reasons"],
    }


def spikelens_child(url: str, run_dir: str, args) -> None:
    """Child mode of the peers comparison: one loadgen run into run_dir, and the figures loadgen
    reports (loadgen.metrics.summarize) beside it for the parent."""
    from bench.peers.spikelens_output import CHILD_SUMMARY
    from loadgen.metrics import summarize
    from loadgen.runner import LocustRunOptions, run_locust

    result = run_locust(
        url,
        run_dir,
        LocustRunOptions(
            workload(args),
            {"shape": "constant", "users": args.users},
            duration_s=args.duration_s,
            warmup_s=args.warmup_s,
        ),
    )
    summary = summarize(
        pq.read_table(Path(run_dir) / "requests.parquet"),
        pq.read_table(Path(run_dir) / "tokens.parquet"),
        duration_s=args.duration_s,
    )
    (Path(run_dir) / CHILD_SUMMARY).write_text(
        json.dumps(
            {
                "load_started_ns": result.load_started_ns,
                "duration_s": args.duration_s,
                "request_throughput": summary["request_throughput"],
                "completed": summary["completed"],
                "ttft_p50_ms": summary["vllm"]["ttft_ms"]["p50"],
                "ttft_p99_ms": summary["vllm"]["ttft_ms"]["p99"],
                "client_valid": result.client_valid,
                "client_reasons": result.client_health["reasons"],
            }
        )
    )


def _thread_cpu_s(native_id: int) -> float:
    for t in psutil.Process().threads():
        if t.id == native_id:
            return t.user_time + t.system_time
    return 0.0


def run_one_tool(tool: str, args, work: Path, tokenizer: Path) -> dict:
    """One tool against a fresh no-op server (a thread of this otherwise idle process)."""
    from importlib.metadata import version

    from bench.peers import aiperf_output, commands, guidellm_output, spikelens_output
    from bench.peers.figures import tool_figures
    from bench.peers.process_tree import TreeSampler
    from tests.support.sse_server import SSEServer, SSEServerConfig

    venv = Path(args.peers_venv)
    out = work / tool
    out.mkdir(parents=True)
    load_before = os.getloadavg()
    with SSEServer(SSEServerConfig(ttft_s=args.server_ttft_s)) as server:
        spec = commands.RunSpec(
            url=server.url,
            users=args.users,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            duration_s=args.duration_s,
            warmup_s=args.warmup_s,
        )
        cmd = {
            "spikelens": lambda: commands.spikelens_command(Path(__file__), spec, out / "run"),
            "guidellm": lambda: commands.guidellm_command(
                venv, spec, tokenizer, out / "benchmarks.json"
            ),
            "aiperf": lambda: commands.aiperf_command(venv, spec, tokenizer, out / "artifacts"),
        }[tool]()
        t0 = time.monotonic()
        with open(out / "tool.log", "wb") as log:
            # its own process group, so a timeout or Ctrl-C ends every process of the tool
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, cwd=out, start_new_session=True
            )
            server_cpu = functools.partial(_thread_cpu_s, server._thread.native_id)
            with TreeSampler(proc.pid, also=server_cpu) as sampler:
                try:
                    returncode = proc.wait(timeout=args.warmup_s + args.duration_s + 300)
                except BaseException:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    raise
        wall_s = time.monotonic() - t0
    if returncode != 0:
        tail = (out / "tool.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{tool} exited with {returncode}: {' '.join(cmd)}\n{tail}")
    report = {
        "spikelens": lambda: spikelens_output.parse_run_dir(out / "run", version("spikelens")),
        "guidellm": lambda: guidellm_output.parse_benchmarks(out / "benchmarks.json"),
        "aiperf": lambda: aiperf_output.parse_artifacts(out / "artifacts"),
    }[tool]()
    figures = tool_figures(report, server.served, sampler, returncode=returncode, wall_s=wall_s)
    figures["load_average"] = {"before": load_before, "after": os.getloadavg()}
    if tool == "spikelens":
        child = json.loads((out / "run" / spikelens_output.CHILD_SUMMARY).read_text())
        figures["client_valid"], figures["client_reasons"] = (
            child["client_valid"],
            child["client_reasons"],
        )
    return figures


def check_peers_venv(venv: str) -> None:
    """Fail before any work when the peers are not installed."""
    missing = [name for name in ("guidellm", "aiperf") if not (Path(venv) / "bin" / name).exists()]
    if missing:
        raise SystemExit(
            f"--peers-venv {venv}: {' and '.join(missing)} not installed there; "
            "run `make setup-peers` (or pass --skip-peers)"
        )


def run_peer_comparison(args) -> dict:
    """`repeats` rounds of loadgen, GuideLLM, AIPerf (interleaved, so drifting machine load hits
    all three alike); per tool every run and each figure's median."""
    from bench.peers import commands
    from bench.peers.figures import median_of_runs, peer_ratios

    check_peers_venv(args.peers_venv)
    tools = ("spikelens", "guidellm", "aiperf")
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        tokenizer = commands.tokenizer_dir(Path(tmp) / "tokenizer")
        for rep in range(args.repeats):
            for tool in tools:
                runs[tool].append(run_one_tool(tool, args, Path(tmp) / f"round{rep}", tokenizer))
    median = median_of_runs(runs)
    return {
        "settings": {
            "users": args.users,
            "prompt_tokens": args.prompt_tokens,
            "output_tokens": args.output_tokens,
            "duration_s": args.duration_s,
            "spikelens_warmup_s": args.warmup_s,
            "server_ttft_s": args.server_ttft_s,
            "server_itl_s": 0.0,
            "repeats": args.repeats,
        },
        "median": median,
        "ratio": peer_ratios(median),
        "runs": runs,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--skip-byte", action="store_true", help="skip the chunk_size=1 Locust run")
    parser.add_argument(
        "--skip-accuracy", action="store_true", help="skip the 64-stream accuracy run"
    )
    parser.add_argument(
        "--peers-only", action="store_true", help="only the GuideLLM/AIPerf comparison"
    )
    parser.add_argument(
        "--skip-peers", action="store_true", help="skip the GuideLLM/AIPerf comparison"
    )
    parser.add_argument("--peers-venv", default=str(_HERE.parent / ".venv-peers"))
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the peers comparison")
    parser.add_argument(
        "--server-ttft-s", type=float, default=0.005, help="no-op server TTFT (peers run)"
    )
    parser.add_argument("--httpx-child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument(
        "--spikelens-child", nargs=2, metavar=("URL", "RUN_DIR"), help=argparse.SUPPRESS
    )
    return parser


def _run_clients(args: argparse.Namespace) -> tuple[dict, dict, dict | None]:
    """Locust (line mode), plain httpx and Locust in byte mode against one no-op server, each
    with the server's CPU use over its run."""
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    server_proc = psutil.Process(server.pid)

    def with_server_cpu(run):
        """Run one client and add the server's CPU use over its whole run (100 = one core): a
        server near 100 % means the figure is the server's limit, not the client's."""
        cpu0, t0 = sum(server_proc.cpu_times()[:2]), time.monotonic()
        figures = run()
        figures["server_cpu_percent"] = (
            100 * (sum(server_proc.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0)
        )
        return figures

    try:
        locust = with_server_cpu(lambda: run_locust_client(url, args, "line"))
        plain = with_server_cpu(lambda: run_httpx_client(url, args))
        byte = (
            None
            if args.skip_byte
            else with_server_cpu(lambda: run_locust_client(url, args, "byte"))
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    return locust, plain, byte


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.httpx_child:
        print(json.dumps(asyncio.run(_httpx_main(args.httpx_child, args))))
        return
    if args.spikelens_child:
        spikelens_child(*args.spikelens_child, args)
        return
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    if not args.skip_peers:
        check_peers_venv(args.peers_venv)
    if args.peers_only:
        print(
            json.dumps(
                {
                    "bench": "loadgen",
                    "host": platform.node(),
                    "cpus": os.cpu_count(),
                    "peers": run_peer_comparison(args),
                },
                indent=2,
            )
        )
        return

    locust, plain, byte = _run_clients(args)
    result = {
        "bench": "loadgen",
        "settings": {
            "users": args.users,
            "duration_s": args.duration_s,
            "warmup_s": args.warmup_s,
            "prompt_tokens": args.prompt_tokens,
            "output_tokens": args.output_tokens,
            "server": "tests.support.sse_server (no-op, zero delays, own process)",
            "host": platform.node(),
            "cpus": os.cpu_count(),
        },
        "locust": locust,
        "httpx": plain,
        "ratio": {
            "requests_per_s": locust["requests_per_s"] / plain["requests_per_s"]
            if plain["requests_per_s"]
            else None,
            "cpu_ms_per_request": locust["cpu_ms_per_request"] / plain["cpu_ms_per_request"]
            if plain["cpu_ms_per_request"]
            else None,
        },
    }
    if byte is not None:
        result["locust_byte"] = byte
    if not args.skip_accuracy:
        result["accuracy"] = run_accuracy(args)
    if not args.skip_peers:
        result["peers"] = run_peer_comparison(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
