"""Sampling for the decode loop: persistent penalty state, batched metadata, and the sampler.

Public API (docs/INTERFACES.md, "Sampling API"):
    PenaltyState(max_slots, vocab_size, device)  .assign(slot, prompt_ids, output_ids)  .update(slots, next_ids)
    SamplingMetadata.build(params_list, slots, state, step_seeds=None)
    Sampler(backend="auto").sample(logits, meta) -> next ids [B] int64, no host sync
"""

from engine.sampling.metadata import SamplingMetadata
from engine.sampling.penalty_state import PAD_SLOT, PenaltyState
from engine.sampling.sampler import Sampler
from engine.sampling.seeds import step_seed

__all__ = ["PAD_SLOT", "PenaltyState", "Sampler", "SamplingMetadata", "step_seed"]
