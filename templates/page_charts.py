"""Plotly figures of the nightly, sweep and evaluation pages (the incident's are in charts.py).

Same rules as templates/charts.py: plain dicts embedded as JSON, labels from a run html-escaped
(Plotly renders a subset of HTML in them), a summary per chart for <noscript>. Pure.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from templates.charts import base_layout, chart_entry, column_values, summarize

# Explicit colour scales: plotly.js's named "YlOrRd" and "Blues" run dark → light, the reverse of
# the HTML heatmap tables; spelling them out keeps table and chart the same way round.
HEAT_SCALE = [
    [0.0, "rgb(255,255,204)"],
    [1 / 3, "rgb(254,178,76)"],
    [2 / 3, "rgb(240,59,32)"],
    [1.0, "rgb(128,0,38)"],
]
COUNT_SCALE = [[0.0, "rgb(239,246,255)"], [1.0, "rgb(37,99,235)"]]


def nightly_trend_figures(
    trend: list[dict], metrics: list[dict], current_run_id: str
) -> list[dict]:
    """One chart per (scenario, metric) across past nightlies, this run's point ringed."""
    out = []
    keys = list(dict.fromkeys((m["scenario"], m["metric"]) for m in metrics))
    for i, (scenario, metric) in enumerate(keys):
        rows = sorted(
            (t for t in trend if t["metric"] == metric and t.get("scenario") == scenario),
            key=lambda t: t["started_at"],
        )
        if not rows:
            continue
        current = [t for t in rows if t["run_id"] == current_run_id or t.get("current")]
        data = [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": html.escape(str(metric)),
                "x": [t["started_at"] for t in rows],
                "y": column_values(rows, "value"),
                "text": [html.escape(str(t["run_id"])) for t in rows],
                "hovertemplate": "%{y:.3g} (%{text})",
                "line": {"color": "#0f766e"},
            }
        ]
        if current:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": "this run",
                    "x": [current[-1]["started_at"]],
                    "y": [current[-1]["value"]],
                    "marker": {
                        "size": 12,
                        "color": "rgba(0,0,0,0)",
                        "line": {"width": 2, "color": "#cf222e"},
                    },
                }
            )
        unit = next((m["unit"] for m in metrics if m["metric"] == metric and m["unit"]), "")
        title = f"{metric}{f' ({unit})' if unit else ''}{f' · {scenario}' if scenario else ''}"
        layout = base_layout(title, height=240, hovermode="closest", showlegend=False)
        layout["xaxis"] = {"type": "date", "gridcolor": "#eaeef2"}
        fig = {"data": data, "layout": layout}
        out.append(chart_entry(f"chart-trend-{i}", fig, summarize(fig)[:1]))
    return out


def sweep_heatmap_figures(ctx: dict) -> list[dict]:
    """A heatmap per sweep metric over the x × y grid (rows: y values, columns: x values)."""
    xs, ys = ctx["x"]["values"], ctx["y"]["values"]
    by_cell = {(c["x"], c["y"]): c for c in ctx["cells"]}
    out = []
    for i, m in enumerate(ctx["metrics"]):
        z = [[by_cell.get((x, y), {}).get(m["key"]) for x in xs] for y in ys]
        data = [
            {
                "type": "heatmap",
                "x": [str(x) for x in xs],
                "y": [str(y) for y in ys],
                "z": z,
                "colorscale": HEAT_SCALE,
                "reversescale": not m["higher_is_worse"],
                "name": html.escape(str(m["label"])),
                "texttemplate": "%{z:.3~g}",
                "hoverongaps": False,
                "colorbar": {"title": {"text": html.escape(str(m.get("unit") or ""))}},
            }
        ]
        layout = base_layout(str(m["label"]), height=300, hovermode="closest")
        layout["xaxis"] = {
            "title": {"text": html.escape(str(ctx["x"]["name"]))},
            "type": "category",
        }
        # Rows top-down in the order of y.values, as in the HTML table above the chart.
        layout["yaxis"] = {
            "title": {"text": html.escape(str(ctx["y"]["name"]))},
            "type": "category",
            "autorange": "reversed",
        }
        out.append(chart_entry(f"chart-heat-{i}", {"data": data, "layout": layout}))
    return out


def confusion_figure(labels: Sequence[str], matrix: Sequence[Sequence[float]]) -> dict:
    """Truth (rows) × predicted (columns) counts as an annotated heatmap: [{id, figure, summary}]."""
    names = [html.escape(str(label)) for label in labels]
    data = [
        {
            "type": "heatmap",
            "x": names,
            "y": names,
            "z": matrix,
            "colorscale": COUNT_SCALE,
            "texttemplate": "%{z}",
            "hovertemplate": "truth %{y}, predicted %{x}: %{z}<extra></extra>",
            "showscale": False,
        }
    ]
    layout = base_layout("", height=380, hovermode="closest")
    layout["margin"] = {"l": 20, "r": 20, "t": 20, "b": 60}
    layout["xaxis"] = {"title": {"text": "predicted"}, "type": "category", "automargin": True}
    layout["yaxis"] = {
        "title": {"text": "truth"},
        "type": "category",
        "autorange": "reversed",
        "automargin": True,
    }
    return chart_entry("chart-confusion", {"data": data, "layout": layout}, summary=[])
