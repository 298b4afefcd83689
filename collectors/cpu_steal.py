"""CPU steal: the share of the CPUs' time the hypervisor gave to other guests during a run's load.

What: `StealMeter(cpus)` reads the per-CPU counters of /proc/stat once a second on a background
thread (`start` at the measured load's start, `stop` at its end) and sums, over the CPUs the
engine runs on, the ticks that were stolen (the 8th field, `steal`) against all ticks. `stop`
returns one summary for run.json: the share over the measured load and its worst second. A
kernel or container that does not report steal gives {"available": false, "reason": ...}; no
number is guessed.
Why: a virtual machine whose hypervisor runs other guests on its cores loses time no counter of
the guest's processes shows: a stolen stretch counts as neither run-queue wait nor as the
process's CPU time (a paravirtual steal clock takes it out of both), so the engine just looks
slower. The run says how much of the box went missing, so a latency rise can be read against it.
The per-window series the analysis reads (rca: `host`) comes from the /proc sampler's readings of
the same counters at its own ~10 Hz (`cpu_tick_rows`, collect/cpu-<root>.parquet), on the CPUs the
engine's processes may run on.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

PROC_STAT = Path("/proc/stat")
INTERVAL_S = 1.0  # one reading a second: /proc/stat counts in 1/USER_HZ (10-ms) ticks
STEAL_FIELD = 7  # user nice system idle iowait irq softirq steal: the 8th field, 0-based 7
IDLE_FIELDS = (3, 4)  # idle and iowait: time the CPU had nothing to run
# The worst second is looked for among intervals at least this long: the last one (to `stop`)
# can be a few ticks, where one stolen 10-ms tick would read as 10 % or more.
MIN_WORST_S = 0.5


@dataclass(frozen=True)
class CpuTicks:
    """One CPU's cumulative counters, in ticks of 1/USER_HZ s."""

    total: int  # user + nice + system + idle + iowait + irq + softirq + steal (guest is in user)
    steal: int  # time the hypervisor ran something else while this virtual CPU wanted to run
    idle: int = 0  # idle + iowait: the CPU had nothing to run (a halted vCPU accrues no steal)


def parse_proc_stat(text: str) -> dict[int, CpuTicks]:
    """The per-CPU lines (`cpuN ...`) of /proc/stat; ValueError when they have no steal field
    (kernels before 2.6.11) or are not numbers."""
    out: dict[int, CpuTicks] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        fields = rest.split()
        if len(fields) <= STEAL_FIELD:
            raise ValueError(f"/proc/stat {name}: {len(fields)} fields, no steal column")
        ticks = [int(f) for f in fields[: STEAL_FIELD + 1]]
        out[int(name[3:])] = CpuTicks(
            total=sum(ticks),
            steal=ticks[STEAL_FIELD],
            idle=sum(ticks[i] for i in IDLE_FIELDS),
        )
    if not out:
        raise ValueError("/proc/stat has no per-CPU lines")
    return out


def read_proc_stat() -> dict[int, CpuTicks]:
    return parse_proc_stat(PROC_STAT.read_text())


# collect/cpu-<root>.parquet: one row per CPU the engine may run on and reading, cumulative
CPU_TICK_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),
        ("cpu", pa.int32()),
        ("total_ns", pa.int64()),  # every field of the CPU's /proc/stat line
        ("idle_ns", pa.int64()),  # idle + iowait
        ("steal_ns", pa.int64()),  # taken by the hypervisor while the vCPU wanted to run
    ]
)
_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def cpu_tick_rows(ts_ns: int, reading: dict[int, CpuTicks], cpus: Iterable[int]) -> list[dict]:
    """Rows of CPU_TICK_SCHEMA for the `cpus` present in one /proc/stat reading (ns, not ticks)."""
    return [
        {
            "ts_ns": ts_ns,
            "cpu": cpu,
            "total_ns": reading[cpu].total * _TICK_NS,
            "idle_ns": reading[cpu].idle * _TICK_NS,
            "steal_ns": reading[cpu].steal * _TICK_NS,
        }
        for cpu in sorted(cpus)
        if cpu in reading
    ]


def _summed(reading: dict[int, CpuTicks], cpus: Sequence[int]) -> CpuTicks:
    chosen = [reading[c] for c in cpus if c in reading]
    return CpuTicks(sum(t.total for t in chosen), sum(t.steal for t in chosen))


def steal_summary(
    readings: Sequence[tuple[float, dict[int, CpuTicks]]], cpus: Sequence[int]
) -> dict:
    """The share of `cpus`' ticks stolen between the first and the last reading, and the worst
    interval between two readings (seconds from the first). Pure: (monotonic s, reading) in."""
    if len(readings) < 2:
        return {"available": False, "reason": "fewer than two readings of /proc/stat"}
    sums = [(t, _summed(r, cpus)) for t, r in readings]
    total = sums[-1][1].total - sums[0][1].total
    steal = sums[-1][1].steal - sums[0][1].steal
    worst, worst_at = 0.0, 0.0
    for (t0, a), (t1, b) in itertools.pairwise(sums):
        ticks = b.total - a.total
        share = (b.steal - a.steal) / ticks if ticks > 0 else 0.0
        if share > worst and t1 - t0 >= MIN_WORST_S:
            worst, worst_at = share, t0 - sums[0][0]
    return {
        "available": True,
        "source": str(PROC_STAT),
        "cpus": list(cpus),
        "seconds": round(sums[-1][0] - sums[0][0], 3),
        "share": steal / total if total > 0 else 0.0,
        "worst_second_share": worst,
        "worst_second_at_s": round(worst_at, 1),
    }


class StealMeter:
    """Readings of /proc/stat once a second on a daemon thread, from `start` to `stop`."""

    def __init__(
        self,
        cpus: Sequence[int],
        reader: Callable[[], dict[int, CpuTicks]] = read_proc_stat,
        interval_s: float = INTERVAL_S,
    ):
        self.cpus = sorted(cpus)
        self._reader = reader
        self._interval_s = interval_s
        self._readings: list[tuple[float, dict[int, CpuTicks]]] = []
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> None:
        try:
            self._readings.append((time.monotonic(), self._reader()))
        except (OSError, ValueError) as e:
            self._error = f"{type(e).__name__}: {e}"
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._read()

    def start(self) -> None:
        self._read()
        self._thread = threading.Thread(target=self._loop, name="cpu-steal", daemon=True)
        self._thread.start()

    def stop(self) -> dict:
        """The summary (steal_summary), or why there is none."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._error is None:
            self._read()
        if self._error is not None:
            return {"available": False, "reason": self._error}
        return steal_summary(self._readings, self.cpus)
