"""The no-op SSE server honours both names of the output length (max_tokens and OpenAI's newer
max_completion_tokens, which GuideLLM and AIPerf send), so every client gets the length it asked for."""

import json

import httpx

from tests.support.sse_server import SSEServer


def _content_chunks(url: str, body: dict) -> int:
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=10) as resp:
        events = [
            json.loads(line[6:])
            for line in resp.iter_lines()
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
    return sum(1 for e in events if e["choices"] and e["choices"][0]["delta"].get("content"))


def test_max_completion_tokens_sets_the_length():
    messages = [{"role": "user", "content": "hi"}]
    with SSEServer() as server:
        assert (
            _content_chunks(
                server.url, {"messages": messages, "stream": True, "max_completion_tokens": 5}
            )
            == 5
        )
        assert (
            _content_chunks(
                server.url,
                {"messages": messages, "stream": True, "max_tokens": 3, "max_completion_tokens": 5},
            )
            == 3
        )
        assert _content_chunks(server.url, {"messages": messages, "stream": True}) == 16
    assert [r.completion_tokens for r in server.served] == [5, 3, 16]
