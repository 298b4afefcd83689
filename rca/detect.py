"""Spike detection on per-window latency percentiles (ITL, TTFT, E2E P99) against a robust baseline.

Baseline of a series = median of its valid windows over the whole run, spread = 1.4826·MAD (the
median tolerates up to half the windows being an incident), estimated again (up to trim_rounds
times, until it settles) without the windows the last estimate calls anomalous (above the
threshold below with trim_k for k), so a fault covering a quarter of the run does not widen the
spread it is judged against. A window is flagged when it beats all three of: median + k·spread, median·(1 +
min_rel_excess), median + min_abs_excess_ms — the floors keep a steady series' tiny MAD from
turning scheduler noise into spikes. Flagged windows at most
`merge_gap_windows` apart form one interval; intervals shorter than `min_windows` flagged windows
are dropped. A second test (`sustained_intervals`) judges a stretch of elevated windows by its
mean, whose noise shrinks by √n, for a rise that lasts without any one window clearing the
threshold. Intervals of different series that overlap (or nearly) are one incident: one Spike
with the list of series; its primary metric is the series with the largest relative peak; its
time span is that of its ITL/TTFT intervals (E2E lags: it is binned at completion). A fourth test,
'median', applies the per-window test to the ITL and TTFT P50 (`median_intervals`); a fifth,
'local' (opt-in), judges a stretch against its own neighbours (`local_intervals`).

Pure functions over lists of window dicts (rows of warehouse query `windows`); nothing is mutated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from rca.config import DETECTORS, METRICS, DetectConfig

_COUNT_OF = {"itl_p99": "itl_n", "ttft_p99": "ttft_n", "e2e_p99": "e2e_n"}
# The P50 column of a series the 'median' test reads (E2E has none: its P50 follows the mix of
# output lengths more than any slowdown).
_P50_OF = {"itl_p99": "itl_p50_ms", "ttft_p99": "ttft_p50_ms"}


@dataclass(frozen=True)
class Baseline:
    metric: str
    median_ms: float
    spread_ms: float  # 1.4826 · MAD
    threshold_ms: float  # a window above this is flagged
    valid_windows: int
    trimmed_windows: int = 0  # valid windows left out of the second estimate (see module doc)


@dataclass
class Interval:
    """A run of flagged windows of one series: [first, last] window indices, inclusive."""

    metric: str
    first: int
    last: int
    peak_ms: float
    baseline_ms: float
    flagged: list[int]
    excess_area: float  # Σ over flagged windows of (value − baseline) / baseline
    # The test that flagged it: 'mad', 'sustained', 'changepoint', 'median' or 'local'.
    detector: str = "mad"


@dataclass
class Spike:
    spike_id: int
    metric: str  # primary series
    metrics: list[str]  # every series that spiked
    first_window: int
    last_window: int
    start_s: float
    end_s: float
    peak_ms: float
    baseline_ms: float
    severity: str
    severity_score: float
    detector: str = "mad"
    intervals: list[Interval] = field(default_factory=list)


def series(windows: list[dict], metric: str, config: DetectConfig) -> np.ndarray:
    """The metric per window as float64 [n_windows]; NaN where missing or under min_samples."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    return _column(windows, f"{metric}_ms", metric, config)


def _column(windows: list[dict], column: str, metric: str, config: DetectConfig) -> np.ndarray:
    """`column` per window as float64 [n_windows]; NaN where missing or where the window holds
    fewer samples of `metric` than min_samples asks."""
    count_key = _COUNT_OF[metric]
    need = config.min_samples.get(metric, 1)
    values = np.full(len(windows), np.nan)
    for i, w in enumerate(windows):
        v = w.get(column)
        if v is not None and (w.get(count_key) or 0) >= need:
            values[i] = float(v)
    return values


def _threshold(median: float, spread: float, k: float, config: DetectConfig) -> float:
    return max(
        median + k * spread,
        median * (1.0 + config.min_rel_excess),
        median + config.min_abs_excess_ms,
    )


def _median_spread(valid: np.ndarray) -> tuple[float, float]:
    median = float(np.median(valid))
    return median, 1.4826 * float(np.median(np.abs(valid - median)))


def baseline(values: np.ndarray, metric: str, config: DetectConfig) -> Baseline | None:
    """Robust baseline of a series; None when it has fewer than min_baseline_windows valid windows.
    Each further estimate (up to trim_rounds) leaves out the windows above the last one's trim_k
    threshold, until the windows left out stop changing or fewer than min_baseline_windows would
    remain (then the last estimate stands)."""
    valid = values[~np.isnan(values)]
    if len(valid) < config.min_baseline_windows:
        return None
    median, spread = _median_spread(valid)
    trimmed = 0
    for _ in range(config.trim_rounds if config.trim_k is not None else 0):
        calm = valid[valid <= _threshold(median, spread, config.trim_k or 0.0, config)]
        if len(calm) < config.min_baseline_windows or len(calm) == len(valid) - trimmed:
            break  # too few left to estimate, or the same windows as the last round: settled
        median, spread = _median_spread(calm)
        trimmed = len(valid) - len(calm)
    threshold = _threshold(median, spread, config.mad_k, config)
    return Baseline(metric, median, spread, threshold, len(valid), trimmed)


