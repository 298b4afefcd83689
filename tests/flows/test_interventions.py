"""flows.interventions: the stretch a confirmation replays, faults shifted onto it, and each
cause's intervention as a change of the scenario or of the replayed requests."""

import pytest

from flows.interventions import (
    KV_FACTOR,
    BaselineFacts,
    TraceEntry,
    apply_to_engine,
    apply_to_trace,
    arm_scenario,
    cap_arrivals,
    cap_users,
    intervention_for,
    plan_stretch,
    recorded_closed_loop,
    shift_faults,
    zero_penalties,
)
from flows.scenario import parse_scenario

RECORDED = {
    "name": "gc",
    "duration_s": 40,
    "warmup_s": 4,
    "engine": {"model": "small", "max_num_seqs": 16, "kv_blocks": 1024},
    "load": {"shape": "constant", "users": 6},
    "faults": [
        {"kind": "memory.gc_storm", "start_s": 16, "duration_s": 10, "params": {}},
        {"kind": "load.burst", "start_s": 1, "duration_s": 2, "params": {}},
    ],
}


def test_the_stretch_holds_a_baseline_before_the_spike_and_a_tail_after_it():
    # spike at 16–26 s of measured time; load started 4.1 s after the first request
    s = plan_stretch(16.0, 26.0, t0_offset_s=4.1, warmup_s=4.0, trace_end_s=44.0)
    assert s.trace_from_s == 0.0  # the lead (max(20, 2×10) = 20 s) + warm-up reach the start
    assert s.spike_start_s == pytest.approx(16.1) and s.spike_end_s == pytest.approx(26.1)
    assert s.trace_to_s == pytest.approx(35.1)  # spike end + 5 s
    assert s.duration_s == pytest.approx(31.1)
    late = plan_stretch(100.0, 104.0, t0_offset_s=5.0, warmup_s=5.0, trace_end_s=300.0)
    assert late.trace_from_s == pytest.approx(80.0)  # 105 − 20 s lead − 5 s warm-up
    assert late.spike_start_s == pytest.approx(20.0) and late.duration_s == pytest.approx(29.0)


def test_faults_land_where_they_landed_and_those_outside_the_stretch_are_left_out():
    s = plan_stretch(100.0, 104.0, t0_offset_s=5.0, warmup_s=5.0, trace_end_s=300.0)
    faults = [
        {"kind": "memory.gc_storm", "start_s": 98, "duration_s": 10, "params": {"x": 1}},
        {"kind": "load.burst", "start_s": 10, "duration_s": 5},
        {"kind": "comm.straggler", "start_s": 70, "duration_s": 20},  # cut at the arm's start
    ]
    shifted = shift_faults(faults, s)
    assert shifted[0] == {
        "kind": "memory.gc_storm",
        "start_s": 18.0,
        "duration_s": 10.0,
        "params": {"x": 1},
    }
    assert shifted[1]["kind"] == "comm.straggler"
    assert shifted[1]["start_s"] == 0.0 and shifted[1]["duration_s"] == pytest.approx(10.0)
    assert len(shifted) == 2


def test_each_cause_has_its_intervention_or_says_why_not():
    assert intervention_for("memory", "engine").name == "gc_off"
    assert "gc.collect()" in intervention_for("memory", "engine").leaves
    assert intervention_for("memory", "engine", gc_paused=False).name == "kv_x4"
    assert intervention_for("penalty", "engine").name == "penalties_off"
    assert intervention_for("load", "vllm").name == "arrivals_capped"
    for cause in ("communication", "unexplained"):
        none = intervention_for(cause, "engine")
        assert not none.available and none.reason, cause
    for cause in ("client", "network"):  # measured on our engine; vLLM has no server time here
        assert intervention_for(cause, "engine").name == "measured"
        assert not intervention_for(cause, "vllm").available
        assert "no server-side time" in intervention_for(cause, "vllm").reason
    host = intervention_for("host", "vllm")
    assert host.available and host.name == "priority_raised" and "nice -10" in host.does
    denied = intervention_for("host", "engine", priority_denied="needs CAP_SYS_NICE")
    assert not denied.available and denied.reason == "needs CAP_SYS_NICE"
    assert not intervention_for("memory", "target").available
    derived = {"kind": "vllm", "model": "/m"}
    assert not intervention_for("memory", "vllm", False, derived).available
    sized = {**derived, "num_gpu_blocks_override": 64, "kv_cache_space_gib": 1}
    kv = intervention_for("memory", "vllm", False, sized)
    assert kv.available and apply_to_engine(sized, kv) == {
        **sized,
        "num_gpu_blocks_override": 64 * KV_FACTOR,
        "kv_cache_space_gib": KV_FACTOR,
    }


