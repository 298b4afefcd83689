"""/proc CPU and scheduling counters of a real process tree."""

import itertools
import os

import pyarrow.parquet as pq
import pytest

from collectors.proc_sampler import ProcSampler, read_process
from collectors.process_tree import ProcessTree


def test_read_process_of_this_process_and_of_a_gone_pid():
    row = read_process(os.getpid())
    assert row["cpu_ns"] > 0 and row["run_ns"] > 0 and row["threads"] >= 1 and row["rss_bytes"] > 0
    assert row["voluntary_switches"] + row["involuntary_switches"] > 0
    assert read_process(2**22 + 4321) is None


def test_sampler_follows_a_tree_and_counts_its_cpu(tmp_path, hot_child, waiter):
    proc = hot_child(mode="spawn", burn_s=1.5)
    tree = ProcessTree(proc.pid, "engine")
    sampler = ProcSampler(tree, tmp_path / "proc.parquet", interval_s=0.05, refresh_s=0.1).start()
    waiter(lambda: len([p for p in tree.roles if p != proc.pid]) >= 1, timeout_s=15)
    waiter(lambda: sampler.ticks >= 20)
    rows = sampler.stop()
    table = pq.read_table(tmp_path / "proc.parquet").to_pylist()
    assert rows == len(table)
    root = [r for r in table if r["pid"] == proc.pid]
    assert root[0]["role"] == "engine" and len(root) >= 15
    cpu = root[-1]["cpu_ns"] - root[0]["cpu_ns"]  # clock ticks (10 ms)
    run = root[-1]["run_ns"] - root[0]["run_ns"]  # schedstat, ns
    assert cpu >= 2e7 and abs(run - cpu) <= 0.5 * cpu + 2e7, (
        cpu,
        run,
    )  # the same CPU time, two ways
    child_roles = {r["role"] for r in table if r["pid"] != proc.pid}
    assert "engine:spawn_child" in child_roles


def test_sampler_reads_the_steal_counters_of_the_trees_cpus(tmp_path, hot_child, waiter):
    proc = hot_child(mode="spawn", burn_s=1.0)
    tree = ProcessTree(proc.pid, "engine")
    sampler = ProcSampler(
        tree, tmp_path / "proc.parquet", 0.05, 0.1, cpu_out_path=tmp_path / "cpu.parquet"
    ).start()
    waiter(lambda: sampler.ticks >= 10)
    sampler.stop()
    rows = pq.read_table(tmp_path / "cpu.parquet").to_pylist()
    assert sampler.cpu_error is None
    assert {r["cpu"] for r in rows} == os.sched_getaffinity(proc.pid)
    for cpu in {r["cpu"] for r in rows}:
        mine = [r for r in rows if r["cpu"] == cpu]
        assert len(mine) >= 10
        assert all(0 <= r["steal_ns"] + r["idle_ns"] <= r["total_ns"] for r in mine)
        assert all(a["total_ns"] <= b["total_ns"] for a, b in itertools.pairwise(mine))
        assert mine[-1]["total_ns"] > mine[0]["total_ns"]  # cumulative, and time went on


def test_interval_out_of_range_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="proc interval_s"):
        ProcSampler(ProcessTree(1, "x"), tmp_path / "p.parquet", interval_s=0)
