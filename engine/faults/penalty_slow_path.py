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

from engine.faults.registry import register
from spikelens_common.fault_params import SlowPathParams


@register("penalty.slow_path")
class PenaltySlowPath:
    def __init__(self, params: SlowPathParams):
        self.params = params

    def start(self, engine) -> None:
        engine.penalty_state.recount_passes = self.params.passes

    def apply(self, engine) -> None:
        pass  # state: PenaltyState.update runs the slow path itself

    def stop(self, engine) -> None:
        engine.penalty_state.recount_passes = 0
