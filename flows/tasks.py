"""Prefect tasks: small, typed, one side effect each, retries where a step is transient.

Flows compose these; nothing here knows the order of a run.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NONE

from engine.server.launch import EngineProcess
from flows.manifest import RunManifest
from flows.priority import engine_preexec
from flows.supervisor import die_with_parent
from flows.vllm_config import VllmConfig
from flows.vllm_process import VllmProcess

if TYPE_CHECKING:
    from collectors import CollectorSet
    from loadgen.runner import LocustResult, LocustRunOptions

# The CLI listens on this logger to draw its progress display; Prefect's UI shows task states.
progress = logging.getLogger("spikelens.progress")


@task(name="start-engine", cache_policy=NONE, retries=1, retry_delay_seconds=2)
def start_engine(
    run_id: str,
    engine: dict[str, Any],
    faults: list[dict[str, Any]],
    run_dir: Path,
    gc_off: bool = False,
    nice: int | None = None,
) -> EngineProcess:
    """Start the engine server as a child process, with the collectors' GC hook in it and its
    ranks, and wait until /health answers. `faults`: the engine's own (flows.fault_routing);
    `gc_off`: the hook turns automatic GC off in them (a scenario's intervention.gc_off);
    `nice`: they run at that priority (intervention.nice)."""
    from collectors import collect_dir, hook_env

    progress.info("starting engine (%s)", engine.get("model", "default"))
    handle = EngineProcess(
        {"run_id": run_id, "engine": engine, "faults": faults},
        run_dir,
        startup_timeout_s=180.0,
        preexec_fn=engine_preexec(nice),
        env_hook=lambda env: hook_env(collect_dir(run_dir), "engine", env, gc_off=gc_off),
    ).start()
    progress.info("engine up at %s", handle.url)
    return handle


@task(name="start-vllm", cache_policy=NONE)
def start_vllm(
    config: VllmConfig,
    run_dir: Path,
    env_hook: Callable[[dict[str, str]], dict[str, str]] | None = None,
    nice: int | None = None,
) -> VllmProcess:
    """Start a vLLM server as a supervised child and wait until /health answers. No retry: a
    failed start has already taken minutes, and its log says why. `env_hook` edits the server's
    environment (e.g. the collectors' GC hook); `handle.root_pid` / `handle.tree()` name its
    process tree; `nice`: its processes run at that priority (intervention.nice)."""
    progress.info("starting vLLM (%s)", config.model)
    preexec = engine_preexec(nice)
    handle = VllmProcess(config, run_dir, preexec_fn=preexec, env_hook=env_hook).start()
    progress.info(
        "vLLM %s up at %s after %.0f s",
        handle.build.version if handle.build else "?",
        handle.url,
        handle.startup_s,
    )
    return handle


@task(name="stop-vllm", cache_policy=NONE)
def stop_vllm(handle: VllmProcess) -> int | None:
    """SIGTERM vLLM's API server, then SIGKILL what is left of its tree."""
    progress.info("stopping vLLM")
    return handle.stop()


@task(name="served-model", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def served_model(url: str, api_key: str | None = None) -> str:
    """The model id the requests name: the first one GET /v1/models lists."""
    from loadgen.served_models import served_model as first_model

    return first_model(url, api_key)


@task(name="start-nvml-sampler", cache_policy=NONE)
def start_nvml_sampler(run_dir: Path, interval_ms: int = 100) -> subprocess.Popen:
    """NVML GPU sampler as a child process writing nvml.parquet. Without a GPU it records that
    NVML is unavailable (nvml_status.json) and exits at once: no invented numbers."""
    log = open(run_dir / "nvml_sampler.log", "ab")
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "collectors.nvml_sampler",
                "--run-dir",
                str(run_dir),
                "--interval-ms",
                str(interval_ms),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
    finally:
        log.close()


@task(name="stop-nvml-sampler", cache_policy=NONE)
def stop_nvml_sampler(proc: subprocess.Popen, run_dir: Path) -> dict:
    """SIGTERM the sampler (it writes its last rows) and return nvml_status.json."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    status = run_dir / "nvml_status.json"
    return (
        json.loads(status.read_text())
        if status.is_file()
        else {
            "available": False,
            "reason": f"sampler exited with {proc.returncode} and wrote no status",
        }
    )


@task(name="start-collectors", cache_policy=NONE)
def start_collectors(
    run_dir: Path,
    root_pid: int,
    role: str,
    metrics_url: str | None = None,
    engine_apart: bool = False,
) -> CollectorSet:
    """Outside-in telemetry of an engine's process tree (py-spy stacks, /proc CPU and scheduling,
    /metrics at 4 Hz) into run_dir/collect; the GC hook runs inside the engine (its launcher).
    `engine_apart`: the engine runs on CPUs of its own (flows.affinity), so py-spy, left with the
    load generator, runs below its priority (collectors.pyspy.OBSERVER_NICE)."""
    from collectors import CollectorOptions, CollectorSet
    from collectors.pyspy import OBSERVER_NICE

    progress.info("collectors on pid %d (%s)", root_pid, role)
    options = CollectorOptions(pyspy_nice=OBSERVER_NICE if engine_apart else 0)
    return CollectorSet(
        run_dir, root_pid, role, metrics_url, options=options, preexec_fn=die_with_parent
    ).start()


@task(name="stop-collectors", cache_policy=NONE)
def stop_collectors(handle: CollectorSet) -> dict:
    """Stop the collectors (each writes its last rows); their status goes into run.json."""
    return handle.stop()


@task(name="stop-engine", cache_policy=NONE)
def stop_engine(handle: EngineProcess) -> int | None:
    """SIGTERM the engine (it writes steps/gc/faults files), SIGKILL if it hangs."""
    progress.info("stopping engine")
    return handle.stop()


@task(name="drive-load", cache_policy=NONE)
def drive_load(
    url: str,
    run_dir: Path,
    options: LocustRunOptions,
    on_load_start: Callable[[int], None] | None,
    on_warmup_health: Callable[[dict], None] | None = None,
) -> LocustResult:
    """Run Locust as a subprocess against `url` as `options` say; raw samples land in `run_dir`.

    The runner enforces its own hard deadline (duration + warm-up + grace) on the subprocess.
    `on_warmup_health(verdict)`: the warm-up's client health, as measured load starts.
    """
    from loadgen.runner import run_locust  # imports no locust: the runner spawns a subprocess

    progress.info(
        "load: %.0f s warm-up + %.0f s measured",
        options.warmup_s,
        options.duration_s,
        extra={"duration_s": options.warmup_s + options.duration_s},
    )
    return run_locust(
        url,
        run_dir,
        options,
        on_load_start=on_load_start,
        preexec_fn=die_with_parent,
        on_warmup_health=on_warmup_health,
    )


@task(name="summarize-load", cache_policy=NONE)
def summarize_load(run_dir: Path, duration_s: float, slo: dict | None) -> dict:
    """vLLM-style summary of the measured phase (TTFT/ITL/TPOT/E2E, throughput, goodput vs the
    scenario's `slo:`), with GuideLLM and genai-perf views, for run.json."""
    import pyarrow.parquet as pq

    from loadgen.metrics import SLO, summarize

    return summarize(
        pq.read_table(run_dir / "requests.parquet"),
        pq.read_table(run_dir / "tokens.parquet"),
        duration_s=duration_s,
        slo=SLO.from_dict(slo) if slo else None,
    )


@task(name="write-manifest", cache_policy=NONE)
def write_manifest(manifest: RunManifest, run_dir: Path) -> Path:
    return manifest.write(run_dir)


@task(name="ingest-run", cache_policy=NONE, retries=3, retry_delay_seconds=2)
def ingest(db_path: Path, run_dir: Path) -> dict[str, int]:
    """Load every file of the run directory into DuckDB (replacing an earlier ingest)."""
    from warehouse.ingest import ingest_run

    progress.info("ingesting %s", run_dir.name)
    return ingest_run(db_path, run_dir)


@task(name="analyze-run", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def analyze(db_path: Path, run_id: str, detector: str | None = None) -> Any:
    """Find the spikes and attribute each to a cause; results stored in DuckDB. `detector`: a
    preset of rca.config.PRESETS (None: the one the run's scenario names, else "default")."""
    from rca.analyze import analyze_run

    progress.info("finding spikes and causes")
    return analyze_run(db_path, run_id, preset_name=detector)


@task(name="render-report", cache_policy=NONE)
def render_report(db_path: Path, run_id: str, out_dir: Path) -> Path:
    """Render the incident report of a run from the warehouse."""
    from pages.incident import build_incident_context
    from templates.render import render_incident

    progress.info("rendering report")
    return render_incident(
        build_incident_context(db_path, run_id), out_dir, index_href="../index.html"
    )


def rebuild_index(reports_root: str | Path, title: str = "spikelens reports") -> Path:
    """Render reports_root/index.html from every report.json below it (pages.index builds the
    context, templates renders it; no warehouse needed)."""
    from pages.index import build_index_context
    from templates.render import render_index

    return render_index(build_index_context(reports_root, title), reports_root)


@task(name="refresh-index", cache_policy=NONE)
def refresh_index(reports_root: Path) -> Path:
    """Rebuild reports/index.html from the report.json every page leaves beside itself."""
    return rebuild_index(reports_root)
