"""CPU time of a process and all its descendants, sampled from outside while it runs.

Why: AIPerf is a dozen processes (controller, workers, record processors, …) and GuideLLM forks
worker processes; a tool's CPU per request must count all of them. A thread polls the tree with
psutil every `interval_s`, keeping each process's last seen user + system time, so a process that
exits still counts up to its last sample (at most one interval lost per short-lived process).
`cpu_between` gives the tree's CPU seconds inside a window (the tool's measured phase), and
`active_processes` those that used at least `min_share` of a core there. `also` (optional) is
sampled at the same instants and kept apart (the no-op server thread's CPU seconds), so
`also_between` covers the same window.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

import psutil


class TreeSampler:
    def __init__(
        self, root_pid: int, interval_s: float = 0.1, also: Callable[[], float] | None = None
    ):
        self.root_pid, self.interval_s, self.also = root_pid, interval_s, also
        self.also_values: list[float] = []
        self.times: list[int] = []  # sample wall times (ns)
        self.snapshots: list[dict[int, float]] = []  # per sample: pid -> CPU seconds so far
        self.names: dict[int, str] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        try:
            root = psutil.Process(self.root_pid)
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            procs = []
        for proc in procs:
            try:
                cpu = proc.cpu_times()
                self._last[proc.pid] = cpu.user + cpu.system
                self.names.setdefault(proc.pid, proc.name())
            except psutil.Error:
                continue
        self.times.append(time.time_ns())
        self.snapshots.append(dict(self._last))
        if self.also is not None:
            self.also_values.append(self.also())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)
        self._sample()

    def _index(self, t_ns: int) -> int:
        """The last sample at or before t_ns (the first one if t_ns precedes them all)."""
        return max(bisect.bisect_right(self.times, t_ns) - 1, 0)

    def _at(self, t_ns: int) -> dict[int, float]:
        return self.snapshots[self._index(t_ns)] if self.snapshots else {}

    def also_between(self, start_ns: int, end_ns: int) -> float | None:
        if not self.also_values:
            return None
        return self.also_values[self._index(end_ns)] - self.also_values[self._index(start_ns)]

    def per_process_between(self, start_ns: int, end_ns: int) -> dict[int, float]:
        a, b = self._at(start_ns), self._at(end_ns)
        return {pid: cpu - a.get(pid, 0.0) for pid, cpu in b.items() if cpu - a.get(pid, 0.0) > 0}

    def cpu_between(self, start_ns: int, end_ns: int) -> float:
        return sum(self.per_process_between(start_ns, end_ns).values())

    def total(self) -> float:
        return sum(self.snapshots[-1].values()) if self.snapshots else 0.0

    def active_processes(
        self, start_ns: int, end_ns: int, min_share: float = 0.05
    ) -> dict[str, float]:
        """pid:name -> share of a core (1.0 = one core) for processes above min_share in the window."""
        span_s = max((end_ns - start_ns) / 1e9, 1e-9)
        return {
            f"{pid}:{self.names.get(pid, '?')}": round(cpu / span_s, 3)
            for pid, cpu in sorted(self.per_process_between(start_ns, end_ns).items())
            if cpu / span_s >= min_share
        }
