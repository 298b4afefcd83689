"""pages.capacity: headlines for each knee status, a bad context names its key, and the charts'
knee band and SLO lines."""

from dataclasses import asdict

import pytest

from pages.capacity import CapacityContext, context_from_sweep
from pages.fields import ContextError
from pages.from_mapping import from_mapping
from templates.capacity_charts import capacity_figures


def sweep(status, capacity, first_fail, passed):
    steps = [
        {
            "load": float(x),
            "run_id": f"r{x}",
            "passed": p,
            "metrics": {"ttft_p99_ms": 10.0 * x},
            "cause": {
                "label": "below the knee" if p else "load (queueing)",
                "past_knee": not p,
                "cause": None if p else "load",
            },
        }
        for x, p in zip((4, 2), passed)
    ]
    return {
        "sweep_id": "sw",
        "scenario_name": "cap",
        "kind": "users",
        "slo": {"ttft_ms": 150},
        "attainment": 0.9,
        "command": "spikelens capacity s.yaml --users 2,4",
        "search": False,
        "knee": {"capacity": capacity, "first_fail": first_fail, "status": status},
        "steps": steps,
    }


def test_headlines_say_what_the_sweep_found():
    found = context_from_sweep(sweep("found", 2.0, 4.0, (False, True)))
    assert found.headline == (
        "Capacity 2 users: the SLO (TTFT ≤ 150 ms for ≥ 90% of requests) holds up "
        "to 2 and fails from 4 users. Past the knee: load (queueing)."
    )
    assert (
        "knee lies beyond"
        in context_from_sweep(sweep("not_reached", 4.0, None, (True, True))).headline
    )
    low = context_from_sweep(sweep("below_range", None, 2.0, (False, False)))
    assert (
        low.headline
        == "Even the lowest step (2 users) missed the SLO (TTFT ≤ 150 ms for ≥ 90% of requests)."
    )
    assert [s.load for s in low.steps] == [2.0, 4.0]  # sorted by load


@pytest.mark.parametrize(
    "breaking,needle",
    [
        (lambda c: c.pop("knee"), "context: missing key 'knee'"),
        (lambda c: c["knee"].update(status="maybe"), "knee.status: must be one of found"),
        (lambda c: c["steps"][0].pop("cause"), "steps[0]: missing key 'cause'"),
        (lambda c: c["steps"][1]["metrics"].update(goodput="fast"), "steps[1].metrics.goodput"),
        (
            lambda c: c["steps"][0].update(report_href="javascript:alert(1)"),
            "steps[0].report_href: must be a relative link",
        ),
        (lambda c: c.update(steps=[]), "steps: a sweep has at least one step"),
    ],
)
def test_a_bad_context_names_the_key(breaking, needle):
    ctx = asdict(context_from_sweep(sweep("found", 2.0, 4.0, (False, True))))
    breaking(ctx)
    with pytest.raises(
        ContextError, match=needle.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
    ):
        from_mapping(CapacityContext, ctx)


def test_charts_mark_the_knee_and_the_slo():
    ctx = asdict(context_from_sweep(sweep("found", 2.0, 4.0, (False, True))))
    throughput, latency = capacity_figures(ctx)
    band = latency["figure"]["layout"]["shapes"][0]
    assert (band["x0"], band["x1"]) == (2.0, 4.0)
    slo_line = latency["figure"]["layout"]["shapes"][-1]
    assert slo_line["y0"] == slo_line["y1"] == 150 and slo_line["line"]["dash"] == "dash"
    ttft = next(t for t in latency["figure"]["data"] if t["name"] == "TTFT p99")
    assert ttft["x"] == [2.0, 4.0] and ttft["y"] == [20.0, 40.0]
    assert [
        t["name"] for t in throughput["figure"]["data"]
    ] == []  # no throughput figures given: no traces
    assert latency["figure"]["layout"]["yaxis"]["type"] == "log"


def test_a_step_fills_the_page_figures_and_keeps_them_json_safe():
    from pages.capacity import STEP_METRICS, CapacityStep, StepCause

    s = CapacityStep(
        2.0,
        "r2",
        True,
        {"goodput": float("nan"), "ttft_p99_ms": 20, "completed": 9},
        StepCause("below the knee", False),
    )
    assert set(STEP_METRICS) <= set(s.metrics) and s.metrics["itl_p99_ms"] is None
    assert (
        s.metrics["goodput"] is None
        and s.metrics["ttft_p99_ms"] == 20
        and isinstance(s.metrics["ttft_p99_ms"], int)
    )
