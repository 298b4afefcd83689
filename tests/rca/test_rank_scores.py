"""rca.rank_scores: AC@k and Avg@k over ranked causes, as RCAEval defines them."""

import pytest

from rca.rank_scores import RankedEvent, ac_at, avg_at, ranked_causes


def test_ac_at_k_and_avg_at_5():
    events = [
        RankedEvent("memory", ("memory", "load")),  # right at 1
        RankedEvent("memory", ("load", "penalty", "memory")),  # right at 3
        RankedEvent("penalty", ("load",)),  # never
        RankedEvent("load", ()),  # no answer: a miss at every k
    ]
    assert ac_at(events, 1) == 0.25
    assert ac_at(events, 3) == 0.5
    # AC@1..5 = 0.25, 0.25, 0.5, 0.5, 0.5
    assert avg_at(events, 5) == pytest.approx(0.4)
    assert events[3].top == "unexplained"
    assert ac_at([], 1) is None and avg_at([]) is None
    with pytest.raises(ValueError, match="k must be"):
        ac_at(events, 0)


def test_ranked_metrics_become_ranked_causes_first_occurrence_kept():
    cause = {
        "gc_ms": "memory",
        "kv_usage": "memory",
        "forward_ms": "unexplained",
        "waiting": "load",
    }
    metrics = ["forward_ms", "gc_ms", "unknown", "kv_usage", "waiting"]
    assert ranked_causes(metrics, cause) == ("memory", "load")
    assert ranked_causes(metrics, cause, skip=()) == ("unexplained", "memory", "load")
