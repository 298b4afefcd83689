"""Ranking scores as RCAEval computes them, over ranked causes: AC@k and Avg@k.

For each event a method answers a ranked list (best first). AC@k is the share of events whose
true cause is among the first k answers; Avg@k is the mean of AC@1 … AC@k (so a method that
names the right cause second still earns part of the credit). RCAEval ranks metrics; here every
method answers causes — a peer's ranked metrics become ranked causes by each metric's cause, first
occurrence kept (`ranked_causes`), spikelens' are its attributions by share — so all methods are
scored on the same labels. An event with an empty ranking counts as a miss at every k.

Pure functions; the statistics take a sequence of events so rca.intervals can bootstrap them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RankedEvent:
    """One event as one method saw it."""

    truth: str  # the injected fault's cause
    ranked: tuple[str, ...]  # the method's causes, most likely first (may be empty)

    @property
    def top(self) -> str:
        """The method's first answer ('unexplained' when it named none)."""
        return self.ranked[0] if self.ranked else "unexplained"


def ranked_causes(
    metrics: Iterable[str], metric_cause: Mapping[str, str], skip: Iterable[str] = ("unexplained",)
) -> tuple[str, ...]:
    """Causes in the order their first metric appears in `metrics`; metrics without a cause and
    causes in `skip` (a metric that stands for no cause, e.g. residual step time) are left out."""
    skipped, out = set(skip), []
    for m in metrics:
        cause = metric_cause.get(m)
        if cause is not None and cause not in skipped and cause not in out:
            out.append(cause)
    return tuple(out)


def ac_at(events: Sequence[RankedEvent], k: int) -> float | None:
    """AC@k: share of events whose truth is in the first k answers (None without events)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not events:
        return None
    return sum(e.truth in e.ranked[:k] for e in events) / len(events)


def avg_at(events: Sequence[RankedEvent], k: int = 5) -> float | None:
    """Avg@k = mean of AC@1 … AC@k (None without events)."""
    if not events:
        return None
    return sum(ac_at(events, j) or 0.0 for j in range(1, k + 1)) / k
