"""Run a long CLI command in a supervised child so that no exit — not even SIGKILL — leaves an
orphan engine, Locust or Prefect server behind.

The CLI process becomes a *subreaper* (PR_SET_CHILD_SUBREAPER) and re-runs itself as a child:
- Ctrl-C / SIGTERM to the CLI are forwarded to the child (in its own session, so the terminal
  signals nobody else), whose flow tears down and reports.
- SIGKILL of the CLI: the child gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and tears down.
- SIGKILL of the child (the flow process): its orphans — the engine, Locust, Prefect's temporary
  API server — are re-parented to the CLI instead of init, and the CLI terminates them.
Linux only; elsewhere the command simply runs in-process.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

import psutil

_ENV_FLAG = "SPIKELENS_SUPERVISED"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return False
    return libc.prctl(option, value) == 0


def die_with_parent() -> None:
    """preexec_fn: the kernel SIGTERMs this child when the thread that started it exits.

    Prefect runs sync flows and their tasks in the main thread, so that thread lives as long as
    the flow process. No-op where prctl is unavailable.
    """
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def supervised() -> bool:
    """True inside the supervised child (or where supervision is unavailable)."""
    return os.environ.get(_ENV_FLAG) == "1" or not sys.platform.startswith("linux")


def _terminate_descendants(grace_s: float = 20.0) -> None:
    """SIGTERM every process still below us (orphans re-parented here), SIGKILL stragglers."""
    procs = psutil.Process().children(recursive=True)
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    kill_survivors(procs, grace_s)


def kill_survivors(procs: list[psutil.Process], grace_s: float) -> None:
    """Wait up to grace_s for `procs` to exit, then SIGKILL the ones still alive."""
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)


def run_supervised(argv: list[str]) -> int:
    """Re-run `python -m flows.cli argv…` as a supervised child; returns its exit code."""
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1):
        return -1  # caller runs in-process
    # Its own session: a terminal's Ctrl-C reaches only this process, which forwards it to the
    # child alone. Were they one process group, Prefect's API server (the child's child) would
    # die of the same SIGINT and the flow could not record its teardown.
    child = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *argv],
        env={**os.environ, _ENV_FLAG: "1"},
        preexec_fn=die_with_parent,
        start_new_session=True,
    )

    def forward(signum, frame):
        # Always SIGTERM: a child started from a non-interactive shell may ignore SIGINT.
        try:
            child.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _terminate_descendants()
    return 128 - code if code < 0 else code  # killed by signal N → 128+N, as a shell reports
