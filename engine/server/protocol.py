"""Request models for ``/v1/completions`` and ``/v1/chat/completions``, accepting what vLLM accepts.

Why pydantic with ``extra="ignore"``: clients and benchmark tools send fields we do not implement
(``logprobs``, ``echo``, ``tools``, ``response_format``…); vLLM and OpenAI accept those requests, so we
do too rather than fail a load test on a field that does not change decoding. Types are checked here;
value ranges are checked by ``SamplingParams`` against ``SAMPLING_RANGES`` (one source of truth for
the ranges of docs/design.md). The models' JSON schemas state the same ranges (``WithJsonSchema`` built
from that table), so ``/openapi.json`` publishes the contract the server enforces. Types are strict
(``strict=True``): a string is not a number and 0 is not ``false``, as the schema says; an integer
is still a valid float.

``parse_request`` turns a raw body into a model or an ``APIError`` (400) that names the field.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from engine.sampling_params import SAMPLING_RANGES, STOP_TOKEN_ID_RANGE, Range, SamplingParams
from engine.server.errors import APIError, invalid_request
from engine.tokenizer import ROLE_TOKENS

# Request fields copied into SamplingParams when the client set them (SamplingParams' defaults
# apply otherwise). Names are the same on both sides.
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "seed",
    "ignore_eos",
    "stop_token_ids",
)


# Request fields outside SamplingParams that the server checks against a range.
REQUEST_RANGES: dict[str, Range] = {"n": Range(1, 1, integer=True, off="only 1 is supported")}


def _ranged(valid: Range, kind: type) -> WithJsonSchema:
    """The schema of a number field that states ``valid`` (the value is checked against the same
    Range); ``kind`` is the field's Python type, which must agree with the Range's ``integer``."""
    if valid.integer != (kind is int):
        raise TypeError(f"range {valid} is {'integer' if valid.integer else 'real'}, not {kind}")
    return WithJsonSchema(valid.json_schema())


Temperature = Annotated[float, _ranged(SAMPLING_RANGES["temperature"], float)]
TopP = Annotated[float, _ranged(SAMPLING_RANGES["top_p"], float)]
TopK = Annotated[int, _ranged(SAMPLING_RANGES["top_k"], int)]
MinP = Annotated[float, _ranged(SAMPLING_RANGES["min_p"], float)]
FrequencyPenalty = Annotated[float, _ranged(SAMPLING_RANGES["frequency_penalty"], float)]
PresencePenalty = Annotated[float, _ranged(SAMPLING_RANGES["presence_penalty"], float)]
RepetitionPenalty = Annotated[float, _ranged(SAMPLING_RANGES["repetition_penalty"], float)]
MaxTokens = Annotated[int, _ranged(SAMPLING_RANGES["max_tokens"], int)]
Seed = Annotated[int, _ranged(SAMPLING_RANGES["seed"], int)]
StopTokenId = Annotated[int, _ranged(STOP_TOKEN_ID_RANGE, int)]
N = Annotated[int, _ranged(REQUEST_RANGES["n"], int)]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: bool = False
    # vLLM extension: every chunk carries the running usage (exact tokens per chunk for clients).
    continuous_usage_stats: bool = False


class _SamplingRequest(BaseModel):
    """Fields shared by both endpoints (OpenAI's plus vLLM's extensions)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str | None = None
    max_tokens: MaxTokens | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    top_k: TopK | None = None
    min_p: MinP | None = None
    frequency_penalty: FrequencyPenalty | None = None
    presence_penalty: PresencePenalty | None = None
    repetition_penalty: RepetitionPenalty | None = None
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[StopTokenId] | None = None
    ignore_eos: bool | None = None
    n: N = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)

    @property
    def continuous_usage(self) -> bool:
        options = self.stream_options
        return bool(self.include_usage and options and options.continuous_usage_stats)

    def requested_max_tokens(self) -> tuple[int | None, str]:
        """The client's output-length limit and the field it came from (for error messages)."""
        return self.max_tokens, "max_tokens"

    def stop_strings(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]

    def sampling_kwargs(self) -> dict[str, Any]:
        """The sampling fields the client set, by SamplingParams' names (max_tokens excluded)."""
        return {
            name: getattr(self, name) for name in SAMPLING_FIELDS if getattr(self, name) is not None
        }


