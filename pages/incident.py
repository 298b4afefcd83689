"""The incident page of one analysed run: what spiked, when, why, against the ground truth.

Everything comes from the warehouse queries: the run header, its latency windows, steps, GC
pauses, NVML samples and the stored analysis (spikes, attributions, evidence, and rca.findings'
normal-vs-spike comparison and fault verdicts); nothing is analysed here. The words (headline,
verdict, the index entry) are written here and nowhere else. Times are seconds from
load_started_ns. The step series is downsampled to at most MAX_STEPS points, keeping the slowest
step of each chunk so stalls stay visible; GC pauses to the MAX_GC_PAUSES longest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pages.confirm import VERDICTS as CONFIRM_VERDICTS
from pages.display_windows import display_windows
from pages.fields import ContextError, count, finite, need_share, one_of, real, relative_href
from pages.index import ReportEntry
from pages.observed_signals import signal_coverage
from pages.run_header import RunHeader, read_run_header
from spikelens_common.said_causes import said_causes
from warehouse.db import connect
from warehouse.observed_windows import is_observed, latency_windows
from warehouse.queries import query

MAX_STEPS = 2000
MAX_GC_PAUSES = 2000
_METRIC_LABEL = {"itl_p99": "ITL p99", "ttft_p99": "TTFT p99", "e2e_p99": "E2E p99"}


@dataclass(frozen=True)
class Evidence:
    """One signal behind a cause: its value in the spike against its baseline."""

    signal: str = ""
    value: float | None = None
    baseline: float | None = None
    unit: str = ""
    note: str = ""
    pearson_r: float | None = None  # correlation with the spike's latency series, if computed


@dataclass(frozen=True)
class Attribution:
    """One cause of a spike and the share of the excess latency it explains."""

    cause: str
    share: float  # in [0, 1]
    confidence: float | None = None
    evidence: tuple[Evidence, ...] = ()

    def __post_init__(self) -> None:
        need_share(self.share, "share")


@dataclass(frozen=True)
class Spike:
    """A reported spike with its causes, largest share first (the bars read top-down)."""

    spike_id: int
    metric: str  # itl_p99 | ttft_p99 | e2e_p99: the series that defines it
    start_s: float
    end_s: float
    peak_ms: float | None
    baseline_ms: float | None
    top_cause: str
    attributions: tuple[Attribution, ...]
    metrics: tuple[str, ...] = ()  # every latency series the spike covers
    detector: str | None = None
    severity: str | float | None = None
    severity_score: float | None = None
    summary: str | None = ""  # one line of why, from the attribution
    coverage: float | None = None  # share of the excess the engine's step slowdown accounts for
    uncovered: float | None = None  # share of the excess no measured signal covers

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ContextError("end_s", f"{self.end_s!r} is before start_s {self.start_s!r}")
        if self.uncovered is not None:
            need_share(self.uncovered, "uncovered")
        object.__setattr__(
            self, "attributions", tuple(sorted(self.attributions, key=lambda a: -float(a.share)))
        )

    @property
    def co_causes(self) -> tuple[Attribution, ...]:
        """The causes said beside the verdict, largest first (spikelens_common.said_causes, the
        rule the evaluation scores): each covers a third of the excess or more, like the top
        cause, so naming one alone would hide a cause nearly as large as itself."""
        by_cause = {a.cause: a for a in self.attributions}
        said = said_causes(self.top_cause, {c: float(a.share) for c, a in by_cause.items()})
        return tuple(by_cause[c] for c in said[1:])


@dataclass(frozen=True)
class Window:
    """One latency window; running/waiting: mean batch and queue of the window's steps."""

    t_s: float
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    ttft_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    requests: int | None = None
    tokens: int | None = None
    running: float | None = None
    waiting: float | None = None


@dataclass(frozen=True)
class StepPoint:
    """A rank-0 step with its stage times and KV/queue state, or another rank's collective wait."""

    t_s: float
    rank: int | None = None
    forward_ms: float | None = None
    penalty_ms: float | None = None
    sample_ms: float | None = None
    schedule_ms: float | None = None
    comm_ms: float | None = None
    batch_size: float | None = None
    kv_blocks_used: float | None = None
    kv_blocks_total: float | None = None
    preempted: float | None = None
    waiting: float | None = None


