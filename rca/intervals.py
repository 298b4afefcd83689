"""95 % intervals for the evaluation's figures: a seeded bootstrap over events, the exact
(Clopper–Pearson) interval of a proportion and the exact (Garwood) interval of a Poisson rate.

Bootstrap: the events (faults, spikes) are resampled with replacement `reps` times and the
statistic recomputed on each replicate; the interval is the replicates' percentile range. The
generator is `numpy.random.default_rng(seed)` and the events are taken in the order given, so the
same events and seed give the same interval on every call and every machine (the caller passes
events in a fixed order: runs in suite order, faults in file order). A replicate on which the
statistic is undefined (None: e.g. accuracy with no event) is dropped; the share dropped is
returned so a reader can see when an interval rests on few replicates.

Clopper–Pearson: a share of k right out of n (accuracy) from the beta quantiles
B(α/2; k, n−k+1) … B(1−α/2; k+1, n−k); at 25 of 25 it is [0.86, 1.00], where a percentile
bootstrap would claim [1.00, 1.00].

Poisson: false alarms on the controls are counts over an exposure in hours; the exact interval
is chi²(α/2; 2k)/2T … chi²(1−α/2; 2k+2)/2T, which is defined for k = 0 too (upper bound
≈ 3.7/T for 95 %), where a normal approximation would claim zero uncertainty.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval; all three None when the statistic is undefined."""

    value: float | None  # the statistic on the events as observed
    low: float | None  # lower end of the interval
    high: float | None  # upper end of the interval
    level: float = 0.95  # coverage the interval is built for
    method: str = "bootstrap"  # 'bootstrap' (percentile) | 'clopper-pearson' | 'poisson-exact'
    reps: int = 0  # bootstrap replicates drawn (0 for an exact interval)
    undefined_share: float = 0.0  # share of replicates on which the statistic was undefined

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "method": self.method,
            "reps": self.reps,
            "undefined_share": self.undefined_share,
        }


@dataclass(frozen=True)
class BootstrapOptions:
    """How a bootstrap interval is drawn."""

    reps: int = 2000  # replicates; 2,000 puts the 2.5 % percentile on ~50 replicates
    seed: int = 0  # numpy default_rng seed: the same seed gives the same interval
    level: float = 0.95  # coverage

    def __post_init__(self) -> None:
        if not (isinstance(self.reps, int) and 100 <= self.reps <= 1_000_000):
            raise ValueError(f"reps must be an integer in [100, 1000000], got {self.reps!r}")
        if not 0.5 <= self.level < 1.0:
            raise ValueError(f"level must be in [0.5, 1), got {self.level!r}")


def bootstrap(
    events: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    options: BootstrapOptions = BootstrapOptions(),
) -> Interval:
    """Percentile bootstrap interval of `statistic` over `events` (resampled with replacement)."""
    value = statistic(events) if events else None
    if value is None:
        return Interval(None, None, None, options.level, "bootstrap", options.reps, 1.0)
    rng = np.random.default_rng(options.seed)
    n = len(events)
    draws = rng.integers(0, n, size=(options.reps, n))  # [reps, n] event indices
    stats = []
    for row in draws:
        s = statistic([events[i] for i in row])
        if s is not None:
            stats.append(s)
    undefined = 1.0 - len(stats) / options.reps
    if not stats:
        return Interval(value, None, None, options.level, "bootstrap", options.reps, undefined)
    alpha = 1.0 - options.level
    low, high = np.quantile(np.asarray(stats, dtype=np.float64), [alpha / 2, 1 - alpha / 2])
    return Interval(
        float(value), float(low), float(high), options.level, "bootstrap", options.reps, undefined
    )


def poisson_rate(count: int, exposure: float, level: float = 0.95) -> Interval:
    """Exact (Garwood) interval of a rate: `count` events over `exposure` (e.g. hours)."""
    from scipy.stats import chi2

    if not (isinstance(count, int) and count >= 0):
        raise ValueError(f"count must be an integer >= 0, got {count!r}")
    if not 0.5 <= level < 1.0:
        raise ValueError(f"level must be in [0.5, 1), got {level!r}")
    if not exposure > 0:
        return Interval(None, None, None, level, "poisson-exact")
    alpha = 1.0 - level
    low = 0.0 if count == 0 else float(chi2.ppf(alpha / 2, 2 * count)) / 2
    high = float(chi2.ppf(1 - alpha / 2, 2 * count + 2)) / 2
    return Interval(count / exposure, low / exposure, high / exposure, level, "poisson-exact")


def proportion_exact(k: int, n: int, level: float = 0.95) -> Interval:
    """Exact (Clopper–Pearson) interval of the share `k` of `n`; undefined (None) for n = 0."""
    from scipy.stats import beta

    if not (isinstance(n, int) and isinstance(k, int) and 0 <= k <= n):
        raise ValueError(f"need integers 0 <= k <= n, got k={k!r}, n={n!r}")
    if not 0.5 <= level < 1.0:
        raise ValueError(f"level must be in [0.5, 1), got {level!r}")
    if n == 0:
        return Interval(None, None, None, level, "clopper-pearson")
    alpha = 1.0 - level
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Interval(k / n, low, high, level, "clopper-pearson")
