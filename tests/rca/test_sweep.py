"""Sweep cell statistics: loops score high on repetition and low on entropy."""

import math

from rca.sweep import repeated_ngram_rate, token_entropy_bits


def test_a_loop_repeats_and_a_fresh_sequence_does_not():
    loop = [1, 2, 3] * 10
    fresh = list(range(30))
    assert repeated_ngram_rate(fresh) == 0.0
    assert repeated_ngram_rate(loop) == 1 - 3 / 28
    assert repeated_ngram_rate([1, 2]) == 0.0  # too short for a 3-gram


def test_entropy_bits():
    assert token_entropy_bits([7] * 10) == 0.0
    assert math.isclose(token_entropy_bits([0, 1, 2, 3]), 2.0)
    assert token_entropy_bits([]) == 0.0
