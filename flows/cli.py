"""`spikelens` command line: typer + rich. Every long step shows progress; errors are one line.

The CLI parses arguments, shows progress and prints results; the flows do the work.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from flows.paths import StatePaths

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Load-test LLM decoding engines and explain every latency spike.",
)
console = Console(stderr=True)


def builtin_scenario(name: str) -> Path:
    """Path of a scenario shipped with spikelens (found from the installed package)."""
    return Path(str(resources.files("scenarios") / name))


class _ProgressHandler(logging.Handler):
    """Prints each `spikelens.progress` message as a step line and drives one progress bar: a
    message logged with `extra={"duration_s": N}` (the load phase) fills the bar over N seconds;
    any other message shows as a pulsing bar until the next one."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.INFO)
        self.progress, self.t0 = progress, time.monotonic()
        self.task = progress.add_task("starting", total=None)
        self.timed: tuple[float, float] | None = None  # (start, duration) of a timed step

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        self.progress.console.print(
            f"[dim]{time.monotonic() - self.t0:6.1f}s[/dim] {msg}", highlight=False
        )
        duration = getattr(record, "duration_s", None)
        self.timed = (time.monotonic(), float(duration)) if duration else None
        self.progress.reset(self.task, description=msg, total=float(duration) if duration else None)

    def tick(self) -> None:
        """Advance a timed step's bar with the clock (called from the refresh loop)."""
        if self.timed:
            start, duration = self.timed
            self.progress.update(self.task, completed=min(time.monotonic() - start, duration))


def _tick_until(stop: threading.Event, handler: _ProgressHandler) -> None:
    while not stop.wait(0.5):
        handler.tick()


def _supervise() -> None:
    """Re-run this command in a supervised child (see flows/supervisor.py): no orphans, ever."""
    from flows.supervisor import run_supervised, supervised

    if not supervised():
        code = run_supervised(sys.argv[1:])
        if code != -1:
            raise typer.Exit(code)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _with_progress(title: str, fn, *args, **kwargs):
    """Run `fn` under a spinner fed by the progress logger; SIGTERM behaves like Ctrl-C."""
    signal.signal(signal.SIGTERM, _interrupt)
    logger = logging.getLogger("spikelens.progress")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    columns = (
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("/"),
        TimeRemainingColumn(),
    )
    console.print(f"[bold]{title}[/bold]")
    with Progress(*columns, console=console, transient=True) as progress:
        handler = _ProgressHandler(progress)
        logger.addHandler(handler)
        stop = threading.Event()
        ticker = threading.Thread(target=_tick_until, args=(stop, handler), daemon=True)
        ticker.start()
        from prefect.exceptions import ExternalSignal  # SIGTERM inside a Prefect flow

        try:
            return fn(*args, **kwargs)
        except ExternalSignal as e:
            raise KeyboardInterrupt(type(e).__name__) from e
        finally:
            stop.set()
            logger.removeHandler(handler)


def _fail(message: str, code: int = 2) -> NoReturn:
    console.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def _require(command: str) -> None:
    """Exit 2 before any work when `command`'s optional dependencies are missing."""
    from rich.markup import escape

    from flows.requirements import MissingExtra, check

    try:
        check(command)
    except MissingExtra as e:  # one line, however narrow the terminal: scripts grep for it
        console.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


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
        load_scenario(scenario, overrides)  # fail fast, before Prefect starts, on a bad file
    except ScenarioError as e:
        _fail(str(e))
    _supervise()
    from flows.run_scenario import run_scenario

    try:
        result = _with_progress(
            f"running {scenario.name}", run_scenario, str(scenario), None, "incident", overrides
        )
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    console.print(
        f"run [bold]{result.run_id}[/bold]: {result.spikes} spike(s)"
        + (f", causes: {', '.join(result.causes)}" if result.causes else "")
    )
    if result.errors:
        console.print(f"[yellow]run had errors:[/yellow] {'; '.join(result.errors)}")
    # The report path is the last line on stdout, for scripts and for people.
    print(result.report)


