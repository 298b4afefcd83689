"""A no-op OpenAI-compatible streaming server with controlled delays (asyncio, no framework).

What: answers POST /v1/chat/completions and /v1/completions with `max_tokens` (else
`max_completion_tokens`, else 16) SSE content chunks in vLLM's format: the first `ttft_s` after the request, then one every `itl_s` (on an absolute
schedule, so delays do not drift), a final chunk with finish_reason, a usage chunk when
`stream_options.include_usage` is set, and `data: [DONE]`. GET /health answers 200. A request
with `max_tokens` < 1 or malformed JSON gets vLLM's 400 error body.
It records, per request, when it sent the first content chunk and the last byte (server side),
so tests can compare loadgen's client-side TTFT/E2E with them.
Why: to calibrate and test the load generator (and bench/loadgen.py) without an engine; it does
no inference, so the client is the only thing measured. GET /metrics exposes two vLLM-named series
(requests finished, streams open) for the scraper's tests.

Run standalone, from the repository root:

    python -m tests.support.sse_server --port 8123 --ttft-s 0.05 --itl-s 0.01
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from dataclasses import dataclass, field


@dataclass
class ServedRequest:
    """The server's view of one request (wall-clock ns)."""

    request_id: str
    arrival_ns: int  # the request's headers and body were read
    first_chunk_ns: int | None = None  # just before the first content chunk was written
    done_ns: int | None = None  # just before [DONE] was written
    completion_tokens: int = 0
    cancelled: bool = False  # the client went away mid-stream
    authorization: str | None = None  # the Authorization header, to test API-key passing


@dataclass
class SSEServerConfig:
    ttft_s: float = 0.0  # delay from reading the request to the first content chunk
    itl_s: float = 0.0  # delay between content chunks
    role_chunk: bool = True  # send vLLM's leading {"role": "assistant", "content": ""} chunk
    token_text: str = "tok "  # content of each chunk (one token each)
    reject_model: str | None = None  # answer 400 (param "model") to requests for this model


@dataclass
class SSEServer:
    """Start with `start()` (a thread with its own event loop, 127.0.0.1, a free port)."""

    config: SSEServerConfig = field(default_factory=SSEServerConfig)
    host: str = "127.0.0.1"
    port: int = 0
    served: list[ServedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> SSEServer:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, self.host, self.port)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="sse-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("SSE server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> SSEServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another on this connection
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                arrival_ns = time.time_ns()
                if method == "GET" and path == "/metrics":
                    await self._send_metrics(writer)
                elif method == "GET" and path in ("/health", "/v1/models"):
                    await self._send_json(
                        writer,
                        200,
                        {"status": "ok"}
                        if path == "/health"
                        else {"object": "list", "data": [{"id": "noop", "object": "model"}]},
                    )
                elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
                    await self._completion(writer, path, headers, body, arrival_ns)
                else:
                    await self._send_json(writer, 404, {"error": {"message": f"no route {path}"}})
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _send_metrics(self, writer: asyncio.StreamWriter) -> None:
        """Prometheus text: requests served and streams open (vLLM's metric names)."""
        running = sum(1 for r in self.served if r.done_ns is None and not r.cancelled)
        data = (
            "# HELP vllm:request_success_total Finished requests.\n"
            "# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{model_name="noop"}} {len(self.served) - running}\n'
            "# HELP vllm:num_requests_running Requests streaming now.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="noop"}} {running}\n'
        ).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
            + f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _send_json(self, writer: asyncio.StreamWriter, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _completion(self, writer, path, headers, body, arrival_ns) -> None:
        try:
            request = json.loads(body)
            # OpenAI's newer name (GuideLLM and AIPerf send it) when max_tokens is absent.
            max_tokens = request.get("max_tokens", request.get("max_completion_tokens", 16))
            if not isinstance(max_tokens, int) or max_tokens < 1:
                raise ValueError("max_tokens must be an integer >= 1")
        except (ValueError, AttributeError) as exc:
            await self._send_json(
                writer,
                400,
                {
                    "error": {
                        "message": str(exc),
                        "type": "invalid_request_error",
                        "param": "max_tokens",
                        "code": 400,
                    }
                },
            )
            return
        if (
            self.config.reject_model is not None
            and request.get("model") == self.config.reject_model
        ):
            await self._send_json(
                writer,
                400,
                {
                    "error": {
                        "message": f"model {request.get('model')!r} is not served",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": 400,
                    }
                },
            )
            return
        request_id = headers.get("x-request-id", f"noop-{arrival_ns}")
        served = ServedRequest(
            request_id=request_id, arrival_ns=arrival_ns, authorization=headers.get("authorization")
        )
        self.served.append(served)
        chat = path.endswith("chat/completions")
        cfg = self.config
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )

        def chunk(
            choice_delta: dict | None, finish: str | None = None, usage: dict | None = None
        ) -> bytes:
            event = {
                "id": f"cmpl-{request_id}",
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": arrival_ns // 10**9,
                "model": request.get("model", "noop"),
                "choices": [],
            }
            if choice_delta is not None:
                choice = {"index": 0, "finish_reason": finish}
                choice.update(
                    {"delta": choice_delta} if chat else {"text": choice_delta.get("content", "")}
                )
                event["choices"] = [choice]
            if usage is not None:
                event["usage"] = usage
            data = f"data: {json.dumps(event)}\n\n".encode()
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"

        try:
            if chat and cfg.role_chunk:
                writer.write(chunk({"role": "assistant", "content": ""}))
                await writer.drain()
            start = time.monotonic()
            for i in range(max_tokens):
                delay = start + cfg.ttft_s + i * cfg.itl_s - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                last = i == max_tokens - 1
                if i == 0:  # stamped before the write: the client cannot see it earlier
                    served.first_chunk_ns = time.time_ns()
                writer.write(chunk({"content": cfg.token_text}, finish="length" if last else None))
                await writer.drain()
                served.completion_tokens = i + 1
            if (request.get("stream_options") or {}).get("include_usage"):
                prompt = request.get("prompt") or " ".join(
                    str(m.get("content", "")) for m in request.get("messages", [])
                )
                writer.write(
                    chunk(
                        None,
                        usage={
                            "prompt_tokens": len(prompt.split()),
                            "completion_tokens": max_tokens,
                            "total_tokens": len(prompt.split()) + max_tokens,
                        },
                    )
                )
            done = b"data: [DONE]\n\n"
            served.done_ns = time.time_ns()
            writer.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            served.cancelled = True
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--ttft-s", type=float, default=0.0)
    parser.add_argument("--itl-s", type=float, default=0.0)
    args = parser.parse_args()
    server = SSEServer(
        SSEServerConfig(ttft_s=args.ttft_s, itl_s=args.itl_s), port=args.port
    ).start()
    print(f"serving on {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
