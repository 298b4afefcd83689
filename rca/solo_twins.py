"""What each partner of an overlapped pair does on its own, from its solo twin (pure).

Two faults drawn to overlap make one spike, and the product says of it the causes that each
cover a third of its excess or more (spikelens_common.said_causes). Scored per fault, a partner
that makes a tenth of the shared excess reads as a miss when it is rightly left unsaid, and one
that ran alone for under 2 s cannot be judged to have acted at all (rca.acted abstains: 22 of
the 62 faults of the seed-3645285898 suite). A generated suite can settle both by measurement:
beside each pair it runs the pair's *solo twins*, the same case with one of its faults alone
(flows.suite_draw, `--twins`). On each twin's raw client latencies, never spikelens' detector:

  acted    rca.acted's judge on the twin, where the fault runs alone for its whole window;
  excess   per client metric, the mean of the samples inside the pair's shared stretch (the
           intersection of the two faults' windows, widened by the judge's tail) less the median
           of the twin's fault-free samples (outside its fault's window and tail);
  share    a partner's excess over the sum of both partners' excesses, on the metric where that
           sum is largest against the baseline (the metric the pair's shared spike lands on most).

A partner is *minor* when its share is under BOTH_SHARE: the right verdict of the shared stretch is
then its partner's cause alone, and the evaluation scores it apart (rca.evaluate). The shares are
of the solos' sum: a pair whose faults feed each other (a burst that makes a small cache
preempt) makes more than the sum, and `pair_excess_ms` (the pair run's own excess on that metric)
shows how much more; the split of that interaction is not measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rca.acted import CLIENT_METRICS, ActedConfig, judge
from spikelens_common.said_causes import BOTH_SHARE

Samples = dict[str, tuple[np.ndarray, np.ndarray]]  # metric → (t_s, value_ms), rca.acted's
Window = tuple[float, float]  # (start_s, end_s) of a fault, from the run's measured start


@dataclass(frozen=True)
class SoloConfig:
    # The judge's own settings: a twin's fault is judged exactly as a fault of a suite run.
    acted: ActedConfig = field(default_factory=ActedConfig)
    # A mean of fewer samples in the shared stretch (or a median of fewer fault-free ones) is
    # noise: no excess then, and no share.
    min_samples: int = 5


@dataclass(frozen=True)
class Solo:
    """One partner's solo measure: its twin's run, judgement, and share of the shared stretch."""

    twin_run_id: str
    acted: bool | None  # rca.acted on the twin (None: the judge abstained)
    acted_ratio: float | None
    metric: str | None  # the metric the shares were taken on (None: no share)
    excess_ms: float | None  # the twin's excess in the shared stretch on that metric
    share: float | None  # of both twins' excess (None: neither raised the stretch, or too few)
    pair_excess_ms: float | None  # the pair run's own excess there, on the same metric
    why: str = ""

    @property
    def minor(self) -> bool:
        """Under the product's threshold for saying a second cause: rightly left unsaid."""
        return self.share is not None and self.share < BOTH_SHARE

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "minor": self.minor}


def shared_stretch(windows: list[Window], tail_s: float) -> Window | None:
    """The stretch every fault's window covers, widened by the tail; None if they never meet."""
    start = max(s for s, _ in windows)
    end = min(e for _, e in windows)
    return (start, end + tail_s) if end > start else None


def excess(
    samples: Samples, metric: str, stretch: Window, fault: Window, config: SoloConfig
) -> tuple[float, float] | None:
    """(excess ms, baseline ms) of `metric` in `stretch`: the mean inside it less the median of the
    samples outside the fault's window and tail; None with too few samples on either side."""
    t, v = samples.get(metric, (np.array([]), np.array([])))
    inside = v[(t >= stretch[0]) & (t < stretch[1])]
    free = v[(t < fault[0]) | (t >= fault[1] + config.acted.tail_s)]
    if len(inside) < config.min_samples or len(free) < config.min_samples:
        return None
    base = float(np.median(free))
    return float(np.mean(inside)) - base, base


@dataclass(frozen=True)
class Twin:
    """A partner's twin run: its id, client samples, fault window and measured duration."""

    run_id: str
    samples: Samples
    window: Window
    duration_s: float


def partner_solos(
    pair_samples: Samples,
    pair_windows: list[Window],
    twins: dict[int, Twin],
    config: SoloConfig = SoloConfig(),
) -> dict[int, Solo]:
    """Fault index of the pair → its Solo, for every partner that has a twin. Shares only where
    every partner has one (a share of one is no split)."""
    stretch = shared_stretch(pair_windows, config.acted.tail_s)
    judged = {
        k: judge(tw.samples, tw.window, [tw.window], tw.duration_s, config.acted)
        for k, tw in twins.items()
    }
    metric, parts = _share_metric(twins, stretch, config) if stretch else (None, {})
    complete = len(twins) == len(pair_windows) and len(twins) > 1
    total = sum(max(0.0, x) for x in parts.values())
    pair = None
    if metric is not None and stretch is not None:
        hull = (min(s for s, _ in pair_windows), max(e for _, e in pair_windows))
        got = excess(pair_samples, metric, stretch, hull, config)
        pair = round(got[0], 3) if got else None
    out = {}
    for k, tw in twins.items():
        share = None
        if complete and metric is not None and total > 0:
            share = round(max(0.0, parts[k]) / total, 4)
        why = "" if share is not None else _no_share_reason(stretch, complete, metric)
        out[k] = Solo(
            tw.run_id,
            judged[k].acted,
            judged[k].ratio,
            metric if share is not None else None,
            round(parts[k], 3) if k in parts else None,
            share,
            pair,
            why,
        )
    return out


def _share_metric(
    twins: dict[int, Twin], stretch: Window, config: SoloConfig
) -> tuple[str | None, dict[int, float]]:
    """The metric where the twins' summed excess is largest against its baseline, and each twin's
    excess on it (only metrics every twin has enough samples of)."""
    best: tuple[float, str, dict[int, float]] | None = None
    for metric in CLIENT_METRICS:
        got = {k: excess(tw.samples, metric, stretch, tw.window, config) for k, tw in twins.items()}
        if any(g is None for g in got.values()):
            continue
        parts = {k: g[0] for k, g in got.items() if g is not None}
        base = float(np.mean([g[1] for g in got.values() if g is not None]))
        if base <= 0:
            continue
        rel = sum(max(0.0, x) for x in parts.values()) / base
        if best is None or rel > best[0]:
            best = (rel, metric, parts)
    return (best[1], best[2]) if best and best[0] > 0 else (None, {})


def _no_share_reason(stretch: Window | None, complete: bool, metric: str | None) -> str:
    if stretch is None:
        return "the pair's faults never overlap: no shared stretch to split"
    if not complete:
        return "not every partner of the pair has a twin"
    if metric is None:
        return "no twin raised the shared stretch on a metric with enough samples"
    return "neither twin raised the shared stretch"
