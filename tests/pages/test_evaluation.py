"""pages.evaluation: the evaluation page laid out from rca.evaluate.evaluate()'s result."""

import pytest

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
    # 1 of 1: the exact interval's low end is 0.025, not the bootstrap's 1.0
    assert ctx.accuracy_interval == pytest.approx((0.025, 1.0))
    html = render_evaluation(ctx, tmp_path / "eval").read_text()
    assert "95 % exact interval" in html and "a miss counts wrong" in html
    assert ctx.confirmation is None and 'id="confirmation"' not in html
    # the GC incident acted on the clients' raw latencies: 1 of 1 right over the acted faults
    acted = ctx.acted
    assert acted is not None and (acted.faults, acted.not_acted, acted.accuracy) == (1, 0, 1.0)
    assert 'id="acted"' in html and "faults that acted on the clients' raw latencies" in html
    # one engine served the suite: its figures are the suite's, no per-engine table
    assert [e.engine for e in ctx.engines] == ["spikelens"] and 'id="per-engine"' not in html
    # the GC incident's spike: its shares to causes other than memory are the page's figure
    away = ctx.excess_elsewhere
    result = evaluate(db, ids, peers=(), bootstrap_reps=100)["excess_elsewhere"]
    assert away is not None and (away.spikes, away.mean) == (1, pytest.approx(result["mean"]))
    assert 0.0 <= away.mean <= 1.0 and 'id="excess-elsewhere"' in html
    # the control's clean stretches as placebo spikes: every answer counted once
    placebo = ctx.placebo
    assert placebo is not None and placebo.runs == 1
    assert sum(n for _, n, _ in placebo.by_cause) == placebo.placebos > 0
    assert 'id="placebo"' in html and "placebo spikes" in html


def test_a_suite_on_two_engines_gets_a_row_per_engine(warehouse_with, tmp_path):
    ids = []
    for spec in ({"incident": "gc"}, {"incident": None}):
        db, run_id = warehouse_with(**spec)
        analyze_run(db, run_id)
        ids.append(run_id)
    result = evaluate(db, ids, peers=(), bootstrap_reps=100)
    control = result["per_engine"]["spikelens"]
    result["per_engine"] = {"spikelens": control, "vllm": control}  # as if vLLM served a copy
    ctx = build_evaluation_context(result, RunHeader(run_id="eval-3", command="x"))
    assert [e.engine for e in ctx.engines] == ["spikelens", "vllm"]
    e = ctx.engines[1]
    assert (e.runs, e.faults, e.detected, e.accuracy) == (2, 1, 1, 1.0)
    assert e.interval == pytest.approx((0.025, 1.0)) and e.control_minutes > 0
    html = render_evaluation(ctx, tmp_path / "eval").read_text()
    assert 'id="per-engine"' in html and "<th>vllm</th>" in html


def test_confirmations_of_the_verdicts_are_scored_on_the_page(warehouse_with, tmp_path):
    """evaluate --confirm: the suite's spike ids feed confirm, and its scores are shown."""
    from rca.confirm_eval import ConfirmCase, ConfirmOutcome, confirmation_scores

    db, run_id = warehouse_with(incident="gc")
    analyze_run(db, run_id)
    result = evaluate(db, [run_id], peers=())
    verdict = result["per_run"][0]["verdicts"][0]
    assert verdict["spike_id"] == 1 and verdict["attributed_cause"] == "memory"
    right = ConfirmCase(run_id, 1, "memory", "memory")
    swapped = ConfirmCase(run_id, 1, "memory", "penalty", swapped=True)
    result["confirmation"] = confirmation_scores(
        [
            ConfirmOutcome(right, "confirmed", 0.95, 150.0),
            ConfirmOutcome(swapped, "not confirmed", 0.1, 150.0),
        ]
    )
    ctx = build_evaluation_context(result, RunHeader(run_id="eval-2", command="x"))
    c = ctx.confirmation
    assert c is not None and (c.right, c.right_confirmed, c.wrong_not_confirmed) == (1, 1, 1)
    assert c.minutes_per_confirmed == 5.0 and c.right_interval == pytest.approx((0.025, 1.0))
    html = render_evaluation(ctx, tmp_path / "eval").read_text()
    assert 'id="confirmation"' in html and "1 of 1</strong> (95 % exact 3%–100%)" in html


