"""Run Locust as a subprocess against an OpenAI-compatible server and collect its raw samples.

What: `run_locust(host, run_dir, LocustRunOptions(...))` writes the run config, starts
`python -m locust -f loadgen/locustfile.py --headless …` in its own process group, calls
`on_load_start(t0_ns)` at the moment warm-up ends, waits (hard timeout), merges every Locust
process's parts into `requests.parquet` and `tokens.parquet` in the run directory, and returns a
LocustResult.
Why a subprocess: importing locust (gevent monkey-patching) into the Prefect or torch process
hangs them: gevent patches threads and sockets under torch and Prefect's event loop. This
module imports neither locust nor gevent.
On any exception or KeyboardInterrupt the whole process group is terminated (SIGTERM: Locust
writes its parts), then killed, and what was recorded is still merged into the run directory.

requests_sent is Locust's own count: `num_requests` of the "chat-stream" entry in Locust's final
stats (--json-file, written at exit). Every request the recorder writes fires exactly one such
event (cancelled ones included), so requests_sent == rows of requests.parquet; the result
carries both so a caller can check.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.chains import chains_of
from loadgen.client_health import WARMUP_MARKER, merge_health, warmup_verdict
from loadgen.error_guard import STOP_MARKER, ErrorGuardConfig
from loadgen.errors import SpecError
from loadgen.locust_config import API_KEY_ENV, CONFIG_ENV, START_MARKER, LocustConfig
from loadgen.prompts import PromptBuilder
from loadgen.recorder import merge_parts
from loadgen.replay import load_trace, trace_options, write_normalised
from loadgen.shapes import spawn_rate, target_users
from loadgen.spec import LoadSpec, WorkloadSpec, load_from, workload_from
from loadgen.traffic_faults import traffic_faults, write_faults
from spikelens_common.metrics_scraper import MetricsScraper

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
EVENT_NAME = "chat-stream"  # the name of the Locust request event the locustfile fires
STARTUP_TIMEOUT_S = 60.0  # Locust import + spawn on a busy 2-core machine
SHUTDOWN_GRACE_S = 60.0  # past warm-up + duration: last streams cancelled, parts written
TERM_GRACE_S = 10.0  # SIGTERM → SIGKILL: Locust flushes its parts on SIGTERM


class LoadgenError(RuntimeError):
    """Locust failed to start, crashed, or overran its hard timeout; carries the output tail."""


@dataclass
class LocustResult:
    requests_sent: int  # Locust's own count of "chat-stream" requests (final stats)
    requests_failed: int  # of those, failed or cancelled
    returncode: int
    load_started_ns: int  # end of warm-up: t0 of the scenario's time line
    stdout_tail: str  # the last lines Locust printed (stdout and stderr)
    requests_recorded: int = 0  # rows written to requests.parquet (should equal requests_sent)
    chunks_recorded: int = 0  # rows written to tokens.parquet
    started_ns: int = 0  # when Locust's clock started (start of warm-up)
    # False when a Locust process saturated or its figures cannot be trusted (loadgen/
    # client_health.verdict: CPU > 90 % of a core, event-loop lag p99 > 50 ms, merged first tokens)
    client_valid: bool = True
    client_health: dict = field(
        default_factory=dict
    )  # verdict: valid, reasons, per-process summaries
    metrics_rows: int = 0  # rows scraped into metrics.parquet (0: no scraping)
    metrics_scrape_errors: int = 0
    # the error guard's verdict when the load stopped early because it was mostly errors:
    # {requests, failed, error_share, top_error, reason}; None when the run ran its course
    stopped_early: dict | None = None


@dataclass(frozen=True)
class LocustRunOptions:
    """What one Locust run drives, for how long, and how it reads and records (`run_locust`).

    Settings only: the two callbacks (`on_load_start`, `preexec_fn`) are code, not settings, and
    stay arguments of `run_locust`. Checked when the run starts, before Locust does (SpecError
    naming the field)."""

    # the requests: a WorkloadSpec, its mapping, or a preset name ("smoke", ...)
    workload: WorkloadSpec | dict | str
    # the arrivals: a LoadSpec, its mapping, or a preset name
    load: LoadSpec | dict | str
    duration_s: float  # measured load after the warm-up, seconds (> 0)
    warmup_s: float = 0.0  # first seconds of load, recorded with phase 'warmup' (>= 0)
    seed: int = 0  # run seed of the workload's draws and the arrival schedule
    tokenizer_path: str | Path | None = None  # tokenizers JSON for exact prompt token counts
    model_name: str = "spikelens"  # the `model` field of every request body
    # hard limit on the whole Locust run, seconds; None: STARTUP_TIMEOUT_S + warmup_s +
    # duration_s + SHUTDOWN_GRACE_S
    timeout_s: float | None = None
    api_key: str | None = None  # Bearer token, handed over in the environment, never on disk
    endpoint: str = "chat"  # "chat" (/v1/chat/completions) or "completions" (/v1/completions)
    # "line": read the body a line at a time off the socket buffer; "byte": one recv per byte
    read_mode: str = "line"
    request_timeout_s: float = 600.0  # network timeout between bytes of one request, seconds
    log_lines: int = 60  # lines of Locust's output kept for stdout_tail and error messages
    # loadgen's own faults, as the flows route them ({kind, start_s, duration_s, params}
    # mappings or FaultSpec-like objects): applied and recorded in faults.loadgen.parquet; a kind
    # loadgen does not apply (spikelens_common.fault_catalogue) is an error
    faults: Sequence[Any] = ()
    # Locust worker processes: 0 runs one process; N (<= 256) a master and N workers
    # (`--processes N`), every worker's samples merged
    workers: int = 0
    # a Prometheus endpoint scraped into metrics.parquet while Locust runs; None: no scraping
    metrics_url: str | None = None
    metrics_interval_s: float = 0.25  # seconds between two scrapes of metrics_url
    # send vLLM's `ignore_eos` (exact output lengths); False for targets that reject unknown
    # fields (outputs may then end before max_tokens)
    ignore_eos: bool = True
    # stop early when the load is mostly errors (the result's `stopped_early` says why); None
    # lets a failing run go its full length
    error_guard: ErrorGuardConfig | None = field(default_factory=ErrorGuardConfig)


def run_locust(
    host: str,
    run_dir: str | Path,
    options: LocustRunOptions,
    *,
    on_load_start: Callable[[int], None] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    on_warmup_health: Callable[[dict], None] | None = None,
) -> LocustResult:
    """Drive `host` (the server root, http(s)://) as `options` say for warmup_s + duration_s,
    recording into `run_dir`; see the module doc.
    Blocks until Locust exits; raises LoadgenError (after killing the group) if it does not
    within options.timeout_s. `on_load_start(t0_ns)` is called when the warm-up ends.
    `preexec_fn` runs in the Locust child before exec (e.g. PR_SET_PDEATHSIG, so a SIGKILLed
    caller leaves no Locust behind). `on_warmup_health(verdict)` (client_health.warmup_verdict)
    is called, from a reader thread, once every Locust process has summarised its warm-up as
    measured load starts; not at all without a warm-up of 2 s or more.
    If the wait is interrupted (any exception, KeyboardInterrupt, a termination signal raised in
    this thread), Locust is terminated and what it recorded is still merged — requests.parquet,
    tokens.parquet, client_health.parquet and faults.loadgen.parquet up to that moment — before
    the exception propagates."""
    run = _prepare_run(host, Path(run_dir), options)
    output = _OutputReader(run.parts_dir / "locust.log", options.log_lines)
    output.expect_warmup(max(options.workers, 1), on_warmup_health)
    scraper = (
        MetricsScraper(
            options.metrics_url,
            run.run_dir / "metrics.parquet",
            options.metrics_interval_s,
            api_key=options.api_key,
        )
        if options.metrics_url
        else None
    )
    try:
        proc = subprocess.Popen(
            locust_command(host, run.load, run.config, run.stats_base),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=run.env,
            start_new_session=True,  # own process group: killed as one
            preexec_fn=preexec_fn,
        )
    except BaseException:
        output.close()
        raise
    clock = _LoadClock(options.warmup_s)
    try:
        returncode = _wait_for_locust(proc, output, scraper, clock, run, on_load_start)
    except BaseException as failure:
        _salvage(failure, proc, output, scraper, run, clock)
        raise
    output.close()
    return _collect(run, returncode, output, scraper, clock)


@dataclass(frozen=True)
class _PreparedRun:
    """Everything decided before Locust starts: where its parts go, its config and environment,
    the faults loadgen applies itself, and the deadline of the whole run."""

    run_dir: Path
    parts_dir: Path
    load: LoadSpec
    config: LocustConfig
    stats_base: Path  # Locust's --json-file (it appends ".json")
    env: dict[str, str]
    faults: list  # loadgen's faults, validated (TrafficFault)
    duration_s: float
    timeout_s: float
    deadline: float  # time.monotonic() past which Locust is stopped


def _prepare_run(host: str, run_dir: Path, options: LocustRunOptions) -> _PreparedRun:
    """Check the inputs, empty the parts folder, write Locust's config file: no process yet."""
    workload, load = workload_from(options.workload), load_from(options.load)
    mine = traffic_faults([_fault_dict(f) for f in options.faults or []])
    _check_inputs(host, workload, options)
    parts_dir = _fresh_parts_dir(run_dir)
    replay_path = None
    if load.shape == "replay" and load.trace is not None:  # LoadSpec requires a trace for replay
        entries = load_trace(load.trace, trace_options(load))
        if load.replay_loop == "closed":
            chains_of(entries)  # every request names its user, or one clear error now
        replay_path = str(write_normalised(entries, parts_dir / "replay.jsonl"))
    guard = options.error_guard
    config = LocustConfig(
        parts_dir=str(parts_dir),
        run_tag=run_dir.name or "run",
        warmup_s=options.warmup_s,
        duration_s=options.duration_s,
        seed=options.seed,
        workload=workload.to_dict(),
        load=load.to_dict(),
        model_name=options.model_name,
        tokenizer_path=str(options.tokenizer_path) if options.tokenizer_path else None,
        endpoint=options.endpoint,
        request_timeout_s=options.request_timeout_s,
        read_mode=options.read_mode,
        faults=[f.to_dict() for f in mine],
        workers=options.workers,
        replay_path=replay_path,
        ignore_eos=options.ignore_eos,
        error_guard=dataclasses.asdict(guard) if guard is not None else None,
    )
    config_path = config.write(parts_dir / "config.json")
    stats_base = parts_dir / "locust_stats"
    stats_base.with_suffix(".json").unlink(missing_ok=True)
    env = {**os.environ, CONFIG_ENV: str(config_path), "PYTHONUNBUFFERED": "1"}
    if options.api_key:
        env[API_KEY_ENV] = options.api_key
    timeout_s = options.timeout_s
    if timeout_s is None:
        timeout_s = STARTUP_TIMEOUT_S + options.warmup_s + options.duration_s + SHUTDOWN_GRACE_S
    return _PreparedRun(
        run_dir=run_dir,
        parts_dir=parts_dir,
        load=load,
        config=config,
        stats_base=stats_base,
        env=env,
        faults=mine,
        duration_s=options.duration_s,
        timeout_s=timeout_s,
        deadline=time.monotonic() + timeout_s,
    )


def _collect(
    run: _PreparedRun,
    returncode: int,
    output: _OutputReader,
    scraper: MetricsScraper | None,
    clock: _LoadClock,
) -> LocustResult:
    """After Locust exited: merge its parts, read its final stats, write loadgen's faults."""
    metrics_rows = scraper.stop() if scraper is not None else 0
    recorded, chunks, health = _merge(run.parts_dir, run.run_dir)
    stats_path = run.stats_base.with_suffix(".json")
    if not stats_path.exists():
        raise LoadgenError(f"locust exited ({returncode}) without final stats\n{output.tail()}")
    sent, failed = _event_counts(stats_path)
    if run.faults:
        write_faults(
            run.faults,
            clock.measured_from(),
            run.duration_s,
            run.run_dir / "faults.loadgen.parquet",
        )
    return LocustResult(
        requests_sent=sent,
        requests_failed=failed,
        returncode=returncode,
        load_started_ns=clock.measured_from(),
        stdout_tail=output.tail(),
        requests_recorded=recorded,
        chunks_recorded=chunks,
        started_ns=clock.started_ns,
        client_valid=health["valid"],
        client_health=health,
        metrics_rows=metrics_rows,
        metrics_scrape_errors=scraper.errors if scraper is not None else 0,
        stopped_early=output.stopped_early,
    )


def _check_inputs(host: str, workload: WorkloadSpec, options: LocustRunOptions) -> None:
    """Everything that can be wrong before Locust starts, named (SpecError)."""
    duration_s, warmup_s, workers = options.duration_s, options.warmup_s, options.workers
    tokenizer_path = options.tokenizer_path
    if duration_s <= 0:
        raise SpecError(f"duration_s must be > 0, got {duration_s!r}")
    if warmup_s < 0:
        raise SpecError(f"warmup_s must be >= 0, got {warmup_s!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or not 0 <= workers <= 256:
        raise SpecError(f"workers must be an integer in [0, 256], got {workers!r}")
    if not host.startswith(("http://", "https://")):
        raise SpecError(f"host must be an http(s):// URL, got {host!r}")
    if host.rstrip("/").endswith("/v1"):
        raise SpecError(f"host {host!r} ends with /v1: give the server root (loadgen adds /v1/...)")
    if tokenizer_path is not None:
        try:
            PromptBuilder(tokenizer_path)  # a missing or broken tokenizer fails here, not in Locust
        except Exception as exc:
            raise SpecError(f"tokenizer_path {tokenizer_path}: {exc}") from None
    if workload.source != "builtin" and workload.path is not None:  # WorkloadSpec requires one
        from loadgen.sources import load_prompt_file

        load_prompt_file(workload.path, workload.source)  # bad files fail here, naming the line


def _fresh_parts_dir(run_dir: Path) -> Path:
    """run_dir/loadgen, without the parts of an earlier attempt (they must not be merged)."""
    parts_dir = run_dir / "loadgen"
    parts_dir.mkdir(parents=True, exist_ok=True)
    for pattern in ("requests.*.parquet", "tokens.*.parquet", "client_health.*"):
        for stale in parts_dir.glob(pattern):
            stale.unlink()
    return parts_dir


@dataclass
class _LoadClock:
    """When Locust's clock started and when measured load starts (after the warm-up)."""

    warmup_s: float
    started_ns: int = 0
    load_started_ns: int | None = None

    def measured_from(self) -> int:
        """The start of measured load; only known once Locust printed its start marker."""
        if self.load_started_ns is None:
            raise LoadgenError("locust's start marker was never read: no measured load")
        return self.load_started_ns


def _wait_for_locust(
    proc: subprocess.Popen,
    output: _OutputReader,
    scraper: MetricsScraper | None,
    clock: _LoadClock,
    run: _PreparedRun,
    on_load_start: Callable[[int], None] | None,
) -> int:
    """Follow Locust to its end: note the start of measured load (and tell the caller at that
    moment), then wait for the exit; LoadgenError past the deadline."""
    if scraper is not None:
        scraper.start()
    output.follow(proc)
    clock.started_ns = output.wait_for_start(
        proc, min(run.deadline, time.monotonic() + STARTUP_TIMEOUT_S)
    )
    clock.load_started_ns = clock.started_ns + int(clock.warmup_s * 1e9)
    if on_load_start is not None:
        _sleep_until_ns(clock.load_started_ns)
        on_load_start(clock.load_started_ns)
    try:
        return proc.wait(timeout=max(0.0, run.deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise LoadgenError(
            f"locust overran its {run.timeout_s:.0f} s timeout\n{output.tail()}"
        ) from None


def _salvage(
    failure: BaseException,
    proc: subprocess.Popen,
    output: _OutputReader,
    scraper: MetricsScraper | None,
    run: _PreparedRun,
    clock: _LoadClock,
) -> None:
    """After a failed or interrupted wait: stop Locust and keep what it measured (the caller
    may still analyse a failed run); a failure to merge is noted on the original failure."""
    # A second SIGTERM must not cut this short: an orphaned flow process gets its parent-death
    # signal again each time it is re-parented (measured: the first one arrives, then another
    # while Locust is still writing its parts), and the rows would be lost.
    with _termination_deferred():
        _terminate_group(proc)  # SIGTERM first: Locust writes its parts, in-flight rows 'cancelled'
        output.close()
        if scraper is not None:
            scraper.stop()
        try:
            _merge(run.parts_dir, run.run_dir)
            started = clock.load_started_ns
            if run.faults and started is not None and time.time_ns() > started:
                measured_s = min(run.duration_s, (time.time_ns() - started) / 1e9)
                write_faults(
                    run.faults, started, measured_s, run.run_dir / "faults.loadgen.parquet"
                )
        except Exception as merge_error:
            failure.add_note(f"merging loadgen's parts also failed: {merge_error!r}")


@contextlib.contextmanager
def _termination_deferred():
    """Ignore SIGTERM/SIGINT while the block runs (bounded cleanup), then restore the handlers.
    Only the main thread may set handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _merge(parts_dir: Path, run_dir: Path) -> tuple[int, int, dict]:
    """Merge the processes' parts into the run directory, then delete the parts."""
    recorded, chunks = merge_parts(parts_dir, run_dir)
    health = merge_health(parts_dir, run_dir)
    for part in list(parts_dir.glob("requests.*.parquet")) + list(
        parts_dir.glob("tokens.*.parquet")
    ):
        part.unlink()
    return recorded, chunks, health


def locust_command(host: str, load: LoadSpec, config: LocustConfig, stats_base: Path) -> list[str]:
    """The Locust command line: headless, our user class, the shape's initial users (open loop:
    one scheduling user per process); run time and later user counts are driven from inside the
    locustfile (exact to the gevent loop)."""
    n_procs = max(config.workers, 1)
    if load.shape == "replay" and not load.open_loop:
        users, rate, user_class = n_procs, float(n_procs), "ClosedReplayUser"
    elif load.open_loop:
        users, rate, user_class = n_procs, float(n_procs), "OpenLoopUser"
    else:
        users, rate, user_class = (
            target_users(load, 0.0, config.duration_s),
            spawn_rate(load),
            "ChatStreamUser",
        )
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--host",
        host.rstrip("/"),
        "--users",
        str(users),
        "--spawn-rate",
        str(rate),
        "--only-summary",
        "--json-file",
        str(stats_base),
        "--stop-timeout",
        "0",  # at the end, streams in flight are cancelled (and recorded)
        "--exit-code-on-error",
        "0",  # failed requests are data, not a crash: see requests_failed
    ]
    if config.workers:
        cmd += ["--processes", str(config.workers)]  # master + N forked workers
    return cmd + [user_class]


def _fault_dict(fault) -> dict:
    """A fault as a mapping, from a mapping or a FaultSpec-like object (kind, start_s, …)."""
    if isinstance(fault, dict):
        return fault
    return {
        "kind": fault.kind,
        "start_s": fault.start_s,
        "duration_s": fault.duration_s,
        "params": dict(fault.params or {}),
    }


def _event_counts(stats_path: Path) -> tuple[int, int]:
    """(num_requests, num_failures) of the EVENT_NAME entry of Locust's final stats."""
    entries = json.loads(stats_path.read_text())
    for entry in entries:
        if entry.get("name") == EVENT_NAME:
            return int(entry["num_requests"]), int(entry["num_failures"])
    return 0, 0


def _sleep_until_ns(t_ns: int) -> None:
    """Sleep until the wall clock reaches t_ns: coarse sleep, then a short spin (~ms accuracy)."""
    while True:
        left = (t_ns - time.time_ns()) / 1e9
        if left <= 0:
            return
        time.sleep(left - 0.002 if left > 0.004 else 0.0002)


def _terminate_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group (Locust writes its parts on SIGTERM), then SIGKILL it."""
    if proc.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


class _OutputReader:
    """Reads Locust's merged stdout/stderr on a thread: keeps a tail, writes the full log, and
    catches the start marker line."""

    def __init__(self, log_path: Path, keep: int):
        self.lines: deque[str] = deque(maxlen=keep)
        self.log = open(log_path, "w")
        self.started_ns: int | None = None
        self.stopped_early: dict | None = None  # the error guard's verdict (STOP_MARKER line)
        self.started = threading.Event()
        self.thread: threading.Thread | None = None
        self.warmup: list[dict | None] = []  # each users' process's warm-up summary
        self._warmup_processes = 1
        self._on_warmup: Callable[[dict], None] | None = None

    def expect_warmup(self, processes: int, callback: Callable[[dict], None] | None) -> None:
        """Call `callback(warmup_verdict)` once `processes` warm-up summaries were read."""
        self._warmup_processes, self._on_warmup = processes, callback

    def _warmup_line(self, payload: str) -> None:
        try:
            self.warmup.append(json.loads(payload))
        except ValueError:
            self.warmup.append(None)
        summaries = [w for w in self.warmup if w]
        if len(self.warmup) == self._warmup_processes and summaries and self._on_warmup:
            try:  # the caller's report must not stop this thread reading Locust's output
                self._on_warmup(warmup_verdict(summaries))
            except Exception as e:
                self.lines.append(f"warm-up health callback failed: {e!r}")

    def follow(self, proc: subprocess.Popen) -> None:
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        if proc.stdout is None:
            raise LoadgenError("locust was started without a stdout pipe")
        for raw in proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if line.startswith(START_MARKER):
                self.started_ns = int(line.split()[1])
                self.started.set()
            elif line.startswith(WARMUP_MARKER):
                self._warmup_line(line[len(WARMUP_MARKER) :])
            elif line.startswith(STOP_MARKER):
                self._stop_line(line[len(STOP_MARKER) :].strip())
            self.lines.append(line)
            self.log.write(line + "\n")
        self.started.set()  # EOF: wake a waiter even without the marker

    def _stop_line(self, payload: str) -> None:
        """The error guard's verdict: the first that parses. A worker and then the master each
        print one; the text is kept as the reason only while no line has parsed (a line that
        another process's output broke, as once seen with two workers, is not the verdict)."""
        if self.stopped_early is not None and "requests" in self.stopped_early:
            return
        try:
            verdict, _ = json.JSONDecoder().raw_decode(payload)
        except ValueError:
            verdict = None
        if isinstance(verdict, dict) and "requests" in verdict:
            self.stopped_early = verdict
        elif self.stopped_early is None:
            self.stopped_early = {"reason": payload}

    def wait_for_start(self, proc: subprocess.Popen, deadline: float) -> int:
        self.started.wait(timeout=max(0.0, deadline - time.monotonic()))
        if self.started_ns is None:
            state = (
                f"exited with {proc.poll()}" if proc.poll() is not None else "did not start in time"
            )
            raise LoadgenError(f"locust {state}\n{self.tail()}")
        return self.started_ns

    def tail(self) -> str:
        return "\n".join(self.lines)

    def close(self) -> None:
        if self.thread is not None:
            self.thread.join(timeout=5.0)
        self.log.close()
