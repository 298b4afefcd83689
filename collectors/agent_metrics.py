"""The metrics `spikelens agent` serves, accumulated and rendered as Prometheus text (0.0.4).

What: `AgentMetrics` holds what the agent's collectors measured about an engine's process tree —
cumulative /proc counters per process, one GC pause observation per GC hook row, sampled
thread-seconds per code region from py-spy, and whether each collector works — and `render()`
writes them in the text exposition format 0.0.4 (`# HELP`, `# TYPE`, one sample per line, label
values escaped, families and series in a fixed order).
Why a contract: Prometheus scrapes this beside a production engine and spikelens' SQL reads the
series back (`spikelens incident --prometheus`), so the family names, types, labels and units
below are fixed; changing one breaks the reader.
Pure: no thread is started and nothing is read or written here; the one lock only lets the
agent's collector threads update while its HTTP threads render.
Series identity: a process's /proc series is keyed by its pid and rendered with the latest
ppid and role seen (vLLM retitles a process after it started: the series then moves to the new
role instead of leaving a second series that would be summed twice); GC and stack series are
keyed by all their labels. Nothing is ever removed: a process's series stays after it exits.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

PREFIX = "spikelens_agent_"
COLLECTORS = ("proc", "gc", "stacks")
# Upper bounds of the GC pause histogram in seconds (+Inf is implied).
GC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
GC_GENERATIONS = ("0", "1", "2")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_PROC_LABELS = ("pid", "ppid", "role")
# family suffix, Prometheus type, key of collectors.proc_sampler.read_process, divisor to the
# unit (ns → s; None: a count), help
_PROC_FAMILIES = (
    (
        "process_cpu_seconds_total",
        "counter",
        "cpu_ns",
        1e9,
        "CPU time (user + system) of the process, all threads, from /proc/<pid>/stat.",
    ),
    (
        "process_run_seconds_total",
        "counter",
        "run_ns",
        1e9,
        "Time the process's threads ran on a CPU (schedstat, summed over threads).",
    ),
    (
        "process_runqueue_wait_seconds_total",
        "counter",
        "wait_ns",
        1e9,
        "Time the process's threads were runnable but waited on a run queue (schedstat).",
    ),
    (
        "process_voluntary_switches_total",
        "counter",
        "voluntary_switches",
        None,
        "Voluntary context switches of the process, summed over threads.",
    ),
    (
        "process_involuntary_switches_total",
        "counter",
        "involuntary_switches",
        None,
        "Involuntary (preempted) context switches of the process, summed over threads.",
    ),
    ("process_threads", "gauge", "threads", None, "Threads of the process."),
)
_GC_HELP = "Garbage collection pauses measured by spikelens' GC hook inside the process."
_STACK_HELP = (
    "Sampled thread-seconds per code region from py-spy (idle included): a stack segment of "
    "d seconds adds d."
)
_UP_HELP = "1 when the collector is working, 0 when it is off or failing."
_ERRORS_HELP = "Errors of a collector: malformed GC hook lines, failed py-spy segments."


def escape_label_value(value: str) -> str:
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value: integers without a decimal point, floats as Python's repr, ±Inf, NaN."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(names: Iterable[str], values: Iterable[str]) -> str:
    pairs = ",".join(f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values))
    return "{" + pairs + "}"


def _order(values: tuple[str, ...]) -> tuple:
    """Sort key of a label tuple: decimal strings (pids) numerically, the rest as text."""
    return tuple((0, int(v), "") if v.isdigit() else (1, 0, v) for v in values)


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(GC_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(GC_BUCKETS, seconds)] += 1  # `le`: a value on a bound counts
        self.total += seconds


@dataclass(frozen=True)
class GcObservation:
    """One GC pause taken from a GC hook row (collectors/site/sitecustomize.py)."""

    pid: str
    role: str
    generation: str
    seconds: float


def gc_observation(row: object) -> GcObservation:
    """The pause of one parsed GC hook JSON line; ValueError naming what is wrong."""
    if not isinstance(row, dict):
        raise ValueError(f"GC row must be a JSON object, got {type(row).__name__}")
    try:
        pid, start, end, gen = row["pid"], row["start_ns"], row["end_ns"], row["generation"]
    except KeyError as exc:
        raise ValueError(f"GC row lacks key {exc.args[0]!r}") from None
    for key, value in (("pid", pid), ("start_ns", start), ("end_ns", end)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"GC row {key} must be an integer, got {value!r}")
    if str(gen) not in GC_GENERATIONS or isinstance(gen, bool):
        raise ValueError(f"GC row generation must be 0, 1 or 2, got {gen!r}")
    if end < start:
        raise ValueError(f"GC row ends before it starts ({start} > {end})")
    role = row.get("role")
    return GcObservation(
        str(pid), role if isinstance(role, str) else "", str(gen), (end - start) / 1e9
    )


class AgentMetrics:
    """Thread-safe accumulator of the agent's families; `render()` is the /metrics body."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: dict[str, tuple[str, str, Mapping[str, int]]] = {}  # pid → ppid, role, row
        self._gc: dict[tuple[str, str, str], _Histogram] = {}  # (pid, role, generation)
        self._stacks: dict[tuple[str, str, str], float] = {}  # (pid, role, region) → seconds
        self._up = dict.fromkeys(COLLECTORS, 0)
        self._errors = dict.fromkeys(COLLECTORS, 0)

    def set_process(self, pid: int, ppid: int, role: str, counters: Mapping[str, int]) -> None:
        """Set a process's cumulative counters (a `read_process` row): the process's own
        totals replace what was there, they are not added."""
        values = {key: int(counters[key]) for _, _, key, _, _ in _PROC_FAMILIES}
        with self._lock:
            self._proc[str(pid)] = (str(ppid), role, values)

    def observe_gc(self, obs: GcObservation) -> None:
        with self._lock:
            self._gc.setdefault((obs.pid, obs.role, obs.generation), _Histogram()).observe(
                obs.seconds
            )

    def add_stack_seconds(self, pid: int, role: str, region: str, seconds: float) -> None:
        key = (str(pid), role, region)
        with self._lock:
            self._stacks[key] = self._stacks.get(key, 0.0) + seconds

    def set_up(self, collector: str, up: bool) -> None:
        self._check_collector(collector)
        with self._lock:
            self._up[collector] = int(up)

    def add_error(self, collector: str, n: int = 1) -> None:
        self._check_collector(collector)
        with self._lock:
            self._errors[collector] += n

    def up(self, collector: str) -> bool:
        with self._lock:
            return bool(self._up[collector])

    @staticmethod
    def _check_collector(collector: str) -> None:
        if collector not in COLLECTORS:
            raise ValueError(f"collector must be one of {', '.join(COLLECTORS)}, got {collector!r}")

    def render(self) -> str:
        """The exposition text: every family (even when empty), sorted by name."""
        with self._lock:
            blocks = [
                *self._proc_blocks(),
                self._gc_block(),
                self._block(
                    "stack_seconds_total",
                    "counter",
                    _STACK_HELP,
                    ("pid", "role", "region"),
                    self._stacks.items(),
                ),
                self._block("collector_up", "gauge", _UP_HELP, ("collector",), _by_one(self._up)),
                self._block(
                    "errors_total", "counter", _ERRORS_HELP, ("collector",), _by_one(self._errors)
                ),
            ]
        return "".join(text for _, text in sorted(blocks))

    def _proc_blocks(self) -> list[tuple[str, str]]:
        blocks = []
        for suffix, kind, key, divisor, help_text in _PROC_FAMILIES:
            series = [
                ((pid, ppid, role), row[key] / divisor if divisor else row[key])
                for pid, (ppid, role, row) in self._proc.items()
            ]
            blocks.append(self._block(suffix, kind, help_text, _PROC_LABELS, series))
        return blocks

    @staticmethod
    def _block(
        suffix: str,
        kind: str,
        help_text: str,
        names: tuple[str, ...],
        series: Iterable[tuple[tuple[str, ...], float]],
    ) -> tuple[str, str]:
        name = PREFIX + suffix
        lines = [f"# HELP {name} {_escape_help(help_text)}", f"# TYPE {name} {kind}"]
        for values, value in sorted(series, key=lambda s: _order(s[0])):
            lines.append(f"{name}{_labels(names, values)} {format_value(value)}")
        return name, "\n".join(lines) + "\n"

    def _gc_block(self) -> tuple[str, str]:
        name = PREFIX + "gc_pause_seconds"
        lines = [f"# HELP {name} {_escape_help(_GC_HELP)}", f"# TYPE {name} histogram"]
        names = ("pid", "role", "generation")
        for key in sorted(self._gc, key=_order):
            hist, cumulative = self._gc[key], 0
            for bound, count in zip((*GC_BUCKETS, math.inf), hist.counts):
                cumulative += count
                labels = _labels((*names, "le"), (*key, format_value(bound)))
                lines.append(f"{name}_bucket{labels} {cumulative}")
            lines.append(f"{name}_sum{_labels(names, key)} {format_value(hist.total)}")
            lines.append(f"{name}_count{_labels(names, key)} {cumulative}")
        return name, "\n".join(lines) + "\n"


def _by_one(values: Mapping[str, int]) -> list[tuple[tuple[str, ...], float]]:
    return [((key,), value) for key, value in values.items()]
