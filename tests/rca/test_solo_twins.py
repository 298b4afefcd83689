"""rca.solo_twins: each partner of a pair judged and weighed on its own solo twin's raw client
latencies (never the detector)."""

import numpy as np

from rca.solo_twins import Twin, excess, partner_solos, shared_stretch
from tests.rca.test_acted import samples

PAIR = [(20.0, 30.0), (22.0, 27.0)]  # the second inside the first, as the generator draws them


def _twin(run_id, window, factor, seed):
    return Twin(run_id, samples(slow=window, factor=factor, seed=seed), window, 60.0)


def _pair_samples():
    """ITL ×3.5 where both faults run (×3 + ×1.5 less the base), ×3 where only the first does."""
    got = samples(slow=PAIR[0], factor=3.0, seed=9)
    t, itl = got["itl"]
    both = (t >= PAIR[1][0]) & (t < PAIR[1][1])
    itl[both] *= 3.5 / 3.0
    return got


def test_the_shared_stretch_is_the_overlap_widened_by_the_tail():
    assert shared_stretch(PAIR, 3.0) == (22.0, 30.0)
    assert shared_stretch([(10.0, 15.0), (16.0, 20.0)], 3.0) is None


def test_a_partner_that_makes_a_fifth_of_the_shared_excess_is_minor():
    twins = {0: _twin("a", PAIR[0], 3.0, 1), 1: _twin("b", PAIR[1], 1.5, 2)}
    got = partner_solos(_pair_samples(), PAIR, twins)
    strong, weak = got[0], got[1]
    assert strong.acted is True and weak.acted is True  # both act alone
    assert strong.metric == weak.metric == "itl"  # TTFT did not rise: no share of its noise
    # excess ×2 against ×0.5 (less in the stretch's tail, where only the first still runs)
    assert 0.75 < strong.share < 0.9 and not strong.minor
    assert weak.share < 1 / 3 and weak.minor
    assert abs(strong.share + weak.share - 1.0) < 1e-3
    # the pair's own excess there is about both solos' together
    assert strong.pair_excess_ms == weak.pair_excess_ms
    assert 0.8 < strong.pair_excess_ms / (strong.excess_ms + weak.excess_ms) < 1.25


def test_partners_of_like_strength_are_both_material():
    twins = {0: _twin("a", PAIR[0], 2.5, 1), 1: _twin("b", PAIR[1], 3.0, 2)}
    got = partner_solos(_pair_samples(), PAIR, twins)
    assert not got[0].minor and not got[1].minor
    assert got[0].share > 1 / 3 and got[1].share > 1 / 3


def test_a_partner_that_did_nothing_alone_did_not_act_and_takes_no_share():
    """Its twin's TTFT and ITL noise stays noise: it takes no share of a metric that did not rise."""
    twins = {0: _twin("a", PAIR[0], 3.0, 1), 1: _twin("b", PAIR[1], 1.0, 2)}
    got = partner_solos(_pair_samples(), PAIR, twins)
    assert got[1].acted is False and got[1].share < 0.05 and got[1].minor
    assert got[0].share > 0.95


def test_no_share_without_every_twin_or_without_an_overlap():
    one = partner_solos(_pair_samples(), PAIR, {0: _twin("a", PAIR[0], 3.0, 1)})
    assert one[0].share is None and one[0].acted is True and "every partner" in one[0].why
    apart = [(10.0, 15.0), (30.0, 35.0)]
    twins = {0: _twin("a", apart[0], 3.0, 1), 1: _twin("b", apart[1], 3.0, 2)}
    got = partner_solos(samples(seed=3), apart, twins)
    assert got[0].share is None and "never overlap" in got[0].why and not got[0].minor


def test_a_metric_that_rose_in_one_partner_alone_gives_it_the_share_there():
    """A GC storm's stretch rises on TTFT; a client stall beside it owns the ITL: each partner's
    share is its largest, so neither is minor."""
    t = np.arange(0.0, 60.0, 0.02)
    rng = np.random.default_rng(4)

    def twin(run_id, window, ttft_factor, itl_factor):
        itl = 10.0 * rng.lognormal(0.0, 0.25, len(t))
        ttft = 30.0 * rng.lognormal(0.0, 0.2, len(t))
        inside = (t >= window[0]) & (t < window[1])
        itl[inside] *= itl_factor
        ttft[inside] *= ttft_factor
        return Twin(run_id, {"itl": (t, itl), "ttft": (t, ttft)}, window, 60.0)

    twins = {0: twin("storm", PAIR[0], 4.0, 1.0), 1: twin("stall", PAIR[1], 1.0, 3.0)}
    got = partner_solos(_pair_samples(), PAIR, twins)
    assert got[0].metric == "ttft" and got[0].share > 0.9 and not got[0].minor
    assert got[1].metric == "itl" and got[1].share > 0.9 and not got[1].minor


def test_neither_twin_raising_the_stretch_gives_no_share():
    t = np.arange(0.0, 60.0, 0.02)
    flat = {"itl": (t, np.full(len(t), 10.0))}
    twins = {k: Twin(str(k), flat, w, 60.0) for k, w in enumerate(PAIR)}
    got = partner_solos(flat, PAIR, twins)
    assert got[0].share is None and got[1].share is None
    assert "rose" in got[0].why and not got[0].minor and got[0].excess_ms is None


def test_excess_needs_samples_on_both_sides():
    few = {"itl": (np.array([21.0, 22.0]), np.array([10.0, 30.0]))}
    assert excess(few, "itl", (20.0, 25.0), (20.0, 25.0), _config()) is None
    assert excess({}, "ttft", (20.0, 25.0), (20.0, 25.0), _config()) is None


def _config():
    from rca.solo_twins import SoloConfig

    return SoloConfig()
