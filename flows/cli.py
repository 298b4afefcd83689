"""`spikelens` command line: typer + rich. Every long step shows progress; errors are one line.

The CLI parses arguments, shows progress and prints results; the flows do the work. Each long
command checks its arguments, runs its flow through `flows.cli_run.run_flow` (supervision,
progress, Ctrl-C, failure lines) and prints what came back: details on stderr, the report's
path as the last line on stdout. `spikelens engine` is in flows/engine_command.py, `incident` in
flows/observed_command.py, `agent` in flows/agent_command.py, `deploy`/`serve`/`export` in
flows/ops_commands.py.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import typer

from flows.agent_command import agent
from flows.cli_confirm import confirm, confirm_and_say
from flows.cli_options import DETECTOR_HELP, detector_option, json_option
from flows.cli_run import fail, run_flow, supervise
from flows.engine_command import engine
from flows.observed_command import incident
from flows.ops_commands import deploy, export, serve
from flows.paths import StatePaths
from flows.progress import console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Load-test LLM decoding engines and explain every latency spike.",
)


def builtin_scenario(name: str) -> Path:
    """Path of a scenario shipped with spikelens (found from the installed package)."""
    return Path(str(resources.files("scenarios") / name))


def _require(command: str) -> None:
    """Exit 2 before any work when `command`'s optional dependencies are missing."""
    from rich.markup import escape

    from flows.requirements import MissingExtra, check

    try:
        check(command)
    except MissingExtra as e:  # one line, however narrow the terminal: scripts grep for it
        console.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _run_incident(
    scenario: Path, overrides: dict | None = None, confirm_repeats: int | None = None
) -> None:
    from flows.scenario import ScenarioError, load_scenario

    try:
        load_scenario(scenario, overrides)  # fail fast, before Prefect starts, on a bad file
    except ScenarioError as e:
        fail(str(e))
    supervise()  # before the flow's imports (torch, Prefect: ~4 s), which the child does anyway
    from flows.run_scenario import run_scenario

    result = run_flow(
        f"running {scenario.name}", run_scenario, str(scenario), None, "incident", overrides
    )
    console.print(
        f"run [bold]{result.run_id}[/bold]: {result.spikes} spike(s)"
        + (f", causes: {', '.join(result.causes)}" if result.causes else "")
    )
    if result.errors:
        console.print(f"[yellow]run had errors:[/yellow] {'; '.join(result.errors)}")
    code = 0
    if confirm_repeats is not None:
        if result.spikes and result.status == "ok":
            code = confirm_and_say(result.run_id, None, confirm_repeats, None, print_page=False)
        else:
            console.print(f"nothing to confirm: {result.spikes} spike(s), run {result.status}")
    # The report path is the last line on stdout, for scripts and for people.
    print(result.report)
    if code:
        raise typer.Exit(code)


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
    confirm: bool = typer.Option(
        False, "--confirm", help="Then prove the worst spike's cause (spikelens confirm)."
    ),
    repeats: int = typer.Option(2, min=1, max=10, help="--confirm's runs per arm."),
) -> None:
    """Run SCENARIO end to end: engine, load, warehouse, causes, report. With --confirm, exit
    as `spikelens confirm` does: 0 confirmed (or nothing to confirm), 1 not, 3 inconclusive."""
    _run_incident(scenario, json_option("--overrides", overrides), repeats if confirm else None)


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
    from flows.nightly_config import NightlyConfig, NightlyConfigError, default_config_dir

    try:
        NightlyConfig.load(config_dir or default_config_dir())
    except NightlyConfigError as e:
        fail(str(e))
    supervise()
    from flows.nightly import nightly_regression

    result = run_flow(
        "nightly regression",
        nightly_regression,
        str(config_dir) if config_dir else None,
        None,
        pinned,
    )
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
        fail(f"--temperatures/--penalties: {e}")
    result = run_flow(
        "penalty sweep", penalty_sweep, str(scenario) if scenario else None, temps, pens
    )
    console.print(f"sweep run {result.run_id}: {len(result.cells)} cells")
    print(result.report)