@dataclass(frozen=True)
class NvmlSample:
    """One NVML sample of one GPU (fields the device does not report are None)."""

    t_s: float
    gpu: int
    util_gpu: float | None = None
    util_mem: float | None = None
    mem_used: float | None = None
    mem_total: float | None = None
    sm_clock: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    clock_event_reasons: float | None = None


@dataclass(frozen=True)
class GcPause:
    t_s: float
    duration_ms: float
    generation: int | None = None


@dataclass(frozen=True)
class Comparison:
    """A signal's mean outside every spike (2-window guard) and inside any spike."""

    signal: str
    normal: float | None
    spike: float | None
    unit: str = ""


@dataclass(frozen=True)
class Correlation:
    signal: str
    metric: str
    r: float | None
    lag_s: float | None = None
    n: int | None = None
    note: str = ""


@dataclass(frozen=True)
class Fault:
    """An injected fault (ground truth) and what the analysis made of it."""

    kind: str
    cause: str
    start_s: float
    end_s: float
    detected: bool  # a spike was matched to it
    attributed_cause: str | None = None  # that spike's top cause
    params: Any = None
    matched: bool = field(init=False)  # detected and blamed on the right cause

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "matched", bool(self.detected) and self.attributed_cause == self.cause
        )


@dataclass(frozen=True)
class Confirmation:
    """`spikelens confirm`'s result for one spike: the spike replayed with `cause` removed."""

    spike_id: int
    cause: str
    verdict: str  # confirmed | not confirmed | inconclusive
    reason: str = ""
    intervention: str = ""  # what was changed, in words
    share_removed: float | None = None  # of the recorded excess (None: not measured)
    share_low: float | None = None  # min over the repeat pairs
    share_high: float | None = None  # max over the repeat pairs
    href: str = ""  # its page, relative to the incident page
    measured: bool = False  # client/network: client vs server times compared, nothing re-run

    def __post_init__(self) -> None:
        one_of(self.verdict, CONFIRM_VERDICTS, "confirmations.verdict")
        object.__setattr__(self, "href", relative_href(self.href, "confirmations.page"))

    @property
    def words(self) -> str:
        """e.g. "confirmed: 92 % [84, 96] of the excess went away"."""
        if self.share_removed is None:
            return self.verdict
        if self.measured:
            return f"{self.verdict} by measurement: {self.share_removed:.0%} of the excess was outside the engine"
        share = f"{self.share_removed:.0%}"
        if self.share_low is not None and self.share_high is not None:
            share += f" [{self.share_low:.0%}, {self.share_high:.0%}]"
        return f"{self.verdict}: {share} of the excess went away"


@dataclass(frozen=True)
class Totals:
    """The run's measured requests and latency percentiles (warehouse/queries/totals.sql)."""

    requests: int | None = None
    errors: int | None = None
    output_tokens: int | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None


@dataclass(frozen=True)
class Measurement:
    """The load generator's times against the engine server's socket-side ones, per request."""

    requests: int | None = None
    ttft_diff_p50_ms: float | None = None
    ttft_diff_p99_ms: float | None = None
    e2e_diff_p50_ms: float | None = None
    e2e_diff_p99_ms: float | None = None
    kernel_stamped_share: float | None = None  # share stamped by the kernel at both ends
    # each inter-token gap against the gap between the server's writes (None: not stamped)
    itl_diff_p50_ms: float | None = None
    itl_diff_p99_ms: float | None = None


@dataclass(frozen=True)
class ReportedTimes:
    """The client's TTFT against the engine's own, as vLLM reported it per request (query
    `reported_times`): what lies between them is vLLM's front end, the transit and the client."""

    requests: int
    client_ttft_p50_ms: float | None = None
    client_ttft_p99_ms: float | None = None
    engine_ttft_p50_ms: float | None = None
    engine_ttft_p99_ms: float | None = None
    outside_p50_ms: float | None = None
    outside_p99_ms: float | None = None
    engine_mean_itl_p50_ms: float | None = None


