"""Workload and load specifications: the scenario's `workload:` and `load:` blocks.

What: validated dataclasses that say *what* each request looks like (WorkloadSpec: prompt and
output lengths, sampling parameters) and *how* requests arrive (LoadSpec: the load shape).
Why: the runner ships them to the Locust subprocess as JSON, so every field is checked here,
in the parent process, where a bad scenario fails fast with the field's name and valid range
instead of as a traceback inside Locust. Unknown keys are an error naming the key.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from loadgen.errors import SpecError
from spikelens_common.config_keys import strict_keys

# Sampling parameters the workload may set, with the valid range the engine enforces
# (docs/design.md "Engine semantics"; OpenAI / vLLM). (low, high, low_inclusive, high_inclusive, integer)
SAMPLING_RANGES: dict[str, tuple[float, float, bool, bool, bool]] = {
    "temperature": (0.0, math.inf, True, False, False),
    "top_p": (0.0, 1.0, False, True, False),
    "top_k": (-1, math.inf, True, False, True),
    "min_p": (0.0, 1.0, True, True, False),
    "frequency_penalty": (-2.0, 2.0, True, True, False),
    "presence_penalty": (-2.0, 2.0, True, True, False),
    "repetition_penalty": (0.0, math.inf, False, False, False),
    "seed": (0, 2**63 - 1, True, True, True),
}

CLOSED_LOOP_SHAPES = ("constant", "ramp", "step", "spike")
OPEN_LOOP_SHAPES = ("open", "poisson", "replay")
SHAPES = CLOSED_LOOP_SHAPES + OPEN_LOOP_SHAPES
# how a replay sends a trace: on its recorded times, or as its recorded users' closed loops
REPLAY_LOOPS = ("open", "closed")


def _reject_unknown(cls: type, data: dict, where: str) -> None:
    """Raise SpecError naming the first key of `data` that `cls` does not declare."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping, got {type(data).__name__}")
    strict_keys(data, (f.name for f in dataclasses.fields(cls)), where, error=SpecError)


def _check_number(
    where: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    integer: bool = False,
) -> None:
    """Raise SpecError unless `value` is a number in the given range (bools are not numbers)."""
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    lo = "[" if low_inclusive else "("
    hi = "]" if high_inclusive else ")"
    rng = f"{lo}{low}, {high}{hi}"
    if isinstance(value, bool) or not ok_type or (isinstance(value, float) and math.isnan(value)):
        raise SpecError(f"{where} must be {kind} in {rng}, got {value!r}")
    below = value < low if low_inclusive else value <= low
    above = value > high if high_inclusive else value >= high
    if below or above:
        raise SpecError(f"{where} must be {kind} in {rng}, got {value!r}")


