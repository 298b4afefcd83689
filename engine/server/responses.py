"""OpenAI response bodies and stream chunks for completions and chat completions (vLLM's shapes).

Streaming: one chunk per engine step. With ``stream_options.include_usage`` every chunk carries
``"usage": null`` and a last chunk has ``choices: []`` and the usage, as OpenAI documents.
Chat streams put ``role`` in the first delta together with the first text, so no chunk is emitted
before the first token (a role-only chunk would fake the client's time to first token).
"""

from __future__ import annotations

from dataclasses import dataclass


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
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def stream_chunk(meta: ResponseMeta, text: str, finish_reason: str | None, first: bool,
                 include_usage: bool) -> dict:
    """One step's chunk: ``choices[0].text`` (completions) or ``choices[0].delta`` (chat)."""
    if meta.chat:
        delta = {"role": "assistant", "content": text} if first else {"content": text}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    chunk = {"id": meta.id, "object": meta.chunk_object, "created": meta.created, "model": meta.model,
             "choices": [choice]}
    if include_usage:
        chunk["usage"] = None
    return chunk


def usage_chunk(meta: ResponseMeta, prompt_tokens: int, completion_tokens: int) -> dict:
    """The final chunk of ``include_usage`` streams: no choices, the request's usage."""
    return {"id": meta.id, "object": meta.chunk_object, "created": meta.created, "model": meta.model,
            "choices": [], "usage": usage(prompt_tokens, completion_tokens)}


def full_response(meta: ResponseMeta, text: str, finish_reason: str | None, prompt_tokens: int,
                  completion_tokens: int) -> dict:
    """The non-streaming body."""
    if meta.chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": finish_reason}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        obj = "text_completion"
    return {"id": meta.id, "object": obj, "created": meta.created, "model": meta.model,
            "choices": [choice], "usage": usage(prompt_tokens, completion_tokens)}
