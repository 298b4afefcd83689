"""Knee finding, the search's next load, step verdicts and the queueing reading (pure)."""

import pytest

from rca.capacity import (
    SearchOptions,
    StepOutcome,
    find_knee,
    judge_step,
    next_search_load,
    parse_loads,
    queueing_reading,
)


def step(load, passed, run_id=None):
    return StepOutcome(
        float(load),
        run_id or f"r{load:g}",
        100,
        95 if passed else 40,
        0.95 if passed else 0.4,
        passed,
        {},
    )


def summary(completed, failed, good, ttft_p99=100.0):
    return {
        "completed": completed,
        "failed": failed,
        "cancelled": 3,
        "requests": completed + failed + 3,
        "good_requests": good,
        "goodput": good / 10,
        "request_throughput": completed / 10,
        "output_throughput": completed * 4.0,
        "vllm": {
            "ttft_ms": {"p50": 50.0, "p90": 80.0, "p99": ttft_p99},
            "tpot_ms": {},
            "itl_ms": {"p50": 5.0},
            "e2e_ms": {"p99": 900.0},
        },
    }


def test_judge_step_counts_failed_requests_against_and_ignores_cut_off_ones():
    s = judge_step(4, "r4", summary(completed=90, failed=10, good=90), attainment=0.9)
    assert s.judged == 100 and s.attainment == 0.9 and s.passed
    s = judge_step(8, "r8", summary(completed=90, failed=10, good=89), attainment=0.9)
    assert not s.passed
    assert s.metrics["ttft_p99_ms"] == 100.0 and s.metrics["itl_p50_ms"] == 5.0
    assert s.metrics["tpot_p50_ms"] is None and s.metrics["goodput"] == 8.9


def test_judge_step_needs_an_slo_summary_and_a_valid_attainment():
    with pytest.raises(ValueError, match="good_requests"):
        judge_step(1, "r1", {"completed": 3}, 0.9)
    with pytest.raises(ValueError, match="attainment"):
        judge_step(1, "r1", summary(1, 0, 1), 1.5)
    assert judge_step(1, "r1", summary(0, 0, 0), 0.9).passed is False


def test_knee_lies_between_the_last_pass_and_the_first_fail():
    knee = find_knee([step(8, False), step(2, True), step(4, True), step(16, False)])
    assert (knee.capacity, knee.first_fail, knee.status) == (4, 8, "found")
    assert knee.capacity_run_id == "r4" and knee.first_fail_run_id == "r8"


def test_a_pass_above_a_failure_is_not_capacity():
    knee = find_knee([step(2, True), step(4, False), step(8, True)])
    assert (knee.capacity, knee.first_fail) == (2, 4)


def test_knee_not_reached_and_below_range():
    assert find_knee([step(2, True), step(4, True)]).status == "not_reached"
    knee = find_knee([step(2, False), step(4, False)])
    assert (knee.capacity, knee.first_fail, knee.status) == (None, 2, "below_range")
    assert find_knee([]).status == "below_range"


def test_search_doubles_then_bisects_to_the_resolution():
    opts = SearchOptions(kind="users", start=1, max_load=64, max_steps=10)
    capacity = 5  # the server passes up to 5 users
    steps, tried = [], []
    while (load := next_search_load(steps, opts)) is not None:
        tried.append(load)
        steps.append(step(load, load <= capacity))
    assert tried == [1, 2, 4, 8, 6, 5]
    assert find_knee(steps).capacity == 5 and find_knee(steps).first_fail == 6


def test_search_is_bounded_in_steps_and_by_max_load():
    opts = SearchOptions(kind="users", start=2, max_load=10, max_steps=3)
    steps = [step(2, True), step(4, True), step(8, True)]
    assert next_search_load(steps, opts) is None  # 3 steps: done
    opts = SearchOptions(kind="users", start=2, max_load=10, max_steps=8)
    assert next_search_load(steps, opts) == 10  # capped, not 16
    assert next_search_load(steps + [step(10, True)], opts) is None


def test_search_halves_when_the_first_step_fails_and_rates_bisect_to_fractions():
    opts = SearchOptions(kind="users", start=4, max_load=64)
    assert next_search_load([step(4, False)], opts) == 2
    assert next_search_load([step(1, False)], opts) is None
    opts = SearchOptions(kind="rate", start=1, max_load=64, resolution=0.5)
    assert next_search_load([step(1, True), step(2, False)], opts) == 1.5
    assert next_search_load([step(1, True), step(1.5, False)], opts) is None


def test_search_options_name_the_bad_field():
    with pytest.raises(ValueError, match="kind"):
        SearchOptions(kind="qps").check()
    with pytest.raises(ValueError, match="start"):
        SearchOptions(kind="users", start=1.5).check()
    with pytest.raises(ValueError, match="max_steps"):
        SearchOptions(max_steps=0).check()


def test_parse_loads():
    assert parse_loads("8, 2,4", "users") == [2, 4, 8]
    assert parse_loads("0.5,2", "rate") == [0.5, 2]
    with pytest.raises(ValueError, match="--rates: a comma-separated"):
        parse_loads("1,fast", "rate")
    for bad, kind, word in (
        ("2,x", "users", "numbers"),
        ("1.5", "users", "integer"),
        ("0", "rate", "requests/s"),
        ("2,2", "users", "repeated"),
        ("", "users", "at least"),
    ):
        with pytest.raises(ValueError, match=word):
            parse_loads(bad, kind)


def test_queueing_reading_claims_only_what_the_signals_show():
    q = queueing_reading({"steps": 500, "waiting_p50": 6, "waiting_p90": 9, "batch_mean": 4.0})
    assert q["queueing"] is True and "6 request(s) waiting" in q["note"]
    q = queueing_reading({"steps": 500, "waiting_p50": 0, "waiting_p90": 1, "batch_mean": 3.2})
    assert q["queueing"] is False and q["note"].startswith("no queueing")
    assert queueing_reading({"steps": 0})["queueing"] is None
    assert queueing_reading(None)["queueing"] is None


def test_capacity_verdict_against_the_lowest_and_highest_baseline_sweep():
    from rca.capacity import capacity_verdict

    v = capacity_verdict("capacity_users", 4, [8, 6, 8], drop_rel=0.2)
    assert v["verdict"] == "regressed" and v["baseline"] == 6 and abs(v["rel_delta"] + 1 / 3) < 1e-9
    assert (
        capacity_verdict("capacity_users", 6, [8, 6, 8], 0.2)["verdict"] == "unchanged"
    )  # as low as a clean sweep
    assert (
        capacity_verdict("capacity_users", 5, [6], 0.2)["verdict"] == "unchanged"
    )  # -17 %: within drop_rel
    assert capacity_verdict("capacity_users", 16, [8, 6], 0.2)["verdict"] == "improved"
    assert (
        capacity_verdict("capacity_users", None, [2], 0.2)["verdict"] == "regressed"
    )  # below range = 0
    none = capacity_verdict("capacity_users", 4, [], 0.2)
    assert none["verdict"] == "insufficient" and none["candidate"] == 4
