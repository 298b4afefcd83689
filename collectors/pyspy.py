"""Record stack samples of a process tree with py-spy and classify them by code region.

What: `PySpyRecorder(root_pid, collect_dir, rate_hz, nice=0)` runs one
`py-spy record --pid ROOT --subprocesses --idle --nonblocking --rate N --format chrometrace`
(py-spy follows children that appear later: vLLM's EngineCore and workers, the engine's TP
ranks; each process is sampled at `rate_hz`). `stop()` sends SIGINT (py-spy then writes its
trace), converts the trace to `stacks-<root>.parquet` (collectors/chrometrace.py) and keeps the raw
trace beside it (`pyspy-<root>.json`, viewable in Perfetto).
Why these flags: `--idle` keeps samples of waiting threads, so per-window shares have a
denominator; `--nonblocking` reads the target's memory without stopping it (no pause of the
engine per sample, at the price of an occasional torn stack); chrometrace is the only output of
py-spy 0.4.3 with times.
py-spy needs ptrace rights over the target (root, or CAP_SYS_PTRACE, or ptrace_scope 0); when it
is missing or cannot attach, the recorder says so in its status and the run goes on.
Why py-spy runs at OBSERVER_NICE when the engine has CPUs of its own (`nice`, set by the flow):
on the CPUs left it shares only with the load generator, and a late sample costs nothing (each
has its own time) while a late token read is a latency the engine did not make. On the 2-core
box a vLLM run's py-spy (four processes at 100 Hz) took 54 % of the one CPU left to spikelens and
Locust 8 %; Locust read 2-10 % of its first tokens late (docs/benchmarks.md, "py-spy below the
load generator"). At nice 10, CFS gives py-spy a weight of 110 against Locust's 1024 and wakes
Locust first, but only within one session where the kernel groups tasks by session: so py-spy
niced also leads a session and autogroup of its own at that nice (`_own_autogroup`). Where
py-spy shares the engine's CPUs it keeps the flow's priority: there a busy engine would take its
CPU, and its samples, exactly when they matter.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.chrometrace import read_chrometrace

# How far below the flow's priority py-spy runs beside an engine on CPUs of its own (see the
# module docstring); nice 19 is the floor.
OBSERVER_NICE = 10


def observer_preexec(then: Callable[[], None] | None, nice: int) -> Callable[[], None] | None:
    """preexec_fn of py-spy: `then` (e.g. die with the parent), and `nice` below the priority it
    started with (capped at 19; lowering a priority needs no right). `then` itself when `nice`
    is 0."""
    if not nice:
        return then

    def preexec() -> None:
        if then is not None:
            then()
        lowered = min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice)
        os.setpriority(os.PRIO_PROCESS, 0, lowered)
        _own_autogroup(lowered)

    return preexec


def _own_autogroup(nice: int) -> None:
    """Put the calling process in a session of its own and give that session's autogroup `nice`.
    Where the kernel groups tasks by session (sched_autogroup_enabled), a process' nice weighs
    it only against its own session's tasks; across sessions each autogroup weighs as one task
    at the autogroup's nice. Locust has a session of its own (loadgen.runner), so py-spy
    reniced inside the flow's session still took CPU from it as a nice-0 peer
    (docs/benchmarks.md, "py-spy below the load generator"). No autogroups: the nice above is
    all there is, and the write fails harmlessly."""
    os.setsid()
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass


def find_py_spy() -> str | None:
    """py-spy beside this interpreter (the venv's bin), else on PATH."""
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.is_file() else shutil.which("py-spy")


class PySpyRecorder:
    def __init__(
        self,
        root_pid: int,
        collect_dir: str | Path,
        rate_hz: int = 100,
        py_spy: str | None = None,
        preexec_fn: Callable[[], None] | None = None,
        nice: int = 0,
    ):
        if not 1 <= rate_hz <= 1000:
            raise ValueError(f"py-spy rate_hz must be in [1, 1000], got {rate_hz!r}")
        self.root_pid, self.rate_hz = root_pid, rate_hz
        self.collect_dir = Path(collect_dir)
        self.py_spy = py_spy or find_py_spy()
        self.preexec_fn = preexec_fn
        self.nice = nice  # how far below the caller's priority py-spy runs (module docstring)
        self.trace_path = self.collect_dir / f"pyspy-{root_pid}.json"
        self.stacks_path = self.collect_dir / f"stacks-{root_pid}.parquet"
        self.proc: subprocess.Popen | None = None
        self.origin_ns = 0
        self.status: dict = {"rate_hz": rate_hz, "root_pid": root_pid, "nice": nice}

    def start(self) -> PySpyRecorder:
        if self.py_spy is None:
            self.status["error"] = "py-spy not found (pip install py-spy)"
            return self
        self.collect_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            self.py_spy,
            "record",
            "--pid",
            str(self.root_pid),
            "--rate",
            str(self.rate_hz),
            "--subprocesses",
            "--idle",
            "--nonblocking",
            "--full-filenames",
            "--format",
            "chrometrace",
            "-o",
            str(self.trace_path),
        ]
        with open(self.collect_dir / "pyspy.log", "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=observer_preexec(self.preexec_fn, self.nice),
            )
            # py-spy's ts 0 is taken first thing in `record`, just after its exec (Popen returns
            # once the exec succeeded)
            self.origin_ns = time.time_ns()
        self.status["origin_ns"] = self.origin_ns
        return self

    def stop(self, role_of: Callable[[int], str] | None = None, timeout_s: float = 30.0) -> dict:
        """SIGINT py-spy, wait for its trace, write stacks-<root>.parquet (each row's role from
        `role_of(pid)`); returns the status."""
        if self.proc is None:
            return self.status
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.status["returncode"] = self.proc.returncode
        if not self.trace_path.is_file():
            self.status["error"] = (
                f"py-spy exited with {self.proc.returncode} and wrote no trace (see pyspy.log)"
            )
            return self.status
        try:
            table = read_chrometrace(self.trace_path, self.origin_ns)
        except ValueError as exc:
            self.status["error"] = str(exc)
            return self.status
        if role_of is not None:
            roles = [role_of(pid) for pid in table.column("pid").to_pylist()]
            table = table.set_column(
                table.schema.get_field_index("role"), "role", pa.array(roles, pa.string())
            )
        pq.write_table(table, self.stacks_path)
        self.status.update(
            segments=table.num_rows, pids=sorted(set(table.column("pid").to_pylist()))
        )
        return self.status
