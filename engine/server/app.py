"""The FastAPI application: OpenAI-compatible endpoints over one ``AsyncEngine``.

Routes: ``GET /health``, ``GET /metrics`` (Prometheus), ``GET /v1/models``, ``POST /v1/completions``,
``POST /v1/chat/completions``, ``POST /spikelens/arm`` and ``POST /spikelens/flush``. Every error is an ``APIError`` rendered in the
OpenAI shape. Bodies are read and parsed here (not by FastAPI's validation) so that malformed JSON,
oversized bodies and unknown fields get the answers vLLM gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engine.chat_template import ChatTemplateMissing
from engine.server import sse
from engine.server.async_engine import AsyncEngine, EngineDeadError
from engine.server.config import ServerConfig
from engine.server.errors import APIError, invalid_request
from engine.server.generation import TextGeneration
from engine.server.metrics import ServerMetrics
from engine.server.openapi import ServerLimits, engine_openapi
from engine.server.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    parse_request,
    to_sampling_params,
)
from engine.server.responses import ResponseMeta, StreamEncoder, full_response, usage, usage_chunk
from engine.server.wire_clock import WireClock, WireLog, mark_content

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-Id"


def create_app(engine: Any, config: ServerConfig | None = None) -> FastAPI:
    """An app serving ``engine`` (an ``LLMEngine``); its step thread runs for the app's lifespan."""
    config = config or ServerConfig()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.async_engine.start()
        try:
            yield
        finally:
            await app.state.async_engine.shutdown()

    app = FastAPI(title="spikelens engine", lifespan=lifespan, docs_url=None, redoc_url=None)
    metrics = ServerMetrics(config.model_name)
    app.state.metrics = metrics
    app.state.async_engine = AsyncEngine(engine, metrics)
    app.state.server_config = config
    app.state.wire_log = WireLog()  # server_requests.parquet: times at the socket
    app.add_middleware(WireClock, log=app.state.wire_log)
    service = GenerationService(app, engine, config, metrics)
    _add_error_handlers(app)
    _add_info_routes(app, service)
    _add_generation_routes(app, service)
    _add_control_routes(app, service)
    app.openapi = service.openapi  # type: ignore[method-assign]  # FastAPI's documented override
    return app


class GenerationService:
    """What the routes share: the engine, its limits, the server's config and metrics. The
    AsyncEngine is read from ``app.state`` on each request (its lifespan owns it)."""

    def __init__(self, app: FastAPI, engine: Any, config: ServerConfig, metrics: ServerMetrics):
        self.app, self.engine, self.config, self.metrics = app, engine, config, metrics
        self.tokenizer = engine.tokenizer
        self.max_model_len = engine.config.max_model_len
        self.max_num_seqs = engine.config.max_num_seqs
        # Token-id prompts are checked against the model's vocabulary (may exceed the tokenizer's: padded).
        self.model_vocab_size = getattr(engine, "vocab_size", self.tokenizer.vocab_size)
        self.created = int(time.time())

    @property
    def async_engine(self) -> AsyncEngine:
        return self.app.state.async_engine

    def openapi(self) -> dict:
        if self.app.openapi_schema is None:
            self.app.openapi_schema = engine_openapi(
                self.app, ServerLimits(self.max_model_len, self.model_vocab_size)
            )
        return self.app.openapi_schema

    def with_tokenizer_stops(self, params):
        """Add the tokenizer's end-of-turn ids to the stop ids (the engine checks EOS itself), as
        vLLM adds a model's generation-config EOS ids; ``ignore_eos`` keeps only the client's."""
        if params.ignore_eos:
            return params
        extra = sorted(set(self.tokenizer.stop_token_ids) - set(params.stop_token_ids))
        return (
            dataclasses.replace(params, stop_token_ids=(*params.stop_token_ids, *extra))
            if extra
            else params
        )

    async def generate(
        self, request: Request, req, prompt_ids: list[int], params, *, chat: bool, id_prefix: str
    ) -> Response:
        # Arrival = admission, after parsing and tokenization (vLLM stamps arrival_time there too):
        # what an admitted request waits for from here on is bounded by the admission limit.
        arrival_ns = time.time_ns()
        eng = self.async_engine
        request_id = request.headers.get(REQUEST_ID_HEADER) or uuid.uuid4().hex
        if eng.has_request(request_id):
            raise invalid_request(
                f"{REQUEST_ID_HEADER}: request id {request_id!r} is already in flight",
                REQUEST_ID_HEADER,
            )
        self.admit(eng)
        stream = eng.add_request(request_id, prompt_ids, params, arrival_ns=arrival_ns)
        gen = TextGeneration(eng, stream, self.tokenizer, req.stop_strings(), len(prompt_ids))
        meta = ResponseMeta(
            id=id_prefix + request_id,
            created=int(time.time()),
            model=self.config.model_name,
            chat=chat,
        )
        headers = {REQUEST_ID_HEADER: request_id}
        if req.stream:
            return StreamingResponse(
                _sse_body(
                    request, gen, meta, len(prompt_ids), req.include_usage, req.continuous_usage
                ),
                media_type=sse.SSE_MEDIA_TYPE,
                headers={**sse.SSE_HEADERS, **headers},
            )
        return await _full_body(request, gen, meta, len(prompt_ids), headers)

    def admit(self, eng: AsyncEngine) -> None:
        """Shed with 429 + Retry-After when the waiting line beyond the running batch is full."""
        config = self.config
        if config.max_waiting is None:
            return
        waiting = eng.num_open - self.max_num_seqs
        if waiting >= config.max_waiting:
            self.metrics.shed.inc()
            raise APIError(
                HTTPStatus.TOO_MANY_REQUESTS,
                f"server overloaded: {eng.num_open} requests open (running batch {self.max_num_seqs} "
                f"+ waiting limit {config.max_waiting}); retry after {config.retry_after_s} s",
                headers={"Retry-After": str(config.retry_after_s)},
            )


