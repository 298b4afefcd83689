"""CPU candidate path vs the torch reference: seeded rows pick the same token on both paths."""

import pytest
import torch

from engine.sampling import PenaltyState, SamplingMetadata, candidates
from engine.sampling.candidates import candidate_sample
from engine.sampling.sampler import reference_penalties, reference_sample
from engine.sampling_params import SamplingParams

V = 3000


def _params(seed0: int) -> list[SamplingParams]:
    base = [
        dict(temperature=0.8, top_k=50, top_p=0.9),
        dict(temperature=1.0, top_p=0.7),  # no top-k: candidates or fallback
        dict(temperature=1.2, min_p=0.1),
        dict(temperature=0.7),  # no filter at all: always the fallback
        dict(temperature=0.5, top_k=5, min_p=0.5),
        dict(temperature=1.5, top_k=2000, top_p=0.99),  # k above the candidate count
        dict(temperature=0.9, top_p=0.3, min_p=0.02, repetition_penalty=1.3, frequency_penalty=0.4),
    ]
    return [SamplingParams(seed=seed0 + i, **values) for i, values in enumerate(base)]


def _state(rows: int) -> PenaltyState:
    gen = torch.Generator().manual_seed(11)
    state = PenaltyState(rows, V)
    for slot in range(rows):
        state.assign(
            slot,
            torch.randint(0, V, (30,), generator=gen),
            torch.randint(0, V, (30,), generator=gen),
        )
    return state


@pytest.mark.parametrize("scale", [0.5, 3.0, 12.0])  # flat, medium, peaked rows
@pytest.mark.parametrize(
    "pools", [candidates.CANDIDATE_POOLS, (4, 16), ()]
)  # default; retries; threshold only
def test_seeded_rows_match_the_reference(monkeypatch, scale, pools):
    monkeypatch.setattr(candidates, "CANDIDATE_POOLS", pools)
    for step in range(3):
        params = _params(100 * step)
        rows = len(params)
        state = _state(rows)
        logits = torch.randn(rows, V, generator=torch.Generator().manual_seed(step)) * scale
        meta = SamplingMetadata.build(params, list(range(rows)), state)
        penalized = reference_penalties(logits, meta)
        fast = candidate_sample(penalized, meta)
        meta = SamplingMetadata.build(
            params, list(range(rows)), state
        )  # fresh generators, same noise
        assert torch.equal(fast, reference_sample(penalized, meta))


def test_greedy_rows_and_unseeded_rows():
    state = _state(3)
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(top_k=3),
        SamplingParams(temperature=0.0, top_p=0.1),
    ]
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(1))
    meta = SamplingMetadata.build(params, [0, 1, 2], state)
    ids = candidate_sample(logits, meta)
    assert ids[0] == logits[0].argmax() and ids[2] == logits[2].argmax()
    assert ids[1] in logits[1].topk(3).indices


def test_sparse_penalties_equal_dense_ones_after_updates():
    """reference_penalties gathers at history ids; it must equal the dense formula bitwise."""
    from engine.sampling.penalties import apply_penalties

    state = PenaltyState(2, 50)
    state.assign(0, [1, 2, 3], [4])
    state.assign(1, [7] * 300, [])  # longer than the initial history capacity
    for token in ([4, 8], [5, 9], [60, 9]):  # 60 is a padding id (outside the vocabulary)
        state.update([0, 1], torch.tensor(token))
    params = [
        SamplingParams(repetition_penalty=1.4, frequency_penalty=0.3, presence_penalty=-0.2)
    ] * 2
    meta = SamplingMetadata.build(params, [0, 1], state)
    logits = torch.randn(2, 50, generator=torch.Generator().manual_seed(2))
    dense = apply_penalties(
        logits,
        meta.prompt_mask(),
        meta.output_counts(),
        meta.repetition_penalty,
        meta.frequency_penalty,
        meta.presence_penalty,
    )
    assert torch.equal(reference_penalties(logits, meta), dense)
    assert state.history_len == [7, 303]  # prompt + outputs; the padding id still occupies a step