def flagged_intervals(values: np.ndarray, base: Baseline, config: DetectConfig) -> list[Interval]:
    """Merge flagged windows into intervals and keep those with at least min_windows flags."""
    flagged = [i for i, v in enumerate(values) if not np.isnan(v) and v > base.threshold_ms]
    return _intervals_of(values, base, flagged, config, config.min_windows, "mad")


def _intervals_of(
    values: np.ndarray,
    base: Baseline,
    flagged: list[int],
    config: DetectConfig,
    min_windows: int,
    detector: str,
) -> list[Interval]:
    """Flagged windows at most merge_gap_windows apart as intervals of ≥ min_windows flags."""
    groups: list[list[int]] = []
    for i in flagged:
        if groups and i - groups[-1][-1] - 1 <= config.merge_gap_windows:
            groups[-1].append(i)
        else:
            groups.append([i])
    return [_interval(values, base, g, detector) for g in groups if len(g) >= min_windows]


def _interval(values: np.ndarray, base: Baseline, idx: list[int], detector: str) -> Interval:
    """The interval of windows `idx` (time order): its peak and its excess area."""
    peak = float(max(values[i] for i in idx))
    area = (
        float(sum((values[i] - base.median_ms) / base.median_ms for i in idx))
        if base.median_ms > 0
        else 0.0
    )
    return Interval(base.metric, idx[0], idx[-1], peak, base.median_ms, idx, area, detector)


def sustained_intervals(values: np.ndarray, base: Baseline, config: DetectConfig) -> list[Interval]:
    """Third detector: stretches of elevated windows whose *mean* beats the threshold.

    A shift that lasts n windows is judged on its mean, whose spread is spread/√n. A stretch of at
    least `sustained_min_windows` valid windows, every one above the median (missing ones allowed
    up to merge_gap_windows in a row) and its two ends a robust SD above it, is an interval when
    its mean beats all three of median + k·spread/√n, median·(1 + min_rel_excess) and median +
    min_abs_excess_ms. The floors are the single-window test's, so a sustained rise must be as
    large as a spike must be; only the noise allowance shrinks. Each window counts at most as the
    single-window threshold, so one blip (the per-window test's business) cannot carry a stretch,
    and the ends keep a barely-above-median neighbour from joining. Catches a contention that
    lifts a noisy series by half for seconds without any one window clearing 5 robust SDs.
    """
    n_min = config.sustained_min_windows
    above = ~np.isnan(values) & (values > base.median_ms)
    edge = base.median_ms + base.spread_ms
    flags = np.zeros(len(values), dtype=bool)
    for run in _runs_above(values, above, config.merge_gap_windows):
        vals = np.minimum(values[run], base.threshold_ms)  # [n_run] capped, time order
        csum = np.concatenate([[0.0], np.cumsum(vals)])  # [n_run + 1]
        ends = np.flatnonzero(vals > edge)  # [n_ends] positions a stretch may start or end at
        for a in ends:
            for b in ends[ends >= a + n_min - 1]:
                n = b - a + 1
                if _mean_passes((csum[b + 1] - csum[a]) / n, n, base, config):
                    flags[run[a : b + 1]] = True
    flagged = [int(i) for i in np.flatnonzero(flags)]
    return _intervals_of(values, base, flagged, config, 1, "sustained")


def _mean_passes(mean: float, n: int, base: Baseline, config: DetectConfig) -> bool:
    """Does the mean of n capped windows beat median + k·spread/√n and the two floors?"""
    allowance = base.median_ms + config.mad_k * base.spread_ms / np.sqrt(n)
    return mean > max(allowance, _threshold(base.median_ms, 0.0, 0.0, config))


def windows_spike(values: np.ndarray, base: Baseline, config: DetectConfig) -> bool:
    """Would the tests that find spikes call these windows (one stretch, time order) a spike?
    At least min_windows of them above the threshold, or (with 'sustained' among the detectors)
    at least sustained_min_windows valid ones whose capped mean passes the sustained test. What
    `spikelens confirm` asks of an arm's replay of a spike's windows, so a spike found either way
    can reproduce (one the 'median' test alone found is judged here on its P99 windows)."""
    valid = values[~np.isnan(values)]
    if int(np.sum(valid > base.threshold_ms)) >= config.min_windows:
        return True
    n = len(valid)
    capped = np.minimum(valid, base.threshold_ms)
    return (
        "sustained" in config.detectors
        and n >= config.sustained_min_windows
        and _mean_passes(float(np.mean(capped)), n, base, config)
    )


