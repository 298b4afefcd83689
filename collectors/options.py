"""What the collectors sample and how often (one flat dataclass, every field documented)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CollectorOptions:
    # py-spy stack samples per second and process; >= 100 so a 1-s window holds 100 samples.
    pyspy_rate_hz: int = 100
    # False: no stack samples (e.g. where ptrace is not allowed).
    pyspy: bool = True
    # How far below the flow's priority py-spy runs (nice increment, 0-19): flows set
    # collectors.pyspy.OBSERVER_NICE when the engine has CPUs of its own, so on the CPUs left
    # py-spy yields to the load generator; 0 where it shares the engine's CPUs, where a lower
    # priority loses the busy engine's samples (a CI run at +10 sampled nothing of a burning child).
    pyspy_nice: int = 0
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
        if isinstance(self.pyspy_nice, bool) or self.pyspy_nice not in range(20):
            raise ValueError(
                f"collectors.pyspy_nice must be an integer in [0, 19], got {self.pyspy_nice!r}"
            )
        for name, lo, hi in (
            ("proc_interval_s", 0.005, 10.0),
            ("tree_refresh_s", 0.05, 60.0),
            ("metrics_interval_s", 0.05, 60.0),
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise ValueError(f"collectors.{name} must be in [{lo}, {hi}] s, got {value!r}")
