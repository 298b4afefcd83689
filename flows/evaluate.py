"""`evaluation`: run a suite of fault scenarios and score spikelens against the ground truth,
side by side with BARO, NSigma (RCAEval) and a random floor.

Every scenario of the suite folder runs as an incident (kind `evaluation`); then detection
(event precision/recall/F1 with one-to-one matching, 2-window tolerance, delay), false alarms on
the no-fault controls, and attribution (accuracy, macro-F1, confusion) are computed over all of
them. JSON and an HTML page are written under reports/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NONE

from flows.manifest import new_run_id
from flows.paths import StatePaths
from flows.run_scenario import run_scenario
from flows.tasks import progress, refresh_index


def default_suite_dir() -> Path:
    return Path(str(resources.files("scenarios") / "eval"))


@dataclass
class EvaluationResult:
    suite_id: str
    run_ids: list[str]
    scores: dict
    json_path: str
    report: str


def suite_scenarios(suite_dir: Path) -> list[Path]:
    files = sorted(suite_dir.glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"{suite_dir}: no scenario (*.yaml) files")
    return files


def unregistered_kinds(scenario: Path) -> list[str]:
    """Fault kinds the scenario names that this build does not know (a suite may carry cases for
    kinds that land later: those cases are skipped and listed, not run and not failed)."""
    import yaml

    from spikelens_common.fault_catalogue import FAULT_CAUSES

    raw = yaml.safe_load(scenario.read_text()) or {}
    faults = raw.get("faults") or [] if isinstance(raw, dict) else []
    kinds = [str(f.get("kind")) for f in faults if isinstance(f, dict)]
    return sorted({k for k in kinds if k not in FAULT_CAUSES})


@task(name="score-suite", cache_policy=NONE, retries=1)
def score_suite(
    db_path: Path,
    run_ids: list[str],
    peers: tuple[str, ...],
    seed: int = 0,
    count_suppressed: bool = False,
    twins: dict[str, tuple[str, int]] | None = None,
) -> dict:
    from rca.evaluate import evaluate

    return evaluate(
        db_path,
        run_ids,
        tolerance_windows=2,
        peers=peers,
        seed=seed,
        count_suppressed=count_suppressed,
        twins=twins,
    )


def twin_runs(run_of: dict[str, str]) -> dict[str, tuple[str, int]]:
    """twin run id → (its pair's run id, the fault it runs alone), from scenario name → run id:
    the suite's solo twins (flows.suite_draw.twin_of) whose pair ran too."""
    from flows.suite_draw import twin_of

    out = {}
    for name, run_id in run_of.items():
        twin = twin_of(name)
        if twin is not None and twin[0] in run_of:
            out[run_id] = (run_of[twin[0]], twin[1])
    return out


@task(name="write-evaluation", cache_policy=NONE)
def write_outputs(
    suite_id: str, suite_dir: Path, run_ids: list[str], scores: dict, out_dir: Path
) -> tuple[str, str]:
    from pages.evaluation import build_evaluation_context
    from pages.run_header import RunHeader
    from templates.render import render_evaluation

    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "evaluation.json"
    json_path.write_text(
        json.dumps(
            {"suite_id": suite_id, "suite_dir": str(suite_dir), "run_ids": run_ids, **scores},
            indent=2,
            default=str,
        )
    )
    detector = scores.get("detector")
    run = RunHeader(
        run_id=suite_id,
        scenario_name=f"evaluation suite {suite_dir.name}",
        command=f"spikelens evaluate {suite_dir}" + (f" --detector {detector}" if detector else ""),
    )
    page = render_evaluation(
        build_evaluation_context(scores, run), out_dir, index_href="../index.html"
    )
    return str(json_path), str(page)


@task(name="reanalyze-run", cache_policy=NONE, retries=1)
def reanalyze(db_path: Path, run_dir: Path, detector: str | None = None) -> None:
    """Ingest and analyse a stored run again with the current code (its raw files are unchanged;
    re-ingesting picks up columns a newer schema stores); `detector`: the preset (None: the
    run's own)."""
    from rca.analyze import analyze_run
    from warehouse.ingest import ingest_run

    ingest_run(db_path, run_dir)
    analyze_run(db_path, run_dir.name, preset_name=detector)


def previous_suite(reports: Path, suite_id: str) -> dict:
    """The evaluation.json of an earlier suite run (its run ids and folder)."""
    path = reports / suite_id / "evaluation.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no evaluation with id {suite_id!r}")
    return json.loads(path.read_text())


