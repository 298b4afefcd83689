"""rca.evaluate: event matching, detection/attribution scores, peers on the same events."""

import pytest

from rca.analyze import analyze_run
from rca.evaluate import (
    MISSED,
    RunOutcome,
    attribution_scores,
    cover_events,
    evaluate,
    excess_elsewhere,
    fault_answers,
    match_events,
    per_engine_scores,
    score,
)


def _f(cause, a, b):
    return {"kind": f"{cause}.x", "cause": cause, "start_s": a, "end_s": b}


def _s(a, b, cause):
    return {"spike_id": 0, "start_s": a, "end_s": b, "top_cause": cause}


def test_matching_is_one_to_one_within_the_tolerance():
    faults = [_f("memory", 10, 20), _f("load", 40, 45)]
    spikes = [_s(11, 15, "memory"), _s(15, 22, "memory"), _s(46, 48, "load"), _s(60, 62, "load")]
    # the first fault can take only one of its two spikes; 46 s is within 2 windows of 45 s
    assert match_events(faults, spikes, 1.0, 2) == [(0, 1), (1, 2)]
    assert match_events(faults, spikes, 1.0, 0) == [(0, 1)]
    assert match_events([], spikes, 1.0) == [] and match_events(faults, [], 1.0) == []


def test_scores_count_events_delays_and_control_false_alarms():
    runs = [
        RunOutcome(
            "a", 60.0, 1.0, [_f("memory", 20, 30)], [_s(21, 29, "memory"), _s(50, 52, "load")]
        ),
        RunOutcome("b", 60.0, 1.0, [_f("penalty", 10, 20)], []),
        RunOutcome("c", 1800.0, 1.0, [], [_s(5, 7, "load")]),
    ]
    for r in runs:
        r.matches = match_events(r.faults, r.spikes, r.window_s)
    out = score(runs)
    d = out["detection"]
    assert (d["tp"], d["fp"], d["fn"]) == (1, 2, 1)
    assert (
        d["precision"] == pytest.approx(1 / 3)
        and d["recall"] == 0.5
        and d["f1"] == pytest.approx(0.4)
    )
    assert d["delay_s_mean"] == 1.0
    assert out["controls"]["false_alarms_per_hour"] == pytest.approx(2.0)  # 1 alarm in 0.5 h
    assert out["invalid_runs"] == out["controls"]["false_alarms_in_invalid_runs"] == 0
    assert out["attribution"]["accuracy"] == 1.0
    assert out["attribution"]["confusion"]["penalty"][MISSED] == 1
    # judged not to have acted, the missed penalty fault leaves the acted figures
    runs[0].faults[0]["acted"], runs[1].faults[0]["acted"] = True, False
    acted = score(runs)["acted"]
    assert (acted["faults"], acted["not_acted"], acted["undecided"]) == (1, 1, 0)
    assert acted["attribution"]["accuracy_all_faults_exact"]["value"] == 1.0
    assert score(runs)["attribution"]["accuracy_all_faults_exact"]["value"] == 0.5


def test_a_suite_on_both_engines_is_also_scored_per_engine():
    runs = [
        RunOutcome("a", 60.0, 1.0, [_f("memory", 20, 30)], [_s(21, 29, "memory")]),
        RunOutcome("b", 60.0, 1.0, [_f("load", 10, 20)], [_s(11, 18, "memory")], engine="vllm"),
        RunOutcome("c", 120.0, 1.0, [], [_s(5, 7, "load")], engine="vllm"),
    ]
    for r in runs:
        r.matches = match_events(r.faults, r.spikes, r.window_s)
    by = per_engine_scores(runs)
    assert sorted(by) == ["spikelens", "vllm"]
    ours, vllm = by["spikelens"], by["vllm"]
    assert ours["attribution"]["accuracy_all_faults_exact"]["value"] == 1.0
    assert vllm["attribution"]["accuracy_all_faults_exact"]["value"] == 0.0
    assert vllm["attribution"]["confusion"]["load"]["memory"] == 1
    assert (ours["controls"]["runs"], vllm["controls"]["false_alarms"]) == (0, 1)
    assert vllm["controls"]["false_alarms_per_hour"] == pytest.approx(30.0)  # 1 in 2 min


