"""Locust users for OpenAI-compatible streaming chat completions (run only as a subprocess).

What:
- `ChatStreamUser` (closed loop: constant, ramp, step, spike) sends the workload's requests back
  to back; a controller greenlet on the master (or the only process) moves the user count along
  the shape and any load.burst window.
- `OpenLoopUser` (open, poisson, replay; one per process) sends each request at its scheduled
  time in its own greenlet, whether or not earlier ones finished; with N workers, arrival i goes
  to worker i mod N. `intended_send_ns` is the schedule, `sent_ns` the actual send.
- `ClosedReplayUser` (replay with replay_loop closed; one per process) replays each recorded
  user of the trace as a chain in its own greenlet (loadgen.chains); chain j goes to worker
  j mod N.
Every stream is read a line at a time, on sockets that stamp the send in sendall and each
arrival with the kernel's receive time (loadgen/timed_socket.py); every request and content
chunk is recorded with loadgen's recorder, and each request fires one Locust event named
"chat-stream" whose response time is the whole stream (Locust's own sample with stream=True stops
at the headers). The run quits exactly at warm-up + duration; streams still open are recorded as
'cancelled'. Each process also probes its own health (CPU, event-loop lag, read delay) every
second. Settings come from the JSON file named by $SPIKELENS_LOADGEN_CONFIG.

Never import this module (or locust) into the Prefect/torch process: its gevent patching hangs
them (docs/loadgen.md).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from itertools import count
from typing import Any

import gevent
import gevent.pool
import psutil
from gevent import GreenletExit
from locust import FastHttpUser, events, task
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner, WorkerRunner

from loadgen import chains
from loadgen.arrivals import arrival_times, for_worker
from loadgen.client_health import PROBE_INTERVAL_S, WARMUP_MARKER, HealthMonitor
from loadgen.client_stall import KIND as CLIENT_STALL
from loadgen.client_stall import blocking_sleep, run_stalls
from loadgen.error_guard import STOP_MARKER, ErrorGuard, ErrorGuardConfig
from loadgen.locust_config import API_KEY_ENV, CONFIG_ENV, START_MARKER, LocustConfig
from loadgen.prompts import PromptBuilder
from loadgen.recorder import Recorder
from loadgen.replay import read_normalised
from loadgen.request_plan import RequestFactory, RequestPlan
from loadgen.shapes import change_times, spawn_rate, target_users
from loadgen.spec import CLOSED_LOOP_SHAPES
from loadgen.sse import StreamState
from loadgen.timed_socket import TimedSocket, install, line_arrival, timed_socket_of
from loadgen.traffic_faults import burst_edges, burst_factor, from_dicts, sampling_fault_at

EVENT_NAME = "chat-stream"

if CONFIG_ENV not in os.environ:
    raise SystemExit(
        f"{CONFIG_ENV} must name the loadgen run config JSON (written by loadgen.runner)"
    )
CONFIG = LocustConfig.read(os.environ[CONFIG_ENV])
API_KEY = os.environ.get(API_KEY_ENV) or None
WORKLOAD = CONFIG.workload_spec()
LOAD = CONFIG.load_spec()
FAULTS = from_dicts(CONFIG.faults)  # load.burst / penalty.repetition windows
FACTORY = RequestFactory(
    WORKLOAD,
    PromptBuilder(CONFIG.tokenizer_path),
    model_name=CONFIG.model_name,
    seed=CONFIG.seed,
    id_prefix=CONFIG.run_tag,
    endpoint=CONFIG.endpoint,
    ignore_eos=CONFIG.ignore_eos,
)
N_WORKERS = max(CONFIG.workers, 1)
GUARD = (
    ErrorGuard(ErrorGuardConfig(**CONFIG.error_guard)) if CONFIG.error_guard is not None else None
)
install()  # every connection stamps its sends and the kernel's receive times (timed_socket.py)


class Clock:
    """The run's time line in this process: set once when load starts (never rebound)."""

    start_ns: int | None = None
    load_start_ns: int | None = None  # end of warm-up: phase 'measure' from here
    end_ns: int | None = None

    def set(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.load_start_ns = start_ns + int(CONFIG.warmup_s * 1e9)
        self.end_ns = self.load_start_ns + int(CONFIG.duration_s * 1e9)

    def started(self) -> tuple[int, int, int]:
        """(start, load start, end) in ns; an error if read before `set()`."""
        if self.start_ns is None or self.load_start_ns is None or self.end_ns is None:
            raise RuntimeError("the run's clock is read before load started (Clock.set)")
        return self.start_ns, self.load_start_ns, self.end_ns

    def phase(self, t_ns: int) -> str:
        _, load_start_ns, end_ns = self.started()
        return "warmup" if t_ns < load_start_ns else ("measure" if t_ns < end_ns else "after")


CLOCK = Clock()
USER_INDEX = count()
STATE: dict = {}  # per process: 'recorder', 'health' (set at init / first start)


@events.init.add_listener
def _on_init(environment, **_):
    runner = environment.runner
    # the pid keeps part names unique: a worker learns its index only once the master acks it
    tag = f"p{os.getpid()}"
    STATE["recorder"] = Recorder(CONFIG.parts_dir, tag=tag)
    STATE["health"] = HealthMonitor(tag)
    STATE["runner"] = runner
    if isinstance(runner, WorkerRunner):
        runner.register_message(
            "spikelens_clock", lambda environment, msg, **kw: _start_clock(msg.data)
        )
    if isinstance(runner, MasterRunner):
        runner.register_message(
            "spikelens_stop", lambda environment, msg, **kw: _stop_early(msg.data)
        )


def _start_clock(start_ns: int) -> None:
    """Set this process's clock and start its health probes (users' processes only)."""
    if CLOCK.start_ns is not None:
        return
    CLOCK.set(start_ns)
    gevent.spawn(_probe_lag)
    gevent.spawn(_sample_health)
    gevent.spawn(_stall_clock)


def _stall_clock() -> None:
    """client.stall: block this whole process on the fault clock (loadgen.client_stall)."""
    windows = [(f.start_s, f.duration_s, f.params) for f in FAULTS if f.kind == CLIENT_STALL]
    if windows:
        _, load_start_ns, _ = CLOCK.started()
        run_stalls(
            windows,
            lambda: (time.time_ns() - load_start_ns) / 1e9,
            gevent.sleep,
            blocking_sleep(),
        )


@events.test_start.add_listener
def _on_test_start(environment, **_):
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        return  # workers take the master's clock (message 'spikelens_clock')
    start_ns = time.time_ns()
    print(f"{START_MARKER} {start_ns}", flush=True)
    if isinstance(runner, MasterRunner):
        CLOCK.set(start_ns)  # the master runs no users: no health probes
        runner.send_message("spikelens_clock", start_ns)
    else:
        _start_clock(start_ns)
    gevent.spawn(_drive_shape, runner)


def closed_loop_users(t_s: float) -> int:
    """Users the closed-loop shape wants at t_s, multiplied by any active load.burst."""
    return round(target_users(LOAD, t_s, CONFIG.duration_s) * burst_factor(FAULTS, t_s))


def _drive_shape(runner) -> None:
    """Closed loop: move the user count at each change of the shape or of a burst. Then quit
    exactly at the end (the streams still in flight are cancelled and recorded)."""
    _, load_start_ns, end_ns = CLOCK.started()
    if LOAD.shape in CLOSED_LOOP_SHAPES:  # a closed replay's users follow their recording
        for t_s in sorted(set(change_times(LOAD, CONFIG.duration_s)) | set(burst_edges(FAULTS))):
            at_ns = load_start_ns + int(t_s * 1e9)
            if at_ns >= end_ns:
                break
            _sleep_until(at_ns)
            runner.start(closed_loop_users(t_s), spawn_rate(LOAD) * burst_factor(FAULTS, t_s))
    _sleep_until(end_ns)
    if isinstance(runner, MasterRunner):
        _stop_workers_and_collect_stats(runner)
    runner.quit()


def _stop_early(verdict: dict) -> None:
    """The error guard tripped: say why (the runner reads STOP_MARKER) and end the load as at
    the run's end. A worker asks the master, which stops every worker."""
    if STATE.get("stopping"):
        return
    STATE["stopping"] = True
    print(f"{STOP_MARKER} {json.dumps(verdict)}", flush=True)
    runner = STATE["runner"]
    if isinstance(runner, WorkerRunner):
        runner.send_message("spikelens_stop", verdict)
        return

    def quit_now():
        if isinstance(runner, MasterRunner):
            _stop_workers_and_collect_stats(runner)
        runner.quit()

    gevent.spawn(quit_now)


def _stop_workers_and_collect_stats(runner: MasterRunner) -> None:
    """Stop every worker, then wait for one stats report from each sent after it stopped.
    Locust's own quit waits only 0.5 s for the workers' final reports; a busy worker that is
    still writing its parts misses that, and its requests would be missing from the final
    stats (seen: requests_sent 0 with 50 rows recorded)."""
    reported: set[str] = set()
    collecting = False

    def on_report(client_id, data, **_):
        if collecting:
            reported.add(client_id)

    runner.environment.events.worker_report.add_listener(on_report)
    runner.stop()  # sends "stop" and returns once no worker runs users (parts written)
    collecting = True  # reports are ordered after each worker's client_stopped message
    workers = {client.id for client in runner.clients.all}
    deadline = time.monotonic() + 4 * WORKER_REPORT_INTERVAL
    while not workers <= reported and time.monotonic() < deadline:
        gevent.sleep(0.05)


def _sleep_until(t_ns: int) -> None:
    gevent.sleep(max(0.0, (t_ns - time.time_ns()) / 1e9))


def _probe_lag() -> None:
    """Event-loop lag: how late a PROBE_INTERVAL_S timer fires (every send and read in this
    process is late by as much; the arrival stamps are the kernel's, so only pacing suffers)."""
    health: HealthMonitor = STATE["health"]
    while True:
        due = time.perf_counter() + PROBE_INTERVAL_S
        gevent.sleep(PROBE_INTERVAL_S)
        lag_ms = max(0.0, (time.perf_counter() - due) * 1e3)
        health.add_lag(lag_ms, CLOCK.phase(time.time_ns()) == "measure")


def _sample_health() -> None:
    """One health row per second; CPU over the measured phase from this process's CPU times."""
    health: HealthMonitor = STATE["health"]
    recorder: Recorder = STATE["recorder"]
    proc = psutil.Process()
    proc.cpu_percent(None)  # starts the interval
    next_ns = CLOCK.started()[0] + 10**9
    while True:
        _sleep_until(next_ns)
        now = time.time_ns()
        load_starts = CLOCK.phase(now) == "measure" and "cpu_at_load_start" not in STATE
        if load_starts:
            STATE["cpu_at_load_start"] = (sum(proc.cpu_times()[:2]), now)
        health.close_second(
            now, CLOCK.phase(now - 1), proc.cpu_percent(None), len(recorder.in_flight)
        )
        if load_starts:  # the runner reads it: a starved warm-up is said before measuring
            print(f"{WARMUP_MARKER} {json.dumps(health.warmup_summary())}", flush=True)
        next_ns += 10**9


def _measured_cpu_percent() -> float | None:
    """This process's CPU use (% of one core) from load start to now (the stop)."""
    start = STATE.get("cpu_at_load_start")
    if start is None:
        return None
    cpu_s, t_ns = start
    elapsed = (time.time_ns() - t_ns) / 1e9
    return (
        100.0 * (sum(psutil.Process().cpu_times()[:2]) - cpu_s) / elapsed if elapsed > 0 else None
    )


@events.test_stop.add_listener
def _on_test_stop(environment, **_):
    if isinstance(environment.runner, MasterRunner):
        return  # the master runs no users; workers write their own parts
    recorder: Recorder = STATE["recorder"]
    cancelled = recorder.cancel_in_flight("in flight when the test stopped")
    for _ in range(cancelled):  # killed before their stream began: still one event each
        environment.events.request.fire(
            request_type="POST",
            name=EVENT_NAME,
            response_time=0,
            response_length=0,
            exception=RuntimeError("cancelled"),
            context={},
        )
    recorder.flush()
    if CLOCK.start_ns is not None:
        STATE["health"].write(CONFIG.parts_dir, _measured_cpu_percent())


def _sse_lines(response, read_mode: str, sock: TimedSocket | None, measured: bool):
    """Yield (line, arrival_ns, kernel-stamped, uncertain) for the body's lines as they arrive.

    'line' reads whole lines off geventhttpclient's socket buffer (one recv per network packet);
    with a TimedSocket the arrival is the kernel's receive time of the read that completed the
    line, and how long it waited to be read goes to client health. That stamp is the read's
    *last* packet's: when the client read late and a later packet (the next event) came in the
    same read, the kernel had merged them under the later time, so the line's time is an upper
    bound, and the line arrived after the previous read. ``uncertain``: that window is wider
    than MERGED_TOLERANCE_NS. 'byte' uses iter_content(chunk_size=1), exact too but one recv per
    byte (a bigger chunk_size waits for that many bytes, so the first chunk's time would be
    wrong), stamped when read."""
    if read_mode == "line":
        sock_response = response._response  # geventhttpclient's HTTPSocketPoolResponse
        health: HealthMonitor = STATE["health"]
        while True:
            line = sock_response.readline(b"\n")
            seen_ns = time.time_ns()
            if not line:
                return
            if sock is not None and sock.rx_stamped and sock.rx_ns is not None:
                health.add_read_delay((seen_ns - sock.rx_ns) / 1e6, measured)
                arrival_ns, uncertain = line_arrival(sock, sock_response._body_buffer)
                yield line, arrival_ns, True, uncertain
            else:
                yield line, seen_ns, False, False
    else:
        buffer = bytearray()
        for byte in response.iter_content(chunk_size=1, decode_content=False):
            buffer += byte
            if byte == b"\n":
                yield bytes(buffer), time.time_ns(), False, False
                buffer.clear()
        if buffer:
            yield bytes(buffer), time.time_ns(), False, False


def stream_request(
    user: FastHttpUser,
    plan: RequestPlan,
    intended_ns: int,
    user_name: str,
    worker: int,
    fault: str | None = None,
) -> None:
    """Send one streaming request and record it; re-raises GreenletExit after recording the
    request as 'cancelled' (the user was stopped mid-stream)."""
    recorder: Recorder = STATE["recorder"]
    recorder.start(_planned_row(plan, intended_ns, user_name, worker, fault))
    state = StreamState()
    body, headers = plan.body_bytes(), plan.headers(API_KEY)  # built before the send time is taken
    in_flight = recorder.in_flight[plan.request_id]
    sent_ns = in_flight["sent_ns"] = time.time_ns()  # until the socket says when the bytes left
    with user.client.request(
        "POST",
        plan.path,
        name=EVENT_NAME,
        data=body,  # type: ignore[arg-type]  # locust annotates str|dict; geventhttpclient sends bytes as-is
        headers=headers,
        stream=True,
        catch_response=True,
    ) as response:
        sock = timed_socket_of(response)
        if sock is not None and sock.sent_ns is not None:
            sent_ns = in_flight["sent_ns"] = sock.sent_ns  # taken in sendall, after any pool wait
        in_flight["arrival_clock"] = "read"  # until every line of the stream came kernel-stamped
        http_status = response.status_code or 0
        in_flight["http_status"] = http_status
        read = _StreamRead()
        try:
            if getattr(response, "error", None) is not None and http_status == 0:
                read.error = f"connection: {response.error!r}"
            elif http_status != 200:
                read.error = f"HTTP {http_status}: {(response.text or '')[:500]}"
            else:
                _read_stream(response, sock, intended_ns, state, in_flight, read)
        except GreenletExit:
            response.request_meta["response_time"] = (time.time_ns() - sent_ns) / 1e6
            response.failure("cancelled")
            _finish(recorder, plan, state, status="cancelled", error="user stopped mid-stream")
            raise
        except Exception as exc:  # a broken connection mid-stream is a failed request, not a crash
            read.error = f"{type(exc).__name__}: {exc}"
        error = read.error
        # the end of the body reached the socket at the last read's stamp (line mode)
        rx_ns = sock.rx_ns if sock is not None and read.kernel_clock and not error else None
        done_ns = rx_ns if rx_ns is not None else time.time_ns()
        response.request_meta["response_time"] = (done_ns - sent_ns) / 1e6
        response.request_meta["response_length"] = read.n_bytes
        if error:
            response.failure(error)
        else:
            response.success()
        _finish(
            recorder, plan, state, status="error" if error else "ok", error=error, done_ns=done_ns
        )


def _planned_row(
    plan: RequestPlan, intended_ns: int, user_name: str, worker: int, fault: str | None
) -> dict[str, Any]:
    """What is known of a request before it is sent: who sends it, when, and what it asks."""
    return {
        "request_id": plan.request_id,
        "user": user_name,
        "worker": str(worker),
        "phase": "warmup" if intended_ns < CLOCK.started()[1] else "measure",
        "intended_send_ns": intended_ns,
        "prompt_tokens_target": plan.prompt_tokens_target,
        "max_tokens": plan.max_tokens,
        "fault": fault,
        **plan.sampling,
    }


@dataclass
class _StreamRead:
    """How far the read of one response got: kept by the caller, so that a stream broken
    mid-way still reports the bytes it had."""

    n_bytes: int = 0
    kernel_clock: bool = False  # every line of the stream came kernel-stamped
    error: str | None = None


def _read_stream(
    response: Any,
    sock: TimedSocket | None,
    intended_ns: int,
    state: StreamState,
    in_flight: dict[str, Any],
    read: _StreamRead,
) -> None:
    """Feed a 200 response's SSE lines to `state`; note which clock their arrivals are on."""
    measured = CLOCK.phase(intended_ns) == "measure"
    read.kernel_clock = sock is not None
    first_uncertain = None  # the first content line's time: a later packet's, loosely bounded
    for line, arrival_ns, stamped, uncertain in _sse_lines(
        response, CONFIG.read_mode, sock, measured
    ):
        state.feed_line(line, arrival_ns)
        read.n_bytes += len(line)
        read.kernel_clock &= stamped
        if first_uncertain is None and state.first_token_ns is not None:
            first_uncertain = uncertain
    read.kernel_clock &= read.n_bytes > 0
    if read.kernel_clock:
        in_flight["arrival_clock"] = "merged" if first_uncertain else "kernel"
        if first_uncertain is not None:  # only streams that had a first token count
            STATE["health"].add_first_token(first_uncertain, measured)
    read.error = state.failure()


def _finish(
    recorder: Recorder,
    plan: RequestPlan,
    state: StreamState,
    *,
    status: str,
    error: str | None,
    done_ns: int | None = None,
) -> None:
    output_tokens, source = state.output_tokens()
    if GUARD is not None and status != "cancelled":
        verdict = GUARD.observe(status == "error", error)
        if verdict is not None:
            _stop_early(verdict)
    recorder.finish(
        plan.request_id,
        chunk_arrivals_ns=state.chunk_arrivals_ns,
        chunk_tokens=state.chunk_tokens,
        first_token_ns=state.first_token_ns,
        done_ns=done_ns or time.time_ns(),
        prompt_tokens=state.usage_prompt_tokens
        if state.usage_prompt_tokens is not None
        else plan.prompt_tokens_target,
        output_tokens=output_tokens,
        token_count_source=source,
        n_chunks=len(state.chunk_arrivals_ns),
        status=status,
        error=error,
        finish_reason=state.finish_reason,
        reported_queue_ms=state.reported_queue_ms,
        reported_ttft_ms=state.reported_ttft_ms,
        reported_mean_itl_ms=state.reported_mean_itl_ms,
    )


def _sampling_fault(t_ns: int, request_id: str):
    """The traffic fault (penalty.repetition / penalty.heavy_traffic / memory.kv_pressure) that
    rewrites request `request_id` due at t_ns, or None."""
    load_start_ns = CLOCK.started()[1]
    if t_ns < load_start_ns:
        return None
    return sampling_fault_at(FAULTS, (t_ns - load_start_ns) / 1e9, request_id)


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
        request_id = f"{CONFIG.run_tag}-{self.user_name}-{next(self.seq)}"
        fault = _sampling_fault(now, request_id)
        plan = FACTORY.plan(self.rng, request_id, fault.params if fault else None)
        stream_request(self, plan, now, self.user_name, self.worker, fault.kind if fault else None)


class OpenLoopUser(FastHttpUser):
    """Open loop: the process's share of the arrival schedule, each request in its own greenlet.
    At most load.max_in_flight streams are open at once; an arrival that finds no free slot
    waits for one (counted in client_health.slot_waits; its intended time stays the schedule's,
    so the wait shows as send lag, never hidden)."""

    network_timeout = CONFIG.request_timeout_s
    connection_timeout = CONFIG.request_timeout_s
    concurrency = LOAD.max_in_flight  # connections in this user's pool

    def on_start(self):
        self.worker = self.environment.runner.worker_index
        self.user_name = f"w{self.worker}-open"

    def _schedule(self):
        """(global index, seconds after the clock start, plan maker) of this worker's arrivals."""
        if LOAD.shape == "replay":
            entries = read_normalised(CONFIG.replay_path)
            times = ((e.t_s, e) for e in entries)
        else:
            times = (
                (t, None)
                for t in arrival_times(
                    LOAD, CONFIG.warmup_s, CONFIG.duration_s, FACTORY.seed, FAULTS
                )
            )
        for i, (t_s, entry) in for_worker(times, self.worker, N_WORKERS):
            yield i, t_s, entry

    @task
    def run_schedule(self):
        while CLOCK.end_ns is None:
            gevent.sleep(0.01)  # a worker waits for the master's clock
        pool = gevent.pool.Pool(LOAD.max_in_flight)
        health: HealthMonitor = STATE["health"]
        try:
            for i, t_s, entry in self._schedule():
                due_ns = CLOCK.start_ns + int(t_s * 1e9)
                if due_ns >= CLOCK.end_ns:
                    break
                # the plan is built before the due time, so building it never delays the send
                rng = FACTORY.user_rng(0, i)  # per arrival: the same request whatever the split
                request_id = f"{CONFIG.run_tag}-open-{i}"
                if entry is not None:
                    plan, fault = FACTORY.from_replay(entry, rng, request_id), None
                else:
                    sampling_fault = _sampling_fault(due_ns, request_id)
                    plan = FACTORY.plan(
                        rng, request_id, sampling_fault.params if sampling_fault else None
                    )
                    fault = sampling_fault.kind if sampling_fault else None
                _sleep_until(due_ns)
                if pool.full():
                    health.slot_waits += 1
                    pool.wait_available()
                pool.spawn(stream_request, self, plan, due_ns, self.user_name, self.worker, fault)
            _sleep_until(CLOCK.end_ns + 10**9)  # the controller quits at the end
            while True:
                gevent.sleep(1)
        finally:
            pool.kill(block=True)  # each open stream records itself as 'cancelled'


class ClosedReplayUser(FastHttpUser):
    """Closed-loop replay: each of this process's chains (loadgen.chains) in its own greenlet,
    one stream at a time: its first request at its recorded time, the next when the last one
    ended plus think_time_s, stopped at its recorded stop (an open stream then is recorded
    'cancelled', as a stopped Locust user's is) or at the run's end."""

    network_timeout = CONFIG.request_timeout_s
    connection_timeout = CONFIG.request_timeout_s
    concurrency = LOAD.max_in_flight  # connections in this user's pool: one per chain in flight

    def on_start(self):
        self.worker = self.environment.runner.worker_index

    @task
    def run_chains(self):
        while CLOCK.end_ns is None:
            gevent.sleep(0.01)  # a worker waits for the master's clock
        start_ns, _, end_ns = CLOCK.started()
        mine = chains.for_worker(
            chains.chains_of(read_normalised(CONFIG.replay_path)), self.worker, N_WORKERS
        )
        group = gevent.pool.Group()
        try:
            for chain in mine:
                greenlet = group.spawn(self._run_chain, chain)
                if chain.until_s is not None:
                    stop_ns = start_ns + int(chain.until_s * 1e9)
                    gevent.spawn_later(max(0.0, (stop_ns - time.time_ns()) / 1e9), greenlet.kill)
            _sleep_until(end_ns + 10**9)  # the controller quits at the end
            while True:
                gevent.sleep(1)
        finally:
            group.kill(block=True)  # each open stream records itself as 'cancelled'

    def _run_chain(self, chain: chains.Chain) -> None:
        user_name = f"w{self.worker}-u{chain.index}"
        start_ns, _, end_ns = CLOCK.started()
        # a user that stopped in the recording sends nothing after that, even when the kill
        # scheduled for then (run_chains) runs late on a busy gevent loop
        if chain.until_s is not None:
            end_ns = min(end_ns, start_ns + int(chain.until_s * 1e9))
        _sleep_until(start_ns + int(chain.start_s * 1e9))
        seq = count()
        while True:
            for entry in chain.entries:
                now = time.time_ns()
                if now >= end_ns:
                    return
                i = next(seq)
                request_id = f"{CONFIG.run_tag}-{user_name}-{i}"
                rng = FACTORY.user_rng(chain.index, i)  # the same prompt whatever the split
                plan = FACTORY.from_replay(entry, rng, request_id)
                stream_request(self, plan, now, user_name, self.worker)
                gevent.sleep(LOAD.think_time_s)


if __name__ == "__main__":
    sys.exit("run with: python -m locust -f loadgen/locustfile.py --headless (see loadgen.runner)")