@dataclass(frozen=True)
class DetectionFloor:
    """The lowest P99 a window of one series had to reach to count in this run: the baseline the
    analysis stored (rca.detect), so a reader sees how small a rise could have gone unseen."""

    metric: str  # itl_p99 | ttft_p99 | e2e_p99
    median_ms: float  # the run's robust baseline of the series
    threshold_ms: float  # the highest of its floors (k spreads, relative, absolute)


@dataclass(frozen=True)
class IncidentContext:
    """Everything the incident page shows."""

    run: RunHeader
    headline: str = ""
    suppressed_spikes: int = 0  # minor unexplained slowdowns stored but not reported
    totals: Totals = field(default_factory=Totals)
    window_s: float | None = None
    windows: tuple[Window, ...] = ()
    steps: tuple[StepPoint, ...] = ()
    nvml: tuple[NvmlSample, ...] = ()
    gc_pauses: tuple[GcPause, ...] = ()
    spikes: tuple[Spike, ...] = ()
    comparison: tuple[Comparison, ...] = ()
    correlations: tuple[Correlation, ...] = ()
    faults: tuple[Fault, ...] = ()
    measurement: Measurement | None = None  # None: no server-side times (e.g. an external target)
    reported: ReportedTimes | None = None  # None: the server reported no per-request times
    client_lag_p99_ms: tuple[float, float] | None = None  # per-window range, shown when invalid
    confirmations: tuple[Confirmation, ...] = ()  # `spikelens confirm` results, latest per spike
    # an observed run (imported from Prometheus): what its series can and cannot tell, one
    # sentence per family (pages.observed_signals); () for a load-test run
    signal_coverage: tuple[str, ...] = ()
    # how a window came to count as a spike: the detector's preset and its thresholds, one
    # sentence (`detection_line`); "" where the analysis stored no settings
    detection: str = ""
    # the P99 a window of each series had to reach in this run: what a rise had to beat to be seen
    detection_floors: tuple[DetectionFloor, ...] = ()

    def __post_init__(self) -> None:
        if not self.headline.strip():
            object.__setattr__(self, "headline", incident_headline(self))
        if not self.correlations:
            object.__setattr__(self, "correlations", correlations_from_evidence(self.spikes))

    @property
    def invalid(self) -> bool:
        """The load generator judged itself unfit: its latencies are not the engine's alone."""
        return self.run.status == "invalid"

    @property
    def observed(self) -> bool:
        """Imported from monitoring: no recorded requests, so nothing to replay or confirm."""
        return is_observed(self.run.engine)

    @property
    def top(self) -> Spike | None:
        """The spike the first screen talks about (worst_spike)."""
        return worst_spike(self.spikes)

    @property
    def verdict(self) -> str | None:
        """The index's verdict: invalid; else, with injected faults, matched (every fault found
        with the right cause) / wrong cause (every one found) / missed; else none."""
        if self.invalid:
            return "invalid"
        if not self.faults:
            return None
        if all(f.matched for f in self.faults):
            return "matched"
        return "wrong cause" if all(f.detected for f in self.faults) else "missed"

    def confirmation_of(self, spike_id: int) -> Confirmation | None:
        """The latest confirmation of the spike's stored verdict (its top cause), else any."""
        mine = [c for c in self.confirmations if c.spike_id == spike_id]
        spike = next((s for s in self.spikes if s.spike_id == spike_id), None)
        verdict = [c for c in mine if spike is not None and c.cause == spike.top_cause]
        found = verdict or mine
        return found[0] if found else None

    def chart_windows(self) -> tuple[Window, ...]:
        """The windows the timeline and charts draw: a long run's in display buckets."""
        return display_windows(self.windows)

    def entry(self) -> ReportEntry:
        """The page's report.json; an invalid run names a cause only where the analysis kept one
        (rca.validity: the server's own times rose too), never 'unexplained' as if judged."""
        top = self.top
        judged = top is not None and (not self.invalid or top.top_cause != "unexplained")
        return ReportEntry.of(
            self.run,
            "incident",
            verdict=self.verdict,
            top_cause=top.top_cause if judged and top else None,
            headline=self.headline,
            confirmation=proof.words
            if top and (proof := self.confirmation_of(top.spike_id))
            else None,
        )