def _add_error_handlers(app: FastAPI) -> None:
    """Every error in the OpenAI shape; an engine that died answers 503."""

    @app.exception_handler(APIError)
    async def _api_error(_: Request, e: APIError):
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(EngineDeadError)
    async def _engine_dead(_: Request, e: EngineDeadError):
        err = APIError(HTTPStatus.SERVICE_UNAVAILABLE, str(e))
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, e: Exception):
        log.exception("unhandled error")
        err = APIError(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
        return JSONResponse(err.body(), status_code=err.status)


def _add_info_routes(app: FastAPI, service: GenerationService) -> None:
    """GET /health, /metrics (Prometheus), /v1/models."""

    @app.get("/health")
    async def health():
        eng = service.async_engine
        if eng.error is not None or not eng.alive:
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, f"engine not running: {eng.error!r}")
        return {"status": "ok"}

    @app.get("/metrics")
    async def prometheus_metrics():
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def models():
        return {
            "object": "list",
            "data": [
                {
                    "id": service.config.model_name,
                    "object": "model",
                    "created": service.created,
                    "owned_by": "spikelens",
                    "root": service.engine.config.model,
                    "max_model_len": service.max_model_len,
                }
            ],
        }


def _add_generation_routes(app: FastAPI, service: GenerationService) -> None:
    """POST /v1/completions and /v1/chat/completions: parse, tokenize, check, generate."""
    config, tokenizer = service.config, service.tokenizer

    @app.post("/v1/completions")
    async def completions(request: Request):
        req = parse_request(await _read_body(request, config.max_body_bytes), CompletionRequest)
        prompt = req.single_prompt()
        if isinstance(prompt, str):
            prompt_ids = tokenizer.encode(prompt, add_bos=True)
        else:
            prompt_ids = _checked_ids(prompt, service.model_vocab_size)
        if not prompt_ids:
            raise invalid_request("prompt: must encode to at least one token", "prompt")
        params = service.with_tokenizer_stops(
            to_sampling_params(req, len(prompt_ids), service.max_model_len, "prompt")
        )
        return await service.generate(
            request, req, prompt_ids, params, chat=False, id_prefix="cmpl-"
        )

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        req = parse_request(await _read_body(request, config.max_body_bytes), ChatCompletionRequest)
        try:
            prompt_ids = tokenizer.apply_chat_template(req.message_dicts())
        except ChatTemplateMissing as e:  # the server's setup, not the request (vLLM: 400 too)
            raise invalid_request(str(e), None) from None
        except ValueError as e:
            raise invalid_request(str(e), "messages") from None
        params = service.with_tokenizer_stops(
            to_sampling_params(req, len(prompt_ids), service.max_model_len, "messages")
        )
        return await service.generate(
            request, req, prompt_ids, params, chat=True, id_prefix="chatcmpl-"
        )


