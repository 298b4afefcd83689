"""`run_scenario`: one scenario end to end — engine, load, teardown, warehouse, causes, report.

The flow only orchestrates. Whatever happens between starting the engine and the end of the
load (an error, a timeout, Ctrl-C), the engine is stopped and what was collected is still
ingested, analysed and reported, with the failure written into run.json and the report.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import flow
from prefect.exceptions import TerminationSignal

from collectors import collect_dir, hook_env
from collectors.cpu_steal import StealMeter
from engine.server.launch import EngineProcess
from flows.affinity import KeptOff, default_engine_cpus, usable_cpus
from flows.fault_routing import FaultRoutes, route_faults
from flows.finish import finish_run
from flows.manifest import RunManifest, new_run_id
from flows.paths import StatePaths
from flows.runtime import OWN_ENGINE_MODEL, OurEngine, Target, VllmEngine, engine_settings
from flows.scenario import Scenario, load_scenario
from flows.tasks import (
    drive_load,
    progress,
    served_model,
    start_collectors,
    start_engine,
    start_nvml_sampler,
    start_vllm,
    stop_collectors,
    stop_engine,
    stop_nvml_sampler,
    stop_vllm,
    summarize_load,
    write_manifest,
)
from flows.vllm_config import VllmConfig
from flows.vllm_process import VllmProcess
from injectors.cpu_contention import CpuContention
from injectors.delay_proxy import DelayProxy
from injectors.process_faults import arm as arm_process_faults
from injectors.process_faults import schedule_env
from loadgen.runner import LocustRunOptions
from spikelens_common.fault_catalogue import Applier

if TYPE_CHECKING:
    from collectors.supervisor import CollectorSet


@dataclass
class ScenarioRunResult:
    """What one run of a scenario gave, whatever its kind (incident, nightly, sweep, replay,
    capacity step, evaluation case): its id and report, how it ended, its spikes' causes."""

    run_id: str
    scenario_name: str
    run_dir: Path
    report: Path | None
    status: str
    errors: list[str]
    spikes: int
    causes: list[str]


def _tokenizer_path(scenario: Scenario) -> str | None:
    """The engine's tokenizer file, so loadgen can size prompts in exact tokens (None: by words)."""
    runtime = scenario.runtime
    if isinstance(runtime, VllmEngine):  # the checkpoint's own tokenizer, when it is a folder
        tokenizer = Path(runtime.config.model) / "tokenizer.json"
        return str(tokenizer) if tokenizer.is_file() else None
    if isinstance(runtime, Target):
        return None
    from engine.tokenizer import DEFAULT_TOKENIZER_PATH

    model = Path(runtime.config.model)
    if model.is_dir():  # a Hugging Face checkpoint folder brings its own tokenizer
        return str(model / "tokenizer.json") if (model / "tokenizer.json").is_file() else None
    return str(DEFAULT_TOKENIZER_PATH)


