"""render_index / render_nightly / render_sweep / render_evaluation on fixture contexts."""

from __future__ import annotations

import json

import pytest

from pages.fields import ContextError
from templates.render import render_evaluation, render_index, render_nightly, render_sweep


def _page(path, parse):
    return parse(path.read_text(encoding="utf-8"))


def test_index_lists_runs_newest_first_with_links(index_context, tmp_path, parse, typed):
    path = render_index(typed("index", index_context), tmp_path)
    tree = _page(path, parse)
    rows = tree.find("table", id="runs").find_all("tr", cls="run-row")
    assert [r.attrs["data-kind"] for r in rows] == ["nightly", "incident", "sweep"]
    assert [r.find("a").attrs["href"] for r in rows][
        1
    ] == "20261130T020000Z-gc-storm-3f2a/index.html"
    assert "hidden" in tree.find("div", id="filters").attrs  # shown by index.js only
    assert [s.attrs for s in tree.find_all("script")] == [{"src": "static/index.js"}]
    assert (tmp_path / "static" / "index.js").is_file() and not (
        tmp_path / "static" / "plotly.min.js"
    ).exists()


@pytest.mark.parametrize(
    "href", ["javascript:alert(1)", "https://example.com/x", "/etc/passwd", "//evil/x"]
)
def test_index_refuses_links_that_are_not_relative(index_context, tmp_path, href, typed):
    index_context["runs"][0]["href"] = href
    with pytest.raises(ContextError, match=r"runs\[0\]\.href: must be a relative link"):
        render_index(typed("index", index_context), tmp_path)


def test_index_encodes_odd_run_ids_and_checks_kind(index_context, tmp_path, parse, typed):
    index_context["runs"][0]["href"] = 'a b#"><img src=x>/index.html'
    tree = _page(render_index(typed("index", index_context), tmp_path), parse)
    assert not tree.find_all("img")
    assert any(
        a.attrs["href"] == "a%20b#%22%3E%3Cimg%20src%3Dx%3E/index.html" for a in tree.find_all("a")
    )
    index_context["runs"][1]["kind"] = "weekly"
    with pytest.raises(
        ContextError,
        match=r"runs\[1\]\.kind: must be one of incident, nightly, replay, sweep, evaluation",
    ):
        render_index(typed("index", index_context), tmp_path)


def test_nightly_shows_delta_ci_and_verdict(nightly_context, tmp_path, parse, typed):
    tree = _page(render_nightly(typed("nightly", nightly_context), tmp_path), parse)
    assert tree.find("p", id="headline").text == (
        "regressed Against median of the last 6 nightlies: itl_p99 (nightly-small) regressed +18.2%."
    )
    rows = tree.find("table", cls="nightly-metrics").find_all("tr", cls="metric-row")
    cells = [td.text for td in rows[0].find_all("td")]
    assert cells[:6] == [
        "nightly-small",
        "itl_p99",
        "44.6 ms",
        "52.7 ms",
        "8.1 ms (+18.2%)",
        "[4.2 ms, 11.9 ms]",
    ]
    assert cells[7] == "±9.3%"  # the spread between baseline runs, which the change exceeds
    assert cells[8] == "regressed"
    bar = rows[0].find("svg", cls="ci")
    zero = float(bar.find("line", cls="zero").attrs["x1"])
    interval = bar.find("line", cls="interval")
    assert (
        zero < float(interval.attrs["x1"]) < float(interval.attrs["x2"])
    )  # CI entirely above zero
    # NaN from rca reads as a dash; no bar is drawn for an unknown interval.
    missing = [td.text for td in rows[2].find_all("td")]
    assert missing[3:9] == ["—", "—", "[—, —]", "—", "—", "insufficient"]
    charts = json.loads(tree.find("script", id="chart-data").text)
    assert [c["id"] for c in charts] == ["chart-trend-0", "chart-trend-1"]
    assert len(charts[0]["figure"]["data"][0]["y"]) == 7 and charts[0]["figure"]["data"][1][
        "y"
    ] == [52.7]


def test_nightly_verdict_is_derived_from_the_metrics(nightly_context, tmp_path, parse, typed):
    nightly_context["metrics"][0]["verdict"] = "improved"
    nightly_context["title"] = "Replay vs original"
    tree = _page(render_nightly(typed("nightly", nightly_context), tmp_path), parse)
    assert tree.find("span", cls="verdict").text == "improved"
    assert tree.find("title").text.startswith("Replay vs original: improved")


