"""One real Prefect server for the end-to-end suite, started once per test session.

Why: each `spikelens` CLI run in embedded mode starts Prefect's ephemeral API server first, which
took 13.6 s of a 4-s scenario's 18 s on 2 cores (2026-12-03: run started at 14.8 s embedded,
1.2 s against a running server). Across the suite's ~25 CLI runs that was minutes of CI. The
server is Prefect's own (`prefect server start`), the mode docs/operations.md scales out with; the
modules that must test the embedded default (the demo path, and kills that must leave no ephemeral
server behind) opt out with `EMBEDDED_PREFECT = True`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine.server.launch import free_port
from spikelens_common.health_wait import wait_healthy

STARTUP_TIMEOUT_S = 180.0  # a cold SQLite database and migrations: 24 s on a quiet 2-core box


class PrefectServer:
    """`prefect server start` on a free port with its own PREFECT_HOME; `url` is its API."""

    def __init__(self, home: Path):
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.proc: subprocess.Popen | None = None

    def start(self) -> PrefectServer:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PREFECT_HOME": str(self.home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "PREFECT_UI_ENABLED": "false",
            "PREFECT_SERVER_UI_ENABLED": "false",
            "PREFECT_LOGGING_LEVEL": "WARNING",
        }
        env.pop("PREFECT_API_URL", None)
        prefect = Path(sys.executable).with_name("prefect")
        self.proc = subprocess.Popen(
            [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env,
            stdout=open(self.home / "server.log", "wb"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        state = wait_healthy(self.url + "/health", self.proc, deadline, 0.5, 2.0)
        if state == "exited":
            log = (self.home / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"prefect server exited {self.proc.returncode}: {log}")
        if state == "timed out":
            self.stop()
            raise RuntimeError(f"prefect server not healthy after {STARTUP_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        """SIGTERM the server's whole group (uvicorn and its services), SIGKILL what stays."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait_s)
                return
            except subprocess.TimeoutExpired:
                continue
