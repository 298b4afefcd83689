"""What each partner of an overlapped pair does on its own, from its solo twin (pure).

Two faults drawn to overlap make one spike, and the product says of it the causes that each
cover a third of its excess or more (spikelens_common.said_causes). Scored per fault, a partner
that makes a tenth of the shared excess reads as a miss when it is rightly left unsaid, and one
that ran alone for under 2 s cannot be judged to have acted at all (rca.acted abstains: 22 of
the 62 faults of the seed-3645285898 suite). A generated suite can settle both by measurement:
beside each pair it runs the pair's *solo twins*, the same case with one of its faults alone
(flows.suite_draw, `--twins`). On each twin's raw client latencies, never spikelens' detector:

  acted    rca.acted's judge on the twin, where the fault runs alone for its whole window;
  excess   per client metric, the mean of the 1-s window p99s (what a spike is found on)
           inside the pair's shared stretch (the intersection of the two faults' windows,
           widened by the judge's tail) less the median of the twin's fault-free windows'
           (outside its fault's window and tail);
  share    a partner's excess over the sum of both partners' excesses, per metric that rose in
           the stretch; a partner's share is its largest (`metric` says where).

A partner is *minor* when its share is under BOTH_SHARE on every metric that rose: the right
verdict of the shared stretch is then its partner's cause alone, and the evaluation scores it apart (rca.evaluate). The shares are
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
    # rca.detect's window: the excess is of per-window p99s, as a spike's is.
    window_s: float = 1.0
    # A window's p99 of fewer samples is its maximum by another name: such windows are left out
    # (a closed loop of a handful of users finishes a few TTFTs a second).
    min_window_samples: int = 2
    # A mean of fewer windows in the shared stretch (or a median of fewer fault-free ones) is
    # noise: no excess then, and no share.
    min_windows: int = 3
    # A metric *rose* in the stretch when the twins' summed excess is this many standard errors
    # above zero (each the fault-free windows' spread over the root of the stretch's count): a
    # share of a metric that did not rise splits noise, and a partner that did nothing would
    # take all of an unmoved metric (lognormal TTFT noise did so in the tests).
    min_z: float = 3.0


@dataclass(frozen=True)
class Solo:
    """One partner's solo measure: its twin's run, judgement, and share of the shared stretch."""

    twin_run_id: str
    acted: bool | None  # rca.acted on the twin (None: the judge abstained)
    acted_ratio: float | None
    metric: str | None  # the metric of its largest share (None: no share)
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


def window_p99s(t: np.ndarray, v: np.ndarray, config: SoloConfig) -> tuple[np.ndarray, np.ndarray]:
    """(window start s, p99 ms) of every `window_s` window holding `min_window_samples` samples:
    the statistic spikelens' spikes are found on (rca.detect), so a share is of what a spike's
    excess is made of (a GC pause moves a window's p99, hardly the mean of its gaps)."""
    if len(t) == 0:
        return np.array([]), np.array([])
    bins = np.floor(t / config.window_s).astype(int)
    starts, p99s = [], []
    for b in np.unique(bins):
        inside = v[bins == b]
        if len(inside) >= config.min_window_samples:
            starts.append(b * config.window_s)
            p99s.append(float(np.quantile(inside, 0.99)))
    return np.array(starts), np.array(p99s)


def excess(
    samples: Samples, metric: str, stretch: Window, fault: Window, config: SoloConfig
) -> tuple[float, float] | None:
    """(excess ms, its standard error ms) of `metric` in `stretch`: the mean window p99 of the
    windows inside it less the median of the windows wholly outside the fault's window and tail,
    and the latter's spread over the root of the former's count; None with too few windows."""
    t, v = samples.get(metric, (np.array([]), np.array([])))
    w, p99 = window_p99s(t, v, config)
    inside = p99[(w >= stretch[0] - config.window_s / 2) & (w + config.window_s / 2 <= stretch[1])]
    end = w + config.window_s
    free = p99[(end <= fault[0]) | (w >= fault[1] + config.acted.tail_s)]
    if len(inside) < config.min_windows or len(free) < config.min_windows:
        return None
    return float(np.mean(inside) - np.median(free)), float(np.std(free) / np.sqrt(len(inside)))


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
    complete = len(twins) == len(pair_windows) and len(twins) > 1
    by_metric = _metric_parts(twins, stretch, config) if stretch and complete else {}
    hull = (min(s for s, _ in pair_windows), max(e for _, e in pair_windows))
    out = {}
    for k, tw in twins.items():
        judged = judge(tw.samples, tw.window, [tw.window], tw.duration_s, config.acted)
        share, metric = _largest_share(k, by_metric)
        part = by_metric[metric][k] if metric is not None else None
        pair = excess(pair_samples, metric, stretch, hull, config) if metric and stretch else None
        out[k] = Solo(
            tw.run_id,
            judged.acted,
            judged.ratio,
            metric,
            round(part, 3) if part is not None else None,
            share,
            round(pair[0], 3) if pair else None,
            "" if share is not None else _no_share_reason(stretch, complete),
        )
    return out


def _metric_parts(
    twins: dict[int, Twin], stretch: Window, config: SoloConfig
) -> dict[str, dict[int, float]]:
    """metric → each twin's excess on it, for the metrics that rose in the stretch: every twin
    has enough samples of it, and their summed (positive) excess is SoloConfig.min_z standard
    errors above zero."""
    out = {}
    for metric in CLIENT_METRICS:
        got = [
            (k, excess(tw.samples, metric, stretch, tw.window, config)) for k, tw in twins.items()
        ]
        known = [(k, g) for k, g in got if g is not None]
        if len(known) < len(twins):
            continue
        rise = sum(max(0.0, g[0]) for _, g in known)
        noise = float(np.sqrt(sum(g[1] ** 2 for _, g in known)))
        if rise > 0 and rise >= config.min_z * noise:
            out[metric] = {k: g[0] for k, g in known}
    return out


def _largest_share(
    k: int, by_metric: dict[str, dict[int, float]]
) -> tuple[float | None, str | None]:
    """Partner k's share on the metric where it is largest: a partner counts as minor only if it
    makes under a third of the shared stretch's excess on every metric that rose there (a GC
    storm's stretch can rise on TTFT while a client stall beside it owns the ITL)."""
    best: tuple[float | None, str | None] = (None, None)
    for metric, parts in by_metric.items():
        share = round(max(0.0, parts[k]) / sum(max(0.0, x) for x in parts.values()), 4)
        if best[0] is None or share > best[0]:
            best = (share, metric)
    return best


def _no_share_reason(stretch: Window | None, complete: bool) -> str:
    if stretch is None:
        return "the pair's faults never overlap: no shared stretch to split"
    if not complete:
        return "not every partner of the pair has a twin"
    return "no client metric with enough samples rose in the shared stretch in either twin"
