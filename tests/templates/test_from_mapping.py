"""pages.from_mapping: a typed context from plain data; errors name the key path; omitted
optional keys get their defaults; constructors validate and order their own fields."""

from __future__ import annotations

import copy

import pytest

from pages.fields import ContextError
from pages.from_mapping import from_mapping
from pages.incident import IncidentContext


def test_builds_a_typed_context_and_leaves_the_input_alone(incident_context):
    original = copy.deepcopy(incident_context)
    del incident_context["run"]["host"]
    del incident_context["spikes"][0]["severity"]
    snapshot = copy.deepcopy(incident_context)
    ctx = from_mapping(IncidentContext, incident_context)
    assert incident_context == snapshot
    assert ctx.run.host is None and ctx.spikes[0].severity is None
    assert [a.cause for a in ctx.spikes[0].attributions] == ["memory", "unexplained", "load"]
    assert ctx.faults[0].matched is True
    assert original["run"]["run_id"] == ctx.run.run_id


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c.pop("run"), r"context: missing key 'run'"),
        (lambda c: c["run"].pop("command"), r"run: missing key 'command'"),
        (lambda c: c["windows"][3].pop("t_s"), r"windows\[3\]: missing key 't_s'"),
        (
            lambda c: c["windows"][3].update(itl_p99_ms="slow"),
            r"windows\[3\]\.itl_p99_ms: expected a number",
        ),
        (
            lambda c: c["spikes"][0]["attributions"][1].update(share=1.5),
            r"attributions\[1\]\.share: share must be in \[0, 1\]",
        ),
        (
            lambda c: c["spikes"][0].update(end_s=10.0),
            r"spikes\[0\]\.end_s: 10.0 is before start_s 20.0",
        ),
        (lambda c: c.update(spikes={}), r"spikes: expected a list, got dict"),
        (lambda c: c["faults"][0].pop("detected"), r"faults\[0\]: missing key 'detected'"),
        (
            lambda c: c["gc_pauses"][0].update(duration_ms=None),
            r"gc_pauses\[0\]\.duration_ms: expected a number",
        ),
        (lambda c: c["totals"].update(requests=True), r"totals\.requests: expected a number"),
        (
            lambda c: c.update(measurement={"ttft_diff_p99_ms": "1 ms"}),
            r"measurement\.ttft_diff_p99_ms: expected a number",
        ),
    ],
)
def test_bad_input_names_the_key(incident_context, mutate, message):
    mutate(incident_context)
    with pytest.raises(ContextError, match=message):
        from_mapping(IncidentContext, incident_context)


def test_the_error_carries_its_field(incident_context):
    incident_context["spikes"][0]["attributions"][1]["share"] = 1.5
    with pytest.raises(ContextError) as caught:
        from_mapping(IncidentContext, incident_context)
    assert caught.value.field == "spikes[0].attributions[1].share"


def test_wrong_cause_and_missed_faults_are_not_matched(incident_context):
    incident_context["faults"] = [
        {
            "kind": "memory.gc_storm",
            "cause": "memory",
            "start_s": 20,
            "end_s": 30,
            "detected": True,
            "attributed_cause": "load",
        },
        {
            "kind": "comm.straggler",
            "cause": "communication",
            "start_s": 40,
            "end_s": 50,
            "detected": False,
        },
    ]
    faults = from_mapping(IncidentContext, incident_context).faults
    assert [f.matched for f in faults] == [False, False]
    assert faults[1].attributed_cause is None


def test_nan_and_inf_become_none(incident_context):
    incident_context["windows"][10]["itl_p99_ms"] = float("nan")
    incident_context["totals"]["ttft_p99_ms"] = float("-inf")
    ctx = from_mapping(IncidentContext, incident_context)
    assert ctx.windows[10].itl_p99_ms is None and ctx.totals.ttft_p99_ms is None
