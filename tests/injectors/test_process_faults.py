"""memory.gc_storm applied by the GC hook inside a real child process, on the flow's fault clock."""

import json
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from collectors.gc_hook import hook_env
from injectors.process_faults import (
    SCHEDULE_ENV,
    ProcessGcStormParams,
    arm,
    make_params,
    schedule_env,
)

CHILD = (
    "import threading, time; print(threading.active_count(), flush=True); "
    "time.sleep(float(__import__('sys').argv[1]))"
)


def _child(env, seconds):
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(seconds)], env=env, stdout=subprocess.PIPE, text=True
    )


def test_the_storm_runs_only_in_its_role_and_window_and_its_collections_are_recorded(tmp_path):
    collect = tmp_path / "collect"
    env = schedule_env(collect, hook_env(collect, "engine"))
    proc = _child(env, 2.5)
    time.sleep(0.3)  # the child waits for the schedule, as vLLM's processes do until load start
    t0 = time.time_ns()
    faults = [
        {
            "kind": "memory.gc_storm",
            "start_s": 0.1,
            "duration_s": 0.4,
            "params": {"role": "EngineCore"},
        },
        {
            "kind": "memory.gc_storm",
            "start_s": 0.8,
            "duration_s": 0.8,
            "params": {"role": "engine"},
        },
    ]
    assert arm(faults, t0, 2.0, collect, tmp_path) == 2
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.strip() == "2"  # main + the schedule thread
    rows = [
        json.loads(line) for p in collect.glob("gc-*.jsonl") for line in p.read_text().splitlines()
    ]
    rel = [((r["start_ns"] - t0) / 1e9, r["generation"]) for r in rows]
    assert not [t for t, _ in rel if 0.05 < t < 0.75]  # the EngineCore window: not this role
    storm = [g for t, g in rel if 0.8 <= t <= 1.7]
    assert len(storm) >= 10 and 2 in storm  # full collections in the window
    truth = pq.read_table(tmp_path / "faults.process.parquet").to_pylist()
    assert [(r["kind"], r["cause"], r["start_ns"] - t0) for r in truth] == [
        ("memory.gc_storm", "memory", 100_000_000),
        ("memory.gc_storm", "memory", 800_000_000),
    ]


def test_only_the_hooks_kinds_are_armed(tmp_path):
    burst = {"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {}}
    with pytest.raises(ValueError, match="got 'load.burst'"):
        arm([burst], 0, 2.0, tmp_path / "collect", tmp_path)
    assert not (tmp_path / "faults.process.parquet").exists()


def test_without_the_variable_the_hook_starts_no_thread(tmp_path):
    env = hook_env(tmp_path / "collect", "engine")
    assert SCHEDULE_ENV not in env
    proc = _child(env, 0)
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "1"


@pytest.mark.parametrize(
    "params, message",
    [
        ({"objects_per_tick": 0}, "memory.gc_storm.params.objects_per_tick"),
        ({"tick_s": 0}, "memory.gc_storm.params.tick_s"),
        ({"role": ""}, "memory.gc_storm.params.role"),
        ({"objects_per_step": 5}, "unknown key 'objects_per_step'"),
    ],
)
def test_bad_params_name_the_field(params, message):
    with pytest.raises(ValueError, match=message):
        make_params("memory.gc_storm", params)
    assert make_params("memory.gc_storm", {}) == ProcessGcStormParams()
