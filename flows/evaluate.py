"""`evaluation`: run a suite of fault scenarios and score spikelens against the ground truth,
side by side with BARO, NSigma (RCAEval) and a random floor (issue 6).

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

from flows.incident import incident_replay
from flows.manifest import new_run_id
from flows.paths import StatePaths
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


@task(name="score-suite", cache_policy=NONE, retries=1)
def score_suite(db_path: Path, run_ids: list[str], peers: tuple[str, ...]) -> dict:
    from rca.evaluate import evaluate

    return evaluate(db_path, run_ids, tolerance_windows=2, peers=peers)


@task(name="write-evaluation", cache_policy=NONE)
def write_outputs(suite_id: str, suite_dir: Path, scores: dict, out_dir: Path) -> tuple[str, str]:
    from rca.page_contexts import evaluation_context
    from templates.render import render_evaluation

    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "evaluation.json"
    json_path.write_text(json.dumps({"suite_id": suite_id, "suite_dir": str(suite_dir), **scores},
                                    indent=2, default=str))
    run = {"run_id": suite_id, "scenario_name": f"evaluation suite {suite_dir.name}",
           "command": f"spikelens evaluate {suite_dir}"}
    page = render_evaluation(evaluation_context(scores, run), out_dir, index_href="../index.html")
    return str(json_path), str(page)


@flow(name="evaluation")
def evaluation(suite_dir: str | None = None, state_home: str | None = None,
               peers: tuple[str, ...] = ("baro", "nsigma")) -> EvaluationResult:
    """Run every scenario in `suite_dir` (default scenarios/eval/) and score the analysis."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    folder = Path(suite_dir) if suite_dir else default_suite_dir()
    scenarios = suite_scenarios(folder)
    suite_id = new_run_id("evaluation", folder.name)
    run_ids = []
    for i, scenario in enumerate(scenarios, 1):
        progress.info("case %d/%d: %s", i, len(scenarios), scenario.stem)
        run_ids.append(incident_replay(str(scenario), state_home=str(paths.home),
                                       kind="evaluation").run_id)
    scores = score_suite(paths.warehouse, run_ids, tuple(peers))
    json_path, page = write_outputs(suite_id, folder, scores, paths.reports / suite_id)
    refresh_index(paths.reports)
    return EvaluationResult(suite_id, run_ids, scores, json_path, page)
