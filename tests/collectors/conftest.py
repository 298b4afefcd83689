"""Fixtures of the collectors' tests: real child interpreters doing known work."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# Written under <tmp>/engine/sampling/ so its frames match the sampling_penalties region rule.
HOT_CHILD = """
import multiprocessing as mp, sys, time

def burn_penalties(seconds):
    end = time.time() + seconds
    while time.time() < end:
        sum(i * i for i in range(500))

def idle_forever():
    import threading
    threading.Event().wait(60)

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "spawn":
        mp.set_start_method("spawn")
        time.sleep(0.5)
        p = mp.Process(target=burn_penalties, args=(60,), daemon=True)
        p.start()
    print("ready", time.time_ns(), flush=True)
    burn_penalties(float(sys.argv[2]))
    print("switch", time.time_ns(), flush=True)
    idle_forever()
"""


def start_hot_child(
    tmp: Path, mode: str = "plain", burn_s: float = 1.5, env: dict | None = None
) -> subprocess.Popen:
    """A child burning CPU in `burn_penalties` for burn_s, then blocked in Event.wait."""
    folder = tmp / "engine" / "sampling"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "hot_child.py"
    script.write_text(textwrap.dedent(HOT_CHILD))
    proc = subprocess.Popen(
        [sys.executable, str(script), mode, str(burn_s)],
        stdout=subprocess.PIPE,
        text=True,
        env=env or dict(os.environ),
        cwd=tmp,
    )
    line = proc.stdout.readline()
    assert line.startswith("ready"), line
    return proc


def read_stamp(proc: subprocess.Popen, word: str) -> int:
    line = proc.stdout.readline()
    assert line.startswith(word), line
    return int(line.split()[1])


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def wait_for(predicate, timeout_s: float = 10.0, step_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step_s)
    raise AssertionError("condition not met in time")


@pytest.fixture
def hot_child(tmp_path):
    """hot_child(mode="plain"|"spawn", burn_s=1.5, env=None) → Popen (killed at teardown)."""
    started = []

    def make(mode: str = "plain", burn_s: float = 1.5, env: dict | None = None) -> subprocess.Popen:
        proc = start_hot_child(tmp_path, mode, burn_s, env)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        stop(proc)


@pytest.fixture
def waiter():
    return wait_for


@pytest.fixture
def stamp():
    return read_stamp