def _add_control_routes(app: FastAPI, service: GenerationService) -> None:
    """POST /spikelens/arm (start the fault clock) and /spikelens/flush (write the telemetry)."""

    @app.post("/spikelens/arm")
    async def arm(request: Request):
        body = await _read_body(request, service.config.max_body_bytes)
        t0_ns = _parse_arm(body)
        await service.async_engine.run_in_engine(lambda e: e.arm_faults(t0_ns))
        return {"status": "armed", "t0_ns": t0_ns}

    @app.post("/spikelens/flush")
    async def flush():
        written = list(await service.async_engine.run_in_engine(lambda e: e.flush()) or [])
        run_dir = getattr(getattr(service.engine, "telemetry", None), "run_dir", None)
        if run_dir is not None:
            written.append(app.state.wire_log.write(run_dir))
        return {"status": "flushed", "files": [str(p) for p in written]}


async def _sse_body(
    request: Request,
    gen: TextGeneration,
    meta: ResponseMeta,
    prompt_tokens: int,
    include_usage: bool,
    continuous_usage: bool,
) -> AsyncIterator[bytes]:
    """The event stream of one request; errors after the headers are reported in-band."""
    encoder = StreamEncoder(meta, include_usage)
    first = True
    try:
        async for step in gen.steps():
            running = usage(prompt_tokens, gen.completion_tokens) if continuous_usage else None
            if step.text:
                mark_content(request.scope)
            yield encoder.chunk(step.text, step.finish_reason, first, running)
            first = False
        if include_usage:
            yield sse.sse_event(usage_chunk(meta, prompt_tokens, gen.completion_tokens))
    except EngineDeadError as e:  # headers are sent: report in-band, as vLLM does
        yield sse.sse_event(APIError(HTTPStatus.SERVICE_UNAVAILABLE, str(e)).body())
    except Exception as e:  # e.g. the engine rejected the request: also in-band
        log.exception("request %s failed mid-stream", gen.request_id)
        yield sse.sse_event(
            APIError(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}").body()
        )
    finally:
        gen.close()  # client gone or error: free the sequence and its KV blocks
    yield sse.DONE


async def _full_body(
    request: Request,
    gen: TextGeneration,
    meta: ResponseMeta,
    prompt_tokens: int,
    headers: dict[str, str],
) -> Response:
    """A non-streamed answer; a client that leaves first stops the decoding (499)."""

    async def collect() -> tuple[str, str | None]:
        parts = [step.text async for step in gen.steps()]
        return "".join(parts), gen.finish_reason

    collect_task = asyncio.ensure_future(collect())
    disconnect_task = asyncio.ensure_future(_wait_for_disconnect(request))
    try:
        await asyncio.wait({collect_task, disconnect_task}, return_when=asyncio.FIRST_COMPLETED)
        if not collect_task.done():  # the client left: stop decoding for nobody
            collect_task.cancel()
            return Response(status_code=499)
        text, finish_reason = collect_task.result()
    finally:
        disconnect_task.cancel()
        gen.close()
    return JSONResponse(
        full_response(meta, text, finish_reason, prompt_tokens, gen.completion_tokens),
        headers=headers,
    )


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, or 413 naming the limit once it is exceeded (checked as bytes arrive)."""
    declared = request.headers.get("content-length")
    too_large = APIError(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        f"body: request body exceeds the limit of {limit} bytes",
        param="body",
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _wait_for_disconnect(request: Request) -> None:
    """Returns when the client closes the connection (the body is already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _checked_ids(ids: list[int], vocab_size: int) -> list[int]:
    bad = next((t for t in ids if not 0 <= t < vocab_size), None)
    if bad is not None:
        raise invalid_request(
            f"prompt: token ids must be in [0, {vocab_size - 1}], got {bad}", "prompt"
        )
    return ids


def _parse_arm(body: bytes) -> int:
    try:
        data = json.loads(body or b"{}")
    except ValueError as e:  # not UTF-8, not JSON, or an integer beyond Python's digit limit
        raise invalid_request(f"body: the request body is not valid JSON ({e})", "body") from None
    t0 = data.get("t0_ns") if isinstance(data, dict) else None
    if isinstance(t0, bool) or not isinstance(t0, int) or t0 <= 0:
        raise invalid_request(
            f"t0_ns: must be a positive integer of wall-clock nanoseconds, got {t0!r}", "t0_ns"
        )
    return t0