def worst_spike(spikes: tuple[Spike, ...]) -> Spike | None:
    """The spike with the largest peak/baseline ratio: the one the headline and first screen
    talk about (the only such formula)."""
    if not spikes:
        return None
    return max(spikes, key=lambda s: (s.peak_ms or 0) / max(s.baseline_ms or 1e-9, 1e-9))


def correlations_from_evidence(spikes: tuple[Spike, ...]) -> tuple[Correlation, ...]:
    """Correlation rows from evidence that carries a `pearson_r` (the page's default when it is
    given none of its own). Strongest |r| first."""
    rows = [
        Correlation(
            e.signal, s.metric, e.pearson_r, note=f"{a.cause}: {e.note}" if e.note else a.cause
        )
        for s in spikes
        for a in s.attributions
        for e in a.evidence
        if e.pearson_r is not None
    ]
    return tuple(sorted(rows, key=lambda r: -abs(r.r or 0.0)))


def _reported(row: dict) -> ReportedTimes | None:
    if not row["requests"]:
        return None
    return ReportedTimes(
        int(row["requests"]), **{k: finite(v) for k, v in row.items() if k != "requests"}
    )


def build_incident_context(db_path: str | Path, run_id: str) -> IncidentContext:
    """The incident context of an analysed run; KeyError when it is not ingested or analysed."""
    with connect(db_path, read_only=True) as conn:
        run = read_run_header(conn, run_id)
        analysis = query(conn, "run_analysis", run_id=run_id)
        if not analysis:
            raise KeyError(
                f"run {run_id!r} has not been analysed (run rca.analyze.analyze_run first)"
            )
        window_s = float(analysis[0]["window_s"])
        rows = {
            name: query(conn, name, run_id=run_id, window_s=window_s)
            for name in ("step_stages", "client_windows")
        }
        rows["windows"] = latency_windows(conn, run_id, window_s, run.engine)
        rows |= {
            name: query(conn, name, run_id=run_id)
            for name in (
                "step_timeline",
                "step_rank_series",
                "nvml_samples",
                "gc_pauses",
                "totals",
                "measurement_check",
                "reported_times",
                "spikes",
                "attributions",
                "evidence",
                "spike_comparison",
                "fault_verdicts",
                "confirmations",
                "metric_names",
            )
        }
    spikes = _spikes(
        [s for s in rows["spikes"] if not s["suppressed"]], rows["attributions"], rows["evidence"]
    )
    totals_row: dict[str, Any] = {
        k: (count(v) if k in ("requests", "errors", "output_tokens") else finite(v))
        for k, v in rows["totals"][0].items()
    }
    measurement = rows["measurement_check"][0]
    measurement_row: dict[str, Any] = {
        k: (count(v) if k == "requests" else finite(v)) for k, v in measurement.items()
    }
    return IncidentContext(
        run=run,
        suppressed_spikes=sum(bool(s["suppressed"]) for s in rows["spikes"]),
        totals=Totals(**totals_row),
        window_s=window_s,
        windows=_windows(rows["windows"], rows["step_stages"]),
        steps=_steps_with_ranks(rows["step_timeline"], rows["step_rank_series"]),
        nvml=tuple(_nvml_sample(r) for r in _downsample_rows(rows["nvml_samples"], MAX_STEPS)),
        gc_pauses=_gc_pauses(rows["gc_pauses"]),
        spikes=spikes,
        comparison=tuple(
            Comparison(c["signal"], finite(c["normal"]), finite(c["spike"]), c["unit"] or "")
            for c in rows["spike_comparison"]
        ),
        faults=tuple(_fault(f) for f in rows["fault_verdicts"]),
        measurement=(Measurement(**measurement_row) if measurement["requests"] else None),
        reported=_reported(rows["reported_times"][0]),
        client_lag_p99_ms=_lag_range(rows["client_windows"]),
        confirmations=tuple(confirmation_from_row(c) for c in rows["confirmations"]),
        signal_coverage=(
            signal_coverage(r["name"] for r in rows["metric_names"])
            if is_observed(run.engine)
            else ()
        ),
        detection=detection_line(analysis[0]["config"]),
        detection_floors=detection_floors(analysis[0]["baselines"]),
    )