def test_unseeded_draws_follow_the_filtered_distribution():
    """Inverse-CDF draws of unseeded rows: frequencies match the renormalised kept probabilities."""
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, -3.0]])
    state = PenaltyState(1, 5)
    state.assign(0, [], [])
    n = 20000
    meta = SamplingMetadata.build([SamplingParams(temperature=0.9, top_k=3)] * n, [0] * n, state)
    ids = candidate_sample(logits.expand(n, 5), meta, torch.Generator().manual_seed(0))
    kept = torch.softmax(logits[0, :3] / 0.9, dim=-1)
    freq = torch.bincount(ids, minlength=5).float() / n
    torch.testing.assert_close(freq, torch.cat([kept, torch.zeros(2)]), atol=0.015, rtol=0)


def test_rows_whose_top_p_mass_is_beyond_every_pool_skip_the_candidates(monkeypatch):
    """A flat row needs p x its kept mass of candidates, each weighing at most the top token: when
    that exceeds every pool, no topk is taken and the threshold search decides it alone."""
    monkeypatch.setattr(candidates, "CANDIDATE_POOLS", (4, 16))
    calls = []
    real = candidates._sample_candidates
    monkeypatch.setattr(
        candidates,
        "_sample_candidates",
        lambda x, *a, **k: calls.append(x.shape[0]) or real(x, *a, **k),
    )
    flat = (
        torch.randn(1, V, generator=torch.Generator().manual_seed(4)) * 0.01
    )  # mass ~3000: p x mass > 16
    peaked = (
        torch.arange(V, dtype=torch.float32).flip(0).unsqueeze(0) * 5.0
    )  # mass ~1: 4 candidates do
    state = _state(2)
    params = [SamplingParams(top_p=0.9, seed=1), SamplingParams(top_p=0.9, seed=2)]
    logits = torch.cat([flat, peaked])
    meta = SamplingMetadata.build(params, [0, 1], state)
    fast = candidate_sample(logits, meta)
    assert calls == [1]  # only the peaked row went through a pool
    meta = SamplingMetadata.build(params, [0, 1], state)
    assert torch.equal(fast, reference_sample(logits, meta))


def test_a_top_k_rows_top_p_mass_is_its_top_k_mass():
    """Rows whose k-th value is the last candidate stay open; their top-p target is p x the mass of
    their top k, not of the whole row (a heavy tail beyond k would move the cut: 70 of 200 tokens
    differed from the reference when the whole row's mass was used)."""
    rows = 200
    state = PenaltyState(rows, V)
    for slot in range(rows):
        state.assign(slot, [], [])
    params = [SamplingParams(top_k=200, top_p=0.5, seed=10 + i) for i in range(rows)]
    gen = torch.Generator().manual_seed(5)
    ramp = -0.005 * torch.arange(V, dtype=torch.float32)  # weights e^(-rank/200): a heavy tail
    logits = torch.stack([ramp[torch.randperm(V, generator=gen)] for _ in range(rows)])
    fast = candidate_sample(logits, SamplingMetadata.build(params, list(range(rows)), state))
    assert torch.equal(
        fast, reference_sample(logits, SamplingMetadata.build(params, list(range(rows)), state))
    )


def test_a_top_p_that_underflows_fp32_keeps_the_top_token():
    """top_p = 5e-324 is valid ((0, 1]) but 0 in fp32: the row must still draw its top token."""
    params = [SamplingParams(top_p=5e-324), SamplingParams(top_p=1e-45, seed=3)]
    meta = SamplingMetadata.build(params, [0, 1], PenaltyState(2, 100, torch.device("cpu")))
    x = torch.randn(2, 100)
    assert (
        candidate_sample(reference_penalties(x, meta), meta, None).tolist() == x.argmax(-1).tolist()
    )
