"""rca.confirm_eval: which spikes an evaluation confirms (every verdict, plus swapped right ones)
and how the confirmations score."""

import pytest

from rca.confirm_eval import (
    SWAPPED,
    ConfirmCase,
    ConfirmOutcome,
    confirmation_scores,
    plan_confirmations,
)


def per_run():
    """Three runs: two right verdicts, one wrong, one miss."""
    return [
        {
            "run_id": "a",
            "verdicts": [
                {"cause": "memory", "detected": True, "attributed_cause": "memory", "spike_id": 2},
                {"cause": "load", "detected": False, "attributed_cause": None, "spike_id": None},
            ],
        },
        {
            "run_id": "b",
            "verdicts": [
                {"cause": "penalty", "detected": True, "attributed_cause": "load", "spike_id": 1}
            ],
        },
        {
            "run_id": "c",
            "verdicts": [
                {"cause": "host", "detected": True, "attributed_cause": "host", "spike_id": 1}
            ],
        },
    ]


def test_every_detected_verdict_is_confirmed_and_right_ones_are_swapped_evenly():
    cases = plan_confirmations(per_run(), swaps=1)
    assert [(c.run_id, c.spike_id, c.cause, c.right, c.swapped) for c in cases] == [
        ("a", 2, "memory", True, False),
        ("b", 1, "load", False, False),
        ("c", 1, "host", True, False),
        ("a", 2, SWAPPED["memory"], False, True),
    ]
    swapped = [c for c in plan_confirmations(per_run(), swaps=9) if c.swapped]
    assert [(c.run_id, c.cause) for c in swapped] == [("a", "penalty"), ("c", "penalty")]
    assert not [c for c in plan_confirmations(per_run(), swaps=0) if c.swapped]
    assert all(SWAPPED[t] != t for t in SWAPPED)


def test_scores_count_inconclusive_against_both_with_exact_intervals():
    def outcome(cause, truth, verdict, swapped=False):
        return ConfirmOutcome(ConfirmCase("r", 1, truth, cause, swapped), verdict, 0.5, 120.0)

    scores = confirmation_scores(
        [
            outcome("memory", "memory", "confirmed"),
            outcome("load", "load", "inconclusive"),
            outcome("load", "penalty", "not confirmed"),
            outcome("penalty", "memory", "confirmed", swapped=True),
        ]
    )
    assert (scores["right"], scores["right_confirmed"]) == (2, 1)
    assert (scores["wrong"], scores["wrong_not_confirmed"], scores["wrong_swapped"]) == (2, 1, 1)
    assert scores["inconclusive"] == 1
    assert scores["right_confirmed_exact"]["method"] == "clopper-pearson"
    assert scores["right_confirmed_exact"]["low"] == pytest.approx(0.0126, abs=1e-3)
    assert scores["minutes"] == 8.0 and scores["minutes_per_confirmed"] == 4.0
    assert scores["outcomes"][3] == {
        "run_id": "r",
        "spike_id": 1,
        "truth": "memory",
        "cause": "penalty",
        "swapped": True,
        "verdict": "confirmed",
        "share": 0.5,
        "wall_s": 120.0,
        "report": None,
        "note": "",
    }
    empty = confirmation_scores([])
    assert (
        empty["right_confirmed_exact"]["value"] is None and empty["minutes_per_confirmed"] is None
    )
