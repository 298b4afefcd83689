"""`spikelens agent`: the collectors beside a production engine, served as a Prometheus exporter.

What: `Agent(AgentOptions(pid=… or match=…)).start()` finds the engine's root process(es) and
runs, until `stop()`:
- a /proc thread: every `interval_s`, lists each root's tree (collectors/process_tree.py) and
  sets each process's cumulative counters (collectors/proc_sampler.py `read_process`);
- a GC thread: tails every `gc-*.jsonl` the GC hook (collectors/site/sitecustomize.py) writes in
  `gc_dir`, remembering a byte offset per file and parsing complete lines only; one histogram
  observation per row, a malformed line is counted in `errors_total{collector="gc"}`;
- a py-spy thread (`stacks_hz` > 0): `py-spy record --pid ROOT --subprocesses --idle
  --nonblocking --duration S` in consecutive segments of `stacks_segment_s`, each finished
  segment's sampled thread-seconds added per (pid, region) (collectors/chrometrace.py);
- an HTTP server answering `GET /metrics` with collectors/agent_metrics.py's text, 404 elsewhere.
Why: in production nobody starts the engine for spikelens; Prometheus scrapes this agent beside
the engine and `spikelens incident --prometheus` reads the series back.
Roots: `pid`, or every process whose joined /proc cmdline matches the regex `match` and that is
not a descendant of another match (the agent itself and its ancestors, whose command lines hold
the regex, are never matches). No root at start: `AgentError`, one line. A root that exits: its
series stay served (one log line); with `match`, the agent keeps looking for a new one.
No orphan: each py-spy segment ends by itself after `stacks_segment_s` (`--duration`), and
`stop()` interrupts the running one.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil

from collectors.agent_metrics import CONTENT_TYPE, AgentMetrics, gc_observation
from collectors.chrometrace import read_chrometrace
from collectors.proc_sampler import read_process
from collectors.process_tree import ProcessTree
from collectors.pyspy import find_py_spy
from collectors.roles import read_cmdline

ROOT_ROLE = "engine"  # the launcher's word for a root (the GC hook's SPIKELENS_COLLECT_ROLE)
_RESCAN_IDLE_S, _RESCAN_S = 1.0, 10.0  # `match`: look for roots again (none alive / some alive)
_ATTACHED_S = 1.0  # a py-spy segment alive this long has attached
_MAX_READ = 16 << 20  # bytes of one GC file read per tick (the rest waits for the next tick)


class AgentError(RuntimeError):
    """The agent cannot start (no root process, port taken): one line for the user."""


class AgentOptionError(ValueError):
    """A bad option: `field` (the AgentOptions field) and `rule` (what it must be, got what)."""

    def __init__(self, field: str, rule: str):
        super().__init__(f"{field} {rule}")
        self.field, self.rule = field, rule


@dataclass(frozen=True)
class AgentOptions:
    pid: int | None = None  # the engine's root process …
    match: str | None = None  # … or a regex over each process's joined /proc cmdline
    port: int = 9464  # where /metrics is served
    host: str = "127.0.0.1"
    gc_dir: Path | None = None  # where the engine's GC hook writes gc-<pid>.jsonl; None: no GC
    interval_s: float = 1.0  # /proc sampling and GC file polling period
    stacks_hz: int = 10  # py-spy samples per second and process; 0: no stacks
    stacks_segment_s: float = 10.0  # one py-spy recording, whole seconds (its --duration)

    def __post_init__(self) -> None:
        if (self.pid is None) == (self.match is None):
            raise AgentOptionError("pid/match", "must be given, exactly one of them")
        if self.pid is not None and (not _is_int(self.pid) or self.pid <= 0):
            raise AgentOptionError("pid", f"must be a positive process id, got {self.pid!r}")
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise AgentOptionError(
                    "match", f"must be a valid regular expression, got {self.match!r}: {exc}"
                ) from None
        if not self.host:
            raise AgentOptionError("host", "must be an address to bind, got ''")
        if self.gc_dir is not None:
            object.__setattr__(self, "gc_dir", Path(self.gc_dir))
        for name, lo, hi, unit in (
            ("port", 1, 65535, ""),
            ("interval_s", 0.05, 60.0, " s"),
            ("stacks_hz", 0, 1000, " Hz"),
            ("stacks_segment_s", 1.0, 600.0, " s"),
        ):
            value = getattr(self, name)
            integral = isinstance(lo, int)
            ok = _is_int(value) if integral else _is_number(value)
            if not ok or not lo <= value <= hi:
                raise AgentOptionError(name, f"must be in [{lo}, {hi}]{unit}, got {value!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def find_roots(pattern: str, exclude: set[int]) -> list[int]:
    """Pids whose joined cmdline matches `pattern` and that descend from no other match."""
    regex = re.compile(pattern)
    parents: dict[int, int] = {}
    matches = set()
    for proc in psutil.process_iter(["ppid"]):
        parents[proc.pid] = proc.info["ppid"] or 0
        if proc.pid in exclude:
            continue
        argv = read_cmdline(proc.pid)
        if argv and regex.search(" ".join(argv)):
            matches.add(proc.pid)

    def under_another(pid: int) -> bool:
        seen, parent = {pid}, parents.get(pid, 0)
        while parent > 1 and parent not in seen:
            if parent in matches:
                return True
            seen.add(parent)
            parent = parents.get(parent, 0)
        return False

    return sorted(pid for pid in matches if not under_another(pid))


def _self_and_ancestors() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents())}


class _MetricsHandler(BaseHTTPRequestHandler):
    """GET /metrics: the exposition text; anything else 404. No access log."""

    server: _MetricsServer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404, "only /metrics is served here")
            return
        body = self.server.metrics.render().encode()
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: AgentMetrics):
        self.metrics = metrics
        super().__init__(address, _MetricsHandler)


@dataclass
class _Segment:
    """One py-spy recording of one root's tree."""

    root: int
    proc: subprocess.Popen
    trace: Path
    log: Path
    started: float


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Agent:
    """The exporter: `start()` (AgentError when there is no root or the port is taken), `url`,
    `describe()` (one line for the user), `stop()`. `log` receives one line per change of
    state (a root gone or found, a collector failing or back)."""

    def __init__(
        self,
        options: AgentOptions,
        log: Callable[[str], None] = _stderr_line,
        py_spy: str | None = None,
    ):
        self.options, self.log = options, log
        self.metrics = AgentMetrics()
        self.py_spy = py_spy or find_py_spy()
        self.notes: dict[str, str] = {}  # collector → why it is off or failing (for the user)
        self._trees: dict[int, ProcessTree] = {}
        self._trees_lock = threading.Lock()
        self._offsets: dict[Path, int] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: _MetricsServer | None = None
        self._segments: list[_Segment] = []
        self._workdir: Path | None = None
        self._last_scan = 0.0

    @property
    def url(self) -> str:
        """Where /metrics is served (an IPv6 host in brackets)."""
        host = self.options.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.options.port}/metrics"

    def roots(self) -> list[int]:
        with self._trees_lock:
            return sorted(self._trees)

    def start(self) -> Agent:
        """Find the roots (AgentError when none), take a first reading, bind, start threads."""
        for pid in self._initial_roots():
            self._trees[pid] = ProcessTree(pid, ROOT_ROLE)
        self._proc_tick()
        self._gc_tick(first=True)
        try:
            self._server = _MetricsServer((self.options.host, self.options.port), self.metrics)
        except OSError as exc:
            raise AgentError(
                f"cannot serve on {self.options.host}:{self.options.port}: {exc.strerror or exc}"
            ) from None
        self._spawn("agent-http", self._server.serve_forever)
        self._spawn("agent-proc", self._loop(self._proc_tick))
        self._spawn("agent-gc", self._loop(self._gc_tick))
        if self._stacks_possible():
            self._workdir = Path(tempfile.mkdtemp(prefix="spikelens-agent-"))
            self._spawn("agent-stacks", self._stacks_loop)
        return self

    def _initial_roots(self) -> list[int]:
        opts = self.options
        if opts.pid is not None:
            if read_process(opts.pid) is None:
                raise AgentError(f"no process with pid {opts.pid}")
            return [opts.pid]
        assert opts.match is not None
        self._last_scan = time.monotonic()
        roots = find_roots(opts.match, _self_and_ancestors())
        if not roots:
            raise AgentError(f"no running process's command line matches {opts.match!r}")
        return roots

    def _spawn(self, name: str, target: Callable[[], object]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _loop(self, tick: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self._stop.wait(self.options.interval_s):
                tick()

        return run

    def stop(self) -> None:
        """Stop every thread and the server; the running py-spy segment is interrupted."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=10)
        for segment in self._segments:  # the stacks thread ends them; this is the safety net
            _end(segment.proc)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> Agent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> str:
        """One line: where it serves, for which roots, and the state of each collector."""
        states = []
        for collector in ("proc", "gc", "stacks"):
            note = self.notes.get(collector)
            if note:
                states.append(f"{collector} down ({note})")
            elif self.metrics.up(collector):
                states.append(f"{collector} up")
            elif collector == "stacks" and self._workdir is not None:
                hz, seconds = self.options.stacks_hz, self.options.stacks_segment_s
                states.append(f"stacks starting ({hz} Hz, first figures after {seconds:g} s)")
            else:
                states.append(f"{collector} down")
        roots = ", ".join(str(pid) for pid in self.roots()) or "none"
        return f"serving {self.url} for root pid {roots}: {'; '.join(states)}"

    # --- /proc -----------------------------------------------------------------------------

    def _proc_tick(self) -> None:
        """Refresh every root's tree, set each live process's counters, drop exited roots."""
        sampled = 0
        with self._trees_lock:
            trees = dict(self._trees)
        for root, tree in trees.items():
            pids = tree.refresh()
            if not pids:
                self._forget_root(root)
            for pid in pids:
                row = read_process(pid)
                if row is not None:
                    self.metrics.set_process(pid, row["ppid"], tree.role(pid), row)
                    sampled += 1
        self.metrics.set_up("proc", sampled > 0)
        if self.options.match is not None:
            self._rescan()

    def _forget_root(self, root: int) -> None:
        with self._trees_lock:
            del self._trees[root]
            left = bool(self._trees)
        looking = "; looking for a new match" if self.options.match and not left else ""
        self.log(f"agent: root pid {root} exited; its last values stay served{looking}")

    def _rescan(self) -> None:
        """`match`: add roots that appeared (a restarted engine), at most every few seconds."""
        assert self.options.match is not None
        period = _RESCAN_S if self.roots() else _RESCAN_IDLE_S
        if time.monotonic() - self._last_scan < period:
            return
        self._last_scan = time.monotonic()
        tracked = set(self.roots())
        for pid in find_roots(self.options.match, _self_and_ancestors()):
            tree = ProcessTree(pid, ROOT_ROLE)
            if pid in tracked or not tree.refresh():
                continue
            with self._trees_lock:
                if any(pid in t.roles for t in self._trees.values()):
                    continue  # a descendant of a tracked root
                self._trees[pid] = tree
            self.log(f"agent: now following root pid {pid}")

    # --- GC hook files ---------------------------------------------------------------------

    def _gc_tick(self, first: bool = False) -> None:
        """Read the new complete lines of every gc-*.jsonl. At the first look, files of
        processes already gone are an earlier engine's history and are skipped."""
        gc_dir = self.options.gc_dir
        if gc_dir is None:
            self.notes["gc"] = "off"
            return
        try:
            paths = sorted(gc_dir.glob("gc-*.jsonl")) if gc_dir.is_dir() else None
        except OSError:
            paths = None
        if paths is None:
            self._gc_down(f"no folder {gc_dir} (see `spikelens agent --print-env`)")
            return
        if self.notes.pop("gc", None) is not None and not first:
            self.log(f"agent: gc: reading {gc_dir}")
        for path in paths:
            if path not in self._offsets:
                self._offsets[path] = _size(path) if first and not _alive(path) else 0
            self._read_gc_file(path)
        self.metrics.set_up("gc", True)

    def _gc_down(self, note: str) -> None:
        if self.notes.get("gc") != note:
            self.log(f"agent: gc: {note}")
        self.notes["gc"] = note
        self.metrics.set_up("gc", False)

    def _read_gc_file(self, path: Path) -> None:
        offset = self._offsets[path]
        try:
            if path.stat().st_size < offset:  # replaced (a reused pid): read it again
                offset = 0
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(_MAX_READ)
        except OSError:
            return  # removed between listing and reading
        end = data.rfind(b"\n") + 1  # complete lines only: a writer may be mid-line
        self._offsets[path] = offset + end
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                self.metrics.observe_gc(gc_observation(json.loads(line)))
            except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                self.metrics.add_error("gc")

    # --- py-spy ----------------------------------------------------------------------------

    def _stacks_possible(self) -> bool:
        if self.options.stacks_hz == 0:
            self.notes["stacks"] = "off"
            return False
        if self.py_spy is None:
            self.notes["stacks"] = "py-spy not found (pip install py-spy)"
            self.log(f"agent: stacks: {self.notes['stacks']}")
            return False
        return True

    def _stacks_loop(self) -> None:
        """Consecutive py-spy segments of every live root; a failing segment waits out the rest
        of its period so a refused attach does not spin."""
        n = 0
        while not self._stop.is_set():
            roots = self.roots()
            if not roots:
                self.metrics.set_up("stacks", False)
                self._stop.wait(self.options.interval_s)
                continue
            started = time.monotonic()
            self._segments = [self._start_segment(root, n) for root in roots]
            n += 1
            if not self._wait_segments():
                break
            ok = [self._finish_segment(segment) for segment in self._segments]
            self._segments = []
            self.metrics.set_up("stacks", all(ok))
            if not all(ok):
                self._stop.wait(
                    max(0.0, self.options.stacks_segment_s - time.monotonic() + started)
                )
        for segment in self._segments:
            _end(segment.proc)

    def _start_segment(self, root: int, n: int) -> _Segment:
        assert self._workdir is not None and self.py_spy is not None
        opts = self.options
        trace, log = self._workdir / f"pyspy-{root}-{n}.json", self._workdir / f"pyspy-{root}.log"
        cmd = [self.py_spy, "record", "--pid", str(root), "--subprocesses", "--idle"]
        cmd += ["--nonblocking", "--rate", str(opts.stacks_hz), "--format", "chrometrace"]
        cmd += ["--duration", str(round(opts.stacks_segment_s)), "-o", str(trace)]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return _Segment(root, proc, trace, log, time.monotonic())

    def _wait_segments(self) -> bool:
        """Wait for every running segment to end; False when the agent is stopping. py-spy
        still recording after a second has attached (a refused attach exits at once): stacks
        are up from then, not only after the first segment's figures."""
        while any(s.proc.poll() is None for s in self._segments):
            if self._stop.wait(0.1):
                return False
            if "stacks" not in self.notes and all(
                s.proc.poll() is None and time.monotonic() - s.started > _ATTACHED_S
                for s in self._segments
            ):
                self.metrics.set_up("stacks", True)
        return True

    def _finish_segment(self, segment: _Segment) -> bool:
        """Add a finished segment's thread-seconds per (pid, region); False when it failed."""
        try:
            table = read_chrometrace(segment.trace, 0) if segment.trace.is_file() else None
        except ValueError as exc:
            return self._stacks_failed(segment, str(exc))
        if table is None:
            return self._stacks_failed(segment, _last_line(segment.log))
        segment.trace.unlink(missing_ok=True)
        seconds: dict[tuple[int, str], float] = {}
        cols = table.select(["pid", "region", "start_ns", "end_ns"]).to_pydict()
        for pid, region, start, end in zip(
            cols["pid"], cols["region"], cols["start_ns"], cols["end_ns"]
        ):
            seconds[(pid, region)] = seconds.get((pid, region), 0.0) + (end - start) / 1e9
        role = self._role_lookup(segment.root)
        for (pid, region), value in seconds.items():
            self.metrics.add_stack_seconds(pid, role(pid), region, value)
        if self.notes.pop("stacks", None) is not None:
            self.log("agent: stacks: py-spy records again")
        return True

    def _stacks_failed(self, segment: _Segment, why: str) -> bool:
        self.metrics.add_error("stacks")
        if segment.root not in self.roots():
            return True  # the root exited during the segment: not py-spy's failure
        note = f"py-spy failed on pid {segment.root} (exit {segment.proc.returncode}): {why}"
        if self.notes.get("stacks") is None:
            self.log(f"agent: stacks: {note}")
        self.notes["stacks"] = note
        return False

    def _role_lookup(self, root: int) -> Callable[[int], str]:
        with self._trees_lock:
            tree = self._trees.get(root)
        return tree.role if tree is not None else lambda pid: f"{ROOT_ROLE}:child"


def _end(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Interrupt a py-spy (SIGINT: it writes its trace and exits), kill it if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _alive(path: Path) -> bool:
    """Whether the process of a gc-<pid>.jsonl file is running now."""
    pid = path.stem.removeprefix("gc-")
    return pid.isdigit() and psutil.pid_exists(int(pid))


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return "no output"
    lines = [line for line in lines if line]
    return lines[-1] if lines else "no output"
