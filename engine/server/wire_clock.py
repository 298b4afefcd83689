"""Wire-side timestamps of every completion request (``server_requests.parquet``).

``engine_requests.parquet`` stamps a request where the engine sees it: arrival after parsing and
tokenization, first token at the end of the engine step that produced it. Between those stamps and
the socket lie the server's own delays — the event loop waiting for the GIL that the step thread
holds, JSON encoding, the SSE write — tens of milliseconds on 2 busy cores. To check a load
generator against the server (|client − server| p99 ≤ 2 ms) the server must be timed where
the bytes are. One row per request, with

- ``received_ns``: when the request's first bytes reached the server's socket — the kernel's
  receive time (``SO_TIMESTAMPNS``, spikelens_common/socket_clock.py), read with the data by
  ``WireH11Protocol``, uvicorn's h11 protocol. The event loop reads them later: at 64 streams on
  2 cores its read came p99 76 ms after the kernel had the bytes (it is streaming the other
  responses, and shares the GIL with the step thread), and the ASGI call later still
  (``app_start_ns``), after the requests of the same burst are parsed and tokenized. Those waits
  are the server's, so a client rightly counts them and so does this stamp.
  ``received_clock`` says which clock it is: 'kernel', or 'loop' (the loop's read time) where the
  OS or the transport offers no stamps,
- ``first_content_ns``: when the socket write of the first body message that carries generated
  text began (uvicorn writes inside the ASGI ``send``; the ``StampingSocket`` notes the time
  right before the system call). If the message was queued instead (the client's window full),
  the time it was handed to uvicorn,
- ``first_content_sent_ns``: when that system call returned (null when the message was queued).
  On loopback the bytes reach the client's socket inside the call, so its kernel receive time
  lies between the two: the reference's own error bar, microseconds unless the server thread
  was preempted in the call (p99 1.7 ms in one CI run on 2 shared cores),
- ``done_ns``: the same for the last body message (``more_body`` false),
- ``content_ns``: the same for every body message that carried generated text, in order (streamed
  answers; the handler marks each one). Their gaps are the server's inter-token latency, so a
  client's ITL can be checked against the server's as TTFT and E2E are (query
  ``transit_windows``): a late reader stretches the client's gaps, not these,

stamped by ``WireClock``, a pure ASGI middleware (Starlette's ``BaseHTTPMiddleware`` would buffer
the streamed body), and written next to the engine's files at flush and shutdown.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.telemetry.table_buffer import TableBuffer
from spikelens_common.socket_clock import StampingSocket, stamp_transport_reads

SERVER_REQUEST_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),  # the X-Request-Id the response carried
        ("path", pa.string()),
        ("status", pa.int32()),  # HTTP status sent
        ("streamed", pa.bool_()),  # text/event-stream answer
        ("received_ns", pa.int64()),  # first bytes reached the socket (see received_clock)
        ("received_clock", pa.string()),  # 'kernel' (SO_TIMESTAMPNS) | 'loop' (read time) | 'app'
        ("app_start_ns", pa.int64()),  # the ASGI app was called (request head parsed, task ran)
        ("first_content_ns", pa.int64()),  # null: no generated text was sent
        ("first_content_sent_ns", pa.int64()),  # its write returned; null: queued, or none sent
        ("done_ns", pa.int64()),  # null: the connection ended before the last byte
        ("content_ns", pa.list_(pa.int64())),  # each text-carrying write began (streamed answers)
    ]
)

TIMED_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})
_CONTENT_KEY = "spikelens.content_next"  # set by the handler before each text chunk
_RECEIVED_KEY = "spikelens.received"  # (ns, clock) set in the ASGI scope by WireH11Protocol
_SOCKET_KEY = "spikelens.stamping_socket"  # the connection's StampingSocket, same


class WireH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, stamping when a request's first bytes reached the socket.

    The connection's transport reads through a ``StampingSocket`` (kernel receive times); the
    stamp of the read that holds bytes starting a new request (no response cycle open) is put
    into the scope uvicorn builds from them, before the app's task runs.
    """

    _pending: tuple[int, str] | None = None
    _stamps: StampingSocket | None = None  # kernel receive times of this connection's reads

    def connection_made(self, transport) -> None:
        self._stamps = stamp_transport_reads(transport)
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._stamps is not None and self._stamps.last_ns is not None:
            now = (self._stamps.last_ns, "kernel")  # when the bytes reached the socket
        else:
            now = (time.time_ns(), "loop")
        if self._pending is None and (self.cycle is None or self.cycle.response_complete):
            self._pending = now
        before = self.scope if hasattr(self, "scope") else None
        super().data_received(data)
        scope = getattr(self, "scope", None)
        if scope is not None and scope is not before:  # a request head was parsed just now
            scope[_RECEIVED_KEY] = self._pending or now
            scope[_SOCKET_KEY] = self._stamps
            self._pending = None


