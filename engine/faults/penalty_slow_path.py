"""``penalty.slow_path``: the penalty stage recounts every sequence's history from scratch each step.

The normal path keeps persistent per-slot counts and adds one token per step. The slow path is the
naive implementation: build dense one-hot matrices ``[history, V]`` of the prompt and the output and
reduce them, for every decoding sequence, every step — so ``penalty_ms`` grows with batch size ×
history length × vocabulary. The counts it writes equal the persistent ones, so outputs do not
change: only the cost does (as with a real slow code path).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.faults.registry import register


@dataclass(frozen=True)
class SlowPathParams:
    # Recount passes per step: 1 is the naive path; more scales the cost (e.g. to stand out on a GPU).
    passes: int = 1

    def __post_init__(self):
        if (
            isinstance(self.passes, bool)
            or not isinstance(self.passes, int)
            or not 1 <= self.passes <= 100
        ):
            raise ValueError(
                f"penalty.slow_path.params.passes: must be an integer in [1, 100], got {self.passes!r}"
            )


def recount_histories(engine, seqs, passes: int = 1) -> None:
    """Rewrite each sequence's penalty row from its whole history (mutates engine.penalty_state)."""
    state = engine.penalty_state
    V = state.vocab_size
    for _ in range(passes):
        for s in seqs:
            prompt = torch.tensor(s.prompt_ids, device=state.device)
            output = torch.tensor(s.output_ids, dtype=torch.long, device=state.device)
            counts = (
                F.one_hot(output, V).sum(0)
                if len(s.output_ids)
                else torch.zeros(V, dtype=torch.long)
            )  # [V]
            mask = F.one_hot(prompt, V).amax(0).bool()  # [V]
            state.output_counts[s.slot].copy_(counts)
            state.prompt_mask[s.slot].copy_(mask)


@register("penalty.slow_path", SlowPathParams)
class PenaltySlowPath:
    def __init__(self, params: SlowPathParams):
        self.params = params

    def start(self, engine) -> None:
        passes = self.params.passes
        engine.penalty_slow_path = lambda eng, seqs: recount_histories(eng, seqs, passes)

    def apply(self, engine) -> None:
        pass  # the engine calls the installed hook inside its penalty stage

    def stop(self, engine) -> None:
        engine.penalty_slow_path = None
