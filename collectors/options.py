"""What the collectors sample and how often (one flat dataclass, every field documented)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CollectorOptions:
    # py-spy stack samples per second and process; >= 100 so a 1-s window holds 100 samples.
    pyspy_rate_hz: int = 100
    # False: no stack samples (e.g. where ptrace is not allowed).
    pyspy: bool = True
    # /proc CPU and scheduling readings per process, seconds between ticks (10 Hz).
    proc_interval_s: float = 0.1
    # How often the process tree is listed again (new children: vLLM's EngineCore, workers).
    tree_refresh_s: float = 0.5
    # /metrics scrape period (4 Hz: a 1-s window holds 4 scrapes for its rate and quantiles).
    metrics_interval_s: float = 0.25

    def __post_init__(self) -> None:
        if not 1 <= self.pyspy_rate_hz <= 1000:
            raise ValueError(
                f"collectors.pyspy_rate_hz must be in [1, 1000], got {self.pyspy_rate_hz!r}"
            )
        for name, lo, hi in (
            ("proc_interval_s", 0.005, 10.0),
            ("tree_refresh_s", 0.05, 60.0),
            ("metrics_interval_s", 0.05, 60.0),
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise ValueError(f"collectors.{name} must be in [{lo}, {hi}] s, got {value!r}")