def test_methods_table_shows_intervals_ranking_columns_and_skipped_cases(warehouse_with, tmp_path):
    ids = []
    for spec in ({"incident": "gc"}, {"incident": "load"}, {"incident": None}):
        db, run_id = warehouse_with(**spec)
        analyze_run(db, run_id)
        ids.append(run_id)
    result = evaluate(db, ids, peers=(), bootstrap_reps=200)
    result["skipped"] = [
        {"scenario": "client-stall-low.yaml", "unregistered_kinds": ["client.stall"]}
    ]
    ctx = build_evaluation_context(result, RunHeader(run_id="eval-2", command="spikelens evaluate"))
    ours, floor = ctx.methods
    assert ours.events == floor.events == 2
    assert set(ours.intervals) >= {"accuracy", "ac_at_3", "avg_at_5", "false_alarms_per_hour"}
    low, high = ours.intervals["false_alarms_per_hour"]
    assert low == 0.0 and high > 0  # no alarm in 40 s of control, but not "0 ± 0"
    assert "accuracy_lead" in floor.scores and "accuracy_lead" not in ours.scores
    assert ctx.skipped == ("client-stall-low.yaml (client.stall)",)
    assert "(95 % ≤" in ctx.headline and "saturated" not in ctx.headline
    html = render_evaluation(ctx, tmp_path / "eval").read_text()
    assert "AC@3" in html and "Avg@5" in html and 'class="muted small ci"' in html
    assert "client-stall-low.yaml" in html
    # false alarms in controls whose load generator saturated are said apart
    result["controls"].update(false_alarms=3, invalid_runs=1, false_alarms_in_invalid_runs=2)
    result["controls"]["false_alarms_per_hour"] = 3 / result["controls"]["hours"]
    ctx = build_evaluation_context(result, RunHeader(run_id="eval-3", command="spikelens evaluate"))
    assert "(2 of them in 1 whose load generator saturated)" in ctx.headline


def test_a_fault_answered_by_its_partners_spike_and_the_strict_figure(warehouse_with, tmp_path):
    db, run_id = warehouse_with(incident="gc")
    analyze_run(db, run_id)
    result = evaluate(db, [run_id], peers=(), bootstrap_reps=100)
    verdict = result["per_run"][0]["verdicts"][0]
    # as if a second fault had shared the GC spike: answered by it, marked shared, not detected
    shared = {**verdict, "kind": "client.stall", "detected": False, "shared": True}
    result["per_run"][0]["verdicts"].append(shared)
    result["attribution_one_to_one"] = {
        "accuracy_all_faults_exact": {"value": 0.5, "low": 0.0126, "high": 0.987},
        "macro_f1_all_faults": 0.33,
    }
    ctx = build_evaluation_context(result, RunHeader(run_id="eval-5", command="x"))
    assert [c.shared for c in ctx.cases] == [False, True]
    strict = ctx.one_to_one
    assert strict is not None and (strict.accuracy, strict.macro_f1) == (0.5, 0.33)
    html = render_evaluation(ctx, tmp_path / "eval").read_text()
    assert "shared spike" in html and 'id="one-to-one"' in html


def test_minor_partners_measured_by_their_twins_are_set_apart_on_the_page(warehouse_with, tmp_path):
    db, run_id = warehouse_with(incident="gc")
    analyze_run(db, run_id)
    result = evaluate(db, [run_id], peers=(), bootstrap_reps=100)
    ctx = build_evaluation_context(result, RunHeader(run_id="eval-6", command="x"))
    html = render_evaluation(ctx, tmp_path / "plain").read_text()
    assert ctx.material is None and 'id="material"' not in html  # no twins ran
    result["material"] = {
        "faults": 3,
        "partners_measured": 4,
        "minor": 1,
        "minor_answers": {"memory": 1},
        "attribution": {
            "accuracy_all_faults_exact": {"value": 2 / 3, "low": 0.094, "high": 0.992},
            "macro_f1_all_faults": 0.5,
        },
    }
    ctx = build_evaluation_context(result, RunHeader(run_id="eval-7", command="x"))
    material = ctx.material
    assert material is not None and (material.minor, material.partners_measured) == (1, 4)
    assert material.minor_answers == (("memory", 1),)
    html = render_evaluation(ctx, tmp_path / "twins").read_text()
    assert 'id="material"' in html and "answered memory 1" in html and "over 3" in html