# What single_prompt() and the vocabulary check accept (the server adds maxItems and the top id).
PROMPT_SCHEMA = {
    "description": "a string, token ids, or a one-element list of either",
    "anyOf": [
        {"type": "string"},
        {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
        {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1},
        {
            "type": "array",
            "minItems": 1,
            "maxItems": 1,
            "items": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
        },
    ],
}


class CompletionRequest(_SamplingRequest):
    """``POST /v1/completions``: ``prompt`` is a string, token ids, or a one-element list of either.

    ``max_tokens`` defaults to 16, as in OpenAI's and vLLM's completions API.
    """

    prompt: Annotated[str | list[int] | list[str] | list[list[int]], WithJsonSchema(PROMPT_SCHEMA)]
    max_tokens: MaxTokens | None = 16

    def single_prompt(self) -> str | list[int]:
        p = self.prompt
        if isinstance(p, str):
            return p
        if not p:
            raise invalid_request("prompt: must not be empty", "prompt")
        ids = [x for x in p if isinstance(x, int)]
        if len(ids) == len(p):
            return ids
        if len(p) != 1:
            raise invalid_request(
                f"prompt: one prompt per request is supported, got {len(p)}", "prompt"
            )
        first = p[0]
        if isinstance(first, int):
            raise invalid_request("prompt: token ids and strings cannot be mixed", "prompt")
        return first


# Roles newer OpenAI clients send, mapped onto the three the chat templates know.
_ROLE_ALIASES = {"developer": "system"}
CHAT_ROLES = sorted(ROLE_TOKENS) + sorted(_ROLE_ALIASES)


class ChatContentPart(BaseModel):
    # Only text parts are served; text() answers 400 for any other part, so the schema requires both.
    model_config = ConfigDict(
        extra="ignore",
        strict=True,
        json_schema_extra=lambda schema: schema.update(
            required=["type", "text"],
            properties={**schema["properties"], "text": {"type": "string"}},
        ),
    )
    type: Annotated[
        str, WithJsonSchema({"const": "text", "description": "only text parts are supported"})
    ]
    text: Annotated[str | None, WithJsonSchema({"type": "string"})] = None


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    role: Annotated[str, WithJsonSchema({"enum": CHAT_ROLES})]
    content: str | list[ChatContentPart] | None = None

    def text(self, index: int) -> str:
        """The message's text; content parts other than text are a 400 naming the message."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        texts = []
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise invalid_request(
                    f"messages[{index}].content: only text parts are supported, got type {part.type!r}",
                    "messages",
                )
            texts.append(part.text)
        return "".join(texts)


class ChatCompletionRequest(_SamplingRequest):
    """``POST /v1/chat/completions``; ``max_completion_tokens`` (newer OpenAI) wins over ``max_tokens``.

    Without either, the output may fill the rest of the context (vLLM's default).
    """

    messages: list[ChatMessageIn] = Field(min_length=1)
    max_completion_tokens: MaxTokens | None = None

    def requested_max_tokens(self) -> tuple[int | None, str]:
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens, "max_completion_tokens"
        return self.max_tokens, "max_tokens"

    def message_dicts(self) -> list[dict[str, str]]:
        return [
            {"role": _ROLE_ALIASES.get(m.role, m.role), "content": m.text(i)}
            for i, m in enumerate(self.messages)
        ]


def to_sampling_params(
    req: _SamplingRequest, prompt_len: int, max_model_len: int, prompt_field: str
) -> SamplingParams:
    """Validated ``SamplingParams`` for a request whose prompt has ``prompt_len`` tokens.

    Raises a 400 naming the field: ``n`` other than 1, a prompt that fills the context
    (``prompt_field``), ``max_tokens`` beyond the context, or any range ``SamplingParams`` rejects.
    """
    problem = REQUEST_RANGES["n"].error("n", req.n)
    if problem:
        raise invalid_request(f"n: {problem}", "n")
    if prompt_len >= max_model_len:
        raise invalid_request(
            f"{prompt_field}: the prompt has {prompt_len} tokens; it must be shorter than the context "
            f"length max_model_len={max_model_len}",
            prompt_field,
        )
    room = max_model_len - prompt_len
    max_tokens, max_field = req.requested_max_tokens()
    if max_tokens is None:
        max_tokens = room
    elif isinstance(max_tokens, int) and max_tokens > room:
        raise invalid_request(
            f"{max_field}: must be in [1, {room}] for this prompt ({prompt_len} prompt tokens, "
            f"max_model_len={max_model_len}), got {max_tokens}",
            max_field,
        )
    try:
        return SamplingParams(max_tokens=max_tokens, **req.sampling_kwargs())
    except ValueError as e:
        field = getattr(e, "field", None)
        if field == "max_tokens":
            field = max_field
        message = str(e)
        if field == max_field and max_field != "max_tokens":
            message = message.replace("max_tokens", max_field)
        if field and not message.startswith(field):
            message = f"{field}: {message}"
        raise invalid_request(message, field) from None


RequestModel = TypeVar("RequestModel", bound=_SamplingRequest)


def parse_request(body: bytes, model: type[RequestModel]) -> RequestModel:
    """Raw body → validated request model, or a 400 ``APIError`` naming the field (or ``body``)."""
    try:
        data = json.loads(body)
    except ValueError as e:  # not UTF-8, not JSON, or an integer beyond Python's digit limit
        raise invalid_request(f"body: the request body is not valid JSON ({e})", "body") from None
    if not isinstance(data, dict):
        raise invalid_request(
            f"body: the request body must be a JSON object, got {type(data).__name__}", "body"
        )
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise _validation_error(e) from None


def _validation_error(e: ValidationError) -> APIError:
    err = e.errors(include_url=False)[0]
    loc = [str(x) for x in err["loc"]]
    field = loc[0] if loc else "body"
    where = (
        loc[0] + "".join(f"[{x}]" if x.isdigit() else f".{x}" for x in loc[1:]) if loc else "body"
    )
    if err["type"] == "missing":
        top_level_hints = {
            "messages": "a non-empty list of {role, content} objects is required",
            "prompt": "a string or a list of token ids is required",
        }
        hint = top_level_hints.get(field, "") if len(loc) == 1 else ""
        hint = hint or "this field is required"
        return invalid_request(f"{where}: {hint}", field)
    if err["type"] == "too_short" and field == "messages":
        return invalid_request("messages: at least one message is required", field)
    return invalid_request(f"{where}: {err['msg']} (got {_short(err.get('input'))})", field)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "…"
