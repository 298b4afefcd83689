"""The nightly regression's config: which scenarios, against which baseline, with which thresholds.

`scenarios/nightly/config.yaml` by default. Unknown keys are errors naming the file and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from spikelens_common.config_keys import strict_keys


def default_config_dir() -> Path:
    """scenarios/nightly: the nightly's config.yaml and scenarios as installed."""
    return Path(str(resources.files("scenarios") / "nightly"))


# Metric name → quantile (None = mean). Latency in ms; throughput in output tokens/s per window.
METRICS: dict[str, float | None] = {
    "ttft_p50": 0.5,
    "ttft_p99": 0.99,
    "itl_p50": 0.5,
    "itl_p99": 0.99,
    "e2e_p50": 0.5,
    "e2e_p99": 0.99,
    "throughput": None,
    "error_rate": None,
}


class NightlyConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Thresholds:
    """Smallest change that counts as a regression once the bootstrap CI excludes zero."""

    latency_rel: float = 0.10  # 10 % slower TTFT/ITL/E2E median
    tail_rel: float = 0.25  # 25 % slower p99: tails move more between runs of the same code
    latency_abs_ms: float = 5.0  # and never less than 5 ms (measured: clean runs differ by ~3 ms)
    throughput_rel: float = 0.10  # 10 % fewer output tokens/s
    error_rate_abs: float = 0.01  # one more failed request in a hundred

    def for_metric(self, metric: str) -> tuple[float, bool, float]:
        """(threshold, absolute?, smallest absolute change) for a metric name."""
        if metric == "error_rate":
            return self.error_rate_abs, True, 0.0
        if metric == "throughput":
            return self.throughput_rel, False, 0.0
        if metric.endswith("_p99"):
            return self.tail_rel, False, self.latency_abs_ms
        return self.latency_rel, False, self.latency_abs_ms


@dataclass(frozen=True)
class CapacityCheck:
    """An optional capacity sweep in the nightly (off unless the config has a `capacity:` block):
    a capacity below every one of the last `last_n` sweeps' by more than `drop_rel` regressed."""

    scenario: Path  # the scenario swept (its own `slo:` unless `slo` is given)
    kind: str  # users (closed loop) | rate (open loop, requests/s)
    loads: tuple[float, ...]  # the steps; the baseline is sweeps of the same steps
    slo: dict | None = None  # objectives in ms, e.g. {ttft_ms: 500}
    attainment: float = 0.9  # share of requests that must meet the SLO
    drop_rel: float = 0.2  # steps are coarse: one step down from 8 to 6 users is -25 %
    last_n: int = 3  # baseline sweeps; below the lowest of them is a drop (a
    #                                    sweep on a shared box can lose a step to noise once)

    @classmethod
    def from_dict(cls, raw: Any, base: Path, where: str) -> CapacityCheck:
        where = f"{where}: capacity"
        if not isinstance(raw, dict):
            raise NightlyConfigError(f"{where}: a mapping with scenario and users or rates")
        known = {"scenario", "users", "rates", "slo", "attainment", "drop_rel", "last_n"}
        strict_keys(
            raw,
            known,
            where,
            message="{where}.{key}: unknown key; valid: {valid}",
            error=NightlyConfigError,
        )
        if not isinstance(raw.get("scenario"), str) or not (base / raw["scenario"]).is_file():
            raise NightlyConfigError(
                f"{where}.scenario: a scenario file beside config.yaml, got {raw.get('scenario')!r}"
            )
        if ("users" in raw) == ("rates" in raw):
            raise NightlyConfigError(
                f"{where}: give exactly one of users: [2, 4, 8] or rates: [1, 2, 4]"
            )
        kind, loads = ("users", raw["users"]) if "users" in raw else ("rate", raw["rates"])
        from rca.capacity import parse_loads

        try:
            steps = parse_loads(
                ",".join(str(x) for x in loads) if isinstance(loads, list) else str(loads), kind
            )
        except ValueError as e:
            raise NightlyConfigError(
                f"{where}.{'users' if kind == 'users' else 'rates'}: {e}"
            ) from None
        slo = raw.get("slo")
        if slo is not None:
            from loadgen.errors import SpecError
            from loadgen.metrics import SLO

            try:
                SLO.from_dict(slo if isinstance(slo, dict) else {"": slo}, where=f"{where}.slo")
            except SpecError as e:
                raise NightlyConfigError(str(e)) from None
        for key, lo, hi in (("attainment", 0.0, 1.0), ("drop_rel", 0.0, 1.0)):
            value = raw.get(key, getattr(cls, key))
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not lo < value <= hi
            ):
                raise NightlyConfigError(
                    f"{where}.{key}: must be a number in ({lo:g}, {hi:g}], got {value!r}"
                )
        last_n = raw.get("last_n", 3)
        if isinstance(last_n, bool) or not isinstance(last_n, int) or not 1 <= last_n <= 50:
            raise NightlyConfigError(
                f"{where}.last_n: must be an integer in [1, 50], got {last_n!r}"
            )
        return cls(
            scenario=(base / raw["scenario"]).resolve(),
            kind=kind,
            loads=tuple(steps),
            slo=dict(slo) if slo else None,
            attainment=float(raw.get("attainment", 0.9)),
            drop_rel=float(raw.get("drop_rel", 0.2)),
            last_n=last_n,
        )


