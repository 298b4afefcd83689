"""render_incident on a fixture context: the page's structure, its chart, offline assets, escaping."""

from __future__ import annotations

import filecmp
import json

import pytest

from pages.fields import ContextError
from pages.from_mapping import from_mapping
from pages.incident import IncidentContext
from templates import render
from templates.render import plotly_js_path, render_incident


def _typed(data: dict) -> IncidentContext:
    return from_mapping(IncidentContext, data)


@pytest.fixture
def page(incident_context, tmp_path, parse):
    path = render_incident(_typed(incident_context), tmp_path / "run")
    return parse(path.read_text(encoding="utf-8"))


def test_writes_index_and_its_stylesheet(incident_context, tmp_path):
    path = render_incident(_typed(incident_context), tmp_path / "out")
    assert path == tmp_path / "out" / "index.html"
    assert (tmp_path / "out" / "static" / "report.css").stat().st_size > 0


def test_headline_is_at_the_top(page, incident_context):
    headline = page.find("p", id="headline")
    assert headline.text == incident_context["headline"]
    # The first section holds what / when / why / reproduce before any detail table.
    summary = page.find("section", id="summary")
    assert [f.attrs["id"] for f in summary.find_all(cls="fact")] == [
        "fact-what",
        "fact-when",
        "fact-why",
        "fact-reproduce",
    ]
    assert summary.find("code", id="command").text == incident_context["run"]["command"]
    assert "00:20–00:32" in summary.find(id="fact-when").text
    assert "78%" in summary.find(id="fact-why").text


def test_spike_table_has_a_row_per_spike(page):
    rows = page.find("table", cls="spike-table").find_all("tr", cls="spike-row")
    assert len(rows) == 1
    cells = [td.text for td in rows[0].find_all("td")]
    assert cells[1:7] == ["ITL p99", "00:20–00:32", "12 s", "261 ms", "45 ms", "5.8×"]
    assert cells[7] == "9.4"
    assert cells[8] == "memory 78%"


def test_share_bars_are_sorted_and_sized_by_share(page):
    rows = page.find("section", id="spike-1").find_all("tr", cls="share-row")
    assert [r.attrs["data-cause"] for r in rows] == ["memory", "unexplained", "load"]
    widths = [r.find("div", cls="fill").attrs["style"] for r in rows]
    assert widths == ["width: 78.0%", "width: 15.0%", "width: 7.0%"]
    evidence = page.find("section", id="spike-1").find("table", cls="evidence")
    signals = [c.text for c in evidence.find_all("code")]
    assert signals == ["gc_pause_ms_mean", "gc_pauses_per_min", "arrivals_per_s"]


def test_svg_timeline_has_series_spike_band_and_gc_marks(page, incident_context):
    svg = page.find("svg", cls="timeline")
    series = {p.attrs["data-series"]: p.attrs["d"] for p in svg.find_all("path", cls="line")}
    assert set(series) == {"itl_p50_ms", "itl_p99_ms", "ttft_p99_ms", "e2e_p99_ms"}
    assert series["itl_p99_ms"].count("M") == 1 and series["itl_p99_ms"].count("L") == 59
    assert series["ttft_p99_ms"].count("M") == 2  # the empty window breaks the line
    bands = svg.find_all("rect", cls="band")
    assert len(bands) == 1 and float(bands[0].attrs["width"]) > 0
    assert len(svg.find_all("line", cls="gc-mark")) == len(incident_context["gc_pauses"])
    (fault,) = svg.find_all("rect", cls="fault-mark")
    assert (
        fault.attrs["x"] == bands[0].attrs["x"] and fault.attrs["width"] == bands[0].attrs["width"]
    )
    assert fault.find("title").text == "injected memory.gc_storm (memory) 00:20–00:32"


def test_band_covers_the_spike_seconds(page):
    svg = page.find("svg", cls="timeline")
    frame = svg.find("rect", cls="frame")
    left, width = float(frame.attrs["x"]), float(frame.attrs["width"])
    band = svg.find("rect", cls="band")
    start_s = (float(band.attrs["x"]) - left) / width * 60
    end_s = start_s + float(band.attrs["width"]) / width * 60
    assert start_s == pytest.approx(20, abs=0.1) and end_s == pytest.approx(32, abs=0.1)


def test_ground_truth_comparison_and_config(page, incident_context):
    fault = page.find("section", id="ground-truth").find("tr", cls="fault-row")
    assert [td.text for td in fault.find_all("td")] == [
        "memory.gc_storm",
        "memory",
        "00:20–00:32",
        "yes",
        "memory",
        "matched",
    ]
    comparison = page.find("table", cls="comparison").find_all("tr")[1:]
    assert [td.text for td in comparison[1].find_all("td")] == [
        "GC pauses per minute",
        "8.60 /min",
        "66 /min",
        "7.7×",
    ]
    assert page.find("pre", cls="yaml").text.startswith("name: gc-storm")


