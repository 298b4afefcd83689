"""Run the thread-unsafe ``LLMEngine`` in one dedicated thread and serve it to asyncio handlers.

Why one thread: the engine's scheduler, KV cache and penalty state are not thread-safe, and the step
loop must never wait for the event loop (or the event loop for a step). So:

- every call into the engine (add, abort, arm, flush…) is a command on a thread-safe queue that the
  engine thread drains *between* steps;
- each step's outputs go back to the event loop in one ``loop.call_soon_threadsafe`` and are routed
  to per-request ``asyncio.Queue``s;
- with no unfinished request the thread sleeps on an ``Event`` (no busy spin); a new command wakes it.

All public methods except ``run_in_engine``'s callable run on the event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.server.metrics import ServerMetrics

log = logging.getLogger(__name__)


class EngineDeadError(RuntimeError):
    """The engine thread stopped (a step raised, or the server is shutting down)."""


@dataclass
class StepDelivery:
    """One engine step's output for one request, stamped when the step returned."""

    new_token_ids: list[int]
    finished: bool
    finish_reason: str | None
    step_end_ns: int


@dataclass
class RequestStream:
    """The asyncio side of one request: outputs in step order, then the end (or an exception)."""

    request_id: str
    arrival_ns: int
    _queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    finished: bool = False
    first_token_ns: int | None = None  # end of the step that produced the first token
    last_token_ns: int | None = None
    output_tokens: int = 0

    def __aiter__(self):
        return self

    async def __anext__(self) -> StepDelivery:
        if self.finished and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, BaseException):
            self.finished = True
            raise item
        if item.finished:
            self.finished = True
        return item

    def _put(self, item: StepDelivery | BaseException) -> None:
        self._queue.put_nowait(item)


Command = Callable[[Any], None]  # runs on the engine thread with the LLMEngine as argument


