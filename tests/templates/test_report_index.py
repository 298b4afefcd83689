"""The index rebuilt from the report.json each render leaves beside its page."""

from __future__ import annotations

import json

from flows.tasks import rebuild_index
from pages.index import build_index_context
from templates.render import render_incident, render_nightly, render_sweep


def test_each_render_leaves_a_manifest(incident_context, tmp_path, typed):
    render_incident(typed("incident", incident_context), tmp_path / "run1", interactive=False)
    entry = json.loads((tmp_path / "run1" / "report.json").read_text(encoding="utf-8"))
    assert entry == {
        "run_id": "20261130T020000Z-gc-storm-3f2a",
        "kind": "incident",
        "started_at": "2026-11-30T02:00:00Z",
        "scenario_name": "gc-storm",
        "verdict": "matched",
        "top_cause": "memory",
        "headline": incident_context["headline"],
    }


def test_fault_verdicts_of_incidents(incident_context, tmp_path, typed):
    incident_context["faults"][0]["attributed_cause"] = "load"
    render_incident(typed("incident", incident_context), tmp_path / "a", interactive=False)
    incident_context["faults"][0]["detected"] = False
    render_incident(typed("incident", incident_context), tmp_path / "b", interactive=False)
    incident_context["faults"] = []
    render_incident(typed("incident", incident_context), tmp_path / "c", interactive=False)
    verdicts = [json.loads((tmp_path / d / "report.json").read_text())["verdict"] for d in "abc"]
    assert verdicts == ["wrong cause", "missed", None]


def test_index_is_rebuilt_from_the_folder(
    incident_context, nightly_context, sweep_context, tmp_path, parse, typed
):
    render_incident(
        typed("incident", incident_context),
        tmp_path / "r1",
        index_href="../index.html",
        interactive=False,
    )
    nightly_context["kind"] = "replay"
    render_nightly(
        typed("nightly", nightly_context), tmp_path / "r1" / "vs-original", interactive=False
    )
    render_sweep(typed("sweep", sweep_context), tmp_path / "s1", interactive=False)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "index.html").write_text("x")
    (tmp_path / "broken" / "report.json").write_text("{not json")
    ctx = build_index_context(tmp_path)
    assert sorted((r.kind, r.href) for r in ctx.runs) == [
        ("incident", "r1/index.html"),
        ("replay", "r1/vs-original/index.html"),
        ("sweep", "s1/index.html"),
    ]
    tree = parse(rebuild_index(tmp_path).read_text(encoding="utf-8"))
    assert len(tree.find_all("tr", cls="run-row")) == 3
    assert not (tmp_path / "report.json").exists()  # the index itself is no report