ALLOWED_SCRIPTS = [
    {"type": "application/json", "id": "chart-data"},
    {"src": "static/plotly.min.js"},
    {"src": "static/charts.js"},
]


def test_page_needs_no_network(page, tmp_path):
    for el in page.iter():
        for attr in ("src", "href"):
            value = el.attrs.get(attr) or ""
            assert not value.startswith(("http:", "https:", "//")), (el.tag, value)
    assert [s.attrs for s in page.find_all("script")] == ALLOWED_SCRIPTS
    for name in ("plotly.min.js", "charts.js", "report.css"):
        assert (tmp_path / "run" / "static" / name).stat().st_size > 0


def test_without_interactive_charts_there_is_no_script(incident_context, tmp_path, parse):
    path = render_incident(_typed(incident_context), tmp_path / "plain", interactive=False)
    tree = parse(path.read_text(encoding="utf-8"))
    assert not tree.find_all("script") and not tree.find_all(cls="plot")
    assert tree.find("svg", cls="timeline")
    assert not (tmp_path / "plain" / "static" / "plotly.min.js").exists()


def test_interactive_charts_have_data_and_a_noscript_summary(page):
    charts = json.loads(page.find("script", id="chart-data").text)
    assert [c["id"] for c in charts] == ["chart-latency", "chart-stages", "chart-load"]
    latency = charts[0]["figure"]
    assert [t["name"] for t in latency["data"]] == [
        "ITL p50",
        "ITL p99",
        "TTFT p99",
        "E2E p99",
        "GC pause",
    ]
    shapes = latency["layout"]["shapes"]
    assert [(s["x0"], s["x1"]) for s in shapes if s["y0"] == 0] == [(20.0, 32.0)]  # the spike band
    assert [(s["x0"], s["x1"]) for s in shapes if s["y0"] > 1] == [
        (20.0, 32.0)
    ]  # the injected fault
    for c in charts:
        assert page.find("div", id=c["id"], cls="plot")
    summary = page.find("table", cls="chart-summary")
    assert summary.find_all("td")[0].text == "ITL p50"


def test_hostile_strings_render_as_text(hostile_context, xss_strings, tmp_path, parse):
    html = render_incident(_typed(hostile_context), tmp_path / "evil").read_text(encoding="utf-8")
    tree = parse(html)
    assert [s.attrs for s in tree.find_all("script")] == ALLOWED_SCRIPTS
    assert "</" not in tree.find("script", id="chart-data").text  # JSON cannot close its element
    assert not tree.find_all("img")
    assert not [(e.tag, k) for e in tree.iter() for k in e.attrs if k.startswith("on")]
    script, img = xss_strings
    assert script not in html and img not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # The strings come through intact as text, where a reader can see them.
    assert script in tree.find("p", id="headline").text
    assert img in tree.find("code", id="command").text
    assert any(script in li.text for li in tree.find("ul", cls="errors").find_all("li"))


def test_missing_key_is_named(incident_context, tmp_path):
    del incident_context["spikes"][0]["peak_ms"]
    with pytest.raises(ContextError, match=r"spikes\[0\]: missing key 'peak_ms'"):
        render_incident(_typed(incident_context), tmp_path / "x")
    assert not (tmp_path / "x" / "index.html").exists()


def test_empty_run_still_renders(incident_context, tmp_path, parse):
    for key in ("windows", "spikes", "gc_pauses", "faults", "comparison"):
        incident_context[key] = []
    incident_context["headline"] = ""
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "quiet").read_text(encoding="utf-8")
    )
    assert tree.find("p", id="headline").text.startswith("No latency spike in ")
    assert not tree.find_all("svg")
    assert tree.find("p", cls="empty")


def test_fallback_headline_names_the_worst_spike(incident_context):
    """A context without a headline gets pages.incident's, from the one worst-spike formula."""
    incident_context["headline"] = ""
    text = _typed(incident_context).headline
    assert text.startswith(
        "ITL p99 rose from 45 ms to 261 ms for 12 s from 00:20; 78% of the excess is memory"
    )


def test_nan_from_the_producer_reads_as_a_dash(incident_context, tmp_path, parse):
    incident_context["windows"][10]["itl_p99_ms"] = float("nan")
    incident_context["totals"]["ttft_p99_ms"] = float("inf")
    incident_context["comparison"][0]["normal"] = float("nan")
    path = render_incident(_typed(incident_context), tmp_path / "nan")
    html = path.read_text(encoding="utf-8")
    tree = parse(html)
    assert "NaN" not in html and "Infinity" not in html  # the chart JSON stays valid JSON
    json.loads(tree.find("script", id="chart-data").text)
    assert [
        td.text for td in tree.find("table", cls="comparison").find_all("tr")[1].find_all("td")
    ][1] == "—"
    d = next(
        p for p in tree.find_all("path", cls="line") if p.attrs["data-series"] == "itl_p99_ms"
    ).attrs["d"]
    assert d.count("M") == 2  # the NaN window breaks the line


