"""Locust user for OpenAI-compatible streaming chat completions (run only as a subprocess).

What: `ChatStreamUser` (closed loop) sends the workload's requests back to back, reads each SSE
stream a line at a time, and records every request and content chunk with loadgen's own
recorder; each request fires one Locust request event named "chat-stream" whose response time
is the whole stream (Locust's own sample with stream=True would stop at the headers).
A controller greenlet on the master (or the only process) moves the user count along the
load shape and quits at warm-up + duration; requests still streaming then are recorded as
'cancelled'. Settings come from the JSON file named by $SPIKELENS_LOADGEN_CONFIG.

Never import this module (or locust) into the Prefect/torch process: see STACK-NOTES.
"""

from __future__ import annotations

import os
import sys
import time
from itertools import count
from pathlib import Path

import gevent
from gevent import GreenletExit
from locust import FastHttpUser, events, task
from locust.runners import MasterRunner, WorkerRunner

from loadgen.prompts import PromptBuilder
from loadgen.recorder import Recorder
from loadgen.request_plan import RequestFactory, RequestPlan
from loadgen.run_config import API_KEY_ENV, CONFIG_ENV, START_MARKER, RunConfig
from loadgen.shapes import change_times, spawn_rate, target_users
from loadgen.sse import StreamState
from loadgen.traffic_faults import burst_edges, burst_factor, from_dicts, repetition_at

EVENT_NAME = "chat-stream"

if CONFIG_ENV not in os.environ:
    raise SystemExit(f"{CONFIG_ENV} must name the loadgen run config JSON (written by loadgen.runner)")
CONFIG = RunConfig.read(os.environ[CONFIG_ENV])
API_KEY = os.environ.get(API_KEY_ENV) or None
WORKLOAD = CONFIG.workload_spec()
LOAD = CONFIG.load_spec()
FAULTS = from_dicts(CONFIG.faults)  # load.burst / penalty.repetition windows
FACTORY = RequestFactory(WORKLOAD, PromptBuilder(CONFIG.tokenizer_path), model_name=CONFIG.model_name,
                         seed=CONFIG.seed, id_prefix=CONFIG.run_tag, endpoint=CONFIG.endpoint)


