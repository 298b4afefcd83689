"""Is a run worse than its baseline? Bootstrap confidence intervals of percentile differences.

Used by the nightly regression. Latency samples are grouped by request (the gaps of one stream
are correlated), so the bootstrap resamples *requests* — a cluster bootstrap — and recomputes the
pooled percentile from the resampled requests' samples. A metric regressed when the whole
confidence interval of the difference lies above zero AND the relative change passes the
threshold: statistically real and large enough to matter; improved symmetrically; else unchanged.

The bootstrap sees only within-run noise. Separate runs of the same code on a shared host differ by
more (measured on this project's 2-core CI box: two clean 20-s nightlies 28-38 % apart in TTFT and
ITL medians while another job ran), so with two or more baseline runs the change must also exceed
their own spread — the *run noise*: the largest leave-one-out deviation of one baseline run from
the pool of the others. A candidate no further out than a clean run has been is not a regression.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

# Direction per metric family: +1 when larger is worse (latency, errors), -1 when larger is better.
WORSE_WHEN_HIGHER = {"ttft": 1, "itl": 1, "e2e": 1, "error_rate": 1, "throughput": -1}


@dataclass(frozen=True)
class Samples:
    """Per-sample values with the cluster (request, or window) each belongs to."""

    values: np.ndarray  # [n] float64
    clusters: np.ndarray  # [n] int64, 0..k-1

    @classmethod
    def from_groups(cls, groups: list[np.ndarray]) -> Samples:
        groups = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
        if not groups:
            return cls(np.empty(0), np.empty(0, dtype=np.int64))
        return cls(
            np.concatenate(groups),
            np.concatenate([np.full(len(g), i, dtype=np.int64) for i, g in enumerate(groups)]),
        )

    @property
    def n_clusters(self) -> int:
        return int(self.clusters.max()) + 1 if len(self.clusters) else 0


@dataclass(frozen=True)
class MetricVerdict:
    metric: str  # e.g. itl_p99
    baseline: float
    candidate: float
    delta: float  # candidate - baseline
    ci_low: float  # 95% bootstrap CI of delta
    ci_high: float
    rel_delta: float  # delta / baseline
    verdict: str  # regressed | improved | unchanged | insufficient
    n_baseline: int
    n_candidate: int
    run_noise: float = float("nan")  # spread between baseline runs (relative; absolute for
    #                                  error_rate); nan with fewer than 2 usable baseline runs

    def to_dict(self) -> dict:
        return asdict(self)


def _stat(s: Samples, q: float | None) -> float:
    return float(np.quantile(s.values, q)) if q is not None else float(s.values.mean())


def too_few_samples(s: Samples, q: float | None, min_clusters: int = 5, min_tail: int = 10) -> bool:
    """Too few clusters, or too few samples beyond the quantile, for a trustworthy statistic."""
    tail = min(q, 1 - q) if q is not None else 1.0
    return s.n_clusters < min_clusters or len(s.values) * tail < min_tail


def _bootstrap(s: Samples, q: float | None, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Statistic of `reps` cluster-bootstrap replicates of `s`, shape [reps]. Pure; no mutation."""
    order = np.argsort(s.values, kind="stable")
    vals, clus = s.values[order], s.clusters[order]
    k = s.n_clusters
    # weights[r, c] = how often cluster c was drawn in replicate r (multinomial, sums to k)
    weights = rng.multinomial(k, np.full(k, 1.0 / k), size=reps).astype(np.float64)  # [reps, k]
    w = weights[:, clus]  # [reps, n]
    if q is None:
        return (w * vals).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-12)
    cum = np.cumsum(w, axis=1)  # [reps, n]
    target = q * cum[:, -1:]  # [reps, 1]
    idx = (cum < target).sum(axis=1)  # first sorted index reaching the quantile
    return vals[np.minimum(idx, len(vals) - 1)]


def compare_metric(
    metric: str,
    baseline: Samples,
    candidate: Samples,
    q: float | None,
    threshold: float = 0.10,
    absolute: bool = False,
    min_abs: float = 0.0,
    reps: int = 400,
    seed: int = 0,
    min_clusters: int = 5,
    min_tail: int = 10,
    run_noise: float = float("nan"),
) -> MetricVerdict:
    """Verdict for one metric. `q` is the quantile (0.99 for p99) or None for the mean.

    `threshold` is relative to the baseline (0.10 = 10 %), or in the metric's own unit when
    `absolute` (error rates, whose baseline is often 0); `min_abs` is the smallest change, in the
    metric's unit, that counts at all (2.8 ms on a 20 ms ITL p99 is 14 % but run-to-run noise on
    a shared box, which the within-run bootstrap cannot see). A percentile needs `min_tail` samples
    beyond it on each side (p99 of 60 requests is just their maximum, and a bootstrap of a
    maximum is overconfident), else the verdict is `insufficient`. `run_noise` (same unit as
    `threshold`; nan = unknown) raises the threshold to the spread seen between baseline runs.
    """
    family = (
        metric.split("_")[0]
        if not metric.startswith(("error_rate", "throughput"))
        else ("error_rate" if metric.startswith("error_rate") else "throughput")
    )
    sign = WORSE_WHEN_HIGHER[family]
    nb, nc = baseline.n_clusters, candidate.n_clusters
    if any(too_few_samples(s, q, min_clusters, min_tail) for s in (baseline, candidate)):
        b = _stat(baseline, q) if len(baseline.values) else float("nan")
        c = _stat(candidate, q) if len(candidate.values) else float("nan")
        return MetricVerdict(
            metric,
            b,
            c,
            c - b,
            float("nan"),
            float("nan"),
            float("nan"),
            "insufficient",
            nb,
            nc,
            run_noise,
        )
    rng = np.random.default_rng(seed)
    b, c = _stat(baseline, q), _stat(candidate, q)
    diffs = _bootstrap(candidate, q, reps, rng) - _bootstrap(baseline, q, reps, rng)
    lo, hi = (float(x) for x in np.quantile(diffs, [0.025, 0.975]))
    rel = (c - b) / abs(b) if b else (0.0 if c == b else float("inf"))
    worse, better = (lo > 0, hi < 0) if sign > 0 else (hi < 0, lo > 0)
    size = (c - b) if absolute else rel
    big_enough = abs(c - b) >= min_abs
    # "Further out than the configured threshold and than any clean baseline run has been."
    bar = max(threshold, run_noise) if run_noise == run_noise else threshold
    if worse and sign * size >= bar and big_enough:
        verdict = "regressed"
    elif better and -sign * size >= bar and big_enough:
        verdict = "improved"
    else:
        verdict = "unchanged"
    return MetricVerdict(metric, b, c, c - b, lo, hi, rel, verdict, nb, nc, run_noise)


