"""The index rebuilt from the report.json each render leaves beside its page, over contexts the
real builders made (tests/support/page_contexts.py)."""

from __future__ import annotations

import json
from dataclasses import replace

from flows.tasks import rebuild_index
from pages.index import build_index_context
from templates.render import render_incident, render_nightly, render_sweep
from tests.support.page_contexts import GC


def test_each_render_leaves_a_manifest(real_pages, tmp_path):
    ctx = real_pages.incident_context(GC)
    render_incident(ctx, tmp_path / "run1", interactive=False)
    entry = json.loads((tmp_path / "run1" / "report.json").read_text(encoding="utf-8"))
    assert entry == {
        "run_id": GC,
        "kind": "incident",
        "started_at": ctx.run.started_at,
        "scenario_name": "sim-gc",
        "verdict": "matched",
        "top_cause": "memory",
        "headline": ctx.headline,
        "confirmation": None,  # no `spikelens confirm` of it yet
    }


def test_fault_verdicts_of_incidents(real_pages, tmp_path):
    ctx = real_pages.incident_context(GC)
    (fault,) = ctx.faults
    wrong = replace(ctx, faults=(replace(fault, attributed_cause="load"),))
    missed = replace(ctx, faults=(replace(fault, detected=False, attributed_cause=None),))
    for name, c in (("a", wrong), ("b", missed), ("c", replace(ctx, faults=()))):
        render_incident(c, tmp_path / name, interactive=False)
    verdicts = [json.loads((tmp_path / d / "report.json").read_text())["verdict"] for d in "abc"]
    assert verdicts == ["wrong cause", "missed", None]


def test_index_is_rebuilt_from_the_folder(real_pages, tmp_path, parse):
    render_incident(
        real_pages.incident_context(GC),
        tmp_path / "r1",
        index_href="../index.html",
        interactive=False,
    )
    replay = replace(real_pages.nightly_context(), kind="replay")
    render_nightly(replay, tmp_path / "r1" / "vs-original", interactive=False)
    render_sweep(real_pages.sweep_context(), tmp_path / "s1", interactive=False)
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
