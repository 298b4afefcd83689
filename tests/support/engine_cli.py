"""Driving `spikelens engine` as a user does, from tests: the command, its environment, a run
that is expected to end (a refusal, --help), and the wait for a served engine's /health."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

SPIKELENS = str(Path(sys.executable).parent / "spikelens")


def engine_env(tmp_path: Path, **extra: str) -> dict:
    """The environment of a test's engine: its own state home, unbuffered output."""
    return {
        **os.environ,
        "SPIKELENS_HOME": str(tmp_path / "home"),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def run_engine(args: list[str], tmp_path: Path, **extra_env: str) -> subprocess.CompletedProcess:
    """`spikelens engine ARGS` run to its end (a refusal, --help), output captured as text."""
    return subprocess.run(
        [SPIKELENS, "engine", *args],
        env=engine_env(tmp_path, **extra_env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float = 120.0) -> None:
    """Wait until `url`/health answers 200; fail with the engine's stderr if it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"spikelens engine exited with {proc.returncode}: {stderr}")
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("spikelens engine did not become healthy")