def between_run_noise(
    runs: list[Samples], q: float | None, absolute: bool, min_clusters: int = 5, min_tail: int = 10
) -> float:
    """Largest leave-one-out deviation of one run's statistic from the pool of the other runs:
    relative, or in the metric's unit when `absolute`. nan with fewer than 2 usable runs. Pure."""
    usable = [r for r in runs if not too_few_samples(r, q, min_clusters, min_tail)]
    if len(usable) < 2:
        return float("nan")
    worst = 0.0
    for i, one in enumerate(usable):
        rest = _stat(_pool(usable[:i] + usable[i + 1 :]), q)
        gap = abs(_stat(one, q) - rest)
        if not absolute:
            if not rest:
                continue  # a zero statistic has no relative spread (e.g. 0 ms never happens)
            gap /= abs(rest)
        worst = max(worst, gap)
    return worst


def _run_samples(conn, run_id: str) -> dict[str, Samples]:
    """Samples per metric family of one run, clustered by request (throughput: by window)."""
    from warehouse.queries import query

    by_metric: dict[str, dict[str, list[float]]] = {}
    for row in query(conn, "latency_samples", run_id=run_id):
        by_metric.setdefault(row["metric"], {}).setdefault(row["request_id"], []).append(
            row["value_ms"]
        )
    out = {
        m: Samples.from_groups([np.array(v) for v in groups.values()])
        for m, groups in by_metric.items()
    }
    windows = query(conn, "windows", run_id=run_id, window_s=1.0)
    out["throughput"] = Samples.from_groups([np.array([w["tokens"]]) for w in windows])
    return out


def _pool(samples: list[Samples]) -> Samples:
    """Concatenate several runs' samples, keeping their clusters distinct."""
    values, clusters, offset = [], [], 0
    for s in samples:
        values.append(s.values)
        clusters.append(s.clusters + offset)
        offset += s.n_clusters
    if not values:
        return Samples(np.empty(0), np.empty(0, dtype=np.int64))
    return Samples(np.concatenate(values), np.concatenate(clusters))


def compare_runs(
    db_path,
    candidate: str,
    baselines: list[str],
    metrics: dict[str, float | None],
    thresholds,
    reps: int = 400,
    seed: int = 0,
    noise_guard: bool = True,
) -> list[MetricVerdict]:
    """Verdict per metric of `candidate` against the pooled samples of `baselines`.

    `thresholds.for_metric(name) -> (threshold, absolute, min_abs)`. With `noise_guard`, the
    threshold is at least the run noise of the baseline runs (module docstring).
    """
    from warehouse.db import connect

    with connect(db_path, read_only=True) as conn:
        cand = _run_samples(conn, candidate)
        base_runs = [_run_samples(conn, b) for b in baselines]
    verdicts = []
    for metric, q in metrics.items():
        family = metric.split("_p")[0] if "_p" in metric else metric
        family = "error" if family == "error_rate" else family
        empty = Samples(np.empty(0), np.empty(0, dtype=np.int64))
        per_run = [r.get(family, empty) for r in base_runs]
        threshold, absolute, min_abs = thresholds.for_metric(metric)
        noise = between_run_noise(per_run, q, absolute) if noise_guard else float("nan")
        verdicts.append(
            compare_metric(
                metric,
                _pool(per_run),
                cand.get(family, empty),
                q,
                threshold=threshold,
                absolute=absolute,
                min_abs=min_abs,
                reps=reps,
                seed=seed,
                run_noise=noise,
            )
        )
    return verdicts


def store_verdicts(
    db_path,
    run_id: str,
    scenario_name: str,
    verdicts: list[MetricVerdict],
    baseline_runs: list[str],
) -> None:
    """Replace the run's rows in nightly_verdicts (one transaction, warehouse.store)."""
    import pyarrow as pa

    from warehouse.db import connect
    from warehouse.store import replace_run_rows

    def row(v: MetricVerdict) -> dict:
        out = {k: x for k, x in v.to_dict().items() if k not in ("n_baseline", "n_candidate")}
        if out["run_noise"] != out["run_noise"]:
            out["run_noise"] = None  # unknown (fewer than 2 baseline runs): NULL, not NaN
        return {
            "run_id": run_id,
            "scenario_name": scenario_name,
            **out,
            "baseline_runs": list(baseline_runs),
        }

    rows = (
        pa.Table.from_pylist([row(v) for v in verdicts])
        if verdicts
        else pa.table({"run_id": pa.array([], pa.string())})
    )
    with connect(db_path) as conn:
        replace_run_rows(conn, run_id, {"nightly_verdicts": rows})
