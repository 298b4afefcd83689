"""flows.affinity: the flow process's threads, and what they start, kept off the engine's CPUs."""

import os
import subprocess
import sys
import threading

import pytest

from flows.affinity import KeptOff, default_engine_cpus

two_cpus = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs: one for the engine, one for the rest"
)


def test_vllm_gets_all_cpus_but_one_by_default_split_over_its_ranks():
    assert default_engine_cpus({0, 1}) == (0,)
    assert default_engine_cpus({0, 1, 2, 3}) == (0, 1, 2)
    assert default_engine_cpus({2, 5, 7}) == (2, 5)  # the flow's own mask, not the machine's
    assert default_engine_cpus({0, 1, 2, 3}, tensor_parallel_size=2) == (0, 1)
    assert default_engine_cpus({0}) is None  # a single CPU: shared
    assert default_engine_cpus({0, 1}, tensor_parallel_size=2) is None  # not one CPU a rank
    assert default_engine_cpus() == default_engine_cpus(set(os.sched_getaffinity(0)))


@two_cpus
def test_every_thread_and_each_child_started_meanwhile_runs_on_the_other_cpus():
    before = set(os.sched_getaffinity(0))
    engine_cpu = min(before)
    seen: dict[str, set[int]] = {}
    go, done = threading.Event(), threading.Event()

    def other_thread():  # started before: it is moved too
        go.wait()
        seen["thread"] = set(os.sched_getaffinity(0))
        done.set()

    t = threading.Thread(target=other_thread)
    t.start()
    kept = KeptOff((engine_cpu,)).start()
    try:
        go.set()
        done.wait(5)
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
            capture_output=True,
            text=True,
        )
        assert seen["thread"] == before - {engine_cpu}
        assert child.stdout.strip() == str(sorted(before - {engine_cpu}))
        assert kept.describe() == {
            "engine": [engine_cpu],
            "spikelens": sorted(before - {engine_cpu}),
            "source": "scenario",
        }
    finally:
        kept.stop()
        t.join()
    assert set(os.sched_getaffinity(0)) == before
    kept.stop()  # idempotent


@two_cpus
def test_nothing_moves_when_the_engine_has_every_cpu():
    every = tuple(sorted(os.sched_getaffinity(0)))
    kept = KeptOff(every).start()
    assert kept.describe()["spikelens"] == [] and set(os.sched_getaffinity(0)) == set(every)
    kept.stop()