def test_correlation_table_from_evidence_when_none_is_given(incident_context, tmp_path, parse):
    evidence = incident_context["spikes"][0]["attributions"][1]["evidence"]
    evidence[0]["pearson_r"] = 0.93
    evidence[1]["pearson_r"] = -0.2
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "r", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    rows = [
        [td.text for td in tr.find_all("td")]
        for tr in tree.find("table", cls="correlations").find_all("tr")[1:]
    ]
    assert rows == [
        ["gc_pause_ms_mean", "ITL p99", "+0.93", "—", "memory: gen-2 pauses overlap 61% of steps"],
        ["gc_pauses_per_min", "ITL p99", "-0.20", "—", "memory"],
    ]
    incident_context["correlations"] = [
        {"signal": "kv_usage", "metric": "itl_p99", "r": 0.1, "lag_s": 1.0}
    ]
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "r", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    rows = tree.find("table", cls="correlations").find_all("tr")[1:]
    assert [td.text for td in rows[0].find_all("td")] == ["kv_usage", "ITL p99", "+0.10", "1 s", ""]


def test_spike_lists_its_other_series_and_summary(incident_context, tmp_path, parse):
    spike = incident_context["spikes"][0]
    spike["metrics"] = ["itl_p99", "ttft_p99", "e2e_p99"]
    spike["summary"] = "GC pause time inside engine steps"
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "r", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    assert tree.find("tr", cls="spike-row").find_all("td")[1].text == "ITL p99 + TTFT p99, E2E p99"
    assert tree.find("p", cls="spike-summary").text == "memory GC pause time inside engine steps"


def test_plotly_is_the_installed_file(incident_context, tmp_path):
    render_incident(_typed(incident_context), tmp_path / "a")
    render_incident(_typed(incident_context), tmp_path / "a")  # a re-render keeps the file in place
    assert filecmp.cmp(tmp_path / "a" / "static" / "plotly.min.js", plotly_js_path(), shallow=False)


def test_measurement_check_is_shown_only_when_the_server_timed_the_socket(
    incident_context, tmp_path, parse
):
    without = parse(
        render_incident(_typed(incident_context), tmp_path / "a", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    assert not without.find_all("p", id="measurement-check")
    incident_context["measurement"] = {
        "requests": 812,
        "ttft_diff_p50_ms": 0.31,
        "ttft_diff_p99_ms": 1.8,
        "e2e_diff_p50_ms": 0.4,
        "e2e_diff_p99_ms": 2.6,
    }
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "b", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    text = tree.find("p", id="measurement-check").text
    assert (
        "over 812 requests" in text and "0.31 ms (p50) / 1.8 ms (p99)" in text and "2.6 ms" in text
    )
    assert "event loop left a request unread" in text  # no clock information: read-time stamps
    assert "inter-token gap" not in text  # the server did not stamp its chunks
    incident_context["measurement"] |= {"itl_diff_p50_ms": 0.05, "itl_diff_p99_ms": 0.7}
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "c", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    text = tree.find("p", id="measurement-check").text
    assert "each inter-token gap differs from the gap between the server's writes" in text
    assert "0.05 ms / 0.70 ms" in text


@pytest.mark.parametrize(
    "share, says",
    [
        (1.0, "both ends took their times from the kernel's receive stamps"),
        (0.25, "25% of them were stamped by the kernel at both ends"),
        (0.0, "the client's own delay in reading its socket"),
    ],
)
def test_measurement_check_says_which_clocks_were_compared(
    incident_context, tmp_path, parse, share, says
):
    incident_context["measurement"] = {
        "requests": 812,
        "ttft_diff_p50_ms": 0.05,
        "ttft_diff_p99_ms": 0.12,
        "e2e_diff_p50_ms": 0.06,
        "e2e_diff_p99_ms": 0.13,
        "kernel_stamped_share": share,
    }
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "a", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    assert says in tree.find("p", id="measurement-check").text


def test_plotly_assets_without_plotly_are_a_clear_error(tmp_path, monkeypatch):
    """with_plotly and no plotly.min.js installed: say so, not a TypeError on None."""
    monkeypatch.setattr(render, "plotly_js_path", lambda: None)
    with pytest.raises(RuntimeError, match="plotly"):
        render.copy_static(tmp_path, with_plotly=True)


def test_spike_shows_the_share_no_signal_covers(incident_context, tmp_path, parse):
    spike = incident_context["spikes"][0]
    spike["uncovered"] = 0.62
    spike["top_cause"] = "unexplained"
    tree = parse(
        render_incident(_typed(incident_context), tmp_path / "r", interactive=False).read_text(
            encoding="utf-8"
        )
    )
    text = tree.find("p", cls="uncovered").text
    assert "cover 38% of the excess" in text and "62% is not covered" in text
    assert "too much to name a cause" in text
