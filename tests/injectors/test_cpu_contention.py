"""host.cpu_contention: real hog processes pinned to the engine's CPUs, only in the window."""

import os
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from injectors.cpu_contention import CpuContention, make_params

# Timed against their fault windows, and the hog test takes a CPU: `make test-fast` runs the
# "cpu_timing" group in one xdist worker, one test at a time (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("cpu_timing")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_until(predicate, deadline_s: float) -> bool:
    """Poll `predicate` until it holds or `deadline_s` (time.time()) passes (a busy box starts
    and reaps processes late: the test checks states, not their exact moments)."""
    while time.time() < deadline_s:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_hogs_run_pinned_to_the_engine_cpus_in_the_window_and_stop_kills_them(tmp_path):
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    cpus = {sorted(os.sched_getaffinity(0))[0]}
    os.sched_setaffinity(engine.pid, cpus)
    faults = [
        {
            "kind": "host.cpu_contention",
            "start_s": 0.3,
            "duration_s": 2.0,
            "params": {"processes": 2},
        },
        {"kind": "host.cpu_contention", "start_s": 5.0, "duration_s": 20, "params": {}},
    ]
    hog = CpuContention(faults, engine.pid, tmp_path, duration_s=7.0)
    try:
        t0 = time.time_ns()
        hog.arm(t0)
        at = t0 / 1e9
        time.sleep(max(0.0, at + 0.15 - time.time()))
        assert hog.hogs == [] or time.time() - at > 0.3  # nothing before the window
        assert _wait_until(lambda: len(hog.hogs) == 2, at + 2.3), hog.hogs
        first = list(hog.hogs)
        assert all(os.sched_getaffinity(h.pid) == cpus for h in first)
        gone = lambda: hog.hogs == [] and not any(_alive(h.pid) for h in first)  # noqa: E731
        # the window ended at 2.3 s: hogs killed and reaped before the next one (a fresh-clone CI
        # with a vLLM install beside the tests once took over 1.6 s to reap them)
        assert _wait_until(gone, at + 4.9)
        assert _wait_until(lambda: len(hog.hogs) > 0, at + 6.5)
        second = list(hog.hogs)
        assert len(second) == len(cpus)  # default: one per CPU the engine may use
    finally:
        hog.stop()
        engine.kill()
        engine.wait()
    assert not any(_alive(h.pid) for h in second)
    rows = pq.read_table(tmp_path / "faults.host.parquet").to_pylist()
    assert [(r["kind"], r["cause"], r["start_ns"] - t0, r["end_ns"] - t0) for r in rows] == [
        ("host.cpu_contention", "host", 300_000_000, 2_300_000_000),
        ("host.cpu_contention", "host", 5_000_000_000, 7_000_000_000),
    ]  # clipped to the run


@pytest.mark.parametrize(
    "params, message",
    [({"processes": 0}, "params.processes"), ({"cores": 2}, "unknown key 'cores'")],
)
def test_bad_params_name_the_field(params, message):
    with pytest.raises(ValueError, match=message):
        make_params(params)


def test_only_host_cpu_contention_is_taken(tmp_path):
    burst = {"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {}}
    with pytest.raises(ValueError, match="got 'load.burst'"):
        CpuContention([burst], os.getpid(), tmp_path, duration_s=2.0)


def test_a_hog_dies_with_the_process_that_started_it(tmp_path):
    code = (
        "import os, sys, time\n"
        "from injectors.cpu_contention import CpuContention\n"
        f"h = CpuContention([{{'kind': 'host.cpu_contention', 'start_s': 0, 'duration_s': 60,"
        f" 'params': {{'processes': 1}}}}], os.getpid(), {str(tmp_path)!r}, 60)\n"
        "h.arm(time.time_ns()); time.sleep(1.0)\n"
        "print(h.hogs[0].pid, flush=True); time.sleep(60)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        hog_pid = int(owner.stdout.readline())
        assert _alive(hog_pid)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.time() + 10
    while _alive(hog_pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(hog_pid)
