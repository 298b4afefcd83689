"""`spikelens` command line: typer + rich. Every long step shows progress; errors are one line.

The CLI parses arguments, shows progress and prints results; the flows do the work.
"""
from __future__ import annotations

import logging
import signal
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from flows.paths import StatePaths

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Load-test LLM decoding engines and explain every latency spike.")
console = Console(stderr=True)


def builtin_scenario(name: str) -> Path:
    """Path of a scenario shipped with spikelens (found from the installed package)."""
    return Path(str(resources.files("scenarios") / name))


class _ProgressHandler(logging.Handler):
    """Shows each `spikelens.progress` message as the live status line and keeps a log of steps."""

    def __init__(self, status) -> None:
        super().__init__(logging.INFO)
        self.status, self.t0 = status, time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        console.log(f"[dim]{time.monotonic() - self.t0:6.1f}s[/dim] {msg}", highlight=False)
        self.status.update(f"[bold]{msg}[/bold]")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _with_progress(title: str, fn, *args, **kwargs):
    """Run `fn` under a spinner fed by the progress logger; SIGTERM behaves like Ctrl-C."""
    signal.signal(signal.SIGTERM, _interrupt)
    logger = logging.getLogger("spikelens.progress")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    with console.status(title) as status:
        handler = _ProgressHandler(status)
        logger.addHandler(handler)
        try:
            return fn(*args, **kwargs)
        finally:
            logger.removeHandler(handler)


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def _json_option(name: str, value: str | None) -> dict | None:
    import json

    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        _fail(f"{name}: not valid JSON: {e}")
    if not isinstance(parsed, dict):
        _fail(f"{name}: must be a JSON object")
    return parsed


def _run_incident(scenario: Path, overrides: dict | None = None) -> None:
    from flows.scenario import ScenarioError, load_scenario

    try:
        load_scenario(scenario, overrides)   # fail fast, before Prefect starts, on a bad file
    except ScenarioError as e:
        _fail(str(e))
    from flows.incident import incident_replay

    try:
        result = _with_progress(f"running {scenario.name}", incident_replay, str(scenario),
                                None, "incident", overrides)
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    console.print(f"run [bold]{result.run_id}[/bold]: {result.spikes} spike(s)"
                  + (f", causes: {', '.join(result.causes)}" if result.causes else ""))
    if result.errors:
        console.print(f"[yellow]run had errors:[/yellow] {'; '.join(result.errors)}")
    # The report path is the last line on stdout, for scripts and for people.
    print(result.report)


@app.command()
def demo() -> None:
    """Run the demo incident (a GC storm) end to end and print the report's path."""
    _run_incident(builtin_scenario("demo-gc-storm.yaml"))


@app.command()
def run(scenario: Path = typer.Argument(..., exists=True, dir_okay=False,
                                        help="Scenario YAML file."),
        overrides: Optional[str] = typer.Option(
            None, help='JSON laid over the scenario, e.g. \'{"engine": {"max_num_seqs": 8}}\'.')
        ) -> None:
    """Run SCENARIO end to end: engine, load, warehouse, causes, report."""
    _run_incident(scenario, _json_option("--overrides", overrides))


@app.command()
def nightly(config_dir: Optional[Path] = typer.Option(
                None, help="Folder with config.yaml and its scenarios (default: scenarios/nightly)."),
            pinned: Optional[str] = typer.Option(
                None, help="Compare against this run id instead of the rolling baseline.")) -> None:
    """Run the nightly regression; exit code 1 when any metric regressed."""
    from flows.nightly import nightly_regression
    from flows.nightly_config import NightlyConfig, NightlyConfigError
    from flows.nightly import default_config_dir

    try:
        NightlyConfig.load(config_dir or default_config_dir())
    except NightlyConfigError as e:
        _fail(str(e))
    try:
        result = _with_progress("nightly regression", nightly_regression,
                                str(config_dir) if config_dir else None, None, pinned)
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    for s in result.scenarios:
        bad = s.regressed
        console.print(f"{s.scenario_name} ({s.run_id}): "
                      + (f"[red]regressed[/red] {', '.join(bad)}" if bad else "[green]no regression[/green]")
                      + f" vs {len(s.baseline_runs)} baseline run(s)")
    print(result.report or "")
    raise typer.Exit(1 if result.regressed else 0)