def mark_content(scope: MutableMapping[str, Any]) -> None:
    """Called by a streaming handler just before it yields each chunk with generated text: the
    next body message the middleware sends carries a token (the first: where a client's TTFT
    ends; each later one: where one of its inter-token gaps ends)."""
    scope[_CONTENT_KEY] = True


class WireLog:
    """Rows of ``server_requests.parquet``; appended on the event loop, written from anywhere."""

    def __init__(self):
        self.buffer = TableBuffer(SERVER_REQUEST_SCHEMA)

    def write(self, run_dir: Path) -> Path:
        return self.buffer.write(Path(run_dir) / "server_requests.parquet")

    def __len__(self) -> int:
        return len(self.buffer)


class WireClock:
    """ASGI middleware recording one ``WireLog`` row per completion request (see module doc)."""

    def __init__(self, app, log: WireLog):
        self.app = app
        self.log = log

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] not in TIMED_PATHS:
            await self.app(scope, receive, send)
            return
        app_start_ns = time.time_ns()
        # no stamping protocol (another server, a test client): the app start
        received_ns, received_clock = scope.get(_RECEIVED_KEY, (app_start_ns, "app"))
        row: dict[str, Any] = {
            "request_id": None,
            "status": None,
            "streamed": False,
            "first": None,
            "first_sent": None,
            "done": None,
            "content": [],
        }

        async def timed_send(message):
            kind = message["type"]
            if kind == "http.response.start":
                headers = dict(message.get("headers") or [])
                rid = headers.get(b"x-request-id")
                row["request_id"] = rid.decode("latin-1") if rid else None
                row["status"] = message["status"]
                row["streamed"] = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            # The time the socket write began, noted by the StampingSocket right before the system
            # call. Stamps taken here around `send` were off both ways: after it up to 1.3 ms late
            # (the write releases the GIL and the step thread takes it), before it up to 4 ms early
            # on a busy box (uvicorn's framing runs in between).
            handed_ns = time.time_ns()
            await send(message)
            if kind != "http.response.body":
                return
            stamps = scope.get(_SOCKET_KEY)
            written_ns = stamps.last_send_ns if stamps is not None else None
            fresh = written_ns is not None and written_ns >= handed_ns  # this write's, not older
            now = written_ns if fresh else handed_ns
            # A streamed answer's text is where the handler marked it (each mark is for the next
            # body message only); any other answer's first non-empty body is its content.
            if row["streamed"]:
                has_content = bool(scope.pop(_CONTENT_KEY, False))
            else:
                has_content = bool(message.get("body"))
            if has_content and row["status"] == 200:
                if row["first"] is None:
                    row["first"] = now
                    row["first_sent"] = stamps.last_send_done_ns if fresh else None
                if row["streamed"]:
                    row["content"].append(now)
            if not message.get("more_body", False):
                row["done"] = now

        try:
            await self.app(scope, receive, timed_send)
        finally:
            if row["request_id"] is not None:
                self.log.buffer.append(
                    row["request_id"],
                    scope["path"],
                    row["status"],
                    row["streamed"],
                    received_ns,
                    received_clock,
                    app_start_ns,
                    row["first"],
                    row["first_sent"],
                    row["done"],
                    row["content"] or None,
                )
