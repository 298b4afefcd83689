"""The wire clock: one row per completion request, stamped just before the ASGI sends, each text
chunk where the handler marks it; other paths untouched. Driven as plain ASGI (no server needed,
so no stamping protocol: the arrival is the app start, clock 'app')."""

import asyncio
import time

from engine.server.wire_clock import _SOCKET_KEY, WireClock, WireLog, mark_content


def sse_app(
    chunks: list[bytes], content_from: int, status: int = 200, text_until: int | None = None
):
    """An ASGI app streaming `chunks`; generated text is in chunks `content_from` up to (not
    including) `text_until` (default: only `content_from`), each marked as the handler does."""
    last = content_from + 1 if text_until is None else text_until

    async def app(scope, receive, send):
        ctype = b"text/event-stream" if status == 200 else b"application/json"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", ctype), (b"x-request-id", b"req-1")],
            }
        )
        for i, chunk in enumerate(chunks):
            if content_from <= i < last:
                mark_content(scope)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def drive(app, path: str = "/v1/completions", socket=None) -> list[tuple[str, int]]:
    """Run one request through `app`; return (message type, time sent) per message. `socket`:
    a stand-in for the connection's StampingSocket, which the send "writes" through."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        if socket is not None:
            socket.send(b"...")
        sent.append((message["type"], time.time_ns()))

    scope = {"type": "http", "path": path, "method": "POST"}
    if socket is not None:
        scope[_SOCKET_KEY] = socket
    asyncio.run(app(scope, receive, send))
    return sent


class WriteTimes:
    """Notes when each write began and returned, as StampingSocket.send does."""

    last_send_ns = last_send_done_ns = None

    def __init__(self):
        self.writes = []
        self.returns = []

    def send(self, data):
        self.last_send_ns = time.time_ns()
        self.writes.append(self.last_send_ns)
        time.sleep(0.002)  # the write itself takes a while: the stamp must be its start
        self.last_send_done_ns = time.time_ns()
        self.returns.append(self.last_send_done_ns)


def test_stamps_follow_the_sends_and_the_content_mark():
    log = WireLog()
    sent = drive(
        WireClock(
            sse_app([b"data: role\n\n", b"data: hello\n\n", b"data: [DONE]\n\n"], content_from=1),
            log,
        )
    )
    [row] = log.buffer.to_table().to_pylist()
    assert row["request_id"] == "req-1" and row["status"] == 200 and row["streamed"]
    body_times = [t for kind, t in sent if kind == "http.response.body"]
    assert row["received_ns"] <= sent[0][1] and row["received_clock"] == "app"
    # first content: the second body send (the first carried no text), stamped just before it
    assert body_times[0] <= row["first_content_ns"] <= body_times[1]
    assert row["first_content_sent_ns"] is None  # no socket to say when the write returned
    assert body_times[-2] <= row["done_ns"] <= body_times[-1]
    assert row["content_ns"] == [row["first_content_ns"]]  # only the marked chunk carried text


def test_every_text_chunk_is_stamped_and_nothing_else():
    log, socket = WireLog(), WriteTimes()
    chunks = [b"data: role\n\n", b"data: a\n\n", b"data: b\n\n", b"data: c\n\n", b"data: usage\n\n"]
    drive(WireClock(sse_app(chunks, content_from=1, text_until=4), log), socket=socket)
    [row] = log.buffer.to_table().to_pylist()
    # writes: response start, role, a, b, c, usage, the end: the server's ITL gaps are b−a, c−b
    assert row["content_ns"] == socket.writes[2:5]
    assert row["first_content_ns"] == row["content_ns"][0]


def test_with_the_connections_socket_the_stamps_are_when_the_writes_began():
    log, socket = WireLog(), WriteTimes()
    drive(
        WireClock(sse_app([b"data: role\n\n", b"data: hello\n\n"], content_from=1), log),
        socket=socket,
    )
    [row] = log.buffer.to_table().to_pylist()
    # writes: response start, role, hello (first content), the end
    assert row["first_content_ns"] == socket.writes[2] and row["done_ns"] == socket.writes[3]
    # the first text reached the client while its write ran: between its start and its return
    assert row["first_content_sent_ns"] == socket.returns[2] > row["first_content_ns"]


def test_an_error_answer_has_no_content_time_and_other_paths_are_not_logged():
    log = WireLog()
    drive(WireClock(sse_app([b'{"error": {}}'], content_from=0, status=400), log))
    drive(WireClock(sse_app([b"ok"], content_from=0), log), path="/health")
    [row] = log.buffer.to_table().to_pylist()
    assert row["status"] == 400 and row["first_content_ns"] is None and row["done_ns"] is not None


def test_written_as_parquet(tmp_path):
    import pyarrow.parquet as pq

    log = WireLog()
    drive(WireClock(sse_app([b"data: x\n\n"], content_from=0), log))
    path = log.write(tmp_path)
    assert path.name == "server_requests.parquet" and pq.read_table(path).num_rows == 1
