"""Wait for a server process's /health to answer: the start-up poll shared by the engine
launcher, the vLLM launcher and the test suite's Prefect server.

One httpx client serves every poll: a client per poll loads the CA bundle each time (~40 ms of
CPU), which at 10 Hz took 4 s of CPU from a starting engine.
"""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_healthy(
    url: str,
    proc: subprocess.Popen,
    deadline: float,
    interval_s: float,
    request_timeout_s: float,
) -> str:
    """Poll `url` until it answers 200 ('healthy'), `proc` exits ('exited': read its
    returncode) or time.monotonic() passes `deadline` ('timed out')."""
    with httpx.Client(timeout=request_timeout_s) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return "exited"
            try:
                if client.get(url).status_code == 200:
                    return "healthy"
            except httpx.TransportError:
                pass
            time.sleep(interval_s)
    return "timed out"
