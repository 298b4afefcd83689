"""What the work asked predicts of a spike's latency, on engines without step traces.

The load generator knows what it asked of the engine, whatever the engine made of it:
  - intensity: a closed loop's requests in flight (its users, who each wait for their answer, so
    a slower engine leaves the count as it was: query `client_windows`), or an open loop's
    requests by their scheduled send time (query `windows`' `scheduled`); the measured sends of
    a closed loop are not intensity, since a slower engine makes fewer of them;
  - demand: the tokens each request asked, prompt + max_tokens, over the requests sent.
The baseline is what the calm windows carried (rca.consequences.carried: a closed loop's most
users, an open loop's mean). Each counts only when it rose by `load_rise` (AttributeConfig; an
open loop's scheduled count also by ARRIVALS_SLACK, Poisson noise), else its ratio is 1. The
stage path of spikelens' engine reads the same intensity (rca.consequences.intensity) to tell a
backlog from more work asked.

Model: an engine at its capacity serves a fixed amount of work a second, so a request's latency
scales with the work in the system (Little's law): predicted ratio = intensity ratio × demand
ratio, spike over baseline windows. Its part of the observed excess,
(predicted − 1) / (observed − 1) clipped to [0, 1], is what the workload's change explains: the
load share. The rest is what it does not explain, for the ranked series to divide
(rca.metric_rank): the series that count work are in the prediction and do not vote again; a
queue's series still vote load where the work rose (a queue past capacity grows faster than the
work: the slope is not 1 there), and not where it did not and something else rose.

Why proportional, not fitted on the run's normal windows: those windows hold one workload (a
fixed number of users, one token mix), so a regression on them has no spread to learn a slope
from. The slope assumed is a saturated engine's (1): below saturation latency grows more slowly
than the work and load is over-credited; an open loop nearing saturation grows faster and load
is under-credited. Not for observed runs (no load generator: their arrivals are completions).
Pure: window rows in, a WorkPrediction out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rca.consequences import carried, intensity
from rca.evidence import Evidence
from rca.stepcost import mean_or_zero


@dataclass(frozen=True)
class WorkPrediction:
    """The work asked in a spike against its baseline windows, and what it predicts."""

    # 'closed' (users in flight) | 'open' (scheduled arrivals) | 'sent' (neither counted:
    # requests sent; rca.consequences.intensity)
    loop: str
    intensity: tuple[float, float]  # (spike, baseline carried): of the loop's series, a window
    demand: tuple[float, float]  # (spike, baseline): tokens asked per request sent
    intensity_ratio: float  # spike / baseline where it rose beyond noise, else 1
    demand_ratio: float  # the same for the tokens asked
    observed_ratio: float  # the spike's mean latency / its baseline

    @property
    def predicted_ratio(self) -> float:
        return self.intensity_ratio * self.demand_ratio

    @property
    def load_share(self) -> float:
        """The part of the spike's excess the work asked predicts, in [0, 1]."""
        if self.observed_ratio <= 1.0:
            return 0.0
        return float(np.clip((self.predicted_ratio - 1.0) / (self.observed_ratio - 1.0), 0, 1))

    def queue_note(self) -> str:
        """Why a queue that grew is read as a consequence (evidence text)."""
        return (
            "the queue grew while the work asked did not (users in flight or requests scheduled, "
            "and tokens asked per request, within their noise): with as much work a longer queue "
            "means slower service (Little's law), the consequence of what slowed it; it does not "
            "vote"
        )

    def evidence(self) -> list[Evidence]:
        """The inputs that rose beyond their noise, as evidence rows for load."""
        what = {
            "closed": "users in flight",
            "open": "requests scheduled a window",
        }.get(self.loop, "requests sent a window")
        note = (
            f"the work asked predicts {self.predicted_ratio:.2g}× the baseline latency against "
            f"{self.observed_ratio:.2g}× observed: {self.load_share:.0%} of the excess "
            "(rca.work_model)"
        )
        rows = (
            (f"load generator: {what}", self.intensity, self.intensity_ratio, ""),
            ("load generator: tokens asked per request", self.demand, self.demand_ratio, "tokens"),
        )
        return [Evidence(name, *pair, unit, note, None) for name, pair, r, unit in rows if r > 1]


def _ratio(spike: float, base: float, rise: float, slack: float = 0.0) -> float:
    """spike / base when spike beat (1 + rise) × base + slack, else 1 (no change beyond noise)."""
    if base <= 0 or spike <= (1.0 + rise) * base + slack:
        return 1.0
    return spike / base


def _weighted_mean(values: np.ndarray, weights: np.ndarray, mask: np.ndarray) -> float:
    """Σ value × weight / Σ weight over `mask` (NaN values and zero weights left out); 0 if none."""
    v, w = values[mask], weights[mask]
    ok = np.isfinite(v) & np.isfinite(w) & (w > 0)
    return float((v[ok] * w[ok]).sum() / w[ok].sum()) if ok.any() else 0.0


@dataclass(frozen=True)
class WorkSeries:
    """What the load generator asked per window [n_windows] (NaN: not measured)."""

    arrivals: np.ndarray  # requests sent (query `windows`)
    asked_tokens: np.ndarray  # mean prompt + max_tokens of the requests sent (query `windows`)
    scheduled: np.ndarray  # open-loop requests by scheduled send time (query `windows`)
    in_flight: np.ndarray  # requests open at the client (query `client_windows`)


def predict_work(
    work: WorkSeries,
    masks: tuple[np.ndarray, np.ndarray],
    observed_ratio: float,
    load_rise: float,
) -> WorkPrediction | None:
    """The work asked in the spike's windows (`masks`: spike, baseline) against its baseline, and
    what it predicts (see module docstring). None when the run counted no requests sent in its
    baseline windows (nothing to predict from)."""
    in_spike, in_base = masks
    arrivals = np.nan_to_num(work.arrivals)
    if not (arrivals[in_base] > 0).any():
        return None
    demand = (
        _weighted_mean(work.asked_tokens, arrivals, in_spike),
        _weighted_mean(work.asked_tokens, arrivals, in_base),
    )
    loop, series, slack = intensity(work.arrivals, work.scheduled, work.in_flight)
    pushed = (mean_or_zero(series[in_spike]), carried(loop, series[in_base]))
    return WorkPrediction(
        loop,
        pushed,
        demand,
        _ratio(*pushed, load_rise, slack),
        _ratio(*demand, load_rise),
        observed_ratio,
    )
