"""Sweep cell statistics: loops score high on repetition and low on entropy."""

import math

import numpy as np

from rca.sweep import repeated_ngram_rate, repeated_ngram_rates, token_entropy_bits


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


def test_rates_of_many_outputs_equal_the_rate_of_each_bit_for_bit():
    rng = np.random.default_rng(0)
    outputs = [[int(x) for x in rng.integers(0, 30000, rng.integers(0, 60))] for _ in range(300)]
    outputs += [([1, 2, 3, 4] * 20)[:n] for n in range(0, 40)]  # loops, and too short to count
    outputs += [[-5, 2**40, -5, 2**40, -5, 2**40]]  # ids too wide to pack: the lexsort path
    offsets = np.concatenate(([0], np.cumsum([len(o) for o in outputs])))
    values = np.concatenate([np.array(o, dtype=np.int64) for o in outputs])
    got = repeated_ngram_rates(values, offsets)
    assert got.tolist() == [repeated_ngram_rate(o) for o in outputs]
    packed = repeated_ngram_rates(values[: offsets[-2]], offsets[:-1])  # ids that pack in 63 bits
    assert packed.tolist() == [repeated_ngram_rate(o) for o in outputs[:-1]]
    assert repeated_ngram_rates(np.array([1, 2]), np.array([0, 2])).tolist() == [0.0]