@flow(name="run-scenario", log_prints=False)
def run_scenario(
    scenario_path: str,
    state_home: str | None = None,
    kind: str = "incident",
    overrides: dict | None = None,
) -> ScenarioRunResult:
    """Run a scenario against a fresh engine and explain its spikes in an HTML report.

    `overrides` are laid over the scenario file's keys (nested mappings merged), e.g.
    `{"engine": {"max_num_seqs": 8}}` or a sweep's sampling grid.
    """
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    paths.ensure()
    scenario = load_scenario(scenario_path, overrides)
    run_id = new_run_id(kind, scenario.slug)
    run_dir = paths.run_dir(run_id)
    manifest = _new_manifest(scenario, run_id, kind, overrides)
    write_manifest(manifest, run_dir)
    progress.info("run %s", run_id)

    serving = _Serving(scenario, run_dir, route_faults(scenario.faults, scenario.runtime))
    nvml = None
    failure: BaseException | None = None
    try:
        nvml = start_nvml_sampler(run_dir)
        serving.start(run_id, manifest)

        def on_load_start(t0_ns: int) -> None:
            manifest.load_started_ns = t0_ns
            serving.arm(t0_ns, manifest)

        _drive(serving, manifest, on_load_start)
    except BaseException as e:
        failure = e
        manifest.errors.append(_describe_failure(e))
        if isinstance(e, (KeyboardInterrupt, TerminationSignal)):
            # Teardown and the ingest of what was collected are bounded; a repeated signal (an
            # orphaned process gets its parent-death signal again on each re-parenting) must
            # not cut them short.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    finally:
        if nvml is not None:
            manifest.extra["nvml"] = stop_nvml_sampler(nvml, run_dir)
        serving.stop(manifest)
        manifest.ended_ns = time.time_ns()
        manifest.status = (
            "failed" if manifest.errors else "invalid" if not manifest.client_valid else "ok"
        )
        write_manifest(manifest, run_dir)

    finished = None
    if failure is None or manifest.load_started_ns is not None:
        # What was collected is still analysed and reported, failures included.
        try:
            finished = finish_run(paths, run_id, run_dir)
        except Exception:
            if failure is None:
                raise
    if failure is not None:
        raise failure
    if finished is None:  # finish_run returned or raised: with no failure it ran
        raise RuntimeError(f"run {run_id}: the analysis did not run")
    analysis = finished.analysis
    return ScenarioRunResult(
        run_id=run_id,
        scenario_name=manifest.scenario_name,
        run_dir=run_dir,
        report=finished.report,
        status=manifest.status,
        errors=manifest.errors,
        spikes=len(analysis.spikes),
        causes=[
            analysis.attributions[s.spike_id].top_cause
            for s in analysis.spikes
            if s.spike_id in analysis.attributions
        ],
    )


def _new_manifest(
    scenario: Scenario, run_id: str, kind: str, overrides: dict | None
) -> RunManifest:
    """run.json as the run starts: what ran and the command that reproduces it."""
    runtime = scenario.runtime
    return RunManifest(
        run_id=run_id,
        kind=kind,
        scenario_name=scenario.name,
        scenario_path=scenario.path,
        scenario=scenario.raw,
        engine=engine_settings(runtime),
        target=runtime.url if isinstance(runtime, Target) else None,
        faults=[dataclasses.asdict(f) for f in scenario.faults],
        warmup_s=scenario.warmup_s,
        duration_s=scenario.duration_s,
        command=f"spikelens run {shlex.quote(str(scenario.path))}"
        + (f" --overrides {shlex.quote(json.dumps(overrides))}" if overrides else ""),
    )