def test_arm_scenarios_parse_and_differ_only_by_the_intervention():
    s = plan_stretch(16.0, 26.0, t0_offset_s=4.0, warmup_s=4.0, trace_end_s=44.0)
    recorded = arm_scenario(RECORDED, s, "/x/recorded.jsonl", None)
    removed = arm_scenario(RECORDED, s, "/x/removed.jsonl", intervention_for("memory", "engine"))
    kv = arm_scenario(RECORDED, s, "/x/kv.jsonl", intervention_for("memory", "engine", False))
    for raw in (recorded, removed, kv):
        parsed = parse_scenario(raw)
        assert parsed.load.shape == "replay" and parsed.duration_s == pytest.approx(31.0)
        # a closed loop replays as its users' closed loops, with their think time
        assert parsed.load.replay_loop == "closed" and not parsed.load.open_loop
        # the stretch starts at the run's start: both faults stay where they were
        assert [(f.kind, f.start_s) for f in parsed.faults] == [
            ("memory.gc_storm", 16.0),
            ("load.burst", 1.0),
        ]
    assert not parse_scenario(recorded).gc_off and parse_scenario(removed).gc_off
    raised = arm_scenario(RECORDED, s, "/x/host.jsonl", intervention_for("host", "engine"))
    assert raised["intervention"] == {"nice": -10} and raised["engine"] == RECORDED["engine"]
    assert kv["engine"]["kv_blocks"] == 1024 * KV_FACTOR and "intervention" not in kv
    assert recorded["engine"] == removed["engine"] == RECORDED["engine"]


ENTRIES = [
    TraceEntry(
        t / 2,
        32,
        64,
        {"temperature": 0.7, "frequency_penalty": 0.5, "repetition_penalty": 1.2},
    )
    for t in range(40)
]


def test_penalties_off_neutralises_every_penalty_and_caps_max_tokens_at_the_median():
    out = zero_penalties(ENTRIES, 40.4)
    assert {e.max_tokens for e in out} == {40}
    assert all(
        e.sampling
        == {
            "temperature": 0.7,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "repetition_penalty": 1.0,
        }
        for e in out
    )
    assert [e.t_s for e in out] == [e.t_s for e in ENTRIES]
    assert zero_penalties(ENTRIES, None)[0].max_tokens == 64


def test_the_penalty_arm_caps_max_tokens_only_when_the_outputs_looped():
    facts = BaselineFacts(40.4, 1.0)
    plain = intervention_for("penalty", "engine")
    looped = intervention_for("penalty", "engine", loops=True)
    assert not plain.caps_output and looped.caps_output and "max_tokens" in looped.does
    assert "max_tokens" not in plain.does
    uncapped = apply_to_trace(ENTRIES, plain, facts, (5.0, 10.0))
    assert {e.max_tokens for e in uncapped} == {64}
    assert uncapped[0].sampling["frequency_penalty"] == 0.0
    assert {e.max_tokens for e in apply_to_trace(ENTRIES, looped, facts, (5.0, 10.0))} == {40}


def test_the_load_cap_starts_where_the_spikes_load_began_arriving():
    # requests in flight at the spike's start (5 s) arrived from 3 s on (lead 2 s): the cap
    # covers [3, 10) s, so a burst that began before the detected spike is thinned too
    load = intervention_for("load", "vllm")
    widened = apply_to_trace(ENTRIES, load, BaselineFacts(30.0, 1.0, lead_s=2.0), (5.0, 10.0))
    assert widened == cap_arrivals(ENTRIES, (3.0, 10.0), 1.0)
    assert len([e for e in widened if 3.0 <= e.t_s < 10.0]) == 7
    assert all(e in widened for e in ENTRIES if not 3.0 <= e.t_s < 10.0)
    assert "in flight" in load.does


