"""Evidence from the collectors: which process and which code region, measured from outside.

What: for one spike, from the per-window per-process rows of the collectors' queries, the
process whose signal rose most and by how much, as Evidence rows beside the step-trace evidence:
  penalty        share of a process's non-idle stack samples in sampling_penalties (py-spy)
  memory         GC pause ms per second of a process (GC hook), and its stack share in gc
  communication  share of non-idle stack samples in collective_wait
  load           share in scheduler and in http_serialization (more requests, more of both)
  host           run-queue wait ms/s and involuntary switches/s of a process (/proc): a process
                 waiting for a CPU
  unexplained    the share in model_forward
e.g. "engine (pid 41): 38 % of its non-idle stack samples in sampling_penalties during the spike
vs 2 % before".
What these signals cannot tell apart is written into the note, not guessed: a region's share
is relative (a rise can be more work there or less work elsewhere), run-queue wait with the
process's own CPU time rising may be its own threads competing rather than an outside process,
and when several causes' signals rose together the note names the others.
Pure: lists of query rows in, Evidence out; `ProcessSignals.load` reads the warehouse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rca.consequences import cpu_given_to_siblings
from rca.evidence import Evidence, pearson
from rca.stepcost import mean_or_zero
from rca.window_columns import by_window

# (region, cause its rise speaks for)
REGION_CAUSES = (
    ("sampling_penalties", "penalty"),
    ("gc", "memory"),
    ("collective_wait", "communication"),
    ("scheduler", "load"),
    ("http_serialization", "load"),
    ("model_forward", "unexplained"),
)
# A rise counts as marked when it beats the baseline's noise (3 std) and this floor.
RISE_FLOOR = {"share": 0.05, "gc_ms_per_s": 20.0, "runq_wait_ms_per_s": 20.0}
# A process "did more work itself" when its own CPU time during the spike exceeds its baseline by
# this factor and floor: then its run-queue wait may be its own threads competing for the cores
# (a KV-pressure recompute on vLLM raised its worker's CPU and its wait together), and the wait
# does not speak for `host`. 20 % is above the 1-s-window noise of a busy process's CPU here.
OWN_WORK_FACTOR, OWN_WORK_FLOOR_MS = 1.2, 20.0


@dataclass
class ProcessSignals:
    stack_windows: list[dict] = field(default_factory=list)  # query process_stack_windows
    gc_windows: list[dict] = field(default_factory=list)  # query process_gc_windows
    cpu_windows: list[dict] = field(default_factory=list)  # query process_cpu_windows
    # query cpu_steal_windows: machine-level, the engine's CPUs (not per process)
    steal_windows: list[dict] = field(default_factory=list)
    # series already built from the rows above: every spike of a run reads the same ones, so a
    # run with many spikes scans its rows once, not once per spike and region (rows are never
    # changed after load)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def load(cls, conn, run_id: str, window_s: float) -> ProcessSignals:
        from warehouse.queries import query

        return cls(
            *(
                query(conn, name, run_id=run_id, window_s=window_s)
                for name in (
                    "process_stack_windows",
                    "process_gc_windows",
                    "process_cpu_windows",
                    "cpu_steal_windows",
                )
            )
        )

    def steal_share(self, n: int) -> np.ndarray:
        """The share of the engine CPUs' wanted time stolen by the hypervisor, per window [n]
        (NaN where not measured: no /proc sampler, or a kernel without steal accounting)."""
        return by_window(self.steal_windows, "steal_share", n)

    def by_pid(
        self, rows: str, key: str, n: int, fill: float = np.nan
    ) -> dict[int, tuple[str, np.ndarray]]:
        """`per_pid` of one of the row lists (by attribute name), built once per run."""
        memo = ("by_pid", rows, key, n, repr(fill))
        if memo not in self._memo:
            self._memo[memo] = per_pid(getattr(self, rows), key, n, fill)
        return _copied(self._memo[memo])

    def shares(self, region: str, n: int) -> dict[int, tuple[str, np.ndarray]]:
        """`_share_series` of the stack rows for one region, built once per run."""
        memo = ("shares", region, n)
        if memo not in self._memo:
            busy = ("busy", n)
            if busy not in self._memo:
                self._memo[busy] = per_pid(
                    self.stack_windows, "busy_share", n, where=lambda r: r["region"] != "idle"
                )
            self._memo[memo] = _share_series(self.stack_windows, region, n, self._memo[busy])
        return _copied(self._memo[memo])


def _copied(series: dict[int, tuple[str, np.ndarray]]) -> dict[int, tuple[str, np.ndarray]]:
    """A copy callers may change without touching the memo."""
    return {pid: (role, values.copy()) for pid, (role, values) in series.items()}


@dataclass
class _Rise:
    pid: int
    role: str
    series: np.ndarray
    during: float
    before: float
    marked: bool


def per_pid(
    rows: list[dict], key: str, n: int, fill: float = np.nan, where=lambda r: True
) -> dict[int, tuple[str, np.ndarray]]:
    """pid → (role, `key` per window [n]) of per-window process rows: `fill` where a window has no
    row or a NULL value, the last row's value where several rows share a window; processes in
    the order their first row comes, with that row's role; rows failing `where` are skipped.
    Columns are built once and written with numpy (a run of an hour has ~10^5 rows)."""
    kept = [r for r in rows if where(r) and 0 <= r["window"] < n]
    out: dict[int, tuple[str, np.ndarray]] = {}
    if not kept:
        return out
    pid = np.array([int(r["pid"]) for r in kept], dtype=np.int64)
    window = np.array([r["window"] for r in kept], dtype=np.int64)
    raw = [r.get(key) for r in kept]
    has = np.array([v is not None for v in raw], dtype=bool)
    value = np.array([float(v) if v is not None else np.nan for v in raw], dtype=np.float64)
    pids, first = np.unique(pid, return_index=True)
    for i in np.argsort(first, kind="stable"):
        series = np.full(n, fill)
        sel = np.flatnonzero((pid == pids[i]) & has)
        # the last row of a window wins: keep each window's last occurrence only
        w_rev = window[sel][::-1]
        _, last = np.unique(w_rev, return_index=True)
        series[w_rev[last]] = value[sel][::-1][last]
        out[int(pids[i])] = (kept[first[i]].get("role") or "?", series)
    return out


def own_cpu(
    signals: ProcessSignals, pid: int, in_spike: np.ndarray, in_base: np.ndarray
) -> tuple[float, float]:
    """(mean CPU ms/s during the spike, before it) of one process, from /proc."""
    n = len(in_spike)
    cpu = signals.by_pid("cpu_windows", "cpu_ms_per_s", n).get(pid, ("", np.full(n, np.nan)))[1]
    return mean_or_zero(cpu[in_spike]), mean_or_zero(cpu[in_base])


def did_own_work(cpu_during: float, cpu_before: float) -> bool:
    """True when a process's own CPU time rose (see OWN_WORK_FACTOR): run-queue wait alone
    cannot then tell its own threads competing from another process taking its cores."""
    return cpu_during > OWN_WORK_FACTOR * cpu_before + OWN_WORK_FLOOR_MS


def biggest_rise(
    series: dict[int, tuple[str, np.ndarray]],
    in_spike: np.ndarray,
    in_base: np.ndarray,
    floor: float,
) -> _Rise | None:
    best = None
    for pid, (role, values) in series.items():
        s, b = values[in_spike], values[in_base]
        if not np.isfinite(s).any() or not np.isfinite(b).any():
            continue
        during, before = mean_or_zero(s), mean_or_zero(b)
        noise = float(np.nanstd(b)) if np.isfinite(b).sum() > 1 else 0.0
        rise = _Rise(pid, role, values, during, before, during - before > max(3 * noise, floor))
        if best is None or during - before > best.during - best.before:
            best = rise
    return best


def _share_series(
    rows: list[dict], region: str, n: int, busy: dict[int, tuple[str, np.ndarray]]
) -> dict[int, tuple[str, np.ndarray]]:
    """busy_share of `region` per process that was ever sampled in it; 0 in windows where the
    process was sampled busy but not in that region (`busy`: per_pid of the non-idle rows'
    busy_share), NaN where it was not sampled busy at all."""
    share = per_pid(rows, "busy_share", n, where=lambda r: r["region"] == region)
    out = {}
    for pid, (role, in_region) in share.items():
        values = np.where(np.isfinite(busy[pid][1]), 0.0, np.nan)
        out[pid] = (role, np.where(np.isfinite(in_region), in_region, values))
    return out


def process_evidence(
    signals: ProcessSignals,
    latency: np.ndarray,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    window_s: float,
) -> dict[str, list[Evidence]]:
    """cause → Evidence rows from the collectors (empty lists when a run has no collector files)."""
    n = len(latency)
    rows = _stack_rows(signals, latency, in_spike, in_base, n)
    gc = _gc_row(signals, latency, in_spike, in_base, window_s)
    if gc is not None:
        rows.append(gc)
    runq = biggest_rise(
        signals.by_pid("cpu_windows", "runq_wait_ms_per_s", n),
        in_spike,
        in_base,
        RISE_FLOOR["runq_wait_ms_per_s"],
    )
    if runq is not None and _rose(runq):
        rows.append(("host", runq, _runq_evidence(signals, runq, latency, in_spike, in_base, n)))
    return _cross_referenced(rows)


_Row = tuple[str, _Rise, Evidence]  # cause, the rise, its evidence


def _rose(rise: _Rise) -> bool:
    """Evidence for a cause is a signal that moved the way the cause would move it: these all
    rise with their cause, so a share or a wait that stayed flat or fell is no evidence (a
    falling share listed for load read as support on a replayed production burst's page)."""
    return rise.during > rise.before


def _stack_rows(
    signals: ProcessSignals,
    latency: np.ndarray,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    n: int,
) -> list[_Row]:
    """Per region of REGION_CAUSES, the process whose share of stack samples there rose most."""
    rows: list[_Row] = []
    for region, cause in REGION_CAUSES:
        rise = biggest_rise(signals.shares(region, n), in_spike, in_base, RISE_FLOOR["share"])
        if rise is None or not _rose(rise):
            continue
        note = (
            f"{rise.role} (pid {rise.pid}): {rise.during:.0%} of its non-idle stack samples in {region} "
            f"during the spike vs {rise.before:.0%} before (py-spy)"
        )
        evidence = Evidence(
            f"stack_share.{region}",
            rise.during,
            rise.before,
            "fraction",
            note,
            pearson(rise.series, latency),
        )
        rows.append((cause, rise, evidence))
    return rows


def _gc_row(
    signals: ProcessSignals,
    latency: np.ndarray,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    window_s: float,
) -> _Row | None:
    """The process whose GC pause time per second rose most (memory), if one rose enough."""
    gc = biggest_rise(
        signals.by_pid("gc_windows", "pause_ms", len(latency), fill=0.0),
        in_spike,
        in_base,
        RISE_FLOOR["gc_ms_per_s"] * window_s,
    )
    if gc is None or not _rose(gc):
        return None
    per_s = 1.0 / window_s
    note = (
        f"{gc.role} (pid {gc.pid}): GC {gc.during * per_s:.0f} ms/s during the spike vs "
        f"{gc.before * per_s:.0f} before (GC hook inside the process)"
    )
    evidence = Evidence(
        "gc_ms_per_s.process",
        gc.during * per_s,
        gc.before * per_s,
        "ms/s",
        note,
        pearson(gc.series, latency),
    )
    return ("memory", gc, evidence)


def _cross_referenced(rows: list[_Row]) -> dict[str, list[Evidence]]:
    """cause → evidence; a marked rise names the other causes' marked rises of the same windows
    (and a share says it is relative), since these signals alone do not order them."""
    marked: dict[str, str] = {}  # cause → short description of a marked rise
    for cause, rise, evidence in rows:
        if rise.marked:
            marked.setdefault(cause, f"{cause} ({evidence.signal} of {rise.role})")
    out: dict[str, list[Evidence]] = {}
    for cause, rise, evidence in rows:
        if rise.marked:
            others = [text for c, text in marked.items() if c != cause]
            if evidence.signal.startswith("stack_share."):
                evidence.note += (
                    "; a share is relative: more work in this region or less elsewhere look alike"
                )
            if others:
                evidence.note += (
                    "; also rose in the same windows: "
                    + ", ".join(others)
                    + " — these signals alone do not tell which caused the other"
                )
        out.setdefault(cause, []).append(evidence)
    return out


def _runq_evidence(
    signals: ProcessSignals,
    runq: _Rise,
    latency: np.ndarray,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    n: int,
) -> Evidence:
    """Run-queue wait of the process with the largest rise, with its own CPU time beside it."""
    invol = signals.by_pid("cpu_windows", "involuntary_switches_per_s", n).get(
        runq.pid, ("", np.full(n, np.nan))
    )[1]
    cpu_s, cpu_b = own_cpu(signals, runq.pid, in_spike, in_base)
    note = (
        f"{runq.role} (pid {runq.pid}): waited {runq.during:.0f} ms/s for a CPU during the spike vs "
        f"{runq.before:.0f} before; involuntary switches {mean_or_zero(invol[in_spike]):.0f}/s vs "
        f"{mean_or_zero(invol[in_base]):.0f}/s; its own CPU {cpu_s:.0f} vs {cpu_b:.0f} ms/s (/proc)"
    )
    if runq.marked:
        note += (
            "; its own CPU time rose too: its threads may be competing with each other rather than "
            "with another process — run-queue delay alone cannot tell them apart"
            if did_own_work(cpu_s, cpu_b)
            else "; it did no more work itself: CPU contention from outside the process"
        )
        if not did_own_work(cpu_s, cpu_b):  # outside the process — and outside the engine?
            went = cpu_given_to_siblings(
                signals.by_pid("cpu_windows", "cpu_ms_per_s", n),
                runq.pid,
                runq.during - runq.before,
                in_spike,
                in_base,
            )
            note += f"; {went.note()}"
    return Evidence(
        "runq_wait_ms_per_s.process",
        runq.during,
        runq.before,
        "ms/s",
        note,
        pearson(runq.series, latency),
    )


@dataclass
class ProcessSeries:
    """One per-process signal as a series over the run's windows, for ranking beside /metrics."""

    name: str  # e.g. "EngineCore (pid 41) stack_share.sampling_penalties"
    cause: str  # the cause its rise speaks for
    kind: str  # key of RISE_FLOOR: share | gc_ms_per_s | runq_wait_ms_per_s
    unit: str
    values: np.ndarray  # [n_windows]
    role: str
    pid: int
    detail: str  # what the value is, for the evidence text
    source: str  # which collector measured it


def process_series(signals: ProcessSignals, n: int, window_s: float) -> list[ProcessSeries]:
    """Every process's stack-region shares, GC ms/s and run-queue wait ms/s (the signals
    `process_evidence` reads) as series over n windows, each with the cause it speaks for.
    Run-queue wait speaks for `host`; its text says whether the process's own CPU time rose."""
    out = []
    for region, cause in REGION_CAUSES:
        for pid, (role, values) in signals.shares(region, n).items():
            out.append(
                ProcessSeries(
                    f"{role} (pid {pid}) stack_share.{region}",
                    cause,
                    "share",
                    "fraction",
                    values,
                    role,
                    pid,
                    f"of its non-idle stack samples in {region}",
                    "py-spy",
                )
            )
    for pid, (role, values) in signals.by_pid("gc_windows", "pause_ms", n, fill=0.0).items():
        out.append(
            ProcessSeries(
                f"{role} (pid {pid}) gc_ms_per_s",
                "memory",
                "gc_ms_per_s",
                "ms/s",
                values / window_s,
                role,
                pid,
                "ms/s of GC pauses",
                "GC hook inside the process",
            )
        )
    for pid, (role, values) in signals.by_pid("cpu_windows", "runq_wait_ms_per_s", n).items():
        out.append(
            ProcessSeries(
                f"{role} (pid {pid}) runq_wait_ms_per_s",
                "host",
                "runq_wait_ms_per_s",
                "ms/s",
                values,
                role,
                pid,
                "ms/s waiting for a CPU",
                "/proc schedstat",
            )
        )
    return out


def describe_rise(
    series: ProcessSeries,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    cpu: tuple[float, float] | None = None,
) -> str:
    """Evidence text naming the process and the region, e.g. "EngineCore (pid 41): 38 % of its
    non-idle stack samples in sampling_penalties during the spike vs 2 % before (py-spy)".
    `cpu`: the process's own CPU ms/s (during, before: `own_cpu`), said beside a run-queue wait."""
    during, before = mean_or_zero(series.values[in_spike]), mean_or_zero(series.values[in_base])
    fmt = (lambda v: f"{v:.0%}") if series.kind == "share" else (lambda v: f"{v:.0f}")
    text = f"{series.role} (pid {series.pid}): {fmt(during)} {series.detail} during the spike vs {fmt(before)} before ({series.source})"
    if series.kind == "share":
        text += "; a share is relative: more work in this region or less elsewhere look alike"
    if series.kind == "runq_wait_ms_per_s" and cpu is not None:
        cpu_s, cpu_b = cpu
        text += f"; its own CPU {cpu_s:.0f} vs {cpu_b:.0f} ms/s" + (
            "; it rose too: its own threads may be competing — run-queue delay alone cannot tell,"
            " so it does not vote for host"
            if did_own_work(cpu_s, cpu_b)
            else "; it did no more work itself: CPU contention from outside the process"
        )
    return text
