"""The run-vs-run page: checks that name the bad key, and what the page says about the two runs."""
import pytest

from templates.compare_context import check_compare_context
from templates.context_checks import ContextError
from templates.render import render_compare


def context():
    row = {"metric": "itl_p50", "baseline": 10.0, "candidate": 16.0, "delta": 6.0, "ci_low": 5.0,
           "ci_high": 7.0, "rel_delta": 0.6, "verdict": "regressed", "unit": "ms"}
    return {"run_a": {"run_id": "a-1", "engine": {"max_num_seqs": 8}, "report_href": "../../a-1/index.html"},
            "run_b": {"run_id": "b-<2>", "engine": {"max_num_seqs": 4}},
            "metrics": [row, {**row, "metric": "error_rate", "delta": 0.0, "ci_low": 0.0, "ci_high": 0.0,
                              "candidate": 10.0, "rel_delta": 0.0, "verdict": "unchanged", "unit": "share"}],
            "differs": ["engine"], "command": "spikelens compare a-1 'b-<2>'"}


def test_page_shows_both_runs_the_verdict_and_what_differs(tmp_path):
    html = render_compare(context(), tmp_path, index_href="../../index.html").read_text()
    assert "b-&lt;2&gt;" in html and "b-<2>" not in html             # escaped
    assert 'href="../../a-1/index.html"' in html and 'id="differs"' in html
    assert "itl_p50 regressed +60.0%" in html and "run-to-run noise of this host is not measured" in html


@pytest.mark.parametrize("breaking,needle", [
    (lambda c: c.pop("run_b"), "context: missing key 'run_b'"),
    (lambda c: c["run_a"].pop("run_id"), "run_a: missing key 'run_id'"),
    (lambda c: c["metrics"][1].update(verdict="worse"), r"metrics\[1\].verdict: must be one of"),
    (lambda c: c["run_a"].update(report_href="javascript:x"), "run_a.report_href: must be a relative link"),
])
def test_a_bad_context_names_the_key(breaking, needle):
    ctx = context()
    breaking(ctx)
    with pytest.raises(ContextError, match=needle):
        check_compare_context(ctx)
