"""Sampler: greedy = argmax after penalties, filters respected, seeded rows reproducible in any batch."""

import pytest
import torch

from engine.sampling import PAD_SLOT, PenaltyState, Sampler, SamplingMetadata
from engine.sampling.penalties import apply_penalties
from engine.sampling.sampler import reference_filter
from engine.sampling_params import SamplingParams

V = 97


def _state_with_history(slots=4):
    state = PenaltyState(slots, V)
    for slot in range(slots):
        state.assign(slot, [slot, slot + 1, 40], [slot + 2, slot + 2, 41])
    return state


def test_greedy_is_argmax_after_penalties():
    state = _state_with_history()
    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(0))
    # Make the raw argmax a repeated token so the penalty has to move it.
    logits[:, 41] = logits.max() + 0.5
    params = [SamplingParams(temperature=0.0, repetition_penalty=2.0, frequency_penalty=1.0)] * 4
    meta = SamplingMetadata.build(params, [0, 1, 2, 3], state)
    ids = Sampler().sample(logits, meta)
    expected = apply_penalties(
        logits,
        meta.prompt_mask(),
        meta.output_counts(),
        meta.repetition_penalty,
        meta.frequency_penalty,
        meta.presence_penalty,
    ).argmax(dim=-1)
    assert torch.equal(ids, expected)
    assert not (ids == 41).any()
    assert ids.dtype == torch.int64


def test_seeded_request_same_alone_and_in_a_busy_batch():
    seeded = SamplingParams(
        temperature=0.9, top_p=0.95, top_k=50, min_p=0.01, seed=1234, presence_penalty=0.3
    )
    logits_row = torch.randn(1, V, generator=torch.Generator().manual_seed(5))
    alone_state, batch_state = _state_with_history(), _state_with_history()

    alone_ids, batch_ids = [], []
    for step in range(6):
        alone = Sampler().sample(logits_row, SamplingMetadata.build([seeded], [2], alone_state))
        neighbours = torch.randn(3, V)  # unseeded neighbours with other params, different each step
        batch_logits = torch.cat([neighbours[:2], logits_row, neighbours[2:]])
        batch_params = [
            SamplingParams(temperature=1.5),
            SamplingParams(temperature=0.0),
            seeded,
            SamplingParams(top_k=3, seed=step),
        ]
        batch = Sampler().sample(
            batch_logits, SamplingMetadata.build(batch_params, [0, 1, 2, 3], batch_state)
        )
        alone_state.update([2], alone)
        batch_state.update([0, 1, 2, 3], batch)
        alone_ids.append(int(alone[0]))
        batch_ids.append(int(batch[2]))
    assert alone_ids == batch_ids
    assert len(set(alone_ids)) > 1  # the draws differ per step (seed mixed with position)


def test_seeded_draw_survives_preemption_rebuild():
    params = SamplingParams(temperature=1.0, seed=7)
    logits = torch.randn(1, V, generator=torch.Generator().manual_seed(9))
    state = PenaltyState(2, V)
    state.assign(0, [1, 2], [3, 4])
    before = Sampler().sample(logits, SamplingMetadata.build([params], [0], state))
    state.release(0)
    state.assign(1, [1, 2], [3, 4])  # recomputed in another slot
    after = Sampler().sample(logits, SamplingMetadata.build([params], [1], state))
    assert torch.equal(before, after)


def test_samples_stay_inside_the_filtered_set():
    state = PenaltyState(1, V)
    state.assign(0, [0], [])
    params = SamplingParams(temperature=0.7, top_k=10, top_p=0.5, min_p=0.05)
    logits = torch.randn(1, V, generator=torch.Generator().manual_seed(3)) * 3
    meta = SamplingMetadata.build([params] * 64, [0] * 64, state)
    batch = logits.expand(64, V)
    allowed = torch.isfinite(reference_filter(batch, meta)[0]).nonzero().flatten().tolist()
    ids = Sampler().sample(batch, meta).tolist()
    assert set(ids) <= set(allowed)
    assert len(set(ids)) > 1 or len(allowed) == 1


def test_sampling_follows_the_distribution():
    """Exponential race: frequencies over 20k fixed-seed draws match softmax(logits / T)."""
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    state = PenaltyState(1, 4)
    state.assign(0, [], [])
    n = 20000
    torch.manual_seed(0)
    meta = SamplingMetadata.build([SamplingParams(temperature=0.8)] * n, [0] * n, state)
    ids = Sampler().sample(logits.expand(n, 4), meta)
    freq = torch.bincount(ids, minlength=4).float() / n
    torch.testing.assert_close(freq, torch.softmax(logits[0] / 0.8, dim=-1), atol=0.015, rtol=0)


def test_mixed_greedy_random_and_padding_rows():
    state = _state_with_history()
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(4), dtype=torch.float16)
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=1.0, seed=1),
        SamplingParams(),
    ]
    meta = SamplingMetadata.build(params, [0, 1, PAD_SLOT], state)
    assert not meta.all_greedy and not meta.all_random and meta.no_penalties
    before = logits.clone()
    ids = Sampler().sample(logits, meta)
    assert torch.equal(logits, before)  # not mutated
    assert ids[0] == logits[0].float().argmax()
    counts_before = state.output_counts.sum()
    state.update([0, 1, PAD_SLOT], ids)
    assert state.output_counts.sum() == counts_before + 2


def test_metadata_flags_and_bad_shapes():
    state = _state_with_history()
    meta = SamplingMetadata.build([SamplingParams(temperature=0, top_p=0.5)], [0], state)
    assert meta.all_greedy and meta.no_top_p  # greedy rows do not turn filters on
    meta = SamplingMetadata.build([SamplingParams(top_k=V + 10)], [0], state)
    assert meta.no_top_k and int(meta.top_k[0]) == V
    with pytest.raises(ValueError, match="logits must be"):
        Sampler().sample(torch.zeros(2, V), meta)
    with pytest.raises(ValueError, match="slots has 2 rows"):
        SamplingMetadata.build([SamplingParams()], [0, 1], state)
    with pytest.raises(ValueError, match="backend must be"):
        Sampler(backend="cuda")


def test_draw_with_the_callers_weights_equals_the_draw_without():
    from engine.sampling.draw import draw_kept

    scaled = torch.randn(4, 500, generator=torch.Generator().manual_seed(3)) * 2
    keep = scaled >= scaled.quantile(0.7, dim=-1, keepdim=True)  # the row maximum is kept
    weight = torch.exp(scaled - scaled.amax(dim=-1, keepdim=True)).double()
    a = draw_kept(scaled, keep, {}, torch.Generator().manual_seed(9))
    b = draw_kept(scaled, keep, {}, torch.Generator().manual_seed(9), weight)
    assert torch.equal(a, b)