@dataclass(frozen=True)
class NightlyConfig:
    scenarios: tuple[Path, ...]  # scenario files, run in order
    baseline: str = "rolling"  # rolling (last N passing nightlies) | pinned
    last_n: int = 5  # size of the rolling baseline
    pinned_run_id: str | None = None  # the baseline run when baseline = pinned
    metrics: tuple[str, ...] = tuple(METRICS)
    thresholds: Thresholds = field(default_factory=Thresholds)
    bootstrap_reps: int = 400  # replicates per metric (CI resolution vs time)
    # With ≥ 2 baseline runs, a change must also exceed their own spread (rca/compare.py): on a
    # shared host clean runs differ by tens of percent; off only on a dedicated, quiet machine.
    noise_guard: bool = True
    capacity: CapacityCheck | None = None  # optional capacity sweep (off in the shipped config)
    # `spikelens confirm` of a regressed run's worst spike, with this many repeats per arm (each
    # one full run more per arm); 0: off
    confirm_repeats: int = 0

    @classmethod
    def load(cls, config_dir: str | Path) -> NightlyConfig:
        config_dir = Path(config_dir)
        path = config_dir / "config.yaml"
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except OSError as e:
            raise NightlyConfigError(f"{path}: cannot read: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise NightlyConfigError(f"{path}: not valid YAML: {e}") from None
        return cls.from_dict(raw, config_dir, str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], base: Path, where: str = "<config>") -> NightlyConfig:
        strict_keys(
            raw,
            (f.name for f in fields(cls)),
            where,
            error=NightlyConfigError,
            message="{where}: {key}: unknown key; valid: {valid}",
        )
        scenarios = raw.get("scenarios")
        if not scenarios or not isinstance(scenarios, list):
            raise NightlyConfigError(f"{where}: scenarios: a non-empty list of scenario files")
        paths = tuple((base / s).resolve() for s in scenarios)
        for p in paths:
            if not p.is_file():
                raise NightlyConfigError(f"{where}: scenarios: {p} does not exist")
        baseline = raw.get("baseline", "rolling")
        if baseline not in ("rolling", "pinned"):
            raise NightlyConfigError(
                f"{where}: baseline: must be rolling or pinned, got {baseline!r}"
            )
        if baseline == "pinned" and not raw.get("pinned_run_id"):
            raise NightlyConfigError(f"{where}: pinned_run_id: required when baseline is pinned")
        last_n = raw.get("last_n", 5)
        if not isinstance(last_n, int) or not 1 <= last_n <= 100:
            raise NightlyConfigError(f"{where}: last_n: must be an integer in [1, 100]")
        metrics = tuple(raw.get("metrics", METRICS))
        for m in metrics:
            if m not in METRICS:
                raise NightlyConfigError(
                    f"{where}: metrics: unknown metric {m!r}; valid: {', '.join(METRICS)}"
                )
        t_raw = raw.get("thresholds") or {}
        strict_keys(
            t_raw,
            (f.name for f in fields(Thresholds)),
            where,
            error=NightlyConfigError,
            message="{where}: thresholds.{key}: unknown key; valid: {valid}",
        )
        for key, value in t_raw.items():
            if not isinstance(value, (int, float)) or not 0 <= value <= 10:
                raise NightlyConfigError(f"{where}: thresholds.{key}: must be a number in [0, 10]")
        reps = raw.get("bootstrap_reps", 400)
        if not isinstance(reps, int) or not 50 <= reps <= 10_000:
            raise NightlyConfigError(f"{where}: bootstrap_reps: must be an integer in [50, 10000]")
        noise_guard = raw.get("noise_guard", True)
        if not isinstance(noise_guard, bool):
            raise NightlyConfigError(f"{where}: noise_guard: must be true or false")
        capacity = (
            CapacityCheck.from_dict(raw["capacity"], base, where)
            if raw.get("capacity") is not None
            else None
        )
        repeats = raw.get("confirm_repeats", 0)
        if isinstance(repeats, bool) or not isinstance(repeats, int) or not 0 <= repeats <= 10:
            raise NightlyConfigError(
                f"{where}: confirm_repeats: must be an integer in [0, 10], got {repeats!r}"
            )
        return cls(
            scenarios=paths,
            baseline=baseline,
            last_n=last_n,
            pinned_run_id=raw.get("pinned_run_id"),
            metrics=metrics,
            thresholds=Thresholds(**t_raw),
            bootstrap_reps=reps,
            noise_guard=noise_guard,
            capacity=capacity,
            confirm_repeats=repeats,
        )
