"""The engine's OpenAPI document: the contract the server enforces, stated where tools can read it.

What: ``engine_openapi(app, limits)`` builds ``/openapi.json``. Request bodies are the protocol
models' JSON schemas (their ranges come from ``SAMPLING_RANGES``, the table ``SamplingParams``
validates with), tightened by this server's own limits (``max_tokens`` below the context length,
token ids inside the vocabulary); every response is declared with its media type and schema: the
JSON bodies, the OpenAI error shape, and the ``text/event-stream`` of ``stream: true``, each event a
``data:`` line holding a JSON chunk (or an in-band error) and finally ``[DONE]``.

Why: the routes read their bodies themselves (so malformed JSON and unknown fields get vLLM's
answers), which leaves FastAPI nothing to describe; a fuzzer or a client generator reading the bare
schema sends bodies the server must reject. What JSON Schema cannot state is said in the
descriptions: the prompt's tokens plus ``max_tokens`` must fit ``max_model_len``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from engine.server.protocol import ChatCompletionRequest, CompletionRequest
from engine.server.sse import SSE_MEDIA_TYPE

REF = "#/components/schemas/{model}"


@dataclass(frozen=True)
class ServerLimits:
    """What this server's model and configuration bound beyond the fixed ranges."""

    max_model_len: int  # prompt + output tokens per request
    vocab_size: int  # token ids of a prompt are in [0, vocab_size)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _object(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


_INT = {"type": "integer"}
_STR = {"type": "string"}
_COUNT = {"type": "integer", "minimum": 0}
_FINISH = {"anyOf": [{"enum": ["stop", "length", "abort"]}, {"type": "null"}]}

RESPONSE_SCHEMAS: dict[str, dict[str, Any]] = {
    "Usage": _object(
        ["prompt_tokens", "completion_tokens", "total_tokens"],
        prompt_tokens=_COUNT,
        completion_tokens=_COUNT,
        total_tokens=_COUNT,
    ),
    "Error": _object(
        ["error"],
        error=_object(
            ["message", "type", "code"],
            message=_STR,
            type=_STR,
            param={"anyOf": [_STR, {"type": "null"}]},
            code=_INT,
        ),
    ),
    "CompletionResponse": _object(
        ["id", "object", "created", "model", "choices", "usage"],
        id=_STR,
        object={"const": "text_completion"},
        created=_INT,
        model=_STR,
        usage=_ref("Usage"),
        choices={
            "type": "array",
            "minItems": 1,
            "items": _object(
                ["index", "text", "finish_reason"], index=_INT, text=_STR, finish_reason=_FINISH
            ),
        },
    ),
    "ChatCompletionResponse": _object(
        ["id", "object", "created", "model", "choices", "usage"],
        id=_STR,
        object={"const": "chat.completion"},
        created=_INT,
        model=_STR,
        usage=_ref("Usage"),
        choices={
            "type": "array",
            "minItems": 1,
            "items": _object(
                ["index", "message", "finish_reason"],
                index=_INT,
                finish_reason=_FINISH,
                message=_object(["role", "content"], role={"const": "assistant"}, content=_STR),
            ),
        },
    ),
    # One streamed chunk; the last one of an include_usage stream has no choices and the usage.
    "CompletionChunk": _object(
        ["id", "object", "created", "model", "choices"],
        id=_STR,
        object={"const": "text_completion"},
        created=_INT,
        model=_STR,
        usage={"anyOf": [_ref("Usage"), {"type": "null"}]},
        choices={
            "type": "array",
            "maxItems": 1,
            "items": _object(
                ["index", "text", "finish_reason"], index=_INT, text=_STR, finish_reason=_FINISH
            ),
        },
    ),
    "ChatCompletionChunk": _object(
        ["id", "object", "created", "model", "choices"],
        id=_STR,
        object={"const": "chat.completion.chunk"},
        created=_INT,
        model=_STR,
        usage={"anyOf": [_ref("Usage"), {"type": "null"}]},
        choices={
            "type": "array",
            "maxItems": 1,
            "items": _object(
                ["index", "delta", "finish_reason"],
                index=_INT,
                finish_reason=_FINISH,
                delta=_object(["content"], role={"const": "assistant"}, content=_STR),
            ),
        },
    ),
    "ModelList": _object(
        ["object", "data"],
        object={"const": "list"},
        data={
            "type": "array",
            "items": _object(
                ["id", "object", "created", "owned_by", "max_model_len"],
                id=_STR,
                object={"const": "model"},
                created=_INT,
                owned_by=_STR,
                root=_STR,
                max_model_len=_INT,
            ),
        },
    ),
}


def _stream_event(chunk: str) -> dict[str, Any]:
    """One SSE event of a stream (OpenAPI 3.1: the media type's schema describes each event)."""
    payload = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {"anyOf": [_ref(chunk), _ref("Error")]},
    }
    return {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"anyOf": [{"const": "[DONE]"}, payload]}},
        "description": f"`data: <{chunk} JSON>` per engine step (an in-band `Error` if the request "
        "fails after the headers were sent), then `data: [DONE]`",
    }


