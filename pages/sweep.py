"""The sweep page: one heatmap per metric over the temperature (x) × frequency_penalty (y) grid."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pages.fields import ContextError, finite
from pages.index import ReportEntry
from pages.run_header import RunHeader, read_run_header
from warehouse.db import connect


@dataclass(frozen=True)
class Axis:
    name: str  # the sampling parameter on this axis
    values: tuple[float, ...]  # the grid's values, in order

    def __post_init__(self) -> None:
        if not self.values:
            raise ContextError("values", "must not be empty")


@dataclass(frozen=True)
class SweepMetric:
    key: str  # the cell value's key (an rca.sweep.SweepCell field)
    label: str
    unit: str = ""
    higher_is_worse: bool = True  # colours: the worst cell is the darkest


@dataclass(frozen=True)
class SweepCell:
    x: float
    y: float
    values: Mapping[str, float | None]  # metric key → value (None: no sample)
    requests: int | None = None


@dataclass(frozen=True)
class SweepContext:
    """Everything the sweep page shows; every cell lies on the grid."""

    run: RunHeader
    x: Axis
    y: Axis
    metrics: tuple[SweepMetric, ...]
    cells: tuple[SweepCell, ...]
    headline: str = ""

    def __post_init__(self) -> None:
        for i, c in enumerate(self.cells):
            for axis, value in (("x", c.x), ("y", c.y)):
                if value not in getattr(self, axis).values:
                    raise ContextError(
                        f"cells[{i}].{axis}", f"{value!r} is not one of {axis}.values"
                    )
        if not self.headline.strip():
            object.__setattr__(
                self,
                "headline",
                f"{self.x.name} × {self.y.name} sweep over {len(self.cells)} cells: "
                + ", ".join(m.label for m in self.metrics)
                + ".",
            )

    def entry(self) -> ReportEntry:
        """The page's report.json: a sweep has no verdict."""
        return ReportEntry.of(self.run, "sweep", headline=self.headline)

    def cell_rows(self) -> list[dict]:
        """The cells as plain rows {x, y, requests, <metric key>: value} (tables and charts)."""
        return [{"x": c.x, "y": c.y, "requests": c.requests, **c.values} for c in self.cells]


SWEEP_METRICS = (
    SweepMetric("repeated_3gram_rate", "repeated 3-gram rate", "share", True),
    SweepMetric("entropy_bits", "output entropy", "bits", False),
    SweepMetric("output_tokens", "output length", "tokens", True),
    SweepMetric("e2e_p99_ms", "E2E p99", "ms", True),
    SweepMetric("itl_p99_ms", "ITL p99", "ms", True),
)


def sweep_cells(
    cells: list[dict], x_name: str, y_name: str, metrics: tuple[SweepMetric, ...]
) -> tuple[SweepCell, ...]:
    """Typed cells from rows that carry their coordinates under the axis names
    (rca.sweep.SweepCell.to_dict())."""
    return tuple(
        SweepCell(
            x=c[x_name],
            y=c[y_name],
            requests=c.get("requests"),
            values={m.key: finite(c.get(m.key)) for m in metrics},
        )
        for c in cells
    )


def build_sweep_context(
    db_path: str | Path,
    run_id: str,
    temperatures: list[float],
    penalties: list[float],
    cells: list[dict],
) -> SweepContext:
    """The sweep page of `run_id`; cells off the temperatures × penalties grid are left out."""
    with connect(db_path, read_only=True) as conn:
        run = read_run_header(conn, run_id, with_scenario=False)
    on_grid = [
        c for c in cells if c["temperature"] in temperatures and c["frequency_penalty"] in penalties
    ]
    return SweepContext(
        run=run,
        x=Axis("temperature", tuple(temperatures)),
        y=Axis("frequency_penalty", tuple(penalties)),
        metrics=SWEEP_METRICS,
        cells=sweep_cells(on_grid, "temperature", "frequency_penalty", SWEEP_METRICS),
    )
