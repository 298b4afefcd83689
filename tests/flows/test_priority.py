"""flows.priority: who may raise a priority, and an engine's children started at it."""

import os
import subprocess
import sys

import pytest

from flows.priority import RAISED_NICE, engine_preexec, why_not
from flows.supervisor import die_with_parent


def test_lowering_is_always_allowed_and_raising_says_what_it_needs(monkeypatch):
    assert why_not(19) is None
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr("builtins.open", _status_without_cap_sys_nice)
    monkeypatch.setattr("resource.getrlimit", lambda _: (0, 0))
    reason = why_not(RAISED_NICE)
    assert reason is not None and "CAP_SYS_NICE" in reason and "RLIMIT_NICE ≥ 30" in reason
    monkeypatch.setattr("resource.getrlimit", lambda _: (30, 30))
    assert why_not(RAISED_NICE) is None  # an RLIMIT_NICE of 30 allows nice −10


def _status_without_cap_sys_nice(path, *args, **kwargs):
    import io

    assert path == "/proc/self/status"
    return io.StringIO("Name:\tpython\nCapEff:\t0000000000000000\n")


def test_an_engine_started_with_a_raised_priority_runs_at_it():
    assert engine_preexec(None) is die_with_parent
    if why_not(RAISED_NICE) is not None:
        pytest.skip(f"this process may not raise a priority: {why_not(RAISED_NICE)}")
    code = "import os, subprocess, sys; print(os.getpriority(os.PRIO_PROCESS, 0)); " + (
        "print(subprocess.run([sys.executable, '-c', "
        "'import os; print(os.getpriority(os.PRIO_PROCESS, 0))'], capture_output=True, "
        "text=True).stdout.strip())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=engine_preexec(RAISED_NICE),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [str(RAISED_NICE)] * 2  # the server and the children it starts