def _errors(*statuses: int) -> dict[str, Any]:
    why = {
        400: "a field is invalid: `param` names it and the message gives the valid range",
        413: "the body exceeds the server's limit",
        429: "overloaded: retry after `Retry-After` seconds",
        503: "the engine is not running",
    }
    out = {}
    for status in statuses:
        out[str(status)] = {
            "description": why[status],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
    if 429 in statuses:
        out["429"]["headers"] = {"Retry-After": {"schema": {"type": "integer", "minimum": 0}}}
    return out


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


# Request examples (schemathesis' examples phase sends them: both answer shapes get exercised).
_EXAMPLES = {
    "CompletionRequest": {
        "prompt": "The capital of France is",
        "max_tokens": 8,
        "temperature": 0.7,
    },
    "ChatCompletionRequest": {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8},
}


def _generation(request: str, response: str, chunk: str, summary: str) -> dict[str, Any]:
    body = _EXAMPLES[request]
    examples = {
        "plain": {"summary": "one JSON answer", "value": body},
        "stream": {
            "summary": "an event stream with the usage chunk",
            "value": {**body, "stream": True, "stream_options": {"include_usage": True}},
        },
    }
    return {
        "summary": summary,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref(request), "examples": examples}},
        },
        "responses": {
            "200": {
                "description": f"`{response}`, or with `stream: true` an event stream of `{chunk}`",
                "content": {
                    "application/json": {"schema": _ref(response)},
                    SSE_MEDIA_TYPE: {"schema": _stream_event(chunk)},
                },
            },
            **_errors(400, 413, 429, 503),
        },
    }


def _request_schemas(limits: ServerLimits) -> dict[str, Any]:
    """The request models' schemas (and their $defs), bounded by this server's limits."""
    schemas: dict[str, Any] = {}
    for model in (CompletionRequest, ChatCompletionRequest):
        schema = copy.deepcopy(model.model_json_schema(ref_template=REF))
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    note = (
        f"prompt tokens + max_tokens must not exceed max_model_len={limits.max_model_len}; "
        "unset: the rest of the context"
    )
    for name in ("CompletionRequest", "ChatCompletionRequest"):
        props = schemas[name]["properties"]
        for field in ("max_tokens", "max_completion_tokens"):
            if field in props:
                props[field]["anyOf"][0]["maximum"] = limits.max_model_len - 1
                props[field]["description"] = note
    ids = {"type": "integer", "minimum": 0, "maximum": limits.vocab_size - 1}
    for variant in schemas["CompletionRequest"]["properties"]["prompt"]["anyOf"]:
        if variant.get("items", {}).get("type") == "integer":
            variant.update(items=ids, maxItems=limits.max_model_len - 1)
        elif variant.get("items", {}).get("type") == "array":
            variant["items"].update(items=ids, maxItems=limits.max_model_len - 1)
    return schemas


def engine_openapi(app: FastAPI, limits: ServerLimits) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``app`` (built by ``create_app``)."""
    doc = get_openapi(
        title=app.title,
        version=app.version,
        routes=app.routes,
        description="OpenAI-compatible API of the spikelens engine. Unknown request fields are "
        "ignored (as vLLM does); every value outside its stated range answers 400.",
    )
    doc.setdefault("components", {})["schemas"] = {**RESPONSE_SCHEMAS, **_request_schemas(limits)}
    doc["paths"] = {**_openai_paths(), **_spikelens_paths()}
    return doc


def _openai_paths() -> dict[str, Any]:
    """The routes vLLM serves too: health, metrics, models and the two generation endpoints."""
    health = _object(["status"], status={"const": "ok"})
    return {
        "/health": {
            "get": {
                "summary": "Liveness",
                "responses": {"200": _json("the engine thread is running", health), **_errors(503)},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (vLLM's names)",
                "responses": {
                    "200": {
                        "description": "Prometheus text format",
                        "content": {"text/plain": {"schema": _STR}},
                    }
                },
            }
        },
        "/v1/models": {
            "get": {
                "summary": "The served model",
                "responses": {"200": _json("one model", _ref("ModelList"))},
            }
        },
        "/v1/completions": {
            "post": _generation(
                "CompletionRequest",
                "CompletionResponse",
                "CompletionChunk",
                "Text completion (OpenAI / vLLM)",
            )
        },
        "/v1/chat/completions": {
            "post": _generation(
                "ChatCompletionRequest",
                "ChatCompletionResponse",
                "ChatCompletionChunk",
                "Chat completion (OpenAI / vLLM)",
            )
        },
    }


def _spikelens_paths() -> dict[str, Any]:
    """spikelens' own control routes: arm the fault clock, flush the telemetry."""
    arm_body = _object(
        ["t0_ns"],
        t0_ns={
            "type": "integer",
            "minimum": 1,
            "description": "wall-clock ns at which measured load started",
        },
    )
    return {
        "/spikelens/arm": {
            "post": {
                "summary": "Start the fault clock",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": arm_body}},
                },
                "responses": {
                    "200": _json(
                        "armed", _object(["status", "t0_ns"], status={"const": "armed"}, t0_ns=_INT)
                    ),
                    **_errors(400, 413),
                },
            }
        },
        "/spikelens/flush": {
            "post": {
                "summary": "Write the telemetry files now",
                "responses": {
                    "200": _json(
                        "files written",
                        _object(
                            ["status", "files"],
                            status={"const": "flushed"},
                            files={"type": "array", "items": _STR},
                        ),
                    )
                },
            }
        },
    }
