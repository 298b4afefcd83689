"""Capacity of a server: the highest load at which it still meets its SLO, and the knee past it.

What (pure functions, no I/O):
- `judge_step(load, run_id, summary, attainment)`: one load step's outcome from its run summary
  (loadgen.metrics.summarize, stored in run.json): throughput, latency percentiles, goodput and
  whether it passed.
- `find_knee(steps)`: the capacity (the highest load that passes with every lower step passing)
  and the first failing load above it: the knee lies between the two.
- `next_search_load(steps, options)`: the next load of a search — doubling from `start` until a
  step fails, then bisecting between the last pass and the first fail, bounded in steps.
- `queueing_reading(evidence)`: what a step's engine signals say about queueing, for steps past
  the knee that show no spike (a saturated server can be uniformly slow).

Pass rule (SLO attainment, as DistServe and vLLM's `--goodput` use it): a request is *good* when it
completed and met every objective of the SLO (`loadgen.metrics.SLO.met`: TTFT, TPOT, E2E); a step
passes when good requests are at least `attainment` of the judged ones (completed + failed;
requests cut off by the end of the run are not judged). With only a TTFT objective and attainment
0.9 this is "TTFT p90 ≤ the objective"; goodput is good requests per second, as vLLM defines it.
Why attainment and not a throughput criterion: throughput keeps rising past the point where
latency becomes unacceptable (queueing adds latency, not lost work), so only the SLO marks the knee.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

LOAD_KINDS = ("users", "rate")  # closed loop (concurrent users) | open loop (requests/s)


@dataclass(frozen=True)
class SearchOptions:
    """Bounds of a capacity search (used when no explicit list of load steps is given)."""

    kind: str = "users"  # users | rate
    start: float = 1.0  # first load tried
    max_load: float = 256.0  # never try more than this (doubling stops here)
    max_steps: int = 8  # total runs of the search, doubling and bisecting together
    resolution: float = 1.0  # stop bisecting when last pass and first fail are this close
    #                            (1 user: concurrency is an integer; a rate: e.g. 0.5 req/s)

    def check(self) -> SearchOptions:
        if self.kind not in LOAD_KINDS:
            raise ValueError(f"kind: must be one of {', '.join(LOAD_KINDS)}, got {self.kind!r}")
        if not 0 < self.start <= self.max_load:
            raise ValueError(
                f"start: must be in (0, max_load={self.max_load:g}], got {self.start:g}"
            )
        if self.kind == "users" and (self.start != int(self.start) or self.start < 1):
            raise ValueError(f"start: users must be an integer >= 1, got {self.start:g}")
        if not 1 <= self.max_steps <= 32:
            raise ValueError(f"max_steps: must be an integer in [1, 32], got {self.max_steps}")
        if self.resolution <= 0:
            raise ValueError(f"resolution: must be > 0, got {self.resolution:g}")
        return self


@dataclass(frozen=True)
class StepOutcome:
    """One load step: its run, its figures and its verdict against the SLO."""

    load: float
    run_id: str
    judged: int  # completed + failed requests of the measured phase
    good_requests: int  # completed and within every objective
    attainment: float | None  # good_requests / judged (None: nothing judged)
    passed: bool
    metrics: dict  # flat figures: request_throughput, goodput, ttft_p99_ms, …
    run_status: str = "ok"  # the run's own status (ok | invalid | failed)
    run_note: str = ""  # why, when not ok (the client-health reasons, the run's errors)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Knee:
    """Where the SLO stops holding. `capacity` None: even the lowest step failed."""

    capacity: float | None  # highest load passing, every lower step passing too
    capacity_run_id: str | None
    first_fail: float | None  # lowest failing load above `capacity` (None: none failed)
    first_fail_run_id: str | None
    status: str  # found | not_reached (every step passed) | below_range

    @property
    def past(self) -> float:
        """Loads above this are past the knee."""
        return self.capacity if self.capacity is not None else -math.inf

    def to_dict(self) -> dict:
        return asdict(self)


_PERCENTILE_KEYS = ("p50", "p90", "p99")
_LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


def step_metrics(summary: dict) -> dict:
    """Flatten a run summary into the figures the capacity page plots (vLLM's definitions)."""
    out = {
        k: summary.get(k)
        for k in (
            "request_throughput",
            "output_throughput",
            "goodput",
            "completed",
            "failed",
            "cancelled",
            "requests",
        )
    }
    for name in _LATENCIES:
        stats = (summary.get("vllm") or {}).get(name) or {}
        for p in _PERCENTILE_KEYS:
            out[f"{name[:-3]}_{p}_ms"] = stats.get(p)
    return out


def judge_step(
    load: float,
    run_id: str,
    summary: dict,
    attainment: float,
    run_status: str = "ok",
    run_note: str = "",
) -> StepOutcome:
    """A step's outcome. `summary` must carry the SLO's good_requests (summarize(..., slo=…))."""
    if not 0 < attainment <= 1:
        raise ValueError(f"attainment: must be in (0, 1], got {attainment}")
    if "good_requests" not in summary:
        raise ValueError(f"run {run_id}: its summary has no good_requests: it ran without an SLO")
    judged = int(summary.get("completed") or 0) + int(summary.get("failed") or 0)
    good = int(summary["good_requests"])
    share = good / judged if judged else None
    passed = share is not None and share >= attainment
    return StepOutcome(
        float(load),
        run_id,
        judged,
        good,
        share,
        passed,
        step_metrics(summary),
        run_status,
        run_note,
    )


def find_knee(steps: list[StepOutcome]) -> Knee:
    """Capacity = the highest load that passes with every lower step passing; the knee lies
    between it and the next (failing) step. A pass above a failure is noise, not capacity."""
    ordered = sorted(steps, key=lambda s: s.load)
    best = None
    for s in ordered:
        if not s.passed:
            return Knee(
                best.load if best else None,
                best.run_id if best else None,
                s.load,
                s.run_id,
                "found" if best else "below_range",
            )
        best = s
    if best is None:
        return Knee(None, None, None, None, "below_range")
    return Knee(best.load, best.run_id, None, None, "not_reached")


def _rounded(load: float, kind: str) -> float:
    return float(round(load)) if kind == "users" else round(load, 3)


def next_search_load(steps: list[StepOutcome], options: SearchOptions) -> float | None:
    """The next load to try, or None when the search is done (pure).

    Doubling from `start` while every step passes (capped at `max_load`); after the first failure,
    the midpoint of the last pass and the first fail, until they are `resolution` apart; if the
    very first step fails, halving towards the smallest load. At most `max_steps` steps in all.
    """
    if len(steps) >= options.max_steps:
        return None
    if not steps:
        return _rounded(options.start, options.kind)
    tried = {s.load for s in steps}
    knee = find_knee(steps)
    if knee.status == "not_reached":
        top = max(tried)
        nxt = _rounded(min(top * 2, options.max_load), options.kind)
        return nxt if nxt not in tried and nxt > top else None
    if knee.status == "below_range":
        low = min(tried)
        floor = 1.0 if options.kind == "users" else options.resolution
        nxt = _rounded(max(low / 2, floor), options.kind)
        return nxt if nxt < low and nxt not in tried else None
    lo, hi = knee.capacity, knee.first_fail
    if lo is None or hi is None:  # find_knee sets both when the status is "found"
        raise ValueError(f"knee {knee.status!r} without capacity and first_fail: {knee}")
    if hi - lo <= options.resolution:
        return None
    mid = _rounded((lo + hi) / 2, options.kind)
    return mid if lo < mid < hi and mid not in tried else None


def parse_loads(text: str, kind: str) -> list[float]:
    """'2,4,8' → [2.0, 4.0, 8.0]; users must be integers >= 1, rates > 0; sorted, no repeats."""
    flag = "--users" if kind == "users" else "--rates"
    try:
        loads = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{flag}: a comma-separated list of numbers, got {text!r}") from None
    if not loads:
        raise ValueError(f"{flag}: at least one load step")
    for x in loads:
        if kind == "users" and (x != int(x) or not 1 <= x <= 100_000):
            raise ValueError(f"--users: each step must be an integer in [1, 100000], got {x:g}")
        if kind == "rate" and not 0 < x <= 100_000:
            raise ValueError(f"--rates: each step must be in (0, 100000] requests/s, got {x:g}")
    if len(set(loads)) != len(loads):
        raise ValueError(f"{flag}: a load step is repeated in {text!r}")
    return sorted(loads)


@dataclass(frozen=True)
class QueueingThresholds:
    """When a step's engine signals count as queueing (a load cause without a spike)."""

    # At least one request waiting for a batch slot in half of the steps: admission, not the
    # steps themselves, is where the time goes (waiting = 0 below capacity on every run seen).
    waiting_median: float = 1.0


def queueing_reading(
    evidence: dict | None, thresholds: QueueingThresholds = QueueingThresholds()
) -> dict:
    """{queueing: bool | None, note} from a step's engine signals (capacity_queueing.sql row).

    None when the engine reported no steps (an external target): nothing is claimed then.
    """
    if not evidence or not evidence.get("steps"):
        return {"queueing": None, "note": "no engine step traces: queueing not measured"}
    med, p90 = evidence.get("waiting_p50") or 0.0, evidence.get("waiting_p90") or 0.0
    batch = evidence.get("batch_mean")
    batch_txt = f", batch {batch:.1f} sequences on average" if batch is not None else ""
    if med >= thresholds.waiting_median:
        return {
            "queueing": True,
            "note": f"load/queueing: median {med:g} request(s) waiting for a batch slot "
            f"(p90 {p90:g}){batch_txt}",
        }
    return {
        "queueing": False,
        "note": f"no queueing: median {med:g} request(s) waiting (p90 {p90:g}){batch_txt}",
    }


def capacity_verdict(
    metric: str, candidate: float | None, baselines: list[float | None], drop_rel: float
) -> dict:
    """Nightly verdict of a sweep's capacity against earlier sweeps of the same steps (pure).

    A capacity of None (even the lowest step failed) counts as 0. Regressed when the candidate is
    below the *lowest* baseline capacity by more than `drop_rel` (a clean sweep on a shared box
    can lose one step to noise, and the lowest clean sweep bounds that); improved when above the
    highest by more than `drop_rel`; insufficient without a baseline. The row has the keys of
    rca.compare.MetricVerdict (no bootstrap CI: a capacity is one number per sweep).
    """
    nan = float("nan")
    cand = candidate or 0.0
    base = [b or 0.0 for b in baselines]
    row = {
        "metric": metric,
        "baseline": nan,
        "candidate": cand,
        "delta": nan,
        "ci_low": nan,
        "ci_high": nan,
        "rel_delta": nan,
        "verdict": "insufficient",
        "n_baseline": len(base),
        "n_candidate": 1,
        "run_noise": nan,
    }
    if not base:
        return row
    low, high = min(base), max(base)
    ref = low if cand < low else high if cand > high else low
    rel = (cand - ref) / ref if ref else (0.0 if cand == ref else math.inf)
    verdict = (
        "regressed"
        if cand < low * (1 - drop_rel)
        else "improved"
        if cand > high * (1 + drop_rel)
        else "unchanged"
    )
    spread = (high - low) / low if low else nan
    return {
        **row,
        "baseline": ref,
        "delta": cand - ref,
        "rel_delta": rel,
        "verdict": verdict,
        "run_noise": spread,
    }
