"""Sample CPU and scheduling counters of every process of a tree from /proc, at ~10 Hz.

What: a thread reads, for each live process of the tree, cumulative counters: CPU time
(utime + stime from /proc/<pid>/stat), run time, run-queue wait and timeslices summed over its
threads (/proc/<pid>/task/*/schedstat), voluntary and involuntary context switches summed over
its threads (/proc/<pid>/task/*/status), thread count and RSS; one row per process and tick,
written to `collect/proc.parquet` when stopped. The warehouse turns the counters into per-window
rates (a counter sum may drop when a thread exits: deltas are clamped at 0 there).
Why: contention from outside the engine (a hog on its cores) shows as run-queue delay and
involuntary switches of the engine's processes while its own timers only see "everything slower".
Per-thread sums because /proc/<pid>/schedstat and /status describe the main thread only.
With `cpu_out_path`, each tick also reads /proc/stat's counters of the CPUs the tree's processes
may run on (the union of their affinity masks) into that file (collectors.cpu_steal): time a
hypervisor steals from those CPUs shows in none of the per-process counters above.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.cpu_steal import CPU_TICK_SCHEMA, cpu_tick_rows, read_proc_stat
from collectors.process_tree import ProcessTree

PROC_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),
        ("pid", pa.int64()),
        ("ppid", pa.int64()),
        ("role", pa.string()),
        ("cpu_ns", pa.int64()),  # utime + stime, all threads
        ("run_ns", pa.int64()),  # schedstat: time on a CPU, summed over threads
        ("wait_ns", pa.int64()),  # schedstat: time runnable but waiting on a run queue
        ("timeslices", pa.int64()),
        ("voluntary_switches", pa.int64()),
        ("involuntary_switches", pa.int64()),
        ("threads", pa.int32()),
        ("rss_bytes", pa.int64()),
    ]
)

_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def read_process(pid: int) -> dict | None:
    """One reading of a process's counters; None when it is gone."""
    try:
        stat = _read(f"/proc/{pid}/stat")
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        ppid, utime, stime, threads, rss = (
            int(fields[1]),
            int(fields[11]),
            int(fields[12]),
            int(fields[17]),
            int(fields[21]),
        )
        tids = os.listdir(f"/proc/{pid}/task")
    except (OSError, ValueError, IndexError):
        return None
    run = wait = slices = vol = invol = 0
    for tid in tids:
        try:
            r, w, s = _read(f"/proc/{pid}/task/{tid}/schedstat").split()
            run, wait, slices = run + int(r), wait + int(w), slices + int(s)
            for line in _read(f"/proc/{pid}/task/{tid}/status").splitlines()[-2:]:
                key, _, value = line.partition(":")
                if key == "voluntary_ctxt_switches":
                    vol += int(value)
                elif key == "nonvoluntary_ctxt_switches":
                    invol += int(value)
        except (OSError, ValueError):
            continue  # the thread exited between listing and reading
    return {
        "ppid": ppid,
        "cpu_ns": (utime + stime) * _TICK_NS,
        "run_ns": run,
        "wait_ns": wait,
        "timeslices": slices,
        "voluntary_switches": vol,
        "involuntary_switches": invol,
        "threads": threads,
        "rss_bytes": rss * _PAGE,
    }


class ProcSampler:
    """Thread sampling a ProcessTree every `interval_s` into `out_path` (written at stop)."""

    def __init__(
        self,
        tree: ProcessTree,
        out_path: str | Path,
        interval_s: float = 0.1,
        refresh_s: float = 0.5,
        cpu_out_path: str | Path | None = None,
    ):
        if not 0.005 <= interval_s <= 10:
            raise ValueError(f"proc interval_s must be in [0.005, 10] s, got {interval_s!r}")
        self.tree, self.out_path, self.interval_s, self.refresh_s = (
            tree,
            Path(out_path),
            interval_s,
            refresh_s,
        )
        self.cols: dict[str, list] = {name: [] for name in PROC_SCHEMA.names}
        self.cpu_out_path = Path(cpu_out_path) if cpu_out_path is not None else None
        self.cpu_rows: list[dict] = []
        self.cpu_error: str | None = None  # why /proc/stat could not be read (then no more tries)
        self._cpus: set[int] = set()  # the CPUs the tree may run on, at the last refresh
        self.ticks = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ProcSampler:
        self._thread = threading.Thread(target=self._run, name="proc-sampler", daemon=True)
        self._thread.start()
        return self

    def sample_once(self, pids: list[int]) -> None:
        ts_ns = time.time_ns()
        for pid in pids:
            row = read_process(pid)
            if row is None:
                continue
            row.update(ts_ns=ts_ns, pid=pid, role=self.tree.role(pid))
            for name in PROC_SCHEMA.names:
                self.cols[name].append(row[name])
        self._sample_cpus(ts_ns, pids)
        self.ticks += 1

    def _sample_cpus(self, ts_ns: int, pids: list[int]) -> None:
        if self.cpu_out_path is None or self.cpu_error is not None:
            return
        if not self._cpus:
            self._cpus = affinity_union(pids)
        try:
            self.cpu_rows.extend(cpu_tick_rows(ts_ns, read_proc_stat(), self._cpus))
        except (OSError, ValueError) as exc:
            self.cpu_error = f"{type(exc).__name__}: {exc}"

    def _refresh(self) -> list[int]:
        pids = self.tree.refresh()
        if pids:
            self._cpus = affinity_union(pids) or self._cpus
        return pids

    def _run(self) -> None:
        next_t = last_refresh = time.monotonic()
        pids = self._refresh()
        while not self._stop.is_set():
            if time.monotonic() - last_refresh >= self.refresh_s:
                pids, last_refresh = self._refresh(), time.monotonic()
            self.sample_once(pids)
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> int:
        """Stop, take a last reading, write the file; returns its row count."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sample_once(self._refresh())
        table = pa.Table.from_pydict(self.cols, schema=PROC_SCHEMA)
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, self.out_path)
        if self.cpu_out_path is not None and self.cpu_rows:
            pq.write_table(
                pa.Table.from_pylist(self.cpu_rows, schema=CPU_TICK_SCHEMA), self.cpu_out_path
            )
        return table.num_rows


def affinity_union(pids: list[int]) -> set[int]:
    """The CPUs any of `pids` may run on (an empty set when none can be read: all gone)."""
    cpus: set[int] = set()
    for pid in pids:
        try:
            cpus |= os.sched_getaffinity(pid)
        except OSError:
            continue
    return cpus
