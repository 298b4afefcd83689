"""Start ``python -m engine serve`` as a subprocess on a free port and stop it with SIGTERM.

Used by the server's tests and benches and by the flows (which start every engine they drive
through it): ``with EngineProcess(config, run_dir) as proc: httpx.get(proc.url + "/health")``.
The server runs in its own process group, so stopping it also stops what it spawned
(tensor-parallel ranks).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from spikelens_common.health_wait import wait_healthy
from spikelens_common.startup_failure import Hint, StartupFailure

# Fixes known for the root cause lines the engine prints when it cannot start (first match wins);
# a bad CONFIG.json key names itself ("error: engine.kv_blocks: ...").
ENGINE_HINTS = (
    Hint(
        r"out of memory|OutOfMemory|Cannot allocate|not enough memory",
        "lower engine.kv_blocks (or kv_cache_memory_bytes) or engine.max_num_seqs",
    ),
    Hint(r"address already in use", "another server holds the port; pick another"),
)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class SupervisedServer:
    """What every server spikelens starts as a child shares: the tail of its log for error
    messages, and `with` = start ... stop. Subclasses set `log_path` and define start/stop."""

    proc: subprocess.Popen | None

    @property
    def log_path(self) -> Path:
        raise NotImplementedError

    def start(self) -> SupervisedServer:
        raise NotImplementedError

    def stop(self, timeout_s: float = 30.0) -> int:
        raise NotImplementedError

    def running(self) -> subprocess.Popen:
        """The child process; an error before `start()` (nothing to wait for or signal)."""
        if self.proc is None:
            raise RuntimeError(f"{type(self).__name__} is not started: call start() first")
        return self.proc

    def log_tail(self, n_chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except FileNotFoundError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class EngineProcess(SupervisedServer):
    """The engine server as a child process.

    ``config`` is CONFIG.json's content (``{"engine": {...}, "faults": [...], "server": {...}}``); it is
    written into ``run_dir`` as ``engine-config.json``. The server's stderr goes to
    ``run_dir/engine.log``.
    """

    def __init__(
        self,
        config: dict[str, Any],
        run_dir: str | Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 120.0,
        preexec_fn: Callable[[], None] | None = None,
        env_hook: Callable[[dict[str, str]], dict[str, str]] | None = None,
    ):
        # env_hook: edits the server's environment, e.g. the flows put the collectors' GC hook
        # in the server and its ranks (the engine does not know who observes it).
        self.env_hook = env_hook
        # preexec_fn: e.g. the flows' PR_SET_PDEATHSIG hook, so a SIGKILLed parent leaves no orphan.
        self.preexec_fn = preexec_fn
        self.config = config
        self.run_dir = Path(run_dir)
        self.host = host
        self.port = port or free_port(host)
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "engine.log"

    def start(self) -> EngineProcess:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.run_dir / "engine-config.json"
        config_path.write_text(json.dumps(self.config))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "engine",
                    "serve",
                    "--config",
                    str(config_path),
                    "--run-dir",
                    str(self.run_dir),
                    "--host",
                    self.host,
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=self.preexec_fn,
                env=self._env(),
            )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        return self.env_hook(env) if self.env_hook is not None else env

    def _wait_healthy(self) -> None:
        proc = self.running()
        deadline = time.monotonic() + self.startup_timeout_s
        state = wait_healthy(self.url + "/health", proc, deadline, 0.1, 1.0)
        if state == "exited":
            raise self._failure(f"exited with {proc.returncode} during startup")
        if state == "timed out":
            raise self._failure(f"not healthy after {self.startup_timeout_s:.0f} s")

    def _failure(self, what_happened: str) -> StartupFailure:
        """One line: the root cause line of engine.log, its path and the fix if known."""
        return StartupFailure.from_log("engine", self.log_path, what_happened, ENGINE_HINTS)

    def arm_faults(self, t0_ns: int) -> None:
        """Start the engine's fault clock: faults run from t0_ns + start_s (POST /spikelens/arm)."""
        httpx.post(
            self.url + "/spikelens/arm", json={"t0_ns": t0_ns}, timeout=10.0
        ).raise_for_status()

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.running().pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM the server (it stops its tensor-parallel ranks and flushes its files), wait,
        then SIGKILL; returns the exit code. Whatever it spawned and left behind in its process
        group is killed last. (Signalling the whole group first would kill the ranks under the
        server's feet and its shutdown collective would fail before the files are written.)"""
        if self.proc is None:
            return -1
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.proc.wait()
        self._signal_group(signal.SIGKILL)
        self.returncode = self.proc.returncode
        return self.returncode