def _stored_json(value: Any) -> Any:
    """A JSON column as DuckDB returns it: text parsed, anything else as it is."""
    return json.loads(value) if isinstance(value, str) else value


def detection_floors(baselines: Any) -> tuple[DetectionFloor, ...]:
    """The stored per-series baselines (rca.analyze) as floors, TTFT then ITL then E2E; a series
    with no finite median or threshold (too few windows) is left out."""
    stored = _stored_json(baselines)
    if not isinstance(stored, dict):
        return ()
    floors = []
    for metric in ("ttft_p99", "itl_p99", "e2e_p99"):
        b = stored.get(metric) or {}
        median, threshold = finite(b.get("median_ms")), finite(b.get("threshold_ms"))
        if median and threshold:
            floors.append(DetectionFloor(metric, median, threshold))
    return tuple(floors)


def detection_line(config: Any) -> str:
    """The detector's preset and thresholds as the analysis stored them (rca.analyze: the JSON
    of `analyses.config`), in words; "" when it stored no detection settings."""
    stored = _stored_json(config)
    settings = stored.get("detect") if isinstance(stored, dict) else None
    if not isinstance(settings, dict):
        return ""
    try:
        k, rel = float(settings["mad_k"]), float(settings["min_rel_excess"])
        floor_ms, windows = float(settings["min_abs_excess_ms"]), int(settings["min_windows"])
        tests = [str(t) for t in settings["detectors"]]
    except (KeyError, TypeError, ValueError):
        return ""
    preset = stored.get("preset", "")
    if preset:
        name = f"the {preset} detector"
    elif preset is None:
        name = "detector settings given in code"
    else:  # analysed before the preset was recorded
        name = "the detector"
    return (
        f"Spikes found by {name}: a window counts when its P99 is over {k:g} robust standard"
        f" deviations above the run's median, at least {1 + rel:g}× it and {floor_ms:g} ms over,"
        f" for {windows} windows or more (tests: {', '.join(tests)})."
    )


def confirmation_from_row(row: dict[str, Any]) -> Confirmation:
    """A stored confirmation (flows/confirm.py)."""
    return Confirmation(
        spike_id=int(row["spike_id"]),
        cause=row["cause"],
        verdict=row["verdict"],
        reason=row["reason"] or "",
        intervention=row["intervention"] or "",
        share_removed=finite(row["share_removed"]),
        share_low=finite(row["share_low"]),
        share_high=finite(row["share_high"]),
        href=row["page"] or "",
        measured=row.get("pairs") == 0,
    )


def _fault(row: dict[str, Any]) -> Fault:
    """A stored fault verdict (rca.findings): detected when a reported spike was matched."""
    return Fault(
        kind=row["kind"],
        cause=row["cause"],
        start_s=real(row["start_s"], "faults.start_s"),
        end_s=real(row["end_s"], "faults.end_s"),
        detected=row["spike_id"] is not None,
        attributed_cause=row["attributed_cause"],
        params=row["params"],
    )


def _lag_range(client_windows: list[dict]) -> tuple[float, float] | None:
    """The lowest and highest per-window event-loop lag p99 of the load generator (ms)."""
    lags = [v for w in client_windows if (v := finite(w["lag_p99_ms"])) is not None]
    return (min(lags), max(lags)) if lags else None


def _nvml_sample(row: dict[str, Any]) -> NvmlSample:
    """One NVML row: the GPU index as it is, every reading finite or None."""
    values: dict[str, Any] = {k: (v if k == "gpu" else finite(v)) for k, v in row.items()}
    return NvmlSample(**values)


