"""Start ``python -m engine serve`` as a subprocess on a free port and stop it with SIGTERM.

Used by the server's tests and benches (and usable by anyone who needs a real engine process):
``with EngineProcess(config, run_dir) as proc: httpx.get(proc.url + "/health")``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EngineProcess:
    """The engine server as a child process.

    ``config`` is CONFIG.json's content (``{"engine": {...}, "faults": [...], "server": {...}}``); it is
    written into ``run_dir`` as ``engine-config.json``. The server's stderr goes to
    ``run_dir/engine.log``.
    """

    def __init__(self, config: dict[str, Any], run_dir: str | Path, host: str = "127.0.0.1",
                 port: int | None = None, startup_timeout_s: float = 120.0):
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

    def start(self) -> "EngineProcess":
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.run_dir / "engine-config.json"
        config_path.write_text(json.dumps(self.config))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine", "serve", "--config", str(config_path),
                 "--run-dir", str(self.run_dir), "--host", self.host, "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"engine exited with {self.proc.returncode} during startup:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"engine not healthy after {self.startup_timeout_s} s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, wait (then SIGKILL); returns the exit code."""
        if self.proc is None:
            return -1
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        return self.returncode

    def log_tail(self, n_chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except FileNotFoundError:
            return ""

    def __enter__(self) -> "EngineProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
