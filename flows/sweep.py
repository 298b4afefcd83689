"""`penalty_sweep`: one run over a temperature × frequency_penalty grid, summarised per cell.

Each request draws its cell uniformly from the grid (the workload's sampling lists), so one
engine start and one Locust run cover the whole grid; the cells are then grouped from the
requests' recorded sampling parameters and the engine's output token ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NONE

from flows.paths import StatePaths
from flows.run_scenario import run_scenario
from flows.tasks import progress, refresh_index

DEFAULT_TEMPERATURES = (0.1, 0.45, 0.8, 1.15, 1.5)
DEFAULT_PENALTIES = (0.0, 0.5, 1.0, 1.5, 2.0)


def default_base_scenario() -> Path:
    return Path(str(resources.files("scenarios") / "sweep-base.yaml"))


@dataclass
class SweepResult:
    run_id: str
    report: str | None
    cells: list[dict]


def validate_grid(temperatures: list[float], penalties: list[float]) -> None:
    """Ranges of docs/design.md's sampling semantics; errors name the parameter and the range."""
    for t in temperatures:
        if not 0.0 <= t <= 2.0:
            raise ValueError(f"temperature {t} out of range [0, 2]")
    for p in penalties:
        if not -2.0 <= p <= 2.0:
            raise ValueError(f"frequency_penalty {p} out of range [-2, 2]")
    if not temperatures or not penalties:
        raise ValueError("the grid needs at least one temperature and one frequency_penalty")


@task(name="sweep-cells", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def summarise_cells(db_path: Path, run_id: str) -> list[dict]:
    from rca.sweep import sweep_cells

    return [c.to_dict() for c in sweep_cells(db_path, run_id)]


@task(name="render-sweep-report", cache_policy=NONE)
def render_sweep_report(
    db_path: Path,
    run_id: str,
    cells: list[dict],
    temperatures: list[float],
    penalties: list[float],
    out_dir: Path,
) -> Path:
    from pages.sweep import build_sweep_context
    from templates.render import render_sweep

    return render_sweep(
        build_sweep_context(db_path, run_id, temperatures, penalties, cells),
        out_dir,
        index_href="../../index.html",
    )


@flow(name="penalty-sweep")
def penalty_sweep(
    scenario_path: str | None = None,
    temperatures: list[float] | None = None,
    penalties: list[float] | None = None,
    state_home: str | None = None,
) -> SweepResult:
    """Run the grid and summarise repeated 3-gram rate, entropy, length and latency per cell
    (the DEFAULT_TEMPERATURES × DEFAULT_PENALTIES grid unless given)."""
    temperatures = list(DEFAULT_TEMPERATURES if temperatures is None else temperatures)
    penalties = list(DEFAULT_PENALTIES if penalties is None else penalties)
    validate_grid(temperatures, penalties)
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    overrides = {
        "workload": {
            "sampling": {"temperature": list(temperatures), "frequency_penalty": list(penalties)}
        }
    }
    run = run_scenario(
        str(scenario_path or default_base_scenario()),
        state_home=str(paths.home),
        kind="sweep",
        overrides=overrides,
    )
    progress.info("summarising %d × %d cells", len(temperatures), len(penalties))
    cells = summarise_cells(paths.warehouse, run.run_id)
    report = render_sweep_report(
        paths.warehouse,
        run.run_id,
        cells,
        temperatures,
        penalties,
        paths.reports / run.run_id / "sweep",
    )
    refresh_index(paths.reports)
    return SweepResult(run.run_id, str(report), cells)