def _spikes(
    spikes: list[dict], attributions: list[dict], evidence: list[dict]
) -> tuple[Spike, ...]:
    by_cause: dict = {}
    for e in evidence:
        by_cause.setdefault((e["spike_id"], e["cause"]), []).append(
            Evidence(
                e["signal"],
                finite(e["value"]),
                finite(e["baseline"]),
                e["unit"] or "",
                e["note"] or "",
                finite(e["pearson_r"]),
            )
        )
    out = []
    for s in spikes:
        causes = tuple(
            Attribution(
                a["cause"],
                float(a["share"]),
                finite(a["confidence"]),
                tuple(by_cause.get((s["spike_id"], a["cause"]), [])),
            )
            for a in attributions
            if a["spike_id"] == s["spike_id"]
        )
        out.append(
            Spike(
                spike_id=int(s["spike_id"]),
                metric=s["metric"],
                start_s=float(s["start_s"]),
                end_s=float(s["end_s"]),
                peak_ms=finite(s["peak_ms"]),
                baseline_ms=finite(s["baseline_ms"]),
                top_cause=s["top_cause"],
                attributions=causes,
                metrics=tuple(s["metrics"] or ()),
                detector=s["detector"],
                severity=s["severity"],
                severity_score=finite(s["severity_score"]),
                summary=s["summary"],
                coverage=finite(s["coverage"]),
                uncovered=finite(s.get("uncovered")),
            )
        )
    return tuple(out)


def _windows(windows: list[dict], step_windows: list[dict]) -> tuple[Window, ...]:
    step_by_window = {sw["window"]: sw for sw in step_windows}
    return tuple(
        Window(
            t_s=float(w["t_s"]),
            itl_p50_ms=finite(w["itl_p50_ms"]),
            itl_p99_ms=finite(w["itl_p99_ms"]),
            ttft_p99_ms=finite(w["ttft_p99_ms"]),
            e2e_p99_ms=finite(w["e2e_p99_ms"]),
            requests=int(w["requests"]),
            tokens=int(w["tokens"]),
            running=finite(step_by_window.get(w["window"], {}).get("batch_size")),
            waiting=finite(step_by_window.get(w["window"], {}).get("waiting")),
        )
        for w in windows
    )


def _gc_pauses(pauses: list[dict]) -> tuple[GcPause, ...]:
    longest = sorted(pauses, key=lambda p: -p["duration_ms"])[:MAX_GC_PAUSES]
    return tuple(
        GcPause(float(p["t_s"]), float(p["duration_ms"]), p["generation"])
        for p in sorted(longest, key=lambda p: p["t_s"])
    )


