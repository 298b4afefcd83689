"""host.cpu_contention: real hog processes pinned to the engine's CPUs, only in the window."""

import os
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from collectors.cpu_contention import CpuContention, make_params


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def test_hogs_run_pinned_to_the_engine_cpus_in_the_window_and_stop_kills_them(tmp_path):
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    cpus = {sorted(os.sched_getaffinity(0))[0]}
    os.sched_setaffinity(engine.pid, cpus)
    faults = [
        {
            "kind": "host.cpu_contention",
            "start_s": 0.3,
            "duration_s": 1.0,
            "params": {"processes": 2},
        },
        {"kind": "host.cpu_contention", "start_s": 2.2, "duration_s": 20, "params": {}},
        {"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {}},
    ]
    hog = CpuContention(faults, engine.pid, tmp_path, duration_s=4.0)
    try:
        t0 = time.time_ns()
        hog.arm(t0)
        at = lambda s: time.sleep(max(0.0, t0 / 1e9 + s - time.time()))  # noqa: E731
        at(0.15)
        assert hog.hogs == [] or time.time() - t0 / 1e9 > 0.3  # (a slow arm on a busy box)
        at(1.0)
        first = list(hog.hogs)
        assert len(first) == 2 and all(os.sched_getaffinity(h.pid) == cpus for h in first)
        at(1.9)
        assert hog.hogs == [] and not any(_alive(h.pid) for h in first)
        at(3.2)
        second = list(hog.hogs)
        assert len(second) == len(cpus)  # default: one per CPU the engine may use
    finally:
        hog.stop()
        engine.kill()
        engine.wait()
    assert not any(_alive(h.pid) for h in second)
    rows = pq.read_table(tmp_path / "faults.host.parquet").to_pylist()
    assert [(r["kind"], r["cause"], r["start_ns"] - t0, r["end_ns"] - t0) for r in rows] == [
        ("host.cpu_contention", "host", 300_000_000, 1_300_000_000),
        ("host.cpu_contention", "host", 2_200_000_000, 4_000_000_000),
    ]  # clipped to the run


@pytest.mark.parametrize(
    "params, message",
    [({"processes": 0}, "params.processes"), ({"cores": 2}, "unknown key 'cores'")],
)
def test_bad_params_name_the_field(params, message):
    with pytest.raises(ValueError, match=message):
        make_params(params)


def test_a_hog_dies_with_the_process_that_started_it(tmp_path):
    code = (
        "import os, sys, time\n"
        "from collectors.cpu_contention import CpuContention\n"
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