@app.command()
def demo() -> None:
    """Run the demo incident (a GC storm) end to end and print the report's path."""
    _run_incident(builtin_scenario("demo-gc-storm.yaml"))


@app.command()
def run(
    scenario: Path = typer.Argument(..., exists=True, dir_okay=False, help="Scenario YAML file."),
    overrides: str | None = typer.Option(
        None, help='JSON laid over the scenario, e.g. \'{"engine": {"max_num_seqs": 8}}\'.'
    ),
) -> None:
    """Run SCENARIO end to end: engine, load, warehouse, causes, report."""
    _run_incident(scenario, _json_option("--overrides", overrides))


@app.command()
def nightly(
    config_dir: Path | None = typer.Option(
        None, help="Folder with config.yaml and its scenarios (default: scenarios/nightly)."
    ),
    pinned: str | None = typer.Option(
        None, help="Compare against this run id instead of the rolling baseline."
    ),
) -> None:
    """Run the nightly regression; exit code 1 when any metric regressed."""
    from flows.nightly import default_config_dir, nightly_regression
    from flows.nightly_config import NightlyConfig, NightlyConfigError

    try:
        NightlyConfig.load(config_dir or default_config_dir())
    except NightlyConfigError as e:
        _fail(str(e))
    _supervise()
    try:
        result = _with_progress(
            "nightly regression",
            nightly_regression,
            str(config_dir) if config_dir else None,
            None,
            pinned,
        )
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    for s in result.scenarios:
        bad = s.regressed
        console.print(
            f"{s.scenario_name} ({s.run_id}): "
            + (f"[red]regressed[/red] {', '.join(bad)}" if bad else "[green]no regression[/green]")
            + f" vs {len(s.baseline_runs)} baseline run(s)"
        )
    print(result.report or "")
    raise typer.Exit(1 if result.regressed else 0)


@app.command()
def sweep(
    scenario: Path | None = typer.Option(
        None, help="Base scenario (default: scenarios/sweep-base.yaml)."
    ),
    temperatures: str = typer.Option("0.1,0.45,0.8,1.15,1.5", help="Comma-separated temperatures."),
    penalties: str = typer.Option("0,0.5,1,1.5,2", help="Comma-separated frequency penalties."),
) -> None:
    """Penalty sweep: a temperature × frequency_penalty grid in one run, with heatmaps."""
    from flows.sweep import penalty_sweep, validate_grid

    try:
        temps = [float(x) for x in temperatures.split(",") if x.strip()]
        pens = [float(x) for x in penalties.split(",") if x.strip()]
        validate_grid(temps, pens)
    except ValueError as e:
        _fail(f"--temperatures/--penalties: {e}")
    _supervise()
    try:
        result = _with_progress(
            "penalty sweep", penalty_sweep, str(scenario) if scenario else None, temps, pens
        )
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    console.print(f"sweep run {result.run_id}: {len(result.cells)} cells")
    print(result.report)


@app.command()
def replay(
    run_id: str = typer.Argument(..., help="A recorded run to replay."),
    engine_overrides: str | None = typer.Option(
        None, "--engine", help="JSON laid over the engine config, e.g. '{\"max_num_seqs\": 8}'."
    ),
    target: str | None = typer.Option(None, help="Replay against this base URL instead."),
) -> None:
    """Replay a recorded run: same arrival times, request mix and sampling parameters."""
    from flows.replay import replay_run

    _supervise()
    try:
        result = _with_progress(
            f"replaying {run_id}",
            replay_run,
            run_id,
            _json_option("--engine", engine_overrides),
            target,
        )
    except FileNotFoundError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    console.print(f"replay {result.run_id} of {run_id}")
    print(result.report)


@app.command()
def report(run_id: str = typer.Argument(..., help="Run id (see the runs folder).")) -> None:
    """Re-analyse a stored run and render its report again."""
    from pages.incident import build_incident_context
    from rca.analyze import analyze_run
    from templates.render import render_incident

    paths = StatePaths.from_env()
    if not paths.warehouse.exists():
        _fail(f"no warehouse at {paths.warehouse}: run a scenario first")
    from templates.report_index import rebuild_index

    try:
        analyze_run(paths.warehouse, run_id)
        page = render_incident(
            build_incident_context(paths.warehouse, run_id),
            paths.reports / run_id,
            index_href="../index.html",
        )
    except KeyError as e:
        _fail(str(e).strip("'\""))
    rebuild_index(paths.reports)
    print(page)