def confirm_events(paths: StatePaths, per_run: list[dict], repeats: int, swaps: int) -> dict:
    """`spikelens confirm` of every detected fault's verdict and of `swaps` swapped right ones
    (rca.confirm_eval), one after the other; their scores."""
    import time

    from flows.confirm import confirm_spike
    from rca.confirm_eval import ConfirmOutcome, confirmation_scores, plan_confirmations

    cases = plan_confirmations(per_run, swaps)
    outcomes = []
    for i, case in enumerate(cases, 1):
        progress.info(
            "confirming %d/%d: %s spike %d as %s%s",
            i,
            len(cases),
            case.run_id,
            case.spike_id,
            case.cause,
            " (swapped)" if case.swapped else "",
        )
        started = time.monotonic()
        try:
            result = confirm_spike(case.run_id, case.spike_id, repeats, case.cause, str(paths.home))
        except Exception as e:  # one failed confirmation must not lose the suite's hour of runs
            progress.warning("confirmation %d failed: %s", i, e)
            wall_s = round(time.monotonic() - started, 1)
            outcomes.append(ConfirmOutcome(case, "inconclusive", None, wall_s, None, str(e)))
            continue
        share = (result.share or {}).get("point")
        wall_s = round(time.monotonic() - started, 1)
        outcomes.append(ConfirmOutcome(case, result.verdict, share, wall_s, result.report))
    return confirmation_scores(outcomes)


@flow(name="evaluation")
def evaluation(
    suite_dir: str | None = None,
    state_home: str | None = None,
    peers: tuple[str, ...] = ("baro", "nsigma"),
    rescore: str | None = None,
    seed: int = 0,
    count_suppressed: bool = False,
    confirm_repeats: int = 0,
    confirm_swaps: int = 4,
    detector: str | None = None,
) -> EvaluationResult:
    """Run every scenario in `suite_dir` (default scenarios/eval/) and score the analysis.

    `rescore`: the id of an earlier evaluation; its runs are analysed again with the current code
    and scored, without running anything (for tuning detection and attribution on fixed data).
    A case whose fault kind this build does not register is skipped and listed under `skipped`.
    `seed`: the random floor's and the bootstrap intervals' (the same seed, the same figures).
    `count_suppressed`: suppressed spikes are scored as 'unexplained' answers (and false alarms
    in controls) instead of being left out — for generated suites (flows.suite_draw).
    A suite's solo twins (`<case>-solo<k>`, flows.suite_draw) measure their pair's partners and
    are not scored as cases (rca.solo_twins); evaluation.json keeps which they are, for rescore.
    `confirm_repeats` K > 0: then every detected fault's verdict is confirmed (`spikelens
    confirm`, K repeats per arm), and `confirm_swaps` right verdicts with a swapped cause too:
    how often a right verdict is confirmed and a wrong one is not (rca.confirm_eval).
    `detector`: every run analysed with this preset (rca.config.PRESETS; None: each scenario's
    own), recorded in evaluation.json: one recorded suite scored under two presets compares them.
    """
    skipped: list[dict] = []
    twins: dict[str, tuple[str, int]] = {}
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    if rescore:
        earlier = previous_suite(paths.reports, rescore)
        folder, run_ids = Path(earlier["suite_dir"]), list(earlier["run_ids"])
        twins = {t: (str(p), int(k)) for t, (p, k) in (earlier.get("twins") or {}).items()}
        # scored as it was: a held-out draw counts its suppressed spikes as 'unexplained'
        count_suppressed = bool(earlier.get("count_suppressed", count_suppressed))
        for i, run_id in enumerate(run_ids, 1):
            progress.info("re-analysing %d/%d: %s", i, len(run_ids), run_id)
            reanalyze(paths.warehouse, paths.run_dir(run_id), detector)
    else:
        folder = Path(suite_dir) if suite_dir else default_suite_dir()
        scenarios = suite_scenarios(folder)
        run_ids, run_of = [], {}
        for i, scenario in enumerate(scenarios, 1):
            missing = unregistered_kinds(scenario)
            if missing:
                progress.info(
                    "case %d/%d: %s skipped (%s not registered)",
                    i,
                    len(scenarios),
                    scenario.stem,
                    ", ".join(missing),
                )
                skipped.append({"scenario": scenario.name, "unregistered_kinds": missing})
                continue
            progress.info("case %d/%d: %s", i, len(scenarios), scenario.stem)
            ran = run_scenario(
                str(scenario),
                state_home=str(paths.home),
                kind="evaluation",
                overrides={"detector": detector} if detector else None,
            )
            run_ids.append(ran.run_id)
            run_of[scenario.stem] = ran.run_id
        twins = twin_runs(run_of)
    suite_id = new_run_id("evaluation", folder.name)
    scores = {
        **score_suite(paths.warehouse, run_ids, tuple(peers), seed, count_suppressed, twins),
        "skipped": skipped,
        "twins": twins,
        "detector": detector,
    }
    if confirm_repeats > 0:
        scores["confirmation"] = confirm_events(
            paths, scores["per_run"], confirm_repeats, confirm_swaps
        )
    json_path, page = write_outputs(suite_id, folder, run_ids, scores, paths.reports / suite_id)
    refresh_index(paths.reports)
    return EvaluationResult(suite_id, run_ids, scores, json_path, page)
