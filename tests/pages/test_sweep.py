"""pages.sweep: the sweep page's grid from rca.sweep's cells; cells must lie on the grid."""

import pytest

from pages.fields import ContextError
from pages.sweep import SWEEP_METRICS, Axis, SweepContext, build_sweep_context, sweep_cells
from rca.analyze import analyze_run
from rca.sweep import sweep_cells as rca_sweep_cells


def test_sweep_page_keeps_the_cells_on_its_grid(warehouse_with):
    db, run_id = warehouse_with(incident=None)
    analyze_run(db, run_id)
    cells = [c.to_dict() for c in rca_sweep_cells(db, run_id)]
    assert cells
    temperatures = sorted({c["temperature"] for c in cells})
    penalties = sorted({c["frequency_penalty"] for c in cells})
    ctx = build_sweep_context(
        db, run_id, temperatures, penalties, cells + [{**cells[0], "temperature": 99.0}]
    )
    assert len(ctx.cells) == len(cells)  # the off-grid cell is left out
    assert (ctx.x.name, ctx.y.name) == ("temperature", "frequency_penalty")
    assert set(ctx.cells[0].values) == {m.key for m in SWEEP_METRICS}
    assert ctx.cell_rows()[0]["requests"] == cells[0]["requests"]


def test_a_cell_off_the_grid_or_an_empty_axis_is_refused(warehouse_with):
    from pages.run_header import RunHeader

    run = RunHeader(run_id="r", command="c")
    cells = sweep_cells(
        [{"temperature": 9.9, "frequency_penalty": 0.0}],
        "temperature",
        "frequency_penalty",
        SWEEP_METRICS,
    )
    with pytest.raises(ContextError, match=r"^cells\[0\]\.x: 9.9 is not one of x.values$"):
        SweepContext(
            run,
            Axis("temperature", (0.5,)),
            Axis("frequency_penalty", (0.0,)),
            SWEEP_METRICS,
            cells,
        )
    with pytest.raises(ContextError, match=r"^values: must not be empty$"):
        Axis("temperature", ())
