"""spikelens' GC hook: time every garbage collection of this process into the run directory.

What: on interpreter start (Python imports `sitecustomize` from the path), when
SPIKELENS_COLLECT_DIR names a directory, a `gc.callbacks` hook times each collection (start and
stop on the wall clock, generation, objects collected and uncollectable, the thread) and appends
one JSON line per collection to `<dir>/gc-<pid>.jsonl`, with the process's pid, parent pid and
role. Without the variable it does nothing but chain.
Why: GC pauses are measured from inside every process of an engine's tree (spikelens' engine,
vLLM's API server, engine core and workers) without trusting the engine to report them.
How it stays cheap and survives a kill: rows are buffered and written with one `os.write` to an
O_APPEND descriptor when 256 are buffered or the oldest is 100 ms old (checked at each
collection), at exit, and before a fork; so a SIGKILLed process loses at most the rows of its
last 100 ms, and a truncated last line is the only damage a reader can meet.
Role: the launcher names the root (SPIKELENS_COLLECT_ROLE, read only in the process whose pid is
SPIKELENS_COLLECT_ROOT_PID or, when unset, the first process that loads the hook); descendants
are named from their title/argv by `collectors/roles.py` (loaded by path: this file must not need
spikelens on the path). The role is read again at each write, because vLLM retitles a process
(setproctitle) after it started.
Children: multiprocessing spawn and forkserver children start a fresh interpreter with the same
environment, so they load this hook too; fork children keep it and re-open their own file.
Faults: the hook only measures. When SPIKELENS_FAULT_HOOK names a file (set by the launcher only
for a run with process faults: injectors/process_faults.py), it loads that file by path and calls
its `start(roles)`, which starts the fault's own thread (injectors/process_churn.py). Without the
variable nothing else is loaded and no thread is started.
GC off: SPIKELENS_GC_OFF=1 (set only for `spikelens confirm`'s memory/GC arm) freezes what exists
and disables automatic collection in the process; nothing else changes.
Chaining: this directory shadows any other `sitecustomize` (a virtualenv's or the distribution's),
so the next one on sys.path is found and executed after the hook is installed.
"""

import os
import sys

_DIR_ENV, _ROLE_ENV, _ROOT_ENV = (
    "SPIKELENS_COLLECT_DIR",
    "SPIKELENS_COLLECT_ROLE",
    "SPIKELENS_COLLECT_ROOT_PID",
)
_HERE = os.path.dirname(os.path.abspath(__file__))
_MAX_ROWS, _MAX_AGE_NS = 256, 100_000_000


def _load_roles():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_spikelens_roles", os.path.join(os.path.dirname(_HERE), "roles.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _GcRecorder:
    """Buffers one row per collection and appends them as JSON lines to this process's file."""

    def __init__(self, out_dir, roles):
        import gc
        import json
        import threading
        import time

        self._gc, self._json, self._threading, self._time = gc, json, threading, time
        self.out_dir, self.roles = out_dir, roles
        self.rows, self.fd, self.pid = [], None, None
        self.start_ns = self.oldest_ns = 0
        self._open()

    def _open(self):
        self.pid = os.getpid()
        self.rows = []
        path = os.path.join(self.out_dir, f"gc-{self.pid}.jsonl")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _role(self):
        root = os.environ.get(_ROOT_ENV)
        is_root = root is None or root == str(self.pid)
        return self.roles.role_of(self.roles.read_cmdline(), is_root, os.environ.get(_ROLE_ENV))

    def callback(self, phase, info):
        now = self._time.time_ns()
        if phase == "start":
            self.start_ns = now
            return
        if not self.rows:
            self.oldest_ns = now
        self.rows.append(
            (
                self.start_ns,
                now,
                info.get("generation"),
                info.get("collected"),
                info.get("uncollectable"),
                self._threading.get_native_id(),
            )
        )
        if len(self.rows) >= _MAX_ROWS or now - self.oldest_ns >= _MAX_AGE_NS:
            self.flush()

    def flush(self):
        if not self.rows or self.fd is None:
            return
        rows, self.rows = self.rows, []
        role, ppid = self._role(), os.getppid()
        lines = [
            self._json.dumps(
                {
                    "pid": self.pid,
                    "ppid": ppid,
                    "tid": tid,
                    "role": role,
                    "start_ns": s,
                    "end_ns": e,
                    "generation": g,
                    "collected": c,
                    "uncollectable": u,
                }
            )
            for s, e, g, c, u, tid in rows
        ]
        try:
            os.write(self.fd, ("\n".join(lines) + "\n").encode())
        except OSError:
            pass  # a full disk must not break the engine

    def after_fork_in_child(self):
        try:
            os.close(self.fd)
        except OSError:
            pass
        self._open()


def _install():
    out_dir = os.environ.get(_DIR_ENV)
    if not out_dir or not os.path.isdir(out_dir):
        return None
    import atexit
    import gc

    os.environ.setdefault(_ROOT_ENV, str(os.getpid()))
    recorder = _GcRecorder(out_dir, _load_roles())
    gc.callbacks.append(recorder.callback)
    atexit.register(recorder.flush)
    os.register_at_fork(before=recorder.flush, after_in_child=recorder.after_fork_in_child)
    return recorder


def _start_faults():
    """Load the fault module named by SPIKELENS_FAULT_HOOK (injectors/process_churn.py, set by
    the launcher only for a run with process faults) by path and start it; None without it."""
    path = os.environ.get("SPIKELENS_FAULT_HOOK")
    if not path:
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location("_spikelens_fault_hook", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.start(_load_roles())


def _chain():
    """Execute the next `sitecustomize` on sys.path (the one this directory shadows), if any."""
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _gc_off():
    """SPIKELENS_GC_OFF=1 (collectors.gc_hook.GC_OFF_ENV, `spikelens confirm`'s memory/GC
    intervention): what exists now is frozen and automatic collection is off for the process's
    life; explicit gc.collect() calls still run (and the recorder still times them)."""
    if os.environ.get("SPIKELENS_GC_OFF") == "1":
        import gc

        gc.freeze()
        gc.disable()


try:
    _gc_off()
    _recorder = _install()
except Exception as exc:  # the hook must never stop the process it observes
    _recorder = None
    sys.stderr.write(f"spikelens gc hook disabled: {type(exc).__name__}: {exc}\n")
try:
    _fault_thread = _start_faults()
except Exception as exc:
    _fault_thread = None
    sys.stderr.write(f"spikelens fault schedule disabled: {type(exc).__name__}: {exc}\n")
_chain()
