"""The capacity page: the steps of a sweep against load, the knee, and the cause of the slowdown
past it.

The sweep is not a run in the warehouse: flows/capacity.py measures it step by step (each step a
full run with its own report) and hands its summary here as plain data; this module only lays it
out and checks it. Steps are kept in load order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from pages.fields import ContextError, finite, one_of, relative_href
from pages.from_mapping import from_mapping
from pages.index import ReportEntry
from pages.run_header import RunHeader

KNEE_STATUSES = ("found", "not_reached", "below_range")
# Figures per step the page tables and charts read (rca.capacity.step_metrics keys).
STEP_METRICS = (
    "request_throughput",
    "output_throughput",
    "goodput",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
)


@dataclass(frozen=True)
class Knee:
    """Where the SLO stops holding (rca.capacity.Knee)."""

    capacity: float | None  # highest load passing, every lower one passing too
    first_fail: float | None  # lowest failing load above it (None: none failed)
    status: str  # one of KNEE_STATUSES
    capacity_run_id: str | None = None
    first_fail_run_id: str | None = None

    def __post_init__(self) -> None:
        one_of(self.status, KNEE_STATUSES, "status")


@dataclass(frozen=True)
class StepCause:
    """What the page says about a step's slowdown (flows.capacity._step_cause)."""

    label: str  # e.g. "memory (80% of the excess)", "load (queueing)"
    past_knee: bool  # the step lies above the capacity
    cause: str | None = None  # the attributed cause; None: none named
    note: str = ""  # the worst spike's summary and/or the queue's reading
    spikes: int = 0  # spikes detected in the step's run


@dataclass(frozen=True)
class CapacityStep:
    """One load step (rca.capacity.StepOutcome) with its cause and the link to its run's report."""

    load: float
    run_id: str
    passed: bool
    metrics: Mapping[str, float | None]  # STEP_METRICS at least (missing ones become None)
    cause: StepCause
    attainment: float | None = None  # good / judged requests (None: nothing judged)
    judged: int | None = None
    good_requests: int | None = None
    run_status: str | None = None  # the step's run status (ok | invalid | failed)
    run_note: str = ""  # why, when not ok
    report_href: str | None = None  # relative link to the step's incident page
    queue: Mapping[str, Any] | None = None  # the engine's queue figures (capacity_queueing.sql)

    def __post_init__(self) -> None:
        # NaN and ±inf → None; an int stays an int (the charts' JSON shows what was measured)
        metrics = {k: finite(v) if isinstance(v, float) else v for k, v in self.metrics.items()}
        object.__setattr__(self, "metrics", {**{k: None for k in STEP_METRICS}, **metrics})
        if self.report_href is not None:
            object.__setattr__(self, "report_href", relative_href(self.report_href, "report_href"))


@dataclass(frozen=True)
class CapacityContext:
    """Everything the capacity page shows; at least one step, in load order."""

    run: RunHeader  # the sweep: its id, command, scenario, start
    kind: Literal["users", "rate"]  # closed loop (users) or open loop (requests/s)
    slo_text: str  # e.g. "TTFT ≤ 150 ms for ≥ 90% of requests"
    attainment: float  # share of judged requests that must meet the SLO
    knee: Knee
    steps: tuple[CapacityStep, ...]
    slo: Mapping[str, float] | None = None  # objective → limit in ms (the charts' dashed lines)
    load_unit: str = ""  # "users" | "requests/s" (derived from kind when "")
    search: bool = False  # the loads were searched, not chosen
    headline: str = ""

    def __post_init__(self) -> None:
        if not self.steps:
            raise ContextError("steps", "a sweep has at least one step")
        object.__setattr__(self, "steps", tuple(sorted(self.steps, key=lambda s: s.load)))
        if not self.load_unit:
            object.__setattr__(self, "load_unit", load_unit(self.kind))
        if not self.headline.strip():
            object.__setattr__(self, "headline", capacity_headline(self))

    def entry(self) -> ReportEntry:
        """The page's report.json: the cause named past the knee, if any."""
        past = [s for s in self.steps if s.cause.past_knee and s.cause.cause]
        return ReportEntry.of(
            self.run,
            "capacity",
            top_cause=past[0].cause.cause if past else None,
            headline=self.headline,
        )


def load_unit(kind: str) -> str:
    return "users" if kind == "users" else "requests/s"


def capacity_headline(ctx: CapacityContext) -> str:
    """The capacity and where the SLO fails, the causes past the knee; or why there is no knee."""
    knee, unit, slo = ctx.knee, ctx.load_unit, ctx.slo_text
    if knee.status == "found":
        text = (
            f"Capacity {knee.capacity:g} {unit}: the SLO ({slo}) holds up to "
            f"{knee.capacity:g} and fails from {knee.first_fail:g} {unit}."
        )
        named = sorted({s.cause.label for s in ctx.steps if s.cause.past_knee})
        return text + (f" Past the knee: {'; '.join(named)}." if named else "")
    if knee.status == "not_reached":
        return (
            f"Every step met the SLO ({slo}), up to {knee.capacity:g} {unit}: the knee lies "
            "beyond the loads tried."
        )
    return f"Even the lowest step ({ctx.steps[0].load:g} {unit}) missed the SLO ({slo})."


def build_capacity_context(sweep: Mapping[str, Any]) -> CapacityContext:
    """The page of flows.capacity.sweep_summary's dict; a ContextError names its first bad key."""
    slo_text = ", ".join(
        f"{k.removesuffix('_ms').upper()} ≤ {v:g} ms" for k, v in sweep["slo"].items()
    )
    slo_text += f" for ≥ {sweep['attainment']:.0%} of requests"
    run = RunHeader(
        run_id=sweep["sweep_id"],
        command=sweep["command"],
        scenario_name=sweep["scenario_name"],
        started_at=sweep.get("started_at"),
    )
    ctx = from_mapping(
        CapacityContext,
        {
            "run": asdict(run),
            "kind": sweep["kind"],
            "slo": sweep["slo"],
            "slo_text": slo_text,
            "attainment": sweep["attainment"],
            "knee": sweep["knee"],
            "search": sweep["search"],
            "steps": sweep["steps"],
        },
    )
    return replace(ctx, headline=capacity_headline(ctx))