def _downsample_rows(rows: list[dict], max_points: int) -> list[dict]:
    """Every k-th row so that at most max_points remain (for per-sample series)."""
    step = max(1, -(-len(rows) // max_points))
    return rows[::step]


_STAGES = ("forward_ms", "penalty_ms", "sample_ms", "schedule_ms", "comm_ms", "batch_size")
_QUEUE = ("kv_blocks_used", "kv_blocks_total", "preempted", "waiting")


def _steps_with_ranks(steps: list[dict], rank_steps: list[dict]) -> tuple[StepPoint, ...]:
    """Rank-0 steps with their stage times and KV/queue series, plus the other ranks' comm wait
    (one row per rank and step), each rank downsampled to at most MAX_STEPS points."""
    by_step = {(r["step"], r["rank"]): r for r in rank_steps}
    out = []
    for s in downsample_steps(steps):
        extra = by_step.get((s["step"], 0), {})
        out.append(
            StepPoint(
                t_s=real(s["t_s"], "steps.t_s"),
                rank=0,
                **{k: finite(s[k]) for k in _STAGES},
                **{k: finite(extra.get(k)) for k in _QUEUE},
            )
        )
    others = [r for r in rank_steps if r["rank"] != 0]
    for rank in sorted({r["rank"] for r in others}):
        rows = [r for r in others if r["rank"] == rank]
        out += [
            StepPoint(t_s=real(r["t_s"], "steps.t_s"), rank=rank, comm_ms=finite(r["comm_ms"]))
            for r in _downsample_rows(rows, MAX_STEPS)
        ]
    return tuple(out)


def downsample_steps(steps: list[dict], max_points: int = MAX_STEPS) -> list[dict]:
    """At most max_points steps: the slowest (dur_ms) of each of max_points equal-count chunks."""
    if len(steps) <= max_points:
        return steps
    chunks = np.array_split(np.arange(len(steps)), max_points)
    return [steps[int(max(c, key=lambda i: steps[i]["dur_ms"] or 0.0))] for c in chunks]


def _mmss(t_s: float) -> str:
    t = max(0, round(t_s))
    return f"{t // 60:02d}:{t % 60:02d}"


def incident_headline(ctx: IncidentContext) -> str:
    """The page's first line: why the run is invalid; else the worst spike, its span and top
    cause; else that nothing spiked, with the run's figures."""
    if ctx.invalid:
        return invalid_headline(ctx)
    text = _spike_headline(ctx.spikes, ctx.totals, ctx.run.duration_s)
    return _with_suppressed(text, ctx.suppressed_spikes)


def invalid_headline(ctx: IncidentContext) -> str:
    """An invalid run says so and why, first: its latencies are the load generator's as much as
    the engine's, so it never reads as "no spike" (nor names a cause)."""
    lag = ctx.client_lag_p99_ms
    why = (
        f"the load generator was starved: event-loop lag p99 {lag[0]:.0f}–{lag[1]:.0f} ms"
        if lag is not None
        else "the load generator could not keep up"
    )
    reasons = "; ".join(ctx.run.client_reasons)
    text = f"Invalid run: {why}" + (f" ({reasons})" if reasons else "") + "."
    text += " Its latencies are the client's as much as the engine's"
    # rca.validity withdrew the engine verdicts no server-side time confirmed ('unexplained')
    kept = sum(s.top_cause != "unexplained" for s in ctx.spikes)
    n = len(ctx.spikes) - kept
    if n:
        text += f"; {n} spike{'s' if n > 1 else ''} below {'are' if n > 1 else 'is'} not judged"
    if kept:
        text += (
            f"; {kept} spike{'s' if kept > 1 else ''} below keep{'' if kept > 1 else 's'} a"
            " verdict: the server's own times rose with it"
        )
    return text + "."


def _spike_headline(spikes: tuple[Spike, ...], totals: Totals, duration_s: float | None) -> str:
    if not spikes and not totals.requests:
        return "No measured requests in this run: nothing to analyse (see the run's status and errors)."
    if not spikes:
        span = f"{duration_s:.0f} s of measured load" if duration_s else "the measured load"
        figures = ", ".join(
            f"{name} {v:.0f} ms"
            for name, v in (("ITL p99", totals.itl_p99_ms), ("TTFT p99", totals.ttft_p99_ms))
            if v is not None
        )
        return f"No latency spike in {span}" + (f": {figures}." if figures else ".")
    worst = worst_spike(spikes)
    assert worst is not None
    top = next((a for a in worst.attributions if a.cause == worst.top_cause), None)
    text = (
        f"{_METRIC_LABEL.get(worst.metric, worst.metric)} rose from {_ms(worst.baseline_ms)} "
        f"to {_ms(worst.peak_ms)} for {worst.end_s - worst.start_s:.0f} s from {_mmss(worst.start_s)}"
    )
    if top is not None:
        text += f"; {top.share * 100:.0f}% of the excess is {top.cause}"
        for also in worst.co_causes:
            text += f" and {also.share * 100:.0f}% {also.cause}"
        if worst.summary:
            text += f": {worst.summary}"
    if len(spikes) > 1:
        text += f" ({len(spikes)} spikes in all)"
    return text


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f} ms"


def _with_suppressed(headline: str, n: int) -> str:
    """Say how many minor unexplained slowdowns were left out (AttributeConfig.report_unexplained_minor)."""
    if not n:
        return headline
    return (
        headline.rstrip(".") + f" ({n} slowdown{'s' if n > 1 else ''} that no engine signal "
        "explains not reported: likely host noise)."
    )