def test_excess_given_to_causes_not_injected_is_averaged_over_detected_faults():
    # run a: memory injected, its spike gave 0.6 memory, 0.25 host, 0.15 unexplained -> 0.25
    # run b: memory + client injected, 0.5 memory, 0.5 client -> 0 (both injected)
    # run c: the fault was missed, its run's false alarm is not a detected fault -> left out
    a = RunOutcome("a", 60.0, 1.0, [_f("memory", 20, 30)], [_s(21, 29, "memory")])
    a.shares = {0: {"memory": 0.6, "host": 0.25, "unexplained": 0.15}}
    b = RunOutcome(
        "b", 60.0, 1.0, [_f("memory", 20, 30), _f("client", 20, 30)], [_s(21, 29, "memory")]
    )
    b.shares = {0: {"memory": 0.5, "client": 0.5}}
    c = RunOutcome("c", 60.0, 1.0, [_f("load", 10, 12)], [_s(40, 45, "host")])
    c.shares = {0: {"host": 1.0}}
    for r in (a, b, c):
        r.matches = match_events(r.faults, r.spikes, r.window_s)
    out = excess_elsewhere([a, b, c])
    assert (out["spikes"], out["over_10pct"]) == (2, 1)
    assert out["mean"] == pytest.approx(0.125) and out["median"] == pytest.approx(0.125)
    assert out["unexplained_mean"] == pytest.approx(0.075)
    assert score([a, b, c])["excess_elsewhere"] == out
    assert excess_elsewhere([c])["mean"] is None


def _paired(faults, spikes, shares):
    run = RunOutcome("r", 60.0, 1.0, faults, spikes)
    run.shares = shares
    run.matches = match_events(faults, spikes, 1.0)
    run.covers = cover_events(faults, spikes, run.matches, 1.0)
    return run


def test_a_spike_over_two_faults_answers_both_with_what_it_said():
    pair = [_f("memory", 20, 30), _f("client", 22, 29)]
    # memory 0.5 and client 0.4: both clear a third, so the one spike names both faults' causes
    both = _paired(pair, [_s(20, 31, "memory")], {0: {"memory": 0.5, "client": 0.4}})
    assert both.matches == [(0, 0)] and both.covers == [(1, 0)]
    assert fault_answers(both) == ["memory", "client"]
    # client 0.2 is not said: the second fault gets the verdict, a wrong answer, not a miss
    one = _paired(pair, [_s(20, 31, "memory")], {0: {"memory": 0.7, "client": 0.2}})
    assert fault_answers(one) == ["memory", "memory"]
    # the pairing put the spike on the fault it said second: the answers follow what it said
    swapped = _paired(pair, [_s(20, 31, "client")], {0: {"client": 0.5, "memory": 0.4}})
    assert fault_answers(swapped) == ["memory", "client"]


def test_a_spike_over_one_fault_answers_with_its_verdict_alone():
    # a second cause said beside a wrong verdict does not make a lone fault right
    run = _paired(
        [_f("client", 20, 30)], [_s(20, 31, "memory")], {0: {"memory": 0.5, "client": 0.4}}
    )
    assert fault_answers(run) == ["memory"]
    # a fault no spike overlaps, even within the tolerance, stays missed
    far = _paired([_f("load", 10, 12), _f("host", 40, 45)], [_s(10, 13, "load")], {})
    assert far.covers == [] and fault_answers(far) == ["load", MISSED]


def test_shared_spikes_score_beside_the_strict_one_to_one_figures():
    run = _paired(
        [_f("memory", 20, 30), _f("client", 22, 29)],
        [_s(20, 31, "memory")],
        {0: {"memory": 0.5, "client": 0.4}},
    )
    out = score([run])
    assert out["attribution"]["accuracy_all_faults_exact"]["value"] == 1.0
    assert out["attribution_one_to_one"]["accuracy_all_faults_exact"]["value"] == 0.5
    assert out["attribution_one_to_one"]["confusion"]["client"][MISSED] == 1
    assert (out["detection"]["fn"], out["detection"]["faults_covered"]) == (1, 2)
    assert out["acted"]["attribution_one_to_one"]["accuracy_all_faults_exact"]["value"] == 0.5


def test_macro_f1_is_scikit_learns_over_the_injected_causes():
    """Our count of macro-F1 (the bootstrap calls it 2,000 times) against scikit-learn's, on
    random answers that include causes never injected and misses."""
    import random

    from sklearn.metrics import f1_score

    from rca.evaluate import _macro_f1

    rng = random.Random(7)
    causes = ["memory", "load", "penalty", "host", "client", "unexplained", MISSED]
    for n in (1, 2, 5, 40):
        for _ in range(50):
            truth = [rng.choice(causes[:5]) for _ in range(n)]
            answer = [rng.choice(causes) for _ in range(n)]
            labels = sorted(set(truth))
            expected = f1_score(truth, answer, labels=labels, average="macro", zero_division=0)
            assert _macro_f1(truth, answer) == pytest.approx(expected, abs=1e-12)
    assert _macro_f1([], []) is None