def test_arrivals_above_the_baseline_rate_are_dropped_only_inside_the_window():
    # 2 arrivals/s everywhere; window [5, 10) s capped at 1/s keeps 5 of its 10
    out = cap_arrivals(ENTRIES, (5.0, 10.0), 1.0)
    inside = [e for e in out if 5.0 <= e.t_s < 10.0]
    assert len(inside) == 5 and len(out) == len(ENTRIES) - 5
    assert cap_arrivals(ENTRIES, (5.0, 10.0), 3.0) == ENTRIES
    via = apply_to_trace(
        ENTRIES, intervention_for("load", "engine"), BaselineFacts(30.0, 1.0), (5.0, 10.0)
    )
    assert via == out
    unchanged = apply_to_trace(
        ENTRIES, intervention_for("memory", "engine"), BaselineFacts(30.0, 1.0), (5.0, 10.0)
    )
    assert unchanged == ENTRIES


def test_an_open_loop_recording_replays_open_loop():
    s = plan_stretch(16.0, 26.0, t0_offset_s=4.0, warmup_s=4.0, trace_end_s=44.0)
    open_run = {**RECORDED, "load": {"shape": "poisson", "rate": 5.0}}
    load = parse_scenario(arm_scenario(open_run, s, "/x/r.jsonl", None)).load
    assert load.shape == "replay" and load.open_loop
    think = {**RECORDED, "load": {"shape": "constant", "users": 2, "think_time_s": 0.3}}
    load = parse_scenario(arm_scenario(think, s, "/x/r.jsonl", None)).load
    assert load.replay_loop == "closed" and load.think_time_s == 0.3


def test_a_recording_is_closed_loop_when_its_users_waited_for_their_answers():
    assert recorded_closed_loop(RECORDED)  # constant users
    assert recorded_closed_loop(
        {"load": {"shape": "spike", "users": 2, "spike_users": 8, "spike_duration_s": 5}}
    )
    assert not recorded_closed_loop({"load": {"shape": "poisson", "rate": 5.0}})
    assert not recorded_closed_loop({"load": {"shape": "replay", "trace": "/x/r.jsonl"}})
    closed_replay = {"shape": "replay", "trace": "/x/r.jsonl", "replay_loop": "closed"}
    assert recorded_closed_loop({"load": closed_replay})


def users(*spans):
    """Requests of closed-loop users: (user, first send, stop or None), one request a second."""
    out = []
    for user, start, stop in spans:
        end = 30 if stop is None else stop
        out += [TraceEntry(float(t), 16, 8, {}, user, stop) for t in range(start, end)]
    return sorted(out, key=lambda e: e.t_s)


def test_a_closed_loops_load_cap_drops_the_users_who_joined_beyond_the_baseline_count():
    # 3 users throughout; a burst of 3 more at 12–20 s; one base user stops at 14 s and a
    # replacement starts at 15 s (the count stays 3: kept)
    trace = users(
        ("a", 0, None),
        ("b", 0, None),
        ("c", 0, 14),
        ("x", 12, 20),
        ("y", 12, 20),
        ("z", 12, 20),
        ("r", 15, None),
    )
    out = cap_users(trace, (11.5, 22.0))
    assert {e.user for e in out} == {"a", "b", "c", "r"}
    assert [e for e in out] == [e for e in trace if e.user in {"a", "b", "c", "r"}]
    load = intervention_for("load", "engine", closed_loop=True)
    assert load.name == "users_capped" and "users" in load.does
    facts = BaselineFacts(30.0, None, lead_s=0.5)
    assert apply_to_trace(trace, load, facts, (12.0, 22.0)) == out
    # no user alive as the window opens: nothing to cap against, unchanged
    assert cap_users(trace, (-5.0, 22.0)) == trace
    assert intervention_for("load", "engine").name == "arrivals_capped"
