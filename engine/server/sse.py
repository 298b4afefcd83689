"""Server-Sent-Events framing for OpenAI streaming: ``data: {json}\n\n`` events and ``data: [DONE]``."""

from __future__ import annotations

import json

DONE = b"data: [DONE]\n\n"

# Headers that keep proxies and clients from buffering the stream (TTFT/ITL are measured per chunk).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
SSE_MEDIA_TYPE = "text/event-stream"


def sse_event(payload: dict) -> bytes:
    """One SSE event carrying ``payload`` as compact JSON (non-ASCII kept as UTF-8)."""
    return (
        b"data: "
        + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        + b"\n\n"
    )