def test_attribution_scores_macro_f1():
    scores = attribution_scores(
        ["memory", "memory", "load", "penalty"], ["memory", "load", "load", MISSED]
    )
    assert scores["accuracy"] == pytest.approx(2 / 3)
    # over the 3 detected: memory F1 2/3, load 2/3 → macro 2/3 (the events peers rank too)
    assert scores["macro_f1"] == pytest.approx(2 / 3)
    # over all 4 faults, the miss counted wrong: memory 2/3, load 2/3, penalty 0 → macro 4/9
    assert scores["macro_f1_all_faults"] == pytest.approx(4 / 9)
    # 2 right: of the 3 detected, and of all 4 faults (the miss counted wrong), exact intervals
    assert scores["accuracy_exact"]["value"] == pytest.approx(2 / 3)
    assert scores["accuracy_all_faults_exact"]["value"] == pytest.approx(0.5)
    assert scores["accuracy_all_faults_exact"]["method"] == "clopper-pearson"
    assert scores["support"] == {"load": 1, "memory": 2, "penalty": 1}
    assert scores["confusion"]["memory"] == {
        "penalty": 0,
        "memory": 1,
        "communication": 0,
        "load": 1,
        "client": 0,
        "network": 0,
        "host": 0,
        "unexplained": 0,
        MISSED: 0,
    }


def test_evaluate_on_simulated_runs(warehouse_with):
    ids = []
    for spec in (
        {"incident": "gc"},
        {"incident": "penalty", "incident_start_s": 14.0},
        {"incident": None},
    ):
        db, run_id = warehouse_with(**spec)
        analyze_run(db, run_id)
        ids.append(run_id)
    out = evaluate(db, ids, peers=(), bootstrap_reps=200)
    assert out["detection"]["f1"] == 1.0 and out["attribution"]["accuracy"] == 1.0
    assert out["spikelens"]["accuracy"] == out["spikelens"]["ac_at_1"] == 1.0
    assert out["spikelens"]["avg_at_5"] == 1.0 and out["spikelens"]["events"] == 2
    # no false alarm in 40 s of control: 0/h, but the exact upper bound is 3.69 / (40/3600 h)
    fa = out["intervals"]["false_alarms_per_hour"]
    assert fa["value"] == 0.0 and fa["high"] == pytest.approx(3.689 * 90, rel=1e-3)
    assert out["intervals"]["f1"]["value"] == 1.0
    assert out["controls"] == {
        "runs": 1,
        "hours": pytest.approx(40 / 3600),
        "false_alarms": 0,
        "false_alarms_per_hour": 0.0,
        "invalid_runs": 0,
        "false_alarms_in_invalid_runs": 0,
        "false_alarms_by_cause": {},
    }
    assert out["peers"]["random"]["events"] == 2
    assert [v["detected"] for r in out["per_run"] for v in r["verdicts"]] == [True, True]
    # both simulated incidents slowed the clients: judged from their raw latencies
    judged = [f["acted_by"] for r in out["per_run"] for f in r["faults"]]
    assert [j["acted"] for j in judged] == [True, True], judged
    assert out["acted"]["faults"] == 2 and out["acted"]["attribution"]["accuracy"] == 1.0
    # the control's clean stretches, attributed as placebo spikes; one engine: no split
    placebo = out["placebo"]
    assert placebo["runs"] == 1 and placebo["placebos"] > 0 and "by_engine" not in placebo
    assert sum(c["n"] for c in placebo["by_cause"].values()) == placebo["placebos"]


def test_peer_methods_rank_on_the_same_events(warehouse_with):
    pytest.importorskip("RCAEval")
    db, run_id = warehouse_with(incident="comm", tp=2)
    analyze_run(db, run_id)
    out = evaluate(db, [run_id], peers=("baro", "nsigma"), bootstrap_reps=200)
    for method in ("baro", "nsigma"):
        assert out["peers"][method]["events"] == 1 and out["peers"][method]["failures"] == 0
        assert out["peers"][method]["ac_at_3"] is not None
        assert "accuracy_lead" in out["peers"][method]
    assert out["peers"]["baro"]["top_metrics"] == {"comm_ms": 1}