@dataclass
class _Serving:
    """What a run starts besides the load: spikelens' engine or vLLM, with the collectors on its
    process tree, the host.cpu_contention hogs on its CPUs (nothing for a `target:`) and the
    network.delay proxy. Each applier gets its own faults from `faults` (routed once).
    `stop` stops whatever was started, in reverse order, and notes it in run.json."""

    scenario: Scenario
    run_dir: Path
    faults: FaultRoutes
    url: str = ""
    engine: EngineProcess | VllmProcess | None = None
    collectors: CollectorSet | None = None
    hogs: CpuContention | None = None
    proxy: DelayProxy | None = None  # network.delay: loadgen sends through it
    kept_off: KeptOff | None = None  # spikelens' own threads off the engine's CPUs (engine.cpus)
    steal: StealMeter | None = None  # CPU steal on the engine's CPUs over the measured load

    def start(self, run_id: str, manifest: RunManifest) -> None:
        run_dir, runtime = self.run_dir, self.scenario.runtime
        engine: EngineProcess | VllmProcess
        match runtime:
            case OurEngine(config=config):
                engine = start_engine(
                    run_id,
                    config.to_dict(),
                    self.faults.of(Applier.ENGINE),
                    run_dir,
                    gc_off=self.scenario.gc_off,
                    nice=self.scenario.nice,
                )
                role = "engine"
            case VllmEngine(config=config):
                config = self._split_cpus(config, manifest)
                # every process of vLLM's tree inherits the GC hook through its environment
                process_faults = self.faults.of(Applier.GC_HOOK)
                gc_off = self.scenario.gc_off
                engine = start_vllm(
                    config,
                    run_dir,
                    env_hook=lambda env: _vllm_env(run_dir, process_faults, env, gc_off),
                    nice=self.scenario.nice,
                )
                manifest.extra["vllm"] = engine.describe()
                write_manifest(manifest, run_dir)
                role = "vllm"
            case Target(url=url):
                self.url = url
                self._start_proxy()
                return
        root_pid = engine.running().pid
        self.engine = engine
        self.url = engine.url
        apart = self.kept_off is not None and bool(self.kept_off.ours)
        self.collectors = start_collectors(
            run_dir, root_pid, role, f"{self.url}/metrics", engine_apart=apart
        )
        self.hogs = CpuContention(
            self.faults.of(Applier.HOGS), root_pid, run_dir, self.scenario.duration_s
        )
        self._start_proxy()

    def _split_cpus(self, config: VllmConfig, manifest: RunManifest) -> VllmConfig:
        """vLLM on `engine.cpus`, else on all CPUs but one (flows.affinity.default_engine_cpus);
        spikelens' own processes on the rest. run.json's extra.cpus says which and why."""
        source = "scenario"
        if config.cpus is None:
            cpus = default_engine_cpus(tensor_parallel_size=config.tensor_parallel_size)
            if cpus is None:  # a single CPU (or one per rank): shared, as vLLM's default
                every = list(usable_cpus())
                manifest.extra["cpus"] = {"engine": every, "spikelens": every, "source": "shared"}
                return config
            config, source = dataclasses.replace(config, cpus=cpus), "default"
        self.kept_off = KeptOff(config.cpus or (), source).start()
        manifest.extra["cpus"] = self.kept_off.describe()
        return config

    def _start_proxy(self) -> None:
        """network.delay: loadgen's URL becomes the delaying proxy's (same URL without one)."""
        self.proxy = DelayProxy(
            self.faults.of(Applier.PROXY), self.run_dir, self.scenario.duration_s
        )
        self.url = self.proxy.start(self.url)

    def arm(self, t0_ns: int, manifest: RunManifest) -> None:
        """Start every fault clock, and the steal meter, at the start of measured load."""
        self.steal = StealMeter(_steal_cpus(manifest.extra))
        self.steal.start()
        if self.engine is not None:
            self.engine.arm_faults(t0_ns)
        if self.hogs is not None:
            self.hogs.arm(t0_ns)
        if self.proxy is not None:
            self.proxy.arm(t0_ns)
        if process_faults := self.faults.of(Applier.GC_HOOK):
            arm_process_faults(
                process_faults,
                t0_ns,
                self.scenario.duration_s,
                collect_dir(self.run_dir),
                self.run_dir,
            )

    def stop(self, manifest: RunManifest) -> None:
        if self.steal is not None:
            manifest.extra["cpu_steal"] = _steal_record(self.steal.stop(), self.scenario.runtime)
        if self.proxy is not None:
            self.proxy.stop()
        if self.hogs is not None:
            self.hogs.stop()
        if self.collectors is not None:
            manifest.extra["collectors"] = stop_collectors(self.collectors)
        if self.engine is not None:
            code = (
                stop_vllm(self.engine)
                if isinstance(self.engine, VllmProcess)
                else stop_engine(self.engine)
            )
            if code not in (0, None, -15):
                manifest.errors.append(f"engine exited with code {code}")
        if self.kept_off is not None:
            self.kept_off.stop()


# A run whose engine CPUs lost this much of their time to the hypervisor, over the load or in
# its worst second, says so as it ends: 5 % over a run is half the latency rise a nightly calls
# a regression on a quiet box (flows.nightly_config), and a quarter of one second is a spike's
# size (a 1-s window's p99 moves with it). This box (2 vCPUs) measured 0.5 % over a 40-s run,
# 4.3 % in its worst second (2026-12-05).
STEAL_WARN_SHARE = 0.05
STEAL_WARN_SECOND = 0.25


def _steal_cpus(extra: dict) -> list[int]:
    """The engine's CPUs (run.json's extra.cpus where the flow pinned it), else all of ours."""
    pinned = (extra.get("cpus") or {}).get("engine")
    if pinned:
        return sorted(int(c) for c in pinned)
    return list(usable_cpus())


def _steal_record(summary: dict, runtime: object) -> dict:
    """run.json's extra.cpu_steal, and a warning line when the box lost enough to matter."""
    record = {**summary, "scope": "load generator" if isinstance(runtime, Target) else "engine"}
    if not summary.get("available"):
        return record
    flagged = (
        summary["share"] >= STEAL_WARN_SHARE or summary["worst_second_share"] >= STEAL_WARN_SECOND
    )
    record.update(flagged=flagged, flag_share=STEAL_WARN_SHARE, flag_second=STEAL_WARN_SECOND)
    if flagged:
        progress.warning(
            "the hypervisor took %.0f %% of CPUs %s during the measured load (steal; %.0f %% in"
            " its worst second, at %g s): the latencies include it",
            100 * summary["share"],
            ",".join(map(str, summary["cpus"])),
            100 * summary["worst_second_share"],
            summary["worst_second_at_s"],
        )
    return record


