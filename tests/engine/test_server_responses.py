"""Response shapes, and the fast stream encoder is byte-identical to the plain one."""

import json

import pytest

from engine.server.responses import (
    ResponseMeta,
    StreamEncoder,
    full_response,
    stream_chunk,
    usage,
    usage_chunk,
)
from engine.server.sse import sse_event

TEXTS = [
    "",
    "plain",
    'quote " and \\ backslash',
    "new\nline\ttab",
    "ünïcode 你好 🙂",
    "\u0000\u001f",
    "</script>",
]


@pytest.mark.parametrize("chat", [True, False])
@pytest.mark.parametrize("include_usage", [True, False])
def test_stream_encoder_matches_the_plain_encoding(chat, include_usage):
    meta = ResponseMeta(id='chatcmpl-x"y', created=123, model="spikelens", chat=chat)
    enc = StreamEncoder(meta, include_usage)
    for text in TEXTS:
        for finish, first in [(None, False), (None, True), ("length", False)]:
            assert enc.chunk(text, finish, first) == sse_event(
                stream_chunk(meta, text, finish, first, include_usage)
            )
    running = usage(3, 2)
    assert enc.chunk("a", None, False, running) == sse_event(
        stream_chunk(meta, "a", None, False, include_usage, running)
    )


def test_chat_chunks_carry_role_first_and_completion_chunks_text():
    chat = ResponseMeta("c", 1, "m", chat=True)
    first = stream_chunk(chat, "Hi", None, True, False)
    assert first["object"] == "chat.completion.chunk" and first["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "Hi",
    }
    assert stream_chunk(chat, "!", "stop", False, False)["choices"][0] == {
        "index": 0,
        "delta": {"content": "!"},
        "logprobs": None,
        "finish_reason": "stop",
    }
    comp = stream_chunk(ResponseMeta("d", 1, "m", chat=False), "x", None, False, True)
    assert (
        comp["object"] == "text_completion"
        and comp["choices"][0]["text"] == "x"
        and comp["usage"] is None
    )


def test_usage_chunk_and_full_response():
    meta = ResponseMeta("c", 1, "m", chat=True)
    assert usage_chunk(meta, 5, 2) == {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    body = full_response(meta, "hello", "length", 5, 2)
    assert body["object"] == "chat.completion" and body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "hello",
    }
    assert json.loads(json.dumps(body))["usage"]["total_tokens"] == 7
