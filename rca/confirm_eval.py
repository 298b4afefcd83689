"""Does `spikelens confirm` catch a wrong verdict? Which spikes an evaluation confirms, and how its
confirmations score (pure).

Plan (`plan_confirmations`): every detected fault of the suite whose spike has a verdict is
confirmed with that verdict (right when it names the injected cause, wrong when not). So that
wrong verdicts are tested even where the analysis got every one right, `swaps` of the right
verdicts, spread evenly over them in suite order, are also confirmed with a swapped cause
(SWAPPED: a cause with an intervention that does not touch the true one's cost), as a harness
would force a misattribution.

Score (`confirmation_scores`): of the right verdicts, the share confirmed; of the wrong ones, the
share *not* confirmed (the check caught it). An inconclusive confirmation counts against both:
it neither proved a right verdict nor caught a wrong one. Each share has its exact
(Clopper–Pearson) interval; the cost is the confirmations' wall time per confirmed spike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rca.intervals import proportion_exact

# truth → the cause a harness swaps a right verdict to: one whose intervention leaves the true
# cause's cost in place (GC off does not speed a penalty pass; penalties off do not stop a GC)
SWAPPED = {
    "memory": "penalty",
    "penalty": "memory",
    "load": "memory",
    "host": "penalty",
    "communication": "memory",
    "client": "memory",
    "network": "memory",
}


@dataclass(frozen=True)
class ConfirmCase:
    """One confirmation an evaluation runs."""

    run_id: str
    spike_id: int
    truth: str  # the injected cause
    cause: str  # the cause confirmed: the verdict, or a harness's swap
    swapped: bool = False

    @property
    def right(self) -> bool:
        return self.cause == self.truth


def plan_confirmations(per_run: list[dict[str, Any]], swaps: int) -> list[ConfirmCase]:
    """The confirmations of a scored suite (rca.evaluate's `per_run`: each fault's verdict with
    its matched spike id), in suite order; then `swaps` swapped right verdicts."""
    cases = [
        ConfirmCase(run["run_id"], int(v["spike_id"]), v["cause"], v["attributed_cause"])
        for run in per_run
        for v in run["verdicts"]
        if v["detected"] and v.get("attributed_cause") and v.get("spike_id") is not None
    ]
    right = [c for c in cases if c.right and c.truth in SWAPPED]
    n = min(max(0, swaps), len(right))
    chosen = [right[i * len(right) // n] for i in range(n)] if n else []
    return cases + [
        ConfirmCase(c.run_id, c.spike_id, c.truth, SWAPPED[c.truth], swapped=True) for c in chosen
    ]


@dataclass(frozen=True)
class ConfirmOutcome:
    """A confirmation's result, as the evaluation keeps it."""

    case: ConfirmCase
    verdict: str  # confirmed | not confirmed | inconclusive
    share: float | None  # share of the excess removed (or outside the engine)
    wall_s: float
    report: str | None = None
    note: str = ""  # e.g. why the confirmation could not run (then inconclusive)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self.case), **{k: v for k, v in asdict(self).items() if k != "case"}}


def confirmation_scores(outcomes: list[ConfirmOutcome]) -> dict[str, Any]:
    """Right verdicts confirmed and wrong ones not confirmed, with exact intervals, and cost."""
    right = [o for o in outcomes if o.case.right]
    wrong = [o for o in outcomes if not o.case.right]
    k_right = sum(o.verdict == "confirmed" for o in right)
    k_wrong = sum(o.verdict == "not confirmed" for o in wrong)
    confirmed = sum(o.verdict == "confirmed" for o in outcomes)
    wall_min = sum(o.wall_s for o in outcomes) / 60.0
    return {
        "right": len(right),
        "right_confirmed": k_right,
        "right_confirmed_exact": asdict(proportion_exact(k_right, len(right))),
        "wrong": len(wrong),
        "wrong_swapped": sum(o.case.swapped for o in wrong),
        "wrong_not_confirmed": k_wrong,
        "wrong_not_confirmed_exact": asdict(proportion_exact(k_wrong, len(wrong))),
        "inconclusive": sum(o.verdict == "inconclusive" for o in outcomes),
        "minutes": round(wall_min, 2),
        "minutes_per_confirmed": round(wall_min / confirmed, 2) if confirmed else None,
        "outcomes": [o.to_dict() for o in outcomes],
    }