def _runs_above(values: np.ndarray, above: np.ndarray, max_gap: int) -> list[np.ndarray]:
    """Indices of the valid above-median windows, cut where a window at or below the median
    comes, or more than max_gap missing windows do."""
    runs: list[list[int]] = []
    last = -(10**9)
    for i in range(len(values)):
        if np.isnan(values[i]):
            continue
        if not above[i]:
            last = -(10**9)
            continue
        if i - last - 1 <= max_gap and runs:
            runs[-1].append(i)
        else:
            runs.append([i])
        last = i
    return [np.asarray(r) for r in runs]


def changepoint_intervals(
    values: np.ndarray, base: Baseline, config: DetectConfig
) -> list[Interval]:
    """Second detector: PELT (ruptures, l2 cost) segments of the series whose mean beats the threshold.

    The series is scaled to robust z (spread floored at 5 % of the median so a flat series is not
    all change points); missing windows take the median. A segment of at least min_windows
    windows whose mean exceeds the baseline threshold becomes an interval. Catches a sustained
    shift whose single windows hover around the threshold.
    """
    try:
        import ruptures
    except ImportError as exc:  # optional: the 'eval' extra
        raise ImportError(
            "detector 'changepoint' needs the ruptures package (pip install ruptures)"
        ) from exc
    filled = np.where(np.isnan(values), base.median_ms, values)
    if len(filled) < 2 * config.min_windows:
        return []
    scale = max(base.spread_ms, 0.05 * base.median_ms, 1e-9)
    z = ((filled - base.median_ms) / scale).reshape(-1, 1)  # [n_windows, 1]: ruptures wants 2-D
    ends = (
        ruptures.Pelt(model="l2", min_size=config.min_windows, jump=1)
        .fit(z)
        .predict(pen=config.changepoint_penalty * np.log(len(z)))
    )
    intervals, start = [], 0
    for end in ends:
        idx = [i for i in range(start, end) if not np.isnan(values[i])]
        start = end
        if len(idx) < config.min_windows or float(np.mean(values[idx])) <= base.threshold_ms:
            continue
        intervals.append(_interval(values, base, idx, "changepoint"))
    return intervals


def median_intervals(
    windows: list[dict], values: np.ndarray, base: Baseline, config: DetectConfig
) -> list[Interval]:
    """Fourth detector ('median'): the per-window test on the series' P50 (ITL, TTFT).

    The P50 per window gets its own robust baseline, with median_rel_excess for the relative
    floor; at least median_min_windows flagged windows (merged as the other tests merge) make an
    interval, reported on the P99 series `values` against its baseline `base`, so a spike reads
    the same whichever test found it. Where a window holds a handful of requests its P99 is their
    largest, and a shift of every request hides in that spread; the P50 moves with it.
    """
    column = _P50_OF.get(base.metric)
    if column is None:
        return []
    p50 = _column(windows, column, base.metric, config)  # [n_windows]
    p50_base = baseline(p50, base.metric, replace(config, min_rel_excess=config.median_rel_excess))
    if p50_base is None:
        return []
    flagged = [
        i
        for i in range(len(p50))
        if not np.isnan(p50[i]) and p50[i] > p50_base.threshold_ms and not np.isnan(values[i])
    ]
    return _intervals_of(values, base, flagged, config, config.median_min_windows, "median")


def local_intervals(
    windows: list[dict], values: np.ndarray, base: Baseline, config: DetectConfig
) -> list[Interval]:
    """Fifth detector ('local'): a stretch that stands above its own neighbourhood.

    On the P99 series and its P50 (ITL, TTFT), each stretch of local_windows valid windows is
    flagged when its lowest window beats the median of the valid windows within
    local_reach_windows on each side (at least local_side_min on each) by local_k of their robust
    spreads, ×(1 + local_rel_excess) and + min_abs_excess_ms. Flagged windows merge as the other
    tests merge and are reported on the P99 series `values` against `base`. A run whose latency
    drifts has a whole-run spread wider than any neighbourhood's, and a short rise hides in it.
    """
    flags = np.zeros(len(values), dtype=bool)  # [n_windows]
    columns = [values]
    if base.metric in _P50_OF:
        columns.append(_column(windows, _P50_OF[base.metric], base.metric, config))
    floors = replace(config, min_rel_excess=config.local_rel_excess)  # _threshold's floors
    for col in columns:  # [n_windows] each
        for a in range(len(col) - config.local_windows + 1):
            if _stands_out(col, a, floors):
                flags[a : a + config.local_windows] = True
    flagged = [int(i) for i in np.flatnonzero(flags & ~np.isnan(values))]
    return _intervals_of(values, base, flagged, config, config.local_windows, "local")