def _slo_option(value: str | None) -> dict | None:
    """'ttft_ms=500,tpot_ms=50' → {'ttft_ms': 500.0, 'tpot_ms': 50.0}; checked by loadgen's SLO."""
    from loadgen.errors import SpecError
    from loadgen.metrics import SLO

    if value is None:
        return None
    slo = {}
    for part in (p for p in value.split(",") if p.strip()):
        key, sep, number = part.partition("=")
        try:
            slo[key.strip()] = float(number) if sep else None
        except ValueError:
            _fail(f"--slo: {part!r}: expected NAME=MS, e.g. ttft_ms=500")
    try:
        SLO.from_dict(slo, where="--slo")
    except SpecError as e:
        _fail(str(e))
    return slo


@app.command()
def capacity(
    scenario: Path = typer.Argument(..., exists=True, dir_okay=False, help="Scenario YAML file."),
    users: str | None = typer.Option(None, help="Closed-loop steps, e.g. 2,4,8,16."),
    rates: str | None = typer.Option(None, help="Open-loop steps in requests/s, e.g. 2,4,8."),
    search: str | None = typer.Option(
        None,
        help="Search instead of steps: 'users' or 'rate' (double until the SLO "
        "fails, then bisect).",
    ),
    start: float = typer.Option(1.0, help="Search: first load."),
    max_load: float = typer.Option(256.0, help="Search: highest load tried."),
    max_steps: int = typer.Option(8, help="Search: most runs in all."),
    slo: str | None = typer.Option(
        None, help="Objectives in ms, e.g. ttft_ms=500,tpot_ms=50 (default: the scenario's slo:)."
    ),
    attainment: float = typer.Option(0.9, help="Share of requests that must meet the SLO."),
) -> None:
    """Capacity sweep: run SCENARIO at each load step, find the highest load meeting the SLO."""
    import dataclasses

    from flows.capacity import CapacityError, CapacityOptions, capacity_sweep, resolve_slo
    from flows.scenario import ScenarioError
    from loadgen.errors import SpecError
    from rca.capacity import SearchOptions, parse_loads

    if sum(x is not None for x in (users, rates, search)) != 1:
        _fail("give exactly one of --users 2,4,8, --rates 1,2,4 or --search users|rate")
    try:
        if search is not None:
            options = CapacityOptions(
                kind=search,
                search=SearchOptions(
                    kind=search,
                    start=start,
                    max_load=max_load,
                    max_steps=max_steps,
                    resolution=1.0 if search == "users" else max(start / 4, 0.05),
                ).check(),
            )
        else:
            kind = "users" if users is not None else "rate"
            loads = users if users is not None else rates
            if loads is None:
                _fail("give --users 2,4,8 or --rates 1,2,4")
            options = CapacityOptions(kind=kind, loads=tuple(parse_loads(loads, kind)))
        options = dataclasses.replace(options, slo=_slo_option(slo), attainment=attainment)
        resolve_slo(str(scenario), options)  # fail fast, before Prefect starts
    except (ValueError, ScenarioError, SpecError, CapacityError) as e:
        _fail(str(e))
    _supervise()
    try:
        result = _with_progress(
            f"capacity sweep of {scenario.name}", capacity_sweep, str(scenario), options
        )
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    knee = result.knee
    console.print(
        f"sweep {result.sweep_id}: "
        + (
            f"capacity {knee['capacity']:g}, knee between {knee['capacity']:g} and {knee['first_fail']:g}"
            if knee["status"] == "found"
            else f"knee {knee['status'].replace('_', ' ')}"
        )
    )
    print(result.report)