def test_nightly_rejects_unknown_verdicts_and_inverted_intervals(nightly_context, tmp_path, typed):
    nightly_context["metrics"][1]["ci_low"] = 20.0
    with pytest.raises(ContextError, match=r"metrics\[1\]\.ci_low: 20.0 is above ci_high 15.2"):
        render_nightly(typed("nightly", nightly_context), tmp_path)
    nightly_context["metrics"][1]["ci_low"] = -14.0
    nightly_context["metrics"][0]["verdict"] = "regression"
    with pytest.raises(
        ContextError, match=r"metrics\[0\]\.verdict: must be one of regressed, improved"
    ):
        render_nightly(typed("nightly", nightly_context), tmp_path)


def test_sweep_draws_a_heatmap_table_and_chart_per_metric(sweep_context, tmp_path, parse, typed):
    tree = _page(render_sweep(typed("sweep", sweep_context), tmp_path), parse)
    tables = tree.find_all("table", cls="grid")
    assert len(tables) == 4
    loops = tables[0].find_all("tr")[1:]
    assert [r.find("th").text for r in loops] == ["0.0", "0.5", "1.0"]
    first = loops[0].find_all("td")
    assert [c.text for c in first] == ["0.54", "0.39", "0.3", "0.21"]
    # Highest repeated-n-gram rate gets the darkest colour; the missing ITL cell reads as a dash.
    assert first[0].attrs["style"] == "background: rgb(128, 0, 38); color: #ffffff"
    assert tables[3].find_all("tr")[-1].find_all("td")[-1].text == "—"
    charts = json.loads(tree.find("script", id="chart-data").text)
    assert len(charts) == 4 and charts[0]["figure"]["data"][0]["type"] == "heatmap"
    assert charts[0]["figure"]["data"][0]["z"][0] == [0.54, 0.39, 0.3, 0.21]


def test_sweep_cells_must_lie_on_the_grid(sweep_context, tmp_path, typed):
    sweep_context["cells"][2]["x"] = 9.9
    with pytest.raises(ContextError, match=r"cells\[2\]\.x: 9.9 is not one of x.values"):
        render_sweep(typed("sweep", sweep_context), tmp_path)


def test_evaluation_confusion_scores_and_methods(evaluation_context, tmp_path, parse, typed):
    tree = _page(render_evaluation(typed("evaluation", evaluation_context), tmp_path), parse)
    assert tree.find("p", id="headline").text == "37 of 45 cases attributed to the right cause."
    assert "82%" in tree.find(id="fact-what").text
    rows = tree.find("table", cls="confusion").find_all("tr")[1:]
    assert len(rows) == 5 and [td.text for td in rows[2].find_all("td")] == [
        "0",
        "0",
        "7",
        "0",
        "3",
        "10",
    ]
    assert len(tree.find("table", cls="confusion").find_all("td", cls="diagonal")) == 5
    methods = tree.find("table", cls="methods").find_all("tr")[1:]
    best = [[td.text for td in r.find_all("td", cls="best")] for r in methods]
    assert best == [["0.91", "0.82", "1.40 s"], []]
    assert tree.find("table", cls="cases").find("a").attrs["href"] == "r1/index.html"


def test_evaluation_matrix_must_be_square(evaluation_context, tmp_path, typed):
    evaluation_context["confusion"][3] = [1, 0]
    with pytest.raises(ContextError, match=r"confusion\[3\]: 2 columns for 5 labels"):
        render_evaluation(typed("evaluation", evaluation_context), tmp_path)


def test_pages_escape_untrusted_text(
    nightly_context, sweep_context, xss_strings, tmp_path, parse, typed
):
    script, img = xss_strings
    nightly_context["run"]["scenario_name"] = script
    nightly_context["metrics"][0]["metric"] = img
    for t in nightly_context["trend"]:
        t["metric"] = img if t["metric"] == "itl_p99" else t["metric"]
    sweep_context["x"]["name"] = img
    sweep_context["metrics"][0]["label"] = script
    for render, ctx, name in (
        (render_nightly, typed("nightly", nightly_context), "n"),
        (render_sweep, typed("sweep", sweep_context), "s"),
    ):
        html = render(ctx, tmp_path / name).read_text(encoding="utf-8")
        tree = parse(html)
        assert script not in html and img not in html
        assert not tree.find_all("img")
        assert all(
            s.attrs.get("src", "").startswith("static/")
            or s.attrs.get("type") == "application/json"
            for s in tree.find_all("script")
        )
