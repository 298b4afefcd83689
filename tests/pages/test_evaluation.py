"""pages.evaluation: the evaluation page laid out from rca.evaluate.evaluate()'s result."""

from pages.evaluation import CauseScore, build_evaluation_context
from pages.run_header import RunHeader
from rca.analyze import analyze_run
from rca.evaluate import MISSED, evaluate
from templates.render import render_evaluation


def test_evaluation_context_renders(warehouse_with, tmp_path):
    ids = []
    for spec in ({"incident": "gc"}, {"incident": None}):
        db, run_id = warehouse_with(**spec)
        analyze_run(db, run_id)
        ids.append(run_id)
    ctx = build_evaluation_context(
        evaluate(db, ids, peers=()), RunHeader(run_id="eval-1", command="spikelens evaluate")
    )
    assert ctx.labels[-1] == MISSED and len(ctx.confusion) == len(ctx.labels)
    assert ctx.confusion[ctx.labels.index("memory")][ctx.labels.index("memory")] == 1
    assert ctx.per_cause == (
        CauseScore(cause="memory", precision=1.0, recall=1.0, f1=1.0, support=1),
    )
    assert [m.method for m in ctx.methods] == ["spikelens", "random"]
    assert ctx.headline.startswith("1 of 1 injected faults")
    assert render_evaluation(ctx, tmp_path / "eval").exists()
