"""The nightly regression page and the replay-vs-original page (one template): a verdict per
metric with its bootstrap confidence interval, and each metric's trend over past nightlies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pages.fields import ContextError, count, finite, iso_utc, one_of, relative_href
from pages.incident import confirmation_from_row
from pages.index import ReportEntry
from pages.run_header import RunHeader, read_run_header
from warehouse.db import connect
from warehouse.queries import query

# rca.compare.MetricVerdict's words, used for each metric and for the page as a whole.
VERDICTS = ("regressed", "improved", "unchanged", "insufficient")
# Units of the nightly metrics, for the page (latency metrics are in ms).
METRIC_UNITS = {"throughput": "tokens/s per window", "error_rate": "share"}


@dataclass(frozen=True)
class MetricRow:
    """One metric's verdict (rca.compare.MetricVerdict) with the page's unit and scenario."""

    metric: str
    baseline: float | None
    candidate: float | None
    delta: float | None  # candidate − baseline
    ci_low: float | None  # bootstrap CI of the delta
    ci_high: float | None
    verdict: str  # one of VERDICTS
    unit: str = ""
    scenario: str | None = None
    rel_delta: float | None = None  # delta / baseline (derived when not given)
    n_baseline: int | None = None
    n_candidate: int | None = None
    run_noise: float | None = None  # spread between baseline runs (None: fewer than 2)

    def __post_init__(self) -> None:
        one_of(self.verdict, VERDICTS, "verdict")
        if self.ci_low is not None and self.ci_high is not None and self.ci_low > self.ci_high:
            raise ContextError("ci_low", f"{self.ci_low!r} is above ci_high {self.ci_high!r}")
        if self.rel_delta is None and self.delta is not None and self.baseline:
            object.__setattr__(self, "rel_delta", self.delta / self.baseline)


@dataclass(frozen=True)
class TrendPoint:
    run_id: str
    started_at: str | None
    metric: str
    value: float | None
    scenario: str | None = None


@dataclass(frozen=True)
class NightlyContext:
    """Everything the nightly (or replay-vs-original) page shows."""

    run: RunHeader
    metrics: tuple[MetricRow, ...]
    title: str = "Nightly regression"
    kind: Literal["nightly", "replay"] = "nightly"  # the index lists a replay page as "replay"
    baseline_label: str = "baseline"  # what the run was compared with, in words
    trend: tuple[TrendPoint, ...] = ()
    incident_href: str | None = None  # relative link to the run's incident page
    verdict: str | None = None  # the page's verdict (derived when not given)
    headline: str = ""
    # the run's worst spike, confirmed by the nightly (confirm_repeats): its words and page,
    # relative to this one
    confirmation: str | None = None
    confirmation_href: str | None = None

    def __post_init__(self) -> None:
        one_of(self.kind, ("nightly", "replay"), "kind")
        if self.incident_href is not None:
            object.__setattr__(
                self, "incident_href", relative_href(self.incident_href, "incident_href")
            )
        if self.verdict is None:
            object.__setattr__(self, "verdict", overall_verdict(self.metrics))
        one_of(self.verdict, VERDICTS, "verdict")
        if not self.headline.strip():
            object.__setattr__(self, "headline", moved_headline(self.metrics, self.baseline_label))

    def entry(self) -> ReportEntry:
        """The page's report.json: listed under its kind with the page's verdict."""
        return ReportEntry.of(self.run, self.kind, verdict=self.verdict, headline=self.headline)


def moved_headline(metrics: tuple[MetricRow, ...], baseline_label: str) -> str:
    """What moved beyond its confidence interval, against what (the nightly and compare pages)."""
    changed = [m for m in metrics if m.verdict in ("regressed", "improved")]
    if not changed:
        return f"No metric moved beyond its confidence interval against {baseline_label}."
    parts = []
    for m in changed:
        rel = f" {100 * m.rel_delta:+.1f}%" if m.rel_delta is not None else ""
        where = f" ({m.scenario})" if m.scenario else ""
        parts.append(f"{m.metric}{where} {m.verdict}{rel}")
    return f"Against {baseline_label}: " + "; ".join(parts) + "."


def overall_verdict(metrics: tuple[MetricRow, ...]) -> str:
    """Any regressed → regressed; else any improved → improved; else unchanged when at least one
    metric could be judged; else insufficient."""
    verdicts = {m.verdict for m in metrics}
    return next(
        (v for v in ("regressed", "improved", "unchanged") if v in verdicts), "insufficient"
    )


def metric_rows(verdicts: list[dict]) -> tuple[MetricRow, ...]:
    """Page rows from verdict dicts (rca.compare.MetricVerdict.to_dict() or nightly_verdicts rows)."""
    return tuple(
        MetricRow(
            metric=v["metric"],
            baseline=finite(v["baseline"]),
            candidate=finite(v["candidate"]),
            delta=finite(v["delta"]),
            ci_low=finite(v["ci_low"]),
            ci_high=finite(v["ci_high"]),
            verdict=v["verdict"],
            unit=METRIC_UNITS.get(v["metric"], "ms"),
            rel_delta=finite(v["rel_delta"]),
            run_noise=finite(v.get("run_noise")),
            n_baseline=count(v.get("n_baseline")),
            n_candidate=count(v.get("n_candidate")),
        )
        for v in verdicts
    )


def build_nightly_context(db_path: str | Path, run_id: str) -> NightlyContext:
    """A nightly run's stored verdicts per metric, and each metric's trend across past nightlies
    of the same scenario."""
    with connect(db_path, read_only=True) as conn:
        run = read_run_header(conn, run_id, with_scenario=False)
        verdicts = query(conn, "nightly_run_verdicts", run_id=run_id)
        trend = query(conn, "nightly_trend", scenario_name=run.scenario_name)
        proofs = query(conn, "confirmations", run_id=run_id)
    proof = confirmation_from_row(proofs[0]) if proofs else None
    baseline_runs = verdicts[0]["baseline_runs"] if verdicts else []
    label = (
        f"{len(baseline_runs)} earlier nightly run(s)"
        if baseline_runs
        else "no earlier passing nightly (this run starts the baseline)"
    )
    return NightlyContext(
        run=run,
        kind="nightly",
        title=f"Nightly regression: {run.scenario_name}",
        baseline_label=label,
        metrics=metric_rows(verdicts),
        trend=tuple(
            TrendPoint(t["run_id"], iso_utc(t["started_ns"]), t["metric"], finite(t["candidate"]))
            for t in trend
        ),
        incident_href="../index.html",
        confirmation=f"spike {proof.spike_id}, {proof.cause}: {proof.words}" if proof else None,
        confirmation_href=f"../{proof.href}" if proof and proof.href else None,
    )


def build_replay_context(
    db_path: str | Path, run_id: str, original_run_id: str, verdicts: list[dict]
) -> NightlyContext:
    """A replay compared metric by metric with the run it replayed (verdicts: compare_runs')."""
    with connect(db_path, read_only=True) as conn:
        run = read_run_header(conn, run_id, with_scenario=False)
    return NightlyContext(
        run=run,
        kind="replay",
        title=f"Replay vs original run {original_run_id}",
        baseline_label=f"original run {original_run_id}",
        metrics=metric_rows(verdicts),
        incident_href="../index.html",
    )
