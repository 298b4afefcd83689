"""PenaltyState: counts from assign/update, padding never counted, rebuild after preemption."""

import pytest
import torch

from engine.sampling import PAD_SLOT, PenaltyState

V = 11


def test_assign_sets_prompt_mask_and_output_counts():
    state = PenaltyState(3, V)
    state.assign(1, [2, 2, 5], [7, 7, 3])
    assert state.prompt_mask[1].nonzero().flatten().tolist() == [2, 5]
    assert state.output_counts[1].tolist() == [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]
    assert state.output_counts[0].sum() == 0 and state.output_counts[2].sum() == 0
    assert state.num_output_tokens == [0, 3, 0]


def test_update_counts_sampled_ids_and_ignores_padding():
    state = PenaltyState(3, V)
    state.assign(0, [1], [])
    state.assign(2, [1], [])
    # Row 1 is a padded row (slot -1); row 2 carries an out-of-vocabulary pad id.
    state.update([0, PAD_SLOT, 2, 0], torch.tensor([4, 4, V, 4]))
    assert state.output_counts[0, 4] == 2
    assert state.output_counts.sum() == 2  # neither padding row nor pad id counted
    assert state.prompt_mask.sum() == 2
    assert state.num_output_tokens == [2, 0, 1]


def test_padding_ids_in_assign_are_ignored():
    state = PenaltyState(2, V)
    state.assign(0, [V, -1, 3], [V + 5, 6])
    assert state.prompt_mask[0].nonzero().flatten().tolist() == [3]
    assert state.output_counts[0].sum() == 1 and state.output_counts[0, 6] == 1


def test_rebuild_after_preemption_equals_incremental_counts():
    incremental = PenaltyState(2, V)
    incremental.assign(0, [1, 2], [])
    for token in [3, 3, 9]:
        incremental.update([0], torch.tensor([token]))
    rebuilt = PenaltyState(2, V)
    rebuilt.assign(1, [0], [5])  # stale content to be overwritten
    rebuilt.assign(1, [1, 2], [3, 3, 9])  # the preempted sequence lands in another slot
    assert torch.equal(incremental.output_counts[0], rebuilt.output_counts[1])
    assert torch.equal(incremental.prompt_mask[0], rebuilt.prompt_mask[1])
    assert rebuilt.num_output_tokens[1] == incremental.num_output_tokens[0] == 3


def test_release_clears_the_slot():
    state = PenaltyState(1, V)
    state.assign(0, [1], [2])
    state.release(0)
    assert (
        state.output_counts.sum() == 0
        and state.prompt_mask.sum() == 0
        and state.num_output_tokens == [0]
    )


def test_bad_slot_and_shapes_are_errors():
    state = PenaltyState(2, V)
    with pytest.raises(ValueError, match="slot must be"):
        state.assign(2, [1])
    with pytest.raises(ValueError, match="next_ids has 1 rows but slots has 2"):
        state.update([0, 1], torch.tensor([1]))
    with pytest.raises(ValueError, match="vocab_size"):
        PenaltyState(1, 0)