@app.command()
def replay(
    run_id: str | None = typer.Argument(None, help="A recorded run to replay."),
    from_incident: str | None = typer.Option(
        None,
        "--from-incident",
        help="An incident imported from Prometheus (`spikelens incident`): replay the traffic"
        " its counters describe instead.",
    ),
    engine_overrides: str | None = typer.Option(
        None,
        "--engine",
        help="JSON laid over the engine config, e.g. '{\"max_num_seqs\": 8}'; with"
        ' --from-incident, the engine to start, e.g. \'{"model": "small"}\'.',
    ),
    target: str | None = typer.Option(None, help="Replay against this base URL instead."),
) -> None:
    """Replay a recorded run: same arrival times, request mix and sampling parameters."""
    if (run_id is None) == (from_incident is None):
        fail("give a RUN_ID to replay, or --from-incident RUN_ID (not both)")
    engine = json_option("--engine", engine_overrides)
    if from_incident is not None:
        _replay_incident(from_incident, engine, target)
        return
    from flows.replay import replay_run

    result = run_flow(
        f"replaying {run_id}",
        replay_run,
        run_id,
        engine,
        target,
        expected=(FileNotFoundError,),
    )
    console.print(f"replay {result.run_id} of {run_id}")
    print(result.report)


def _replay_incident(run_id: str, engine: dict | None, target: str | None) -> None:
    """`replay --from-incident`: the replay, then one line per production spike on stderr."""
    from flows.replay import replay_incident, replayable_incident
    from warehouse.incident_workload import NoTrafficError

    try:
        replayable_incident(StatePaths.from_env(), run_id, engine, target)  # before any work
    except ValueError as e:
        fail(str(e))
    result = run_flow(
        f"replaying incident {run_id}",
        replay_incident,
        run_id,
        engine,
        target,
        expected=(FileNotFoundError, ValueError, NoTrafficError),
    )
    console.print(f"replay {result.run_id} of incident {run_id}")
    for line in result.reproduction or ["the incident had no reported spike to reproduce"]:
        console.print(f"  {line}", highlight=False, soft_wrap=True)
    print(result.report)


@app.command()
def report(
    run_id: str = typer.Argument(..., help="Run id (see the runs folder)."),
    detector: str | None = typer.Option(None, help=DETECTOR_HELP + " (default: the run's own)."),
) -> None:
    """Re-analyse a stored run and render its report again."""
    from flows.finish import finish_run

    detector_option(detector)
    paths = StatePaths.from_env()
    if not paths.warehouse.exists():
        fail(f"no warehouse at {paths.warehouse}: run a scenario first")
    try:  # the flow's own finish, minus the ingest: the warehouse already holds the run
        finished = finish_run(paths, run_id, None, in_flow=False, detector=detector)
    except KeyError as e:
        fail(str(e).strip("'\""))
    print(finished.report)


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
    from flows.capacity import capacity_sweep
    from flows.cli_options import CapacityFlags

    flags = CapacityFlags(users, rates, search, start, max_load, max_steps, slo, attainment)
    options = flags.options(scenario)  # exits 2 on a bad flag, before Prefect starts
    result = run_flow(f"capacity sweep of {scenario.name}", capacity_sweep, str(scenario), options)
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
        fail(str(e), 2)
    bad = result.regressed
    console.print(
        f"{run_b} vs {run_a}: "
        + (f"[red]regressed[/red] {', '.join(bad)}" if bad else "[green]no regression[/green]")
    )
    print(result.report)
    raise typer.Exit(1 if bad else 0)


app.command()(engine)  # `spikelens engine ...`: serve the engine alone (flows/engine_command.py)
app.command()(confirm)  # `spikelens confirm RUN_ID`: prove a cause (flows/cli_confirm.py)
app.command()(incident)  # `spikelens incident --prometheus …` (flows/observed_command.py)
app.command()(agent)  # `spikelens agent --pid …`: Prometheus exporter (flows/agent_command.py)
for command in (deploy, serve, export):  # operations (flows/ops_commands.py)
    app.command()(command)


