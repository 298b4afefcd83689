"""An incident seen through each of its series, and the one whose excess the signals cover best.

Detection merges the intervals of ITL, TTFT and E2E that overlap or nearly touch into one
incident, and names the series with the largest relative peak its primary. Two effects that
merely sit next to each other (an injected TTFT delay and an unrelated ITL burst of a busy box a
window later) then share one incident, and the primary may be the series no signal covers. So
attribution looks at every series of the incident, each over the span of its own intervals (the
primary over the incident's span, as detection set it), and the verdict comes from the series
whose named causes cover the largest share of its excess; the primary wins ties. 'unexplained'
stays earned: it is the verdict when no series is covered by at least `min_explained_share`,
and then the primary's attribution is the one reported.

Pure: Spikes in, Spikes out; no signal is read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from rca.detect import Spike


class Covered(Protocol):
    """What `best_covered` reads of an attribution."""

    top_cause: str
    uncovered: float  # share of the series' excess no measured signal covers


def series_views(spike: Spike, window_s: float) -> list[Spike]:
    """The spike as each of its series: the primary first (unchanged), then every other series
    with intervals in it, spanning those intervals, with their peak and baseline."""
    views = [spike]
    for metric in spike.metrics:
        ivs = [iv for iv in spike.intervals if iv.metric == metric]
        if metric == spike.metric or not ivs:
            continue
        first, last = min(iv.first for iv in ivs), max(iv.last for iv in ivs)
        peak = max(ivs, key=lambda iv: iv.peak_ms)
        views.append(
            replace(
                spike,
                metric=metric,
                first_window=first,
                last_window=last,
                start_s=first * window_s,
                end_s=(last + 1) * window_s,
                peak_ms=peak.peak_ms,
                baseline_ms=peak.baseline_ms,
            )
        )
    return views


# How much more of its excess another series must cover to give the verdict instead of the
# primary: shares differ by a few % between series of one incident from window noise alone.
PRIMARY_MARGIN = 0.05


def best_covered(attributions: Sequence[Covered]) -> int:
    """Index of the attribution to report: the named verdict with the least uncovered share,
    the first (the primary's) when it is within PRIMARY_MARGIN of that or when every verdict is
    'unexplained'."""
    named = [i for i, a in enumerate(attributions) if a.top_cause != "unexplained"]
    if not named:
        return 0
    best = min(named, key=lambda i: (round(attributions[i].uncovered, 4), i))
    if 0 in named and attributions[0].uncovered <= attributions[best].uncovered + PRIMARY_MARGIN:
        return 0  # another series must cover clearly more to speak for the incident
    return best