class AsyncEngine:
    """Owns the engine thread. ``start()`` inside a running event loop; ``await shutdown()`` to stop."""

    def __init__(self, engine: Any, metrics: ServerMetrics | None = None):
        self.engine = engine
        self.metrics = metrics
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._streams: dict[str, RequestStream] = {}  # event-loop thread only
        self.error: BaseException | None = None  # set when a step raised; the engine is dead
        self.steps = 0  # steps run (read from any thread: int is atomic)

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="engine-step-loop", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    async def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the thread after its current step; fail every open request with ``EngineDeadError``."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, timeout_s)
        if self._thread is None or not self._thread.is_alive():
            # The engine is ours alone now: run commands queued after the thread's last drain
            # (aborts of streams cut by the shutdown) and abort what is still open, so every request
            # ends in engine_requests.parquet with finish_reason "abort".
            while True:
                try:
                    self._commands.get_nowait()(self.engine)
                except queue.Empty:
                    break
            for request_id in list(self._streams):
                self.engine.abort_request(request_id)
        self._fail_all(EngineDeadError("the engine is shutting down"))

    # ---- requests (event-loop thread) --------------------------------------------------------------
    @property
    def num_open(self) -> int:
        """Requests added and not yet finished or aborted."""
        return len(self._streams)

    def has_request(self, request_id: str) -> bool:
        return request_id in self._streams

    def add_request(
        self, request_id: str, prompt_ids: Sequence[int], params: Any, arrival_ns: int | None = None
    ) -> RequestStream:
        """Queue a request for the engine; its outputs arrive on the returned stream."""
        self._check_alive()
        if request_id in self._streams:
            raise ValueError(f"request id {request_id!r} is already in flight")
        stream = RequestStream(request_id, arrival_ns or time.time_ns())
        self._streams[request_id] = stream
        prompt = list(prompt_ids)

        def add(engine):
            try:
                engine.add_request(request_id, prompt, params, arrival_ns=stream.arrival_ns)
            except Exception as e:  # bad input the server did not catch: that request fails alone
                self._loop.call_soon_threadsafe(self._fail_one, request_id, e)

        self._submit(add)
        return stream

    def abort(self, request_id: str) -> None:
        """Forget the request now and free its sequence and KV blocks before the next step."""
        if self._streams.pop(request_id, None) is None:
            return
        if self.metrics is not None:
            self.metrics.aborted.inc()
        self._submit(lambda engine: engine.abort_request(request_id))

    def finish_early(self, request_id: str, prompt_tokens: int) -> None:
        """End a request the server decided is complete (a stop string matched): like ``abort`` for
        the engine, but counted as a request finished with ``stop``."""
        stream = self._streams.pop(request_id, None)
        if stream is None:
            return
        if self.metrics is not None:
            self.metrics.request_finished(
                "stop",
                stream.arrival_ns,
                stream.first_token_ns,
                stream.last_token_ns or time.time_ns(),
                prompt_tokens,
                stream.output_tokens,
            )
        self._submit(lambda engine: engine.abort_request(request_id))

    def abort_all(self, reason: str) -> int:
        """End every open request now with ``EngineDeadError(reason)`` (its handler answers in-band
        or 503) and abort it in the engine; returns how many were open. Used at shutdown so open
        streams end with a proper last event instead of being cancelled mid-write."""
        streams, self._streams = self._streams, {}
        for request_id, stream in streams.items():
            stream._put(EngineDeadError(reason))
            if self.metrics is not None:
                self.metrics.aborted.inc()
            self._submit(_abort(request_id))
        return len(streams)

    async def run_in_engine(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(engine)`` on the engine thread between two steps and return its result."""
        self._check_alive()
        fut = self._running_loop().create_future()

        def call(engine):
            try:
                result = fn(engine)
            except BaseException as e:
                self._loop.call_soon_threadsafe(_settle, fut, None, e)
            else:
                self._loop.call_soon_threadsafe(_settle, fut, result, None)

        self._submit(call)
        return await fut

    # ---- internals --------------------------------------------------------------------------------
    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop `start()` captured; an error before it."""
        if self._loop is None:
            raise RuntimeError("AsyncEngine is not started: call start() in the event loop")
        return self._loop

    def _check_alive(self) -> None:
        if self.error is not None:
            raise EngineDeadError(f"the engine stopped after an error: {self.error!r}")
        if not self.alive:
            raise EngineDeadError("the engine is not running")

    def _submit(self, command: Command) -> None:
        self._commands.put(command)
        self._wake.set()

    def _run(self) -> None:
        """The engine thread: drain commands, step while there is work, sleep when there is none."""
        _name_os_thread("engine-step")
        engine = self.engine
        metrics = self.metrics
        try:
            while True:
                self._wake.clear()  # before draining: a command queued after this sets it again
                while True:
                    try:
                        self._commands.get_nowait()(engine)
                    except queue.Empty:
                        break
                if self._stopping:
                    return
                if engine.has_unfinished():
                    outputs = engine.step()
                    self.steps += 1
                    if outputs:
                        self._running_loop().call_soon_threadsafe(
                            self._deliver, outputs, time.time_ns()
                        )
                    if metrics is not None:
                        metrics.engine_stepped(engine)
                else:
                    if metrics is not None:  # gauges after aborts/finishes, before sleeping
                        metrics.engine_stepped(engine)
                    self._wake.wait()
        except BaseException as e:  # a step raised: fail every request, report unhealthy
            log.exception("engine step loop failed")
            self.error = e
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(
                    self._fail_all, EngineDeadError(f"engine step failed: {e!r}")
                )

    def _deliver(self, outputs: list, step_end_ns: int) -> None:
        metrics = self.metrics
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if stream is None:  # aborted while the step ran
                continue
            n_new = len(out.new_token_ids)
            if metrics is not None:
                metrics.token_times(stream.arrival_ns, stream.last_token_ns, step_end_ns, n_new)
            if n_new:
                stream.first_token_ns = stream.first_token_ns or step_end_ns
                stream.last_token_ns = step_end_ns
                stream.output_tokens += n_new
            stream._put(
                StepDelivery(
                    list(out.new_token_ids), bool(out.finished), out.finish_reason, step_end_ns
                )
            )
            if out.finished:
                del self._streams[out.request_id]
                if metrics is not None:
                    metrics.request_finished(
                        out.finish_reason or "stop",
                        stream.arrival_ns,
                        stream.first_token_ns,
                        step_end_ns,
                        getattr(out, "prompt_tokens", 0),
                        stream.output_tokens,
                    )

    def _fail_one(self, request_id: str, error: BaseException) -> None:
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            stream._put(error)

    def _fail_all(self, error: BaseException) -> None:
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream._put(error)


def _abort(request_id: str) -> Command:
    """The engine-thread command that aborts `request_id`."""
    return lambda engine: engine.abort_request(request_id)


def _settle(fut: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if fut.done():  # the awaiting handler was cancelled
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def _name_os_thread(name: str) -> None:
    """Name the calling thread for the OS (``top -H``, /proc/*/task/*/comm, py-spy): Python 3.11's
    ``threading`` names are invisible outside the process. Linux only; a no-op elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15 = PR_SET_NAME, 16 bytes with the NUL
    except (OSError, AttributeError):
        pass
