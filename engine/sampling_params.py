"""Per-request sampling parameters, validated against the ranges of docs/design.md.

What: `SamplingParams`, the one object that carries a request's decoding settings from the HTTP
server to the sampler. Why: every range is checked here, once, so the server can turn a bad value
into a 400 that names the field (`SamplingParamsError.field`) and the sampler can trust its input.
The ranges live in one table, `SAMPLING_RANGES`: the validator reads it, and so does the server's
OpenAPI schema (`Range.json_schema`), so the published contract is the enforced one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# Below this temperature a request is decoded greedily (argmax after penalties): dividing logits by
# a near-zero temperature would overflow fp32 and turn the softmax into a one-hot anyway.
GREEDY_TEMPERATURE = 1e-5


@dataclass(frozen=True)
class Range:
    """An interval of valid values, the one definition shared by the validator and the API schema."""

    low: float | None  # None = unbounded below
    high: float | None  # None = unbounded above
    low_open: bool = False  # (low, ... instead of [low, ...
    integer: bool = False  # an int (bool is not); else any finite real number
    off: str = ""  # what a special value inside the range means, e.g. "-1 or 0 = off"

    def shown(self) -> str:
        """The range as error messages write it: [0, 2], (0, 1], [1, inf)."""

        def text_of(v: float) -> str:
            return str(v) if isinstance(v, int) else f"{v:g}"

        low = "-inf" if self.low is None else text_of(self.low)
        high = "inf" if self.high is None else text_of(self.high)
        text = (
            f"{'(' if self.low_open else '['}{low}, {high}{']' if self.high is not None else ')'}"
        )
        return f"{text} ({self.off})" if self.off else text

    def error(self, name: str, value: Any) -> str | None:
        """Why ``value`` is not valid for field ``name``, or None when it is."""
        kind = "an integer" if self.integer else "a number"
        if (
            isinstance(value, bool)
            or not isinstance(value, int if self.integer else (int, float))
            or (not self.integer and not math.isfinite(value))
        ):
            return f"{name} must be {kind} in {self.shown()}, got {value!r}"
        below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        if below or (self.high is not None and value > self.high):
            return f"{name} must be in {self.shown()}, got {value!r}"
        return None

    def json_schema(self, high: float | None = None) -> dict[str, Any]:
        """JSON Schema (2020-12, OpenAPI 3.1) of the range; ``high`` tightens the upper bound."""
        schema: dict[str, Any] = {"type": "integer" if self.integer else "number"}
        if self.low is not None:
            schema["exclusiveMinimum" if self.low_open else "minimum"] = self.low
        top = self.high if high is None else (high if self.high is None else min(high, self.high))
        if top is not None:
            schema["maximum"] = top
        if self.off:
            schema["description"] = self.off
        return schema


# The ranges of docs/design.md (OpenAPI / vLLM semantics), by request field name.
SAMPLING_RANGES: dict[str, Range] = {
    "temperature": Range(0.0, 2.0),
    "top_p": Range(0.0, 1.0, low_open=True),
    "top_k": Range(-1, None, integer=True, off="-1 or 0 = off"),
    "min_p": Range(0.0, 1.0),
    "frequency_penalty": Range(-2.0, 2.0),
    "presence_penalty": Range(-2.0, 2.0),
    "repetition_penalty": Range(0.0, 2.0, low_open=True),
    "max_tokens": Range(1, None, integer=True),
    # A signed 64-bit integer, as vLLM bounds it (any such value seeds the per-step SplitMix64).
    "seed": Range(-(2**63), 2**63 - 1, integer=True),
}
# Each id of stop_token_ids.
STOP_TOKEN_ID_RANGE = Range(0, None, integer=True)


class SamplingParamsError(ValueError):
    """A sampling parameter is outside its valid range; `.field` names the offending parameter."""

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings of one request (OpenAI / vLLM semantics). Frozen: validated once."""

    # Softmax temperature; [0, 2] like the OpenAI API. Below GREEDY_TEMPERATURE the request is greedy.
    temperature: float = 1.0
    # Nucleus sampling: keep the smallest top set whose probability mass reaches top_p; (0, 1], 1 = off.
    top_p: float = 1.0
    # Keep the k most likely tokens (ties kept); -1 or 0 = off (vLLM accepts both), else >= 1.
    top_k: int = -1
    # Drop tokens whose probability is below min_p x the top token's probability; [0, 1], 0 = off.
    min_p: float = 0.0
    # OpenAI: subtract frequency_penalty x count(token in output); [-2, 2], 0 = off.
    frequency_penalty: float = 0.0
    # OpenAI: subtract presence_penalty once for every token already in the output; [-2, 2], 0 = off.
    presence_penalty: float = 0.0
    # HF/vLLM: over prompt and output tokens, logit > 0 -> logit / r, else logit x r; (0, 2], 1 = off.
    repetition_penalty: float = 1.0
    # Upper bound on generated tokens; >= 1 (a request that may generate nothing is a client bug).
    max_tokens: int = 16
    # Makes the request's random draws reproducible whatever else is in the batch; None = unseeded.
    seed: int | None = None
    # Generation stops after emitting any of these ids (the stop token itself is returned).
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    # vLLM extension: keep generating past the tokenizer's EOS (benchmarks want fixed output lengths).
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        for name, valid in SAMPLING_RANGES.items():
            value = getattr(self, name)
            problem = None if name == "seed" and value is None else valid.error(name, value)
            if problem:
                raise SamplingParamsError(name, problem)
        if isinstance(self.stop_token_ids, (str, bytes)) or not hasattr(
            self.stop_token_ids, "__iter__"
        ):
            raise SamplingParamsError(
                "stop_token_ids",
                f"stop_token_ids must be a list of ints >= 0, got {self.stop_token_ids!r}",
            )
        stop = tuple(self.stop_token_ids)
        for token_id in stop:
            if STOP_TOKEN_ID_RANGE.error("stop_token_ids", token_id):
                raise SamplingParamsError(
                    "stop_token_ids",
                    f"stop_token_ids must be a list of ints >= 0, got {token_id!r}",
                )
        object.__setattr__(self, "stop_token_ids", stop)  # frozen: normalise a list to a tuple
        if not isinstance(self.ignore_eos, bool):
            raise SamplingParamsError(
                "ignore_eos", f"ignore_eos must be a boolean, got {self.ignore_eos!r}"
            )

    @property
    def is_greedy(self) -> bool:
        """True when the request is decoded by argmax (temperature below GREEDY_TEMPERATURE)."""
        return self.temperature < GREEDY_TEMPERATURE

    @property
    def top_k_enabled(self) -> bool:
        return self.top_k >= 1

    @property
    def needs_penalties(self) -> bool:
        """True when any penalty changes the logits (so a batch without one can skip the stage)."""
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
        )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SamplingParams:
        """Build from a mapping (e.g. a scenario's sampling block); an unknown key is an error naming it."""
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise SamplingParamsError(
                    str(key),
                    f"unknown sampling parameter {key!r}; known: {', '.join(sorted(known))}",
                )
        return cls(**dict(values))
