"""templates/charts.py: which timelines an incident gets, and what goes into each figure."""

from __future__ import annotations

import json
from dataclasses import asdict

from pages.from_mapping import from_mapping
from pages.incident import IncidentContext
from templates.charts import incident_figures, summarize


def _rows(ctx: dict) -> dict:
    """The plain rows render_incident gives the charts: the typed context as dicts."""
    return asdict(from_mapping(IncidentContext, ctx))


def _ids(ctx: dict) -> list[str]:
    return [c["id"] for c in incident_figures(_rows(ctx))]


def test_optional_signals_add_their_charts(incident_context):
    assert _ids(incident_context) == ["chart-latency", "chart-stages", "chart-load"]
    steps = []
    for i in range(40):
        for rank in (0, 1):
            steps.append(
                {
                    "t_s": i * 0.5,
                    "rank": rank,
                    "forward_ms": 18.0,
                    "comm_ms": 1.0 + (20.0 if rank == 0 else 0.0),
                    "kv_blocks_used": 100 + i,
                    "kv_blocks_total": 512,
                    "preempted": int(i == 30),
                    "waiting": 0,
                }
            )
    incident_context["steps"] = steps
    incident_context["nvml"] = [
        {
            "t_s": float(t),
            "gpu": 0,
            "util_gpu": 90.0,
            "mem_used": 60e9,
            "mem_total": 80e9,
            "power_w": 500.0,
        }
        for t in range(60)
    ]
    assert _ids(incident_context) == [
        "chart-latency",
        "chart-stages",
        "chart-kv",
        "chart-comm",
        "chart-nvml",
        "chart-load",
    ]


def test_figures_carry_numbers_and_spike_bands(incident_context):
    ctx = _rows(incident_context)
    ctx["steps"] = [
        dict(s, rank=0, kv_blocks_used=256, kv_blocks_total=512, preempted=0) for s in ctx["steps"]
    ]
    ctx["steps"].append(
        dict(ctx["steps"][0], rank=1, t_s=0.0)
    )  # a second rank stays out of the stacks
    charts = {c["id"]: c for c in incident_figures(ctx)}
    stages = charts["chart-stages"]["figure"]
    assert [t["name"] for t in stages["data"]] == [
        "forward",
        "penalty",
        "sample",
        "schedule",
        "comm",
    ]
    assert all(t["stackgroup"] == "stages" and len(t["x"]) == 120 for t in stages["data"])
    kv = charts["chart-kv"]["figure"]
    assert kv["data"][0]["y"][0] == 50.0 and kv["layout"]["yaxis"]["range"] == [0, 100]
    load = charts["chart-load"]["figure"]
    assert load["data"][0]["name"] == "arrivals / s" and load["data"][0]["x"][0] == 0.5
    for chart in charts.values():
        bands = [s for s in chart["figure"]["layout"]["shapes"] if s["y0"] == 0]
        assert [(s["x0"], s["x1"]) for s in bands] == [(20.0, 32.0)]
    json.dumps([c["figure"] for c in charts.values()], allow_nan=False)


def test_summary_is_min_mean_max_per_trace():
    figure = {
        "data": [
            {"name": "a &lt;b&gt;", "y": [1.0, None, 3.0]},
            {"name": "empty", "y": [None]},
            {"name": "heat", "z": [[1.0, 2.0], [None, 6.0]]},
        ],
        "layout": {},
    }
    assert summarize(figure) == [
        {"name": "a <b>", "min": 1.0, "mean": 2.0, "max": 3.0, "n": 2},
        {"name": "heat", "min": 1.0, "mean": 3.0, "max": 6.0, "n": 3},
    ]