def _stands_out(col: np.ndarray, a: int, config: DetectConfig) -> bool:
    """Does col[a : a + local_windows] (all valid) clear its neighbours' threshold? `config`
    carries local_rel_excess as min_rel_excess."""
    n, reach = config.local_windows, config.local_reach_windows
    stretch = col[a : a + n]  # [n]
    if np.isnan(stretch).any():
        return False
    left, right = col[max(0, a - reach) : a], col[a + n : a + n + reach]
    left, right = left[~np.isnan(left)], right[~np.isnan(right)]
    if min(len(left), len(right)) < config.local_side_min:
        return False
    median, spread = _median_spread(np.concatenate([left, right]))
    return float(stretch.min()) > _threshold(median, spread, config.local_k, config)


def severity_label(peak_ms: float, baseline_ms: float, config: DetectConfig) -> str:
    ratio = peak_ms / baseline_ms if baseline_ms > 0 else float("inf")
    if ratio >= config.critical_ratio:
        return "critical"
    return "major" if ratio >= config.major_ratio else "minor"


def merge_incidents(
    intervals: list[Interval], window_s: float, config: DetectConfig
) -> list[Spike]:
    """Group intervals of any series that overlap or lie within merge_gap_windows into Spikes.

    ITL/TTFT intervals are grouped first. E2E is binned at completion, so it lags an incident by a
    request's duration: an E2E interval joins the group it reaches (overlap or within the gap, the
    nearest one) and never bridges two groups; one that reaches none is an incident of its own.
    """

    def gap(iv: Interval, group: list[Interval]) -> int:
        lo, hi = min(x.first for x in group), max(x.last for x in group)
        return max(iv.first - hi - 1, lo - iv.last - 1, -1)

    groups: list[list[Interval]] = []
    for iv in sorted(
        (iv for iv in intervals if iv.metric != "e2e_p99"), key=lambda iv: (iv.first, iv.last)
    ):
        if groups and gap(iv, groups[-1]) <= config.merge_gap_windows:
            groups[-1].append(iv)
        else:
            groups.append([iv])
    for iv in sorted(
        (iv for iv in intervals if iv.metric == "e2e_p99"), key=lambda iv: (iv.first, iv.last)
    ):
        near = [g for g in groups if gap(iv, g) <= config.merge_gap_windows]
        if near:
            min(near, key=lambda g: gap(iv, g)).append(iv)
        else:
            groups.append([iv])
    groups.sort(key=lambda g: min(x.first for x in g))
    spikes = []
    for n, group in enumerate(groups, start=1):
        primary = max(
            group,
            key=lambda iv: (
                iv.peak_ms / iv.baseline_ms if iv.baseline_ms > 0 else 0.0,
                -METRICS.index(iv.metric),
            ),
        )
        # E2E sets the timing only when nothing else spiked (it lags)
        timing = [iv for iv in group if iv.metric != "e2e_p99"] or group
        first = min(iv.first for iv in timing)
        last = max(iv.last for iv in timing)
        metrics = [m for m in METRICS if any(iv.metric == m for iv in group)]
        spikes.append(
            Spike(
                spike_id=n,
                metric=primary.metric,
                metrics=metrics,
                first_window=first,
                last_window=last,
                start_s=first * window_s,
                end_s=(last + 1) * window_s,
                peak_ms=primary.peak_ms,
                baseline_ms=primary.baseline_ms,
                severity=severity_label(primary.peak_ms, primary.baseline_ms, config),
                severity_score=primary.excess_area * window_s,
                detector="+".join(d for d in DETECTORS if any(iv.detector == d for iv in group)),
                intervals=group,
            )
        )
    return spikes


def detect_spikes(
    windows: list[dict], window_s: float, config: DetectConfig | None = None
) -> tuple[list[Spike], dict[str, Baseline]]:
    """Spikes of a run (time order, ids from 1) and the baseline of each analysable series."""
    config = config or DetectConfig()
    intervals: list[Interval] = []
    baselines: dict[str, Baseline] = {}
    for metric in METRICS:
        values = series(windows, metric, config)
        base = baseline(values, metric, config)
        if base is None:
            continue
        baselines[metric] = base
        if "mad" in config.detectors:
            intervals.extend(flagged_intervals(values, base, config))
        if "sustained" in config.detectors:
            intervals.extend(sustained_intervals(values, base, config))
        if "changepoint" in config.detectors:
            intervals.extend(changepoint_intervals(values, base, config))
        if "median" in config.detectors:
            intervals.extend(median_intervals(windows, values, base, config))
        if "local" in config.detectors:
            intervals.extend(local_intervals(windows, values, base, config))
    return merge_incidents(intervals, window_s, config), baselines