@app.command()
def compare(
    run_a: str = typer.Argument(..., help="Baseline run id."),
    run_b: str = typer.Argument(..., help="Candidate run id, judged against RUN_A."),
) -> None:
    """Compare two stored runs with the nightly's bootstrap verdicts: exit 1 when B regressed
    against A, 0 when not, 2 on a usage error (e.g. an unknown run id)."""
    from flows.compare import CompareUsageError, compare_stored_runs

    try:
        result = compare_stored_runs(run_a, run_b)
    except CompareUsageError as e:
        _fail(str(e), 2)
    bad = result.regressed
    console.print(
        f"{run_b} vs {run_a}: "
        + (f"[red]regressed[/red] {', '.join(bad)}" if bad else "[green]no regression[/green]")
    )
    print(result.report)
    raise typer.Exit(1 if bad else 0)


@app.command()
def engine(
    model_arg: str | None = typer.Argument(
        None, metavar="[MODEL]", help="Same as --model (as in `vllm serve MODEL`)."
    ),
    model: str | None = typer.Option(
        None,
        help="Preset (tiny, small, medium; default small) or a Hugging Face Llama "
        "checkpoint folder.",
    ),
    config: Path | None = typer.Option(
        None,
        exists=True,
        dir_okay=False,
        help="CONFIG.json {engine, faults, server} (docs/engine-server.md); every flag "
        "given on the command line overrides the file's value.",
    ),
    max_model_len: int | None = typer.Option(
        None,
        help="Context length (prompt + output). Default: the model's "
        "max_position_embeddings, capped by the KV cache (kv-blocks × block-size).",
    ),
    max_num_seqs: int | None = typer.Option(None, help="Running-batch limit (default 32)."),
    kv_blocks: int | None = typer.Option(
        None,
        "--kv-blocks",
        "--num-gpu-blocks-override",
        help="Paged KV cache size in blocks (default 512).",
    ),
    kv_cache_memory_bytes: str | None = typer.Option(
        None, help="KV cache size per rank instead of --kv-blocks, e.g. 512MiB or 2GiB."
    ),
    block_size: int | None = typer.Option(None, help="Tokens per KV block (default 16)."),
    max_num_batched_tokens: int | None = typer.Option(
        None, help="Tokens one step may process (default: max-model-len)."
    ),
    dtype: str | None = typer.Option(
        None,
        help="float32 (default), bfloat16, float16; also half, float, auto "
        "(the checkpoint's dtype).",
    ),
    tensor_parallel_size: int | None = typer.Option(
        None, "--tensor-parallel-size", "--tp", help="Tensor-parallel ranks (default 1)."
    ),
    seed: int | None = typer.Option(
        None, help="Seed of synthetic weights and unseeded sampling (default 0)."
    ),
    device: str | None = typer.Option(None, help="cpu (default), cuda or auto."),
    served_model_name: str | None = typer.Option(
        None, help="Model id answered by /v1/models (default spikelens)."
    ),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8000, help="Port."),
    run_dir: Path | None = typer.Option(None, help="Where to write telemetry files."),
) -> None:
    """Serve the engine alone (OpenAI-compatible API, as `vllm serve` does) until Ctrl-C.

    `spikelens engine --model DIR` needs no other flag: the context length comes from the
    checkpoint. With --config FILE, the flags given override the file's values.
    """
    _check_engine_flags(model_arg, model, kv_blocks is not None, kv_cache_memory_bytes, device)
    engine_flags = {
        "model": model or model_arg,
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "kv_blocks": kv_blocks,
        "kv_cache_memory_bytes": kv_cache_memory_bytes,
        "block_size": block_size,
        "max_num_batched_tokens": max_num_batched_tokens,
        "dtype": dtype,
        "tp": tensor_parallel_size,
        "seed": seed,
        "device": device,
    }
    data = _engine_run_config(config, engine_flags, {"model_name": served_model_name})
    run_dir = run_dir or StatePaths.from_env().ensure().runs / "adhoc-engine"
    raise typer.Exit(_serve_engine(data, run_dir, host, port))


