"""pages.compare: both sides from the warehouse, a bad context names its key, and what the page
says about the two runs."""

import pytest

from pages.compare import CompareContext, build_compare_context
from pages.fields import ContextError
from pages.from_mapping import from_mapping
from rca.compare import MetricVerdict
from templates.render import render_compare


def context():
    row = {
        "metric": "itl_p50",
        "baseline": 10.0,
        "candidate": 16.0,
        "delta": 6.0,
        "ci_low": 5.0,
        "ci_high": 7.0,
        "rel_delta": 0.6,
        "verdict": "regressed",
        "unit": "ms",
    }
    return {
        "run_a": {
            "run_id": "a-1",
            "engine": {"max_num_seqs": 8},
            "report_href": "../../a-1/index.html",
        },
        "run_b": {"run_id": "b-<2>", "engine": {"max_num_seqs": 4}},
        "metrics": [
            row,
            {
                **row,
                "metric": "error_rate",
                "delta": 0.0,
                "ci_low": 0.0,
                "ci_high": 0.0,
                "candidate": 10.0,
                "rel_delta": 0.0,
                "verdict": "unchanged",
                "unit": "share",
            },
        ],
        "differs": ["engine"],
        "command": "spikelens compare a-1 'b-<2>'",
    }


def test_page_shows_both_runs_the_verdict_and_what_differs(tmp_path):
    ctx = from_mapping(CompareContext, context())
    html = render_compare(ctx, tmp_path, index_href="../../index.html").read_text()
    assert "b-&lt;2&gt;" in html and "b-<2>" not in html  # escaped
    assert 'href="../../a-1/index.html"' in html and 'id="differs"' in html
    assert (
        "itl_p50 regressed +60.0%" in html
        and "run-to-run noise of this host is not measured" in html
    )


@pytest.mark.parametrize(
    "breaking,needle",
    [
        (lambda c: c.pop("run_b"), "context: missing key 'run_b'"),
        (lambda c: c["run_a"].pop("run_id"), "run_a: missing key 'run_id'"),
        (
            lambda c: c["metrics"][1].update(verdict="worse"),
            r"metrics\[1\].verdict: must be one of",
        ),
        (
            lambda c: c["run_a"].update(report_href="javascript:x"),
            "run_a.report_href: must be a relative link",
        ),
    ],
)
def test_a_bad_context_names_the_key(breaking, needle):
    ctx = context()
    breaking(ctx)
    with pytest.raises(ContextError, match=needle):
        from_mapping(CompareContext, ctx)


def test_both_sides_come_from_the_warehouse(warehouse_with, tmp_path):
    db, run_a = warehouse_with(incident=None)
    _, run_b = warehouse_with(incident="gc")
    (tmp_path / run_a).mkdir()
    (tmp_path / run_a / "index.html").write_text("<html></html>")
    verdict = MetricVerdict("itl_p50", 20.0, 26.0, 6.0, 5.0, 7.0, 0.3, "regressed", 9, 9)
    ctx = build_compare_context(
        db,
        run_a,
        run_b,
        [verdict.to_dict()],
        reports_root=tmp_path,
        out_dir=tmp_path / run_b / f"vs-{run_a}",
    )
    assert (ctx.run_a.run_id, ctx.run_b.run_id, ctx.verdict) == (run_a, run_b, "regressed")
    assert ctx.run_a.report_href == f"../../{run_a}/index.html" and ctx.run_b.report_href is None
    assert ctx.metrics[0].unit == "ms" and ctx.metrics[0].n_baseline == 9
    assert ctx.command == f"spikelens compare {run_a} {run_b}" and ctx.run.run_id == run_b
    assert ctx.differs == ("scenario_name",) and ctx.run_b.scenario_name == "sim-gc"
    assert (
        ctx.run_a.engine == ctx.run_b.engine == {"model": "sim", "tp": 1} and ctx.run_b.load is None
    )
    with pytest.raises(KeyError, match="nope"):
        build_compare_context(db, run_a, "nope", [])