class Clock:
    """The run's time line in this process: set once when load starts (never rebound)."""

    start_ns: int | None = None
    load_start_ns: int | None = None  # end of warm-up: phase 'measure' from here
    end_ns: int | None = None

    def set(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.load_start_ns = start_ns + int(CONFIG.warmup_s * 1e9)
        self.end_ns = self.load_start_ns + int(CONFIG.duration_s * 1e9)


CLOCK = Clock()
USER_INDEX = count()
STATE: dict = {}  # per process: 'recorder' (set at init)


@events.init.add_listener
def _on_init(environment, **_):
    runner = environment.runner
    # the pid keeps part names unique: a worker learns its index only once the master acks it
    STATE["recorder"] = Recorder(CONFIG.parts_dir, tag=f"p{os.getpid()}")
    if isinstance(runner, WorkerRunner):
        runner.register_message("spikelens_clock", lambda environment, msg, **kw: CLOCK.set(msg.data))


@events.test_start.add_listener
def _on_test_start(environment, **_):
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        return  # workers take the master's clock (message 'spikelens_clock')
    CLOCK.set(time.time_ns())
    print(f"{START_MARKER} {CLOCK.start_ns}", flush=True)
    if isinstance(runner, MasterRunner):
        runner.send_message("spikelens_clock", CLOCK.start_ns)
    gevent.spawn(_drive_shape, runner)


def closed_loop_users(t_s: float) -> int:
    """Users the shape wants at t_s, multiplied by any active load.burst."""
    return round(target_users(LOAD, t_s, CONFIG.duration_s) * burst_factor(FAULTS, t_s))


def _drive_shape(runner) -> None:
    """Move the user count at each change of the shape or of a burst, then quit exactly at the
    end (the streams still in flight are cancelled and recorded)."""
    for t_s in sorted(set(change_times(LOAD, CONFIG.duration_s)) | set(burst_edges(FAULTS))):
        at_ns = CLOCK.load_start_ns + int(t_s * 1e9)
        if at_ns >= CLOCK.end_ns:
            break
        gevent.sleep(max(0.0, (at_ns - time.time_ns()) / 1e9))
        runner.start(closed_loop_users(t_s), spawn_rate(LOAD) * burst_factor(FAULTS, t_s))
    gevent.sleep(max(0.0, (CLOCK.end_ns - time.time_ns()) / 1e9))
    runner.quit()


@events.test_stop.add_listener
def _on_test_stop(environment, **_):
    if isinstance(environment.runner, MasterRunner):
        return  # the master runs no users; workers write their own parts
    recorder: Recorder = STATE["recorder"]
    cancelled = recorder.cancel_in_flight("in flight when the test stopped")
    for _ in range(cancelled):
        environment.events.request.fire(request_type="POST", name=EVENT_NAME, response_time=0,
                                        response_length=0, exception=RuntimeError("cancelled"),
                                        context={})
    recorder.flush()


def _sse_lines(response, read_mode: str):
    """Yield the body's lines as they arrive. 'line' reads whole lines off geventhttpclient's
    socket buffer (one recv per network packet); 'byte' uses iter_content(chunk_size=1), which
    is exact too but costs one recv per byte (a bigger chunk_size waits for that many bytes, so
    the first chunk's time would be wrong)."""
    if read_mode == "line":
        sock_response = response._response  # geventhttpclient's HTTPSocketPoolResponse
        while True:
            line = sock_response.readline(b"\n")
            if not line:
                return
            yield line
    else:
        buffer = bytearray()
        for byte in response.iter_content(chunk_size=1, decode_content=False):
            buffer += byte
            if byte == b"\n":
                yield bytes(buffer)
                buffer.clear()
        if buffer:
            yield bytes(buffer)


def stream_request(user: FastHttpUser, plan: RequestPlan, intended_ns: int, user_name: str,
                   worker: int, fault: str | None = None) -> None:
    """Send one streaming request and record it; re-raises GreenletExit after recording the
    request as 'cancelled' (the user was stopped mid-stream)."""
    recorder: Recorder = STATE["recorder"]
    recorder.start({
        "request_id": plan.request_id, "user": user_name, "worker": str(worker),
        "phase": "warmup" if intended_ns < CLOCK.load_start_ns else "measure",
        "intended_send_ns": intended_ns, "prompt_tokens_target": plan.prompt_tokens_target,
        "max_tokens": plan.max_tokens, "fault": fault, **plan.sampling,
    })
    state = StreamState()
    n_bytes = 0
    sent_ns = time.time_ns()
    recorder.in_flight[plan.request_id]["sent_ns"] = sent_ns
    with user.client.request("POST", plan.path, name=EVENT_NAME, data=plan.body_bytes(),
                             headers=plan.headers(API_KEY), stream=True,
                             catch_response=True) as response:
        http_status = response.status_code or 0
        recorder.in_flight[plan.request_id]["http_status"] = http_status
        error = None
        try:
            if getattr(response, "error", None) is not None and http_status == 0:
                error = f"connection: {response.error!r}"
            elif http_status != 200:
                error = f"HTTP {http_status}: {(response.text or '')[:500]}"
            else:
                for line in _sse_lines(response, CONFIG.read_mode):
                    state.feed_line(line, time.time_ns())
                    n_bytes += len(line)
                if state.error:
                    error = state.error
                elif not state.done:
                    error = "stream ended before data: [DONE]"
        except GreenletExit:
            response.request_meta["response_time"] = (time.time_ns() - sent_ns) / 1e6
            response.failure("cancelled")
            _finish(recorder, plan, state, status="cancelled", error="user stopped mid-stream")
            raise
        except Exception as exc:  # a broken connection mid-stream is a failed request, not a crash
            error = f"{type(exc).__name__}: {exc}"
        done_ns = time.time_ns()
        response.request_meta["response_time"] = (done_ns - sent_ns) / 1e6
        response.request_meta["response_length"] = n_bytes
        if error:
            response.failure(error)
        else:
            response.success()
        _finish(recorder, plan, state, status="error" if error else "ok", error=error, done_ns=done_ns)


def _finish(recorder: Recorder, plan: RequestPlan, state: StreamState, *, status: str,
            error: str | None, done_ns: int | None = None) -> None:
    output_tokens, source = state.output_tokens()
    recorder.finish(
        plan.request_id, chunk_arrivals_ns=state.chunk_arrivals_ns, chunk_tokens=state.chunk_tokens,
        first_token_ns=state.first_token_ns, done_ns=done_ns or time.time_ns(),
        prompt_tokens=state.usage_prompt_tokens if state.usage_prompt_tokens is not None
        else plan.prompt_tokens_target,
        output_tokens=output_tokens, token_count_source=source, n_chunks=len(state.chunk_arrivals_ns),
        status=status, error=error, finish_reason=state.finish_reason,
    )


class ChatStreamUser(FastHttpUser):
    """Closed loop: one request at a time, the next as soon as the stream ends (+ think time)."""

    network_timeout = CONFIG.request_timeout_s
    connection_timeout = CONFIG.request_timeout_s
    concurrency = 1  # one stream at a time per user: one connection is enough

    def wait_time(self):
        return LOAD.think_time_s

    def on_start(self):
        self.index = next(USER_INDEX)
        self.worker = self.environment.runner.worker_index  # 0 when not distributed
        self.user_name = f"w{self.worker}-u{self.index}"
        self.rng = FACTORY.user_rng(self.worker, self.index)
        self.seq = count()

    @task
    def chat_stream(self):
        now = time.time_ns()
        if CLOCK.end_ns is None or now >= CLOCK.end_ns:
            gevent.sleep(0.05)  # the clock is not set yet (worker) or the run is ending
            return
        repetition = repetition_at(FAULTS, (now - CLOCK.load_start_ns) / 1e9) if now >= CLOCK.load_start_ns else None
        plan = FACTORY.plan(self.rng, f"{CONFIG.run_tag}-{self.user_name}-{next(self.seq)}", repetition)
        stream_request(self, plan, now, self.user_name, self.worker,
                       "penalty.repetition" if repetition else None)


if __name__ == "__main__":
    sys.exit("run with: python -m locust -f loadgen/locustfile.py --headless (see loadgen.runner)")
