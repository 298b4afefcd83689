"""The engine as a child process: start, wait until healthy, arm faults, stop — never orphaned.

The engine runs in its own process (a real HTTP server, as in production) and in its own process
group, so stopping it also stops anything it spawned (tensor-parallel ranks). Stopping is
SIGTERM first — the engine flushes its telemetry files on it — then SIGKILL after a grace period.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from flows.supervisor import die_with_parent


class EngineStartError(RuntimeError):
    """The engine process exited or never became healthy; the message holds its log tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the engine binds it right after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


@dataclass
class EngineProcess:
    """A running engine server started by spikelens."""

    proc: subprocess.Popen
    url: str
    log_path: Path

    @classmethod
    def start(cls, run_id: str, engine: dict[str, Any], faults: list[dict[str, Any]],
              run_dir: Path, startup_timeout_s: float = 180.0) -> "EngineProcess":
        run_dir.mkdir(parents=True, exist_ok=True)
        config_path = run_dir / "engine_config.json"
        config_path.write_text(json.dumps({"run_id": run_id, "engine": engine, "faults": faults},
                                          indent=2))
        port = free_port()
        log_path = run_dir / "engine.log"
        log = open(log_path, "ab")
        cmd = [sys.executable, "-m", "engine", "serve", "--config", str(config_path),
               "--run-dir", str(run_dir), "--host", "127.0.0.1", "--port", str(port)]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=die_with_parent,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        handle = cls(proc, f"http://127.0.0.1:{port}", log_path)
        try:
            handle.wait_healthy(startup_timeout_s)
        except BaseException:
            handle.stop()
            raise
        return handle

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EngineStartError(f"engine exited with code {self.proc.returncode} during "
                                       f"startup; log tail:\n{_tail(self.log_path)}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise EngineStartError(f"engine not healthy after {timeout_s:.0f} s; log tail:\n"
                               f"{_tail(self.log_path)}")

    def arm_faults(self, t0_ns: int) -> None:
        """Start the engine's fault clock at the start of measured load."""
        httpx.post(f"{self.url}/spikelens/arm", json={"t0_ns": t0_ns}, timeout=10.0).raise_for_status()

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM the process group (engine flushes its files), SIGKILL after `grace_s`."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # Ranks or helpers the engine spawned share its group: make sure none outlives it.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.proc.returncode
