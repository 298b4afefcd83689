"""OpenAI response bodies and stream chunks for completions and chat completions (vLLM's shapes).

Streaming: one chunk per engine step. With ``stream_options.include_usage`` every chunk carries
``"usage": null`` (the running usage with vLLM's ``continuous_usage_stats``) and a last chunk has
``choices: []`` and the usage, as OpenAI documents.
Chat streams put ``role`` in the first delta together with the first text, so no chunk is emitted
before the first token (a role-only chunk would fake the client's time to first token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.server.sse import sse_event


@dataclass(frozen=True)
class ResponseMeta:
    """What every body and chunk of one response repeats."""

    id: str
    created: int  # unix seconds
    model: str
    chat: bool

    @property
    def chunk_object(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def stream_chunk(
    meta: ResponseMeta,
    text: str,
    finish_reason: str | None,
    first: bool,
    include_usage: bool,
    running_usage: dict | None = None,
) -> dict:
    """One step's chunk: ``choices[0].text`` (completions) or ``choices[0].delta`` (chat).

    ``running_usage`` (vLLM's ``continuous_usage_stats``) replaces the ``usage: null`` of
    ``include_usage`` streams with the usage so far."""
    if meta.chat:
        delta = {"role": "assistant", "content": text} if first else {"content": text}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    chunk = {
        "id": meta.id,
        "object": meta.chunk_object,
        "created": meta.created,
        "model": meta.model,
        "choices": [choice],
    }
    if include_usage:
        chunk["usage"] = running_usage
    return chunk


def usage_chunk(meta: ResponseMeta, prompt_tokens: int, completion_tokens: int) -> dict:
    """The final chunk of ``include_usage`` streams: no choices, the request's usage."""
    return {
        "id": meta.id,
        "object": meta.chunk_object,
        "created": meta.created,
        "model": meta.model,
        "choices": [],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def full_response(
    meta: ResponseMeta,
    text: str,
    finish_reason: str | None,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict:
    """The non-streaming body."""
    if meta.chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        obj = "text_completion"
    return {
        "id": meta.id,
        "object": obj,
        "created": meta.created,
        "model": meta.model,
        "choices": [choice],
        "usage": usage(prompt_tokens, completion_tokens),
    }


class StreamEncoder:
    """SSE bytes of one response's chunks, fast in the common case.

    A streamed chunk differs from the previous one only in its text, so the JSON around the text is
    rendered once (with a placeholder) and split; a text-only chunk is then ``prefix + json(text) +
    suffix`` — a few µs instead of a full ``json.dumps`` of the chunk, which matters at 32+ tokens
    per step on the event loop that shares the GIL with the engine thread. First chunks, finishing
    chunks and continuous-usage chunks take the general path. Output is byte-identical to
    ``sse_event(stream_chunk(...))`` (tested).
    """

    _PLACEHOLDER = "\u0000spikelens-text\u0000"

    def __init__(self, meta: ResponseMeta, include_usage: bool):
        self._meta = meta
        self._include_usage = include_usage
        template = sse_event(stream_chunk(meta, self._PLACEHOLDER, None, False, include_usage))
        marker = json.dumps(self._PLACEHOLDER, ensure_ascii=False).encode()
        self._prefix, self._suffix = template.split(marker)

    def chunk(
        self, text: str, finish_reason: str | None, first: bool, running_usage: dict | None = None
    ) -> bytes:
        if finish_reason is None and not first and running_usage is None:
            return self._prefix + json.dumps(text, ensure_ascii=False).encode() + self._suffix
        return sse_event(
            stream_chunk(self._meta, text, finish_reason, first, self._include_usage, running_usage)
        )