def check_sampling(sampling: Any, where: str) -> None:
    """Raise SpecError unless `sampling` maps known parameter names to a valid value or a
    non-empty list of valid values."""
    if not isinstance(sampling, dict):
        raise SpecError(f"{where}: expected a mapping, got {type(sampling).__name__}")
    strict_keys(sampling, SAMPLING_RANGES, where, error=SpecError)
    for name, value in sampling.items():
        low, high, lo_inc, hi_inc, integer = SAMPLING_RANGES[name]
        choices = value if isinstance(value, list) else [value]
        if not choices:
            raise SpecError(f"{where}.{name}: the list of choices is empty")
        for i, choice in enumerate(choices):
            label = f"{where}.{name}" + (f"[{i}]" if isinstance(value, list) else "")
            _check_number(
                label,
                choice,
                low,
                high,
                low_inclusive=lo_inc,
                high_inclusive=hi_inc,
                integer=integer,
            )


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution: normal(mean, std) rounded and clamped to [min, max]."""

    mean: float  # centre of the lengths drawn, in tokens
    std: float = 0.0  # spread; 0 gives every request exactly `mean` tokens
    min: int = 1  # lower clamp: the shortest prompt/output ever sent
    max: int = 4096  # upper clamp: keeps draws inside the engine's max_model_len

    @classmethod
    def from_dict(cls, data: Any, where: str) -> LengthDist:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            data = {"mean": data, "std": 0, "min": int(data), "max": int(data)}
        _reject_unknown(cls, data, where)
        if "mean" not in data:
            raise SpecError(f"{where}.mean is required")
        dist = cls(**data)
        dist.validate(where)
        return dist

    def validate(self, where: str) -> None:
        _check_number(f"{where}.min", self.min, 1, 1_000_000, integer=True)
        _check_number(f"{where}.max", self.max, self.min, 1_000_000, integer=True)
        _check_number(f"{where}.mean", self.mean, self.min, self.max)
        _check_number(f"{where}.std", self.std, 0, 1_000_000)

    def draw(self, rng) -> int:
        """One length from `rng` (a random.Random); pure apart from advancing rng."""
        value = rng.gauss(self.mean, self.std) if self.std > 0 else self.mean
        return int(min(self.max, max(self.min, round(value))))


@dataclass(frozen=True)
class WorkloadSpec:
    """What each request carries. The scenario's `workload:` block."""

    prompt_tokens: LengthDist = field(
        default_factory=lambda: LengthDist(mean=128, std=32, min=16, max=512)
    )
    # drawn per request, then sent as max_tokens with ignore_eos so the output has exactly this length
    output_tokens: LengthDist = field(
        default_factory=lambda: LengthDist(mean=64, std=16, min=8, max=256)
    )
    # each parameter a fixed value or a list drawn from uniformly per request; absent = server default
    sampling: dict[str, Any] = field(default_factory=dict)
    # seed of the per-user draws; None uses the run's seed so one scenario seed reproduces everything
    seed: int | None = None
    # where prompt text comes from: the built-in corpus, a JSONL file, or a ShareGPT JSON file
    source: str = "builtin"
    # file for source jsonl/sharegpt; relative paths resolve against the working directory
    path: str | None = None

    @classmethod
    def from_dict(cls, data: Any, where: str = "workload") -> WorkloadSpec:
        _reject_unknown(cls, data, where)
        kwargs = dict(data)
        for key in ("prompt_tokens", "output_tokens"):
            if key in kwargs:
                kwargs[key] = LengthDist.from_dict(kwargs[key], f"{where}.{key}")
        spec = cls(**kwargs)
        spec.validate(where)
        return spec

    def validate(self, where: str = "workload") -> None:
        self.prompt_tokens.validate(f"{where}.prompt_tokens")
        self.output_tokens.validate(f"{where}.output_tokens")
        check_sampling(self.sampling, f"{where}.sampling")
        if self.seed is not None:
            _check_number(f"{where}.seed", self.seed, 0, 2**63 - 1, integer=True)
        if self.source not in ("builtin", "jsonl", "sharegpt"):
            raise SpecError(
                f"{where}.source must be one of builtin, jsonl, sharegpt, got {self.source!r}"
            )
        if self.source != "builtin" and not self.path:
            raise SpecError(f"{where}.path is required when source is {self.source!r}")

    def draw_sampling(self, rng) -> dict[str, Any]:
        """The sampling parameters of one request: fixed values as given, lists drawn uniformly."""
        return {
            name: rng.choice(value) if isinstance(value, list) else value
            for name, value in sorted(self.sampling.items())
        }

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Stage:
    """One step of a `step` shape: from `at_s` (seconds after the start of load) hold `users`."""

    at_s: float  # seconds after the start of measured load
    users: int  # users held from at_s until the next stage