@app.command()
def sweep(scenario: Optional[Path] = typer.Option(None, help="Base scenario (default: scenarios/sweep-base.yaml)."),
          temperatures: str = typer.Option("0.1,0.45,0.8,1.15,1.5", help="Comma-separated temperatures."),
          penalties: str = typer.Option("0,0.5,1,1.5,2", help="Comma-separated frequency penalties.")
          ) -> None:
    """Penalty sweep: a temperature × frequency_penalty grid in one run, with heatmaps."""
    from flows.sweep import penalty_sweep, validate_grid

    try:
        temps = [float(x) for x in temperatures.split(",") if x.strip()]
        pens = [float(x) for x in penalties.split(",") if x.strip()]
        validate_grid(temps, pens)
    except ValueError as e:
        _fail(f"--temperatures/--penalties: {e}")
    try:
        result = _with_progress("penalty sweep", penalty_sweep,
                                str(scenario) if scenario else None, temps, pens)
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    console.print(f"sweep run {result.run_id}: {len(result.cells)} cells")
    print(result.report)


@app.command()
def replay(run_id: str = typer.Argument(..., help="A recorded run to replay."),
           engine_overrides: Optional[str] = typer.Option(
               None, "--engine", help='JSON laid over the engine config, e.g. \'{"max_num_seqs": 8}\'.'),
           target: Optional[str] = typer.Option(None, help="Replay against this base URL instead.")
           ) -> None:
    """Replay a recorded run: same arrival times, request mix and sampling parameters."""
    from flows.replay import replay_run

    try:
        result = _with_progress(f"replaying {run_id}", replay_run, run_id,
                                _json_option("--engine", engine_overrides), target)
    except FileNotFoundError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    console.print(f"replay {result.run_id} of {run_id}")
    print(result.report)


@app.command()
def report(run_id: str = typer.Argument(..., help="Run id (see the runs folder).")) -> None:
    """Re-analyse a stored run and render its report again."""
    from rca.analyze import analyze_run
    from rca.report import incident_context
    from templates.render import render_incident

    paths = StatePaths.from_env()
    if not paths.warehouse.exists():
        _fail(f"no warehouse at {paths.warehouse}: run a scenario first")
    analyze_run(paths.warehouse, run_id)
    print(render_incident(incident_context(paths.warehouse, run_id), paths.reports / run_id))


@app.command()
def engine(config: Optional[Path] = typer.Option(None, help="Engine config JSON (see docs)."),
           model: str = typer.Option("small", help="Preset name or HF checkpoint folder."),
           host: str = typer.Option("127.0.0.1"), port: int = typer.Option(8000),
           run_dir: Optional[Path] = typer.Option(None, help="Where to write telemetry files.")
           ) -> None:
    """Serve the engine alone (OpenAI-compatible API) until Ctrl-C."""
    import json
    import os
    import subprocess
    import tempfile

    if config is None:
        fd, name = tempfile.mkstemp(suffix=".json")
        os.write(fd, json.dumps({"run_id": "adhoc", "engine": {"model": model},
                                 "faults": []}).encode())
        os.close(fd)
        config = Path(name)
    run_dir = run_dir or StatePaths.from_env().ensure().runs / "adhoc-engine"
    cmd = [sys.executable, "-m", "engine", "serve", "--config", str(config), "--run-dir",
           str(run_dir), "--host", host, "--port", str(port)]
    raise typer.Exit(subprocess.call(cmd))


if __name__ == "__main__":
    app()
