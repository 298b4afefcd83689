"""`host.cpu_contention`: busy-loop processes on the engine's CPUs for the fault window.

What: on the flow's fault clock (armed at load start) a timer thread starts `processes` hog
processes (each a bare `while True: pass` interpreter; default one per CPU the engine may run on),
pins each with `os.sched_setaffinity` to the CPUs the engine's root process may use (its
affinity mask, which its children inherit), and kills them at the window's end; `stop` (flow
teardown) kills any still running. The engine's processes then wait for a CPU: contention from
outside the engine, for any engine spikelens starts.
The hogs write nothing; the collectors' /proc sampler watches only the engine's tree. Ground
truth: `arm` writes the windows to `faults.host.parquet` (cause `host`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from spikelens_common.fault_catalogue import CATALOGUE, Applier, build_params
from spikelens_common.fault_params import CpuContentionParams
from spikelens_common.ground_truth import (
    GROUND_TRUTH_FILES,
    Scheduled,
    scheduled_windows,
    write_windows,
)

KIND = "host.cpu_contention"
GROUND_TRUTH_FILE = GROUND_TRUTH_FILES["hogs"]
_HOG = "while True: pass"


def make_params(values: dict | None) -> CpuContentionParams:
    """Params from a scenario mapping; unknown keys raise naming the key."""
    return build_params(KIND, Applier.HOGS, values)


class CpuContention:
    """The hog supervisor of one run, for its host.cpu_contention faults (the flows route only
    those here): `arm(t0_ns)` at load start, `stop()` at teardown."""

    def __init__(self, faults: list[dict], engine_pid: int, run_dir: str | Path, duration_s: float):
        for f in faults:
            if f["kind"] != KIND:
                raise ValueError(f"the hogs apply {KIND} only, got {f['kind']!r}")
        self.windows = [
            (float(f["start_s"]), float(f["duration_s"]), make_params(f.get("params")))
            for f in faults
        ]
        self.engine_pid, self.run_dir, self.duration_s = engine_pid, Path(run_dir), duration_s
        self.hogs: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self, t0_ns: int) -> None:
        if not self.windows:
            return
        self._thread = threading.Thread(
            target=self._run, args=(t0_ns,), name="cpu-contention", daemon=True
        )
        self._thread.start()
        _write_ground_truth(self.windows, t0_ns, self.duration_s, self.run_dir / GROUND_TRUTH_FILE)

    def _run(self, t0_ns: int) -> None:
        t0 = t0_ns / 1e9
        for start_s, duration_s, params in sorted(self.windows, key=lambda w: w[0]):
            if self._stopped.wait(max(0.0, t0 + start_s - time.time())):
                return
            self._start_hogs(params)
            self._stopped.wait(max(0.0, t0 + start_s + duration_s - time.time()))
            self._kill_hogs()
            if self._stopped.is_set():
                return

    def _start_hogs(self, params: CpuContentionParams) -> None:
        try:
            cpus = os.sched_getaffinity(self.engine_pid)
        except OSError:  # the engine is gone: nothing to contend with
            return
        with self._lock:
            if self._stopped.is_set():
                return
            for _ in range(params.processes or len(cpus)):
                hog = subprocess.Popen(
                    [sys.executable, "-S", "-c", _HOG],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    preexec_fn=_die_with_starter,
                )
                os.sched_setaffinity(hog.pid, cpus)
                self.hogs.append(hog)

    def _kill_hogs(self) -> None:
        with self._lock:
            hogs, self.hogs = self.hogs, []
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(timeout=10)

    def stop(self) -> None:
        """Teardown: end the clock and kill every hog still running."""
        self._stopped.set()
        self._kill_hogs()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._kill_hogs()


def _die_with_starter() -> None:
    """preexec_fn: the kernel SIGKILLs the hog when the thread that started it exits (a
    SIGKILLed flow leaves no hog behind). The timer thread outlives every hog it starts."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _write_ground_truth(windows, t0_ns: int, duration_s: float, path: Path) -> None:
    cause = CATALOGUE[KIND].cause
    scheduled = [Scheduled(KIND, cause, s, d, params) for s, d, params in windows]
    write_windows(scheduled_windows(scheduled, t0_ns, duration_s), path)