@dataclass(frozen=True)
class LoadSpec:
    """How requests arrive. The scenario's `load:` block.

    Closed loop (constant, ramp, step, spike): `users` simulated users each send a request, wait
    for the whole stream, think `think_time_s`, and send the next. Open loop (open = constant
    rate, poisson, replay): requests are sent at scheduled times whether or not earlier ones
    finished, so server slowness cannot slow the arrivals (no coordinated omission). A replay with
    `replay_loop: closed` is a closed loop again: each recorded user sends its recorded requests
    in order, each when the last one ended (loadgen.chains).
    """

    shape: str = "constant"  # constant | ramp | step | spike | open | poisson | replay
    users: int = 16  # closed loop: concurrent users (for ramp: the final count; spike: the base)
    spawn_rate: float | None = None  # users started per second; None starts them all within 1 s
    think_time_s: float = 0.0  # closed loop: pause between a user's requests
    start_users: int = 1  # ramp: users at the start of the ramp
    ramp_s: float | None = None  # ramp: seconds from start_users to users; None = the whole run
    stages: list[Stage] = field(default_factory=list)  # step: [{at_s, users}, ...]
    spike_users: int | None = None  # spike: users during the burst
    spike_start_s: float = 0.0  # spike: burst start, seconds after the start of measured load
    spike_duration_s: float = 0.0  # spike: burst length in seconds
    rate: float | None = None  # open/poisson: target arrivals per second
    max_in_flight: int = 1024  # open loop: cap on concurrent streams (hitting it is recorded)
    trace: str | None = None  # replay: a run directory, a JSONL trace, an Azure CSV or Mooncake
    speed: float = 1.0  # replay: time compression (2 = twice as fast)
    length_scale: float = 1.0  # replay: token lengths times this (0.1: production to a small model)
    trace_from_s: float = 0.0  # replay: the slice replayed, seconds after the trace's first request
    trace_to_s: float | None = None  # replay: end of the slice; None = the end of the trace
    # replay: 'open' sends each request at its recorded time; 'closed' replays each recorded
    # user (the trace's `user`) as a closed loop: its next request when the last one ended plus
    # think_time_s, so a slower engine gets fewer requests, as the recorded users' engine did
    replay_loop: str = "open"

    @classmethod
    def from_dict(cls, data: Any, where: str = "load") -> LoadSpec:
        _reject_unknown(cls, data, where)
        kwargs = dict(data)
        if "stages" in kwargs:
            stages = kwargs["stages"]
            if not isinstance(stages, list):
                raise SpecError(f"{where}.stages: expected a list of {{at_s, users}}")
            parsed = []
            for i, stage in enumerate(stages):
                _reject_unknown(Stage, stage, f"{where}.stages[{i}]")
                if "at_s" not in stage or "users" not in stage:
                    raise SpecError(f"{where}.stages[{i}]: needs at_s and users")
                parsed.append(Stage(**stage))
            kwargs["stages"] = parsed
        spec = cls(**kwargs)
        spec.validate(where)
        return spec

    def validate(self, where: str = "load") -> None:
        if self.shape not in SHAPES:
            raise SpecError(f"{where}.shape must be one of {', '.join(SHAPES)}, got {self.shape!r}")
        _check_number(f"{where}.users", self.users, 1, 100_000, integer=True)
        if self.spawn_rate is not None:
            _check_number(f"{where}.spawn_rate", self.spawn_rate, 0, 100_000, low_inclusive=False)
        _check_number(f"{where}.think_time_s", self.think_time_s, 0, 3600)
        _check_number(f"{where}.max_in_flight", self.max_in_flight, 1, 100_000, integer=True)
        if self.shape == "ramp":
            _check_number(f"{where}.start_users", self.start_users, 0, self.users, integer=True)
            if self.ramp_s is not None:
                _check_number(f"{where}.ramp_s", self.ramp_s, 0, 86_400, low_inclusive=False)
        if self.shape == "step":
            if not self.stages:
                raise SpecError(f"{where}.stages: a step shape needs at least one stage")
            previous = -math.inf
            for i, stage in enumerate(self.stages):
                _check_number(f"{where}.stages[{i}].at_s", stage.at_s, 0, 86_400)
                _check_number(f"{where}.stages[{i}].users", stage.users, 0, 100_000, integer=True)
                if stage.at_s <= previous:
                    raise SpecError(
                        f"{where}.stages[{i}].at_s must be later than the stage before it"
                    )
                previous = stage.at_s
        if self.shape == "spike":
            if self.spike_users is None:
                raise SpecError(f"{where}.spike_users is required for a spike shape")
            _check_number(f"{where}.spike_users", self.spike_users, 1, 100_000, integer=True)
            _check_number(f"{where}.spike_start_s", self.spike_start_s, 0, 86_400)
            _check_number(
                f"{where}.spike_duration_s", self.spike_duration_s, 0, 86_400, low_inclusive=False
            )
        if self.shape in ("open", "poisson"):
            if self.rate is None:
                raise SpecError(f"{where}.rate (requests/s) is required for a {self.shape} shape")
            _check_number(f"{where}.rate", self.rate, 0, 100_000, low_inclusive=False)
        if self.shape == "replay":
            if not self.trace:
                raise SpecError(
                    f"{where}.trace (a run directory, a JSONL, Azure CSV or Mooncake file) is required for replay"
                )
            _check_number(f"{where}.speed", self.speed, 0, 1000, low_inclusive=False)
            _check_number(f"{where}.length_scale", self.length_scale, 0, 100, low_inclusive=False)
            _check_number(f"{where}.trace_from_s", self.trace_from_s, 0, 10**8)
            if self.replay_loop not in REPLAY_LOOPS:
                raise SpecError(
                    f"{where}.replay_loop must be one of {', '.join(REPLAY_LOOPS)}, "
                    f"got {self.replay_loop!r}"
                )
            if self.trace_to_s is not None:
                _check_number(
                    f"{where}.trace_to_s",
                    self.trace_to_s,
                    self.trace_from_s,
                    10**8,
                    low_inclusive=False,
                )

    @property
    def open_loop(self) -> bool:
        """Requests go out on a schedule, whatever the engine answers (no users waiting)."""
        if self.shape == "replay":
            return self.replay_loop == "open"
        return self.shape in OPEN_LOOP_SHAPES

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# Named presets, so a scenario or a test can say `workload: smoke` instead of spelling it out.
WORKLOAD_PRESETS: dict[str, WorkloadSpec] = {
    # tiny requests: a test that checks plumbing, not latency
    "smoke": WorkloadSpec(
        prompt_tokens=LengthDist(mean=16, std=0, min=16, max=16),
        output_tokens=LengthDist(mean=8, std=0, min=8, max=8),
    ),
    # docs/design.md's example chat mix
    "chat": WorkloadSpec(),
}

LOAD_PRESETS: dict[str, LoadSpec] = {
    "smoke": LoadSpec(shape="constant", users=2),
    "chat": LoadSpec(shape="constant", users=16),
}


def workload_from(value: Any, where: str = "workload") -> WorkloadSpec:
    """A WorkloadSpec from a preset name, a mapping, or an existing spec."""
    if isinstance(value, WorkloadSpec):
        value.validate(where)
        return value
    if isinstance(value, str):
        if value not in WORKLOAD_PRESETS:
            raise SpecError(
                f"{where}: unknown preset {value!r} (presets: {', '.join(WORKLOAD_PRESETS)})"
            )
        return WORKLOAD_PRESETS[value]
    return WorkloadSpec.from_dict(value, where)


def load_from(value: Any, where: str = "load") -> LoadSpec:
    """A LoadSpec from a preset name, a mapping, or an existing spec."""
    if isinstance(value, LoadSpec):
        value.validate(where)
        return value
    if isinstance(value, str):
        if value not in LOAD_PRESETS:
            raise SpecError(
                f"{where}: unknown preset {value!r} (presets: {', '.join(LOAD_PRESETS)})"
            )
        return LOAD_PRESETS[value]
    return LoadSpec.from_dict(value, where)