def test_the_same_seed_gives_the_same_figures_twice(warehouse_with):
    ids = []
    for spec in ({"incident": "gc"}, {"incident": "load"}, {"incident": "penalty"}):
        db, run_id = warehouse_with(**spec)
        analyze_run(db, run_id)
        ids.append(run_id)
    first = evaluate(db, ids, peers=(), seed=3, bootstrap_reps=300)
    again = evaluate(db, ids, peers=(), seed=3, bootstrap_reps=300)
    for key in ("intervals", "spikelens", "peers"):
        assert first[key] == again[key]


def test_unknown_peer_is_an_error_naming_the_valid_ones(warehouse_with):
    db, run_id = warehouse_with(incident="gc")
    with pytest.raises(ValueError, match="peers: 'rcd' is not one of baro, nsigma, circa"):
        evaluate(db, [run_id], peers=("rcd",))


def test_method_scores_and_the_paired_accuracy_lead():
    from rca.evaluate import accuracy_lead, method_scores
    from rca.intervals import BootstrapOptions
    from rca.rank_scores import RankedEvent

    ours = [RankedEvent("memory", ("memory",))] * 8 + [RankedEvent("load", ("penalty", "load"))] * 2
    theirs = (
        [RankedEvent("memory", ("load", "memory"))] * 5
        + [RankedEvent("memory", ("memory",))] * 3
        + [RankedEvent("load", ("load",))] * 2
    )
    options = BootstrapOptions(reps=500, seed=0)
    s = method_scores(ours, options)
    assert s["accuracy"] == 0.8 and s["ac_at_3"] == 1.0
    assert s["accuracy_interval"]["low"] <= 0.8 <= s["accuracy_interval"]["high"]
    lead = accuracy_lead(ours, theirs, options)
    assert lead["value"] == pytest.approx(0.8 - 0.5)
    assert lead["low"] <= lead["value"] <= lead["high"]
    with pytest.raises(ValueError, match="paired events differ"):
        accuracy_lead(ours, theirs[:3], options)


def _host_fault_table(start_s: float, duration_s: float):
    """faults.host.parquet of the run builder's box contention (every stage slower alike)."""
    import pyarrow as pa

    from tests.support.runbuilder import SimSpec

    t0 = SimSpec().t0_ns
    return pa.Table.from_pylist(
        [
            {
                "kind": "host.cpu_contention",
                "cause": "host",
                "start_ns": t0 + int(start_s * 1e9),
                "end_ns": t0 + int((start_s + duration_s) * 1e9),
                "params": "{}",
            }
        ]
    )


def test_suppressed_spikes_count_as_unexplained_answers_and_false_alarms(tmp_path):
    """A uniform slowdown no signal explains is suppressed: by default it is a miss in a fault
    run and nothing in a control; counted, it is an 'unexplained' answer and a false alarm."""
    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    db = tmp_path / "w.duckdb"
    control, fault = "host-control", "host-fault"
    hogs = {"faults.host.parquet": _host_fault_table(20.0, 8.0)}
    for run_id, extra in ((control, {}), (fault, hogs)):
        ingest_run(
            db, write_run(tmp_path, SimSpec(run_id=run_id, incident="host", extra_files=extra))
        )
        analysis = analyze_run(db, run_id)
        assert analysis.suppressed and not analysis.spikes  # the premise: only suppressed spikes
    quiet = evaluate(db, [control, fault], peers=(), bootstrap_reps=100)
    counted = evaluate(db, [control, fault], peers=(), bootstrap_reps=100, count_suppressed=True)
    assert quiet["per_run"][1]["verdicts"][0]["detected"] is False
    assert quiet["per_run"][0]["false_alarms"] == 0
    verdict = counted["per_run"][1]["verdicts"][0]
    assert verdict["detected"] and verdict["attributed_cause"] == "unexplained"
    assert counted["per_run"][0]["false_alarms"] >= 1 and counted["count_suppressed"]