def _check_engine_flags(
    model_arg: str | None,
    model: str | None,
    kv_blocks_given: bool,
    kv_cache_memory_bytes: str | None,
    device: str | None,
) -> None:
    """Flags that contradict each other fail (exit 2); a GPU device notes what is missing."""
    if kv_blocks_given and kv_cache_memory_bytes is not None:
        _fail("give the KV cache size once: --kv-blocks or --kv-cache-memory-bytes")
    if device in ("cuda", "auto"):
        _note_missing_requirements("engine --device cuda")
    if model_arg and model and model_arg != model:
        _fail(f"give the model once: MODEL {model_arg!r} and --model {model!r} differ")


def _note_missing_requirements(what: str) -> None:
    """Print (not fail) what `what` needs and this machine lacks (flows.requirements)."""
    from rich.markup import escape

    from flows.requirements import note

    missing = note(what)
    if missing:
        console.print(f"[yellow]note:[/yellow] {escape(missing)}", highlight=False, soft_wrap=True)


def _serve_engine(data: dict, run_dir: Path, host: str, port: int) -> int:
    """`python -m engine serve` on the merged config (kept in run_dir for the record) until it
    stops; its exit code."""
    import json

    run_dir.mkdir(parents=True, exist_ok=True)
    merged = run_dir / "engine-config.json"  # what the server ran with, for the record
    merged.write_text(json.dumps(data, indent=1))
    command = [sys.executable, "-m", "engine", "serve", "--config", str(merged)]
    command += ["--run-dir", str(run_dir), "--host", host, "--port", str(port)]
    return _serve_until_stopped(command)


def _engine_run_config(config: Path | None, engine_flags: dict, server_flags: dict) -> dict:
    """CONFIG.json for `python -m engine serve`: the --config file (if any) with the flags given
    laid over its `engine` and `server` blocks. The server validates the result."""
    import json

    data: dict = {"run_id": "adhoc", "faults": []}
    if config is not None:
        try:
            data = json.loads(config.read_text())
        except json.JSONDecodeError as e:
            _fail(f"--config {config}: not valid JSON ({e})")
        if not isinstance(data, dict):
            _fail(f"--config {config}: must hold a JSON object {{engine, faults, server}}")
    for block, flags in (("engine", engine_flags), ("server", server_flags)):
        given = {k: v for k, v in flags.items() if v is not None}
        if given:
            current = data.get(block)
            base = current if isinstance(current, dict) else {}
            data[block] = {**base, **given}
    return data


def _serve_until_stopped(cmd: list[str]) -> int:
    """Run the server until it exits; Ctrl-C and SIGTERM of this process stop it gracefully.

    It runs in its own session, so each stop reaches it once (forwarded from here): a second
    signal would make uvicorn skip the graceful period. It still dies with a SIGKILLed CLI.
    """
    import subprocess

    from flows.supervisor import die_with_parent

    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=die_with_parent)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # stop the server the same way; it flushes, then exits
            proc.send_signal(signal.SIGINT)


@app.command()
def deploy(
    cron: str = typer.Option("0 2 * * *", help="Five-field cron of the nightly."),
    timezone: str = typer.Option("UTC", help="IANA time zone the cron is read in."),
    pool: str | None = typer.Option(
        None,
        help="Register with this process work pool and return, instead of "
        "serving from this process.",
    ),
    config_dir: Path | None = typer.Option(
        None, file_okay=False, help="Nightly config folder (default: scenarios/nightly)."
    ),
    name: str = typer.Option("nightly", help="Deployment name."),
) -> None:
    """Schedule the nightly regression on a Prefect server (serves until Ctrl-C unless --pool)."""
    from flows.deploy import DeployError
    from flows.deploy import deploy as deploy_nightly

    try:
        deployment_id = deploy_nightly(
            cron=cron,
            timezone=timezone,
            pool=pool,
            config_dir=str(config_dir) if config_dir else None,
            name=name,
        )
    except DeployError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        console.print("stopped serving; Prefect paused the schedule")
        return
    if deployment_id is not None:
        console.print(
            f"deployment [bold]nightly-regression/{name}[/bold] ({deployment_id}) "
            f"in pool {pool}: start a worker with `prefect worker start --pool {pool}`"
        )
    else:  # Prefect catches Ctrl-C inside serve and returns normally
        console.print("stopped serving; the schedule is paused")


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8080, help="Port."),
    root: Path | None = typer.Option(
        None, file_okay=False, help="Reports folder (default: the state's reports/)."
    ),
) -> None:
    """Serve the reports read-only over HTTP (GET/HEAD, nothing outside the reports folder)."""
    from templates.serve import serve as serve_reports

    root = root or StatePaths.from_env().ensure().reports
    console.print(f"serving {root} on http://{host}:{port}/ (Ctrl-C to stop)")
    try:
        serve_reports(root, host=host, port=port)
    except KeyboardInterrupt:
        pass
    except OSError as e:
        _fail(f"--port {port}: {e.strerror}")