@app.command()
def evaluate(
    suite_dir: Path | None = typer.Argument(
        None, file_okay=False, help="Folder of fault scenarios (default: scenarios/eval)."
    ),
    peers: bool = typer.Option(
        True, help="Also score the RCAEval peers (--peer-methods: BARO, NSigma, CIRCA)."
    ),
    rescore: str | None = typer.Option(
        None, help="Id of an earlier evaluation: re-analyse and score its runs, run nothing."
    ),
    peer_methods: str = typer.Option(
        "baro,nsigma,circa",
        help="RCAEval methods scored as peers, comma-separated (with --peers).",
    ),
    seed: int = typer.Option(0, help="Seed of the draw, the random floor and the intervals."),
    generate: int | None = typer.Option(
        None,
        help="Draw N held-out cases (seeded) into SUITE_DIR (default: a new folder), run them.",
    ),
    engines: str = typer.Option(
        "ours",
        help="With --generate: the engines the cases run on: ours, vllm (make setup-vllm "
        "checkpoint), or both (about 30 % vLLM).",
    ),
    unexplained: int = typer.Option(
        0,
        help="With --generate: also K cases whose truth is 'unexplained' (the forward slowed by "
        "nothing any collector reads; spikelens' engine).",
    ),
    control_minutes: float = typer.Option(
        0.0,
        help="With --generate: also this many minutes of long clean runs (10 min each, engines "
        "alternating under --engines both), for the false-alarm rate.",
    ),
    twins: bool = typer.Option(
        False,
        "--twins",
        help="With --generate: also run every pair's solo twins (the case with one fault alone) "
        "to judge and weigh its partners: a partner under a third of the pair's excess is "
        "scored apart.",
    ),
    confirm: int = typer.Option(
        0,
        min=0,
        max=10,
        help="Then `spikelens confirm` every detected fault's verdict with K runs per arm "
        "(0: off), and --swaps right verdicts with a wrong cause: does confirm catch them?",
    ),
    swaps: int = typer.Option(4, min=0, max=100, help="With --confirm: right verdicts swapped."),
    detector: str | None = typer.Option(
        None, help=DETECTOR_HELP + " (default: each scenario's own; with --rescore, each run's)."
    ),
) -> None:
    """Run a suite of fault scenarios; score detection and attribution vs ground truth and peers."""
    detector_option(detector)
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
    from flows.suite_draw import Extras, generate_suite
    from rca.peers import PEER_METHODS

    methods = tuple(m.strip() for m in peer_methods.split(",") if m.strip()) if peers else ()
    for m in methods:
        if m not in PEER_METHODS:
            fail(f"--peer-methods: {m!r} is not one of {', '.join(PEER_METHODS)}")

    folder = suite_dir or default_suite_dir()
    if (control_minutes or unexplained or twins) and generate is None:
        flag = "--unexplained" if unexplained else "--control-minutes" if control_minutes else ""
        flag = flag or "--twins"
        fail(f"{flag}: the extra cases are drawn with --generate N; add it")
    try:
        if generate is not None:
            draw = f"n{generate}-s{seed}" + ("" if engines == "ours" else f"-{engines}")
            extras = Extras(unexplained, control_minutes, twins)
            draw += f"-u{unexplained}" if unexplained else ""
            draw += f"-c{control_minutes:g}" if control_minutes else ""
            draw += "-t" if twins else ""
            folder = suite_dir or StatePaths.from_env().home / "generated" / draw
            drawn = generate_suite(folder, generate, seed, engines, extras)
            console.print(f"{len(drawn)} cases drawn into {folder}")
        if rescore:
            previous_suite(StatePaths.from_env().reports, rescore)
        else:
            for scenario in suite_scenarios(folder):
                if not unregistered_kinds(scenario):  # those cases are skipped, and listed
                    load_scenario(scenario)
    except (ScenarioError, FileNotFoundError, FileExistsError, ValueError) as e:
        fail(str(e))
    counted = generate is not None  # a held-out draw scores suppressed spikes as 'unexplained'
    result = run_flow(
        "evaluation suite",
        evaluation,
        str(folder),
        None,
        methods,
        rescore,
        seed,
        counted,
        confirm,
        swaps,
        detector,
    )
    det, att = result.scores["detection"], result.scores["attribution"]
    every = att.get("accuracy_all_faults_exact") or {}
    console.print(
        f"{len(result.run_ids)} runs: spike F1 {det['f1']}, attribution accuracy "
        f"{att['accuracy']} on detected faults, {every.get('value')} on every fault "
        f"[{every.get('low')}, {every.get('high')}] (exact 95 %), false alarms/h on controls "
        f"{result.scores['controls']['false_alarms_per_hour']}"
    )
    named = result.scores["controls"].get("false_alarms_by_cause") or {}
    if named:
        console.print(
            "  false alarms named: "
            + ", ".join(f"{cause} {n}" for cause, n in sorted(named.items(), key=lambda kv: -kv[1]))
        )
    invalid = result.scores.get("invalid_runs") or 0
    if invalid:
        ctl = result.scores["controls"]
        console.print(
            f"  {invalid} runs invalid (their load generator saturated), scored all the same; "
            f"{ctl.get('false_alarms_in_invalid_runs', 0)} of the false alarms are in them"
        )
    strict = (result.scores.get("attribution_one_to_one") or {}).get("accuracy_all_faults_exact")
    if strict and strict.get("value") != every.get("value"):
        console.print(
            f"  scored one-to-one (a second fault under one spike counts as missed): "
            f"{strict['value']} [{strict['low']}, {strict['high']}]"
        )
    by_engine = result.scores.get("per_engine") or {}
    for name, part in by_engine.items() if len(by_engine) > 1 else ():
        on = part["attribution"].get("accuracy_all_faults_exact") or {}
        console.print(
            f"  {name}: {part['runs']} runs, {part['faults']} faults, right {on.get('value')} "
            f"[{on.get('low')}, {on.get('high')}] (a miss counts wrong), "
            f"{part['controls']['false_alarms']} false alarms in "
            f"{part['controls']['hours'] * 60:.1f} control min"
        )
    if (acted := result.scores.get("acted")) is not None:
        on = acted["attribution"].get("accuracy_all_faults_exact") or {}
        console.print(
            f"over the {acted['faults']} faults that acted on the raw client latencies "
            f"({acted['not_acted']} did not): accuracy {on.get('value')} "
            f"[{on.get('low')}, {on.get('high')}] (exact 95 %), macro-F1 "
            f"{acted['attribution'].get('macro_f1_all_faults')}"
        )
    if (material := result.scores.get("material")) and material["partners_measured"]:
        on = material["attribution"].get("accuracy_all_faults_exact") or {}
        console.print(
            f"  less the {material['minor']} minor partners (under a third of their pair's "
            f"excess by their solo twins, of {material['partners_measured']} measured): "
            f"accuracy {on.get('value')} [{on.get('low')}, {on.get('high')}] over "
            f"{material['faults']}, macro-F1 {material['attribution'].get('macro_f1_all_faults')}"
        )
    if (away := result.scores.get("excess_elsewhere")) and away["spikes"]:
        console.print(
            f"excess given to causes not injected: {away['mean']:.0%} on average over "
            f"{away['spikes']} detected faults ({away['over_10pct']} over 10 %); "
            f"'unexplained' {away['unexplained_mean']:.0%}"
        )
    if (placebo := result.scores.get("placebo")) and placebo["placebos"]:
        named = {c: v["share"] for c, v in placebo["by_cause"].items() if v["n"]}
        console.print(
            f"clean stretches of the {placebo['runs']} controls as placebo spikes: "
            f"{placebo['named']:.0%} of {placebo['placebos']} named a cause ("
            + ", ".join(f"{c} {v:.0%}" for c, v in sorted(named.items(), key=lambda x: -x[1]))
            + ")"
        )
    if (proof := result.scores.get("confirmation")) is not None:
        right, wrong = proof["right_confirmed_exact"], proof["wrong_not_confirmed_exact"]
        console.print(
            f"confirm: {proof['right_confirmed']}/{proof['right']} right verdicts confirmed "
            f"[{right['low']}, {right['high']}], {proof['wrong_not_confirmed']}/{proof['wrong']} "
            f"wrong ones not confirmed [{wrong['low']}, {wrong['high']}], "
            f"{proof['minutes_per_confirmed']} min per confirmed spike"
        )
    console.print(f"JSON: {result.json_path}")
    print(result.report)


if __name__ == "__main__":
    app()
