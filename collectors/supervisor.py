"""`CollectorSet`: start and stop every outside-in collector of one engine process tree.

What: for a root pid (spikelens' engine server, or vLLM's API server) and its descendants as
they appear, runs py-spy (stacks-<root>.parquet), the /proc sampler (proc-<root>.parquet) and,
given a URL, the /metrics scraper (metrics.parquet), all under `<run_dir>/collect/` except the
metrics file; `stop()` stops them in reverse order, each writing its last rows, and writes
`collect/collectors-<root>.json` (what ran, rows written, errors). The GC hook is not started
here: it runs inside the engine's processes, put there by the launcher (`collectors.hook_env`),
and writes `collect/gc-<pid>.jsonl` itself.
Why one object: the flows start it right after the engine is up and stop it before the engine
stops, whatever engine it is; a collector that fails is recorded and the run goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from collectors.options import CollectorOptions
from collectors.proc_sampler import ProcSampler
from collectors.process_tree import ProcessTree
from collectors.pyspy import PySpyRecorder
from spikelens_common.metrics_scraper import MetricsScraper

COLLECT_DIR = "collect"


def collect_dir(run_dir: str | Path) -> Path:
    """Where the collectors (and the GC hook) write in a run directory."""
    return Path(run_dir) / COLLECT_DIR


class CollectorSet:
    def __init__(
        self,
        run_dir: str | Path,
        root_pid: int,
        role: str,
        metrics_url: str | None = None,
        options: CollectorOptions | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ):
        if not isinstance(root_pid, int) or root_pid <= 0:
            raise ValueError(f"collectors root_pid must be a positive pid, got {root_pid!r}")
        self.run_dir, self.root_pid, self.role = Path(run_dir), root_pid, role
        self.dir = collect_dir(run_dir)
        self.metrics_url = metrics_url
        self.options = options or CollectorOptions()
        self.preexec_fn = preexec_fn
        self.tree = ProcessTree(root_pid, role)
        self.pyspy: PySpyRecorder | None = None
        self.proc: ProcSampler | None = None
        self.metrics: MetricsScraper | None = None
        self.status: dict = {"root_pid": root_pid, "role": role, "errors": []}

    def start(self) -> CollectorSet:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.status["started_ns"] = time.time_ns()
        self.tree.refresh()
        if self.options.pyspy:
            self.pyspy = PySpyRecorder(
                self.root_pid,
                self.dir,
                self.options.pyspy_rate_hz,
                preexec_fn=self.preexec_fn,
                nice=self.options.pyspy_nice,
            ).start()
        self.proc = ProcSampler(
            self.tree,
            self.dir / f"proc-{self.root_pid}.parquet",
            self.options.proc_interval_s,
            self.options.tree_refresh_s,
            cpu_out_path=self.dir / f"cpu-{self.root_pid}.parquet",
        ).start()
        if self.metrics_url:
            self.metrics = MetricsScraper(
                self.metrics_url, self.run_dir / "metrics.parquet", self.options.metrics_interval_s
            ).start()
        return self

    def _stop_one(self, name: str, stop: Callable[[], object]) -> None:
        try:
            self.status[name] = stop()
        except Exception as exc:
            self.status["errors"].append(f"{name}: {type(exc).__name__}: {exc}")

    def stop(self) -> dict:
        """Stop every collector (last rows written); returns and writes the status."""
        metrics, proc, pyspy = self.metrics, self.proc, self.pyspy
        if metrics is not None:
            self._stop_one(
                "metrics",
                lambda: {
                    "rows": metrics.stop(),
                    "scrapes": metrics.scrapes,
                    "errors": metrics.errors,
                    "last_error": metrics.last_error,
                },
            )
        if proc is not None:
            self._stop_one(
                "proc",
                lambda: {
                    "rows": proc.stop(),
                    "ticks": proc.ticks,
                    "cpu_rows": len(proc.cpu_rows),
                    "cpu_error": proc.cpu_error,
                },
            )
        if pyspy is not None:
            self.tree.refresh()
            self._stop_one("pyspy", lambda: pyspy.stop(self.tree.role))
            if "error" in pyspy.status:
                self.status["errors"].append(f"pyspy: {pyspy.status['error']}")
        self.status["stopped_ns"] = time.time_ns()
        self.status["roles"] = {str(pid): role for pid, role in sorted(self.tree.roles.items())}
        (self.dir / f"collectors-{self.root_pid}.json").write_text(
            json.dumps(self.status, indent=1, default=str)
        )
        return self.status

    def __enter__(self) -> CollectorSet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
