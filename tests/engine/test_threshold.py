"""The threshold search (the CPU path's last resort) searched in blocks of rows equals one pass."""

import torch

from engine.sampling import PenaltyState, SamplingMetadata, threshold
from engine.sampling.sampler import reference_sample
from engine.sampling.threshold import rows_per_block, threshold_sample
from engine.sampling_params import SamplingParams

V = 2000


def _batch(rows: int) -> tuple[torch.Tensor, list[SamplingParams], PenaltyState]:
    """Flat-ish logits (large nuclei) and a mix of filters; every third row seeded."""
    kinds = [
        dict(temperature=0.8, top_p=0.9),
        dict(temperature=1.1, top_p=0.5, min_p=0.01),
        dict(temperature=0.7, top_k=300, top_p=0.95),
        dict(temperature=1.3),
    ]
    params = [
        SamplingParams(seed=row if row % 3 == 0 else None, **kinds[row % len(kinds)])
        for row in range(rows)
    ]
    state = PenaltyState(rows, V)
    for slot in range(rows):
        state.assign(slot, [], [])
    return torch.randn(rows, V, generator=torch.Generator().manual_seed(5)) * 2, params, state


def _search(x, params, state, seed):
    meta = SamplingMetadata.build(params, list(range(len(params))), state)
    noise = {row: torch.empty(V).exponential_(generator=g) for row, g in meta.generators.items()}
    return threshold_sample(x, meta, noise, torch.Generator().manual_seed(seed))


def test_blocks_of_rows_give_the_one_pass_result(monkeypatch):
    x, params, state = _batch(11)
    whole = _search(x, params, state, seed=1)
    monkeypatch.setattr(
        threshold, "BLOCK_BYTES", 3 * V * 8
    )  # 3 rows a block: 4 blocks, the last short
    assert rows_per_block(V) == 3
    assert torch.equal(
        _search(x, params, state, seed=1), whole
    )  # unseeded uniforms drawn in row order


def test_blocked_seeded_rows_match_the_reference(monkeypatch):
    monkeypatch.setattr(threshold, "BLOCK_BYTES", 2 * V * 8)
    x, params, state = _batch(9)
    seeded = [row for row, p in enumerate(params) if p.seed is not None]
    picked = _search(x, params, state, seed=2)
    reference = reference_sample(x, SamplingMetadata.build(params, list(range(9)), state))
    assert torch.equal(picked[seeded], reference[seeded])


def test_rows_per_block_is_at_least_one():
    assert rows_per_block(128_000) == 4  # 4 MB of fp64 per block
    assert rows_per_block(10**9) == 1