def test_a_control_whose_load_generator_saturated_is_counted_and_shown_apart(tmp_path):
    """An invalid run's spikes stay false alarms (nothing is hidden); the figure says how many."""
    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    db = tmp_path / "w.duckdb"
    # box contention with no ground truth: a control whose (suppressed, counted) spike is a
    # false alarm
    for run_id, status in (("ok-control", "ok"), ("starved-control", "invalid")):
        spec = SimSpec(run_id=run_id, incident="host", status=status)
        ingest_run(db, write_run(tmp_path, spec))
        analyze_run(db, run_id)
    runs = ["ok-control", "starved-control"]
    out = evaluate(db, runs, peers=(), bootstrap_reps=100, count_suppressed=True)
    ctl = out["controls"]
    assert out["invalid_runs"] == ctl["invalid_runs"] == 1
    by_run = {r["run_id"]: r for r in out["per_run"]}
    assert [by_run[r]["valid"] for r in ("ok-control", "starved-control")] == [True, False]
    starved = by_run["starved-control"]["false_alarms"]
    assert starved >= 1 and ctl["false_alarms_in_invalid_runs"] == starved
    assert ctl["false_alarms"] == starved + by_run["ok-control"]["false_alarms"]
    # what they were named: an every-stage slowdown no signal explains (counted as unexplained)
    assert ctl["false_alarms_by_cause"] == {"unexplained": ctl["false_alarms"]}


def test_a_partner_undecided_in_its_run_is_decided_by_its_twin_and_a_minor_one_set_apart():
    pair = [_f("memory", 20, 30), _f("client", 22, 29)]
    run = _paired(pair, [_s(20, 31, "memory")], {0: {"memory": 0.8, "client": 0.1}})
    run.faults[0]["acted"], run.faults[1]["acted"] = True, None  # the client ran under 2 s alone
    run.faults[1]["solo"] = {"acted": True, "share": 0.12, "minor": True}
    run.faults[0]["solo"] = {"acted": True, "share": 0.88, "minor": False}
    out = score([run])
    assert (out["acted"]["faults"], out["acted"]["undecided"]) == (2, 0)
    assert out["acted"]["decided_by_twin"] == 1
    assert out["acted"]["attribution"]["accuracy_all_faults_exact"]["value"] == 0.5
    material = out["material"]
    assert (material["faults"], material["minor"], material["partners_measured"]) == (1, 1, 2)
    assert material["minor_answers"] == {"memory": 1}
    assert material["attribution"]["accuracy_all_faults_exact"]["value"] == 1.0
    # a twin that did not act takes its partner out of the acted faults altogether
    run.faults[1]["solo"] = {"acted": False, "share": 0.0, "minor": True}
    out = score([run])
    assert (out["acted"]["faults"], out["acted"]["not_acted"]) == (1, 1)
    assert out["material"]["minor"] == 0 and out["material"]["faults"] == 1
    # no twin: the abstention counts as acted, and nothing is set apart
    for f in run.faults:
        f.pop("solo")
    out = score([run])
    assert (out["acted"]["faults"], out["acted"]["undecided"]) == (2, 1)
    assert out["material"]["partners_measured"] == 0 and out["material"]["faults"] == 2


def _fault_table(kind: str, cause: str, start_s: float, end_s: float):
    import pyarrow as pa

    from tests.support.runbuilder import SimSpec

    t0 = SimSpec().t0_ns
    row = {"kind": kind, "cause": cause, "params": "{}"}
    row |= {"start_ns": t0 + int(start_s * 1e9), "end_ns": t0 + int(end_s * 1e9)}
    return pa.Table.from_pylist([row])


def test_solo_twins_weigh_their_pairs_partners_and_are_not_scored_as_runs(tmp_path):
    """A GC stall beside a client stall that did nothing: the client's twin shows it did not act
    and made none of the shared excess; the twins are no runs of the suite."""
    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    db = tmp_path / "w.duckdb"
    stall = {"faults.client.parquet": _fault_table("client.stall", "client", 22.0, 26.0)}
    specs = (
        SimSpec(run_id="pair", incident="gc", extra_files=stall),
        SimSpec(run_id="twin0", incident="gc"),
        SimSpec(run_id="twin1", incident=None, extra_files=stall),
    )
    for spec in specs:
        ingest_run(db, write_run(tmp_path, spec))
        analyze_run(db, spec.run_id)
    twins = {"twin0": ("pair", 0), "twin1": ("pair", 1)}
    out = evaluate(db, ["pair", "twin0", "twin1"], peers=(), bootstrap_reps=100, twins=twins)
    assert out["runs"] == 1 and out["twin_runs"] == 2 and out["faults"] == 2
    faults = {f["kind"]: f for f in out["per_run"][0]["faults"]}
    gc, client = faults["memory.gc_storm"]["solo"], faults["client.stall"]["solo"]
    assert gc["twin_run_id"] == "twin0" and client["twin_run_id"] == "twin1"
    assert gc["acted"] is True and client["acted"] is False
    assert gc["share"] > 0.9 and client["minor"] and not gc["minor"]
    assert out["acted"]["not_acted"] == 1 and out["material"]["faults"] == 1
