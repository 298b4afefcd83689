"""``penalty.slow_path``: the penalty bookkeeping falls back to recounting every history each step.

The normal path keeps persistent per-slot counts and adds one token per step. The slow path is the
naive implementation a regression could bring back: after each draw, every updated sequence's
counts and prompt mask are rebuilt from its whole history with dense one-hot reductions
(``PenaltyState.recount_passes``), so the cost grows with batch size x history length x vocabulary.
The values written equal the persistent ones, so outputs do not change: only the cost does.

Where the cost lands: where the sampler's state update runs, after the draw and before the step's
read-back of the sampled ids, i.e. inside ``sample_ms`` and the step time; ``penalty_ms`` (the
penalty arithmetic on the logits) is untouched, as in an engine that times only the whole sampler.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@register("penalty.slow_path", SlowPathParams)
class PenaltySlowPath:
    def __init__(self, params: SlowPathParams):
        self.params = params

    def start(self, engine) -> None:
        engine.penalty_state.recount_passes = self.params.passes

    def apply(self, engine) -> None:
        pass  # state: PenaltyState.update runs the slow path itself

    def stop(self, engine) -> None:
        engine.penalty_state.recount_passes = 0
