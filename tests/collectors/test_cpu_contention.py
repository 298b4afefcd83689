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
    faults = [{"kind": "host.cpu_contention", "start_s": 0.3, "duration_s": 0.6, "params": {"processes": 2}},
              {"kind": "host.cpu_contention", "start_s": 1.5, "duration_s": 20, "params": {}},
              {"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {}}]
    hog = CpuContention(faults, engine.pid, tmp_path, duration_s=3.0)
    try:
        t0 = time.time_ns()
        hog.arm(t0)
        at = lambda s: time.sleep(max(0.0, t0 / 1e9 + s - time.time()))   # noqa: E731
        at(0.15)
        assert hog.hogs == [] or time.time() - t0 / 1e9 > 0.3   # (a slow arm on a busy box)
        at(0.6)
        first = list(hog.hogs)
        assert len(first) == 2 and all(os.sched_getaffinity(h.pid) == cpus for h in first)
        at(1.3)
        assert hog.hogs == [] and not any(_alive(h.pid) for h in first)
        at(2.0)
        second = list(hog.hogs)
        assert len(second) == len(cpus)          # default: one per CPU the engine may use
    finally:
        hog.stop()
        engine.kill()
        engine.wait()
    assert not any(_alive(h.pid) for h in second)
    rows = pq.read_table(tmp_path / "faults.host.parquet").to_pylist()
    assert [(r["kind"], r["cause"], r["start_ns"] - t0, r["end_ns"] - t0) for r in rows] == [
        ("host.cpu_contention", "host", 300_000_000, 900_000_000),
        ("host.cpu_contention", "host", 1_500_000_000, 3_000_000_000)]   # clipped to the run


@pytest.mark.parametrize("params, message", [({"processes": 0}, "params.processes"),
                                             ({"cores": 2}, "unknown key 'cores'")])
def test_bad_params_name_the_field(params, message):
    with pytest.raises(ValueError, match=message):
        make_params(params)