def _drive(serving: _Serving, manifest: RunManifest, on_load_start) -> None:
    """The load, and what it says about itself, into run.json."""
    scenario, run_dir = serving.scenario, serving.run_dir
    options = _load_options(scenario, serving)
    manifest.extra.update(model=options.model_name, endpoint=options.endpoint)
    result = drive_load(
        serving.url, run_dir, options, on_load_start, lambda v: _warmup_health(manifest, v)
    )
    manifest.extra["locust"] = {
        "requests_sent": result.requests_sent,
        "requests_failed": result.requests_failed,
        "returncode": result.returncode,
    }
    manifest.extra["client_health"] = result.client_health
    if result.stopped_early:
        manifest.extra["stopped_early"] = result.stopped_early
        manifest.errors.append(f"stopped early: {result.stopped_early['reason']}")
        progress.warning("stopped early: %s", result.stopped_early["reason"])
    if result.returncode not in (0, None):
        manifest.errors.append(f"locust exited with code {result.returncode}")
    if not result.client_valid:
        manifest.client_valid = False
    manifest.extra["summary"] = summarize_load(
        run_dir, scenario.duration_s, scenario.raw.get("slo")
    )


def _warmup_health(manifest: RunManifest, verdict: dict) -> None:
    """The warm-up's client health, as measured load starts: into run.json, and a warning line
    when the load generator is starved already (the run's verdict will say invalid)."""
    manifest.extra["warmup_client_health"] = verdict
    if not verdict["valid"]:
        progress.warning("%s", verdict["message"])


def _load_options(scenario: Scenario, serving: _Serving) -> LocustRunOptions:
    """What loadgen drives for this scenario, against what `serving` started."""
    runtime, url = scenario.runtime, serving.url
    target = isinstance(runtime, Target)
    own_engine = isinstance(runtime, OurEngine)
    api_key = os.environ.get("SPIKELENS_API_KEY") if target else None
    # spikelens' own engine serves "spikelens"; any other: the target's model id or /v1/models'
    model = (runtime.model if isinstance(runtime, Target) else None) or (
        OWN_ENGINE_MODEL if own_engine else served_model(url, api_key)
    )
    return LocustRunOptions(
        workload=scenario.workload,
        load=scenario.load,
        duration_s=scenario.duration_s,
        warmup_s=scenario.warmup_s,
        seed=scenario.seed,
        tokenizer_path=_tokenizer_path(scenario),
        faults=serving.faults.of(Applier.LOADGEN),
        # the collectors scrape /metrics of an engine spikelens started; a target's is scraped
        # by loadgen (one writer of metrics.parquet per run)
        metrics_url=f"{url.rstrip('/')}/metrics" if target else None,
        api_key=api_key,
        model_name=model,
        endpoint=scenario.endpoint,
    )


def _vllm_env(
    run_dir: Path, process_faults: list[dict], env: dict[str, str], gc_off: bool = False
) -> dict[str, str]:
    """vLLM's environment: every process of its tree inherits the GC hook (with automatic GC off
    under intervention.gc_off), and, when the run has process faults (the GC hook's, routed),
    the churn module and the schedule it waits for."""
    env = hook_env(collect_dir(run_dir), "vllm", env, gc_off=gc_off)
    if process_faults:
        env = schedule_env(collect_dir(run_dir), env)
    return env


def _describe_failure(e: BaseException) -> str:
    """One line for run.json and the report. Ctrl-C arrives as KeyboardInterrupt, SIGTERM as
    Prefect's TerminationSignal (Prefect installs its own SIGTERM handler in the flow engine)."""
    if isinstance(e, (KeyboardInterrupt, TerminationSignal)):
        return f"interrupted ({type(e).__name__}{': ' + str(e) if str(e) else ''}); collected data kept"
    return f"{type(e).__name__}: {e}"[:2000]