@app.command()
def export(
    out_dir: Path = typer.Argument(..., file_okay=False, help="Destination folder."),
    run: list[str] | None = typer.Option(None, "--run", help="Run id (repeatable; default all)."),
) -> None:
    """Export runs as hive-partitioned Parquet (table/date=…/run_id=…/data.parquet)."""
    from warehouse.export import export_runs

    paths = StatePaths.from_env()
    if not paths.warehouse.exists():
        _fail(f"no warehouse at {paths.warehouse}: run a scenario first")
    try:
        files = export_runs(paths.warehouse, out_dir, run or None)
    except (KeyError, ValueError) as e:
        _fail(str(e).strip("'\""))
    console.print(
        f"{len(files)} file(s) written; read back with DuckDB: "
        f"SELECT * FROM read_parquet('{out_dir}/requests/*/*/*.parquet', hive_partitioning=true)"
    )
    print(out_dir)


@app.command()
def evaluate(
    suite_dir: Path | None = typer.Argument(
        None, file_okay=False, help="Folder of fault scenarios (default: scenarios/eval)."
    ),
    peers: bool = typer.Option(True, help="Also score BARO and NSigma (RCAEval)."),
    rescore: str | None = typer.Option(
        None, help="Id of an earlier evaluation: re-analyse and score its runs, run nothing."
    ),
    peer_methods: str = typer.Option(
        "baro,nsigma,circa",
        help="RCAEval methods scored as peers, comma-separated (with --peers).",
    ),
    seed: int = typer.Option(0, help="Seed of the random floor and the bootstrap intervals."),
) -> None:
    """Run a suite of fault scenarios; score detection and attribution vs ground truth and peers."""
    if peers:  # BARO/NSigma need the eval extra: say so now, not after the suite has run
        _require("evaluate")
    from flows.evaluate import (
        default_suite_dir,
        evaluation,
        previous_suite,
        suite_scenarios,
        unregistered_kinds,
    )
    from flows.scenario import ScenarioError, load_scenario
    from rca.peers import PEER_METHODS

    methods = tuple(m.strip() for m in peer_methods.split(",") if m.strip()) if peers else ()
    for m in methods:
        if m not in PEER_METHODS:
            _fail(f"--peer-methods: {m!r} is not one of {', '.join(PEER_METHODS)}")

    folder = suite_dir or default_suite_dir()
    try:
        if rescore:
            previous_suite(StatePaths.from_env().reports, rescore)
        else:
            for scenario in suite_scenarios(folder):
                if not unregistered_kinds(scenario):  # those cases are skipped, and listed
                    load_scenario(scenario)
    except (ScenarioError, FileNotFoundError) as e:
        _fail(str(e))
    _supervise()
    try:
        result = _with_progress(
            "evaluation suite",
            evaluation,
            str(folder),
            None,
            methods,
            rescore,
            seed,
        )
    except KeyboardInterrupt:
        _fail("interrupted; the engine and Locust were stopped", 130)
    det, att = result.scores["detection"], result.scores["attribution"]
    console.print(
        f"{len(result.run_ids)} runs: spike F1 {det['f1']}, attribution accuracy "
        f"{att['accuracy']}, false alarms/h on controls "
        f"{result.scores['controls']['false_alarms_per_hour']}"
    )
    console.print(f"JSON: {result.json_path}")
    print(result.report)


if __name__ == "__main__":
    app()
