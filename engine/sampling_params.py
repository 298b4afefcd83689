"""Per-request sampling parameters, validated against the ranges of DESIGN.md.

What: `SamplingParams`, the one object that carries a request's decoding settings from the HTTP
server to the sampler. Why: every range is checked here, once, so the server can turn a bad value
into a 400 that names the field (`SamplingParamsError.field`) and the sampler can trust its input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

# Below this temperature a request is decoded greedily (argmax after penalties): dividing logits by
# a near-zero temperature would overflow fp32 and turn the softmax into a one-hot anyway.
GREEDY_TEMPERATURE = 1e-5


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
        _check_float("temperature", self.temperature, 0.0, 2.0, "[0, 2]")
        _check_float("top_p", self.top_p, 0.0, 1.0, "(0, 1]", low_open=True)
        _check_int("top_k", self.top_k)
        if self.top_k < -1:
            raise SamplingParamsError("top_k", f"top_k must be -1 or 0 (off) or >= 1, got {self.top_k}")
        _check_float("min_p", self.min_p, 0.0, 1.0, "[0, 1]")
        _check_float("frequency_penalty", self.frequency_penalty, -2.0, 2.0, "[-2, 2]")
        _check_float("presence_penalty", self.presence_penalty, -2.0, 2.0, "[-2, 2]")
        _check_float("repetition_penalty", self.repetition_penalty, 0.0, 2.0, "(0, 2]", low_open=True)
        _check_int("max_tokens", self.max_tokens)
        if self.max_tokens < 1:
            raise SamplingParamsError("max_tokens", f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.seed is not None:
            _check_int("seed", self.seed)
        if isinstance(self.stop_token_ids, (str, bytes)) or not hasattr(self.stop_token_ids, "__iter__"):
            raise SamplingParamsError(
                "stop_token_ids", f"stop_token_ids must be a list of ints >= 0, got {self.stop_token_ids!r}")
        stop = tuple(self.stop_token_ids)
        for token_id in stop:
            if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
                raise SamplingParamsError(
                    "stop_token_ids", f"stop_token_ids must be a list of ints >= 0, got {token_id!r}")
        object.__setattr__(self, "stop_token_ids", stop)  # frozen: normalise a list to a tuple
        if not isinstance(self.ignore_eos, bool):
            raise SamplingParamsError("ignore_eos", f"ignore_eos must be a boolean, got {self.ignore_eos!r}")

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
        return (self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0
                or self.presence_penalty != 0.0)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "SamplingParams":
        """Build from a mapping (e.g. a scenario's sampling block); an unknown key is an error naming it."""
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise SamplingParamsError(
                    str(key), f"unknown sampling parameter {key!r}; known: {', '.join(sorted(known))}")
        return cls(**dict(values))


def _check_float(name: str, value: Any, low: float, high: float, shown: str, low_open: bool = False) -> None:
    """Raise SamplingParamsError unless `value` is a finite real number inside the range `shown`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SamplingParamsError(name, f"{name} must be a number in {shown}, got {value!r}")
    below = value <= low if low_open else value < low
    if below or value > high:
        raise SamplingParamsError(name, f"{name} must be in {shown}, got {value!r}")


def _check_int(name: str, value: Any) -> None:
    """Raise SamplingParamsError unless `value` is an int (bool is rejected: True is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SamplingParamsError(name, f"{name} must be an integer, got {value!r}")
