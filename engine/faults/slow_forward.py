"""``unexplained.slow_forward``: the model's forward runs ``factor`` times slower, and nothing says why.

The phenomenon: a device that computes more slowly for a while with no cause any collector
reads — a neighbour thrashing the shared cache or memory bandwidth from another core, a degraded
accelerator. Its cost is the forward's alone: the other stages, the batch, the GC, the run-queue
wait and the engine's /metrics stay as they were, so the honest verdict is 'unexplained'.

How: a forward pre-hook and a forward hook on the model time each forward pass (after a device
sync on CUDA) and then keep computing (small matrix products, native code that releases the GIL,
like the forward's own) until the pass has taken ``factor`` times as long. The extra time is on
the CPU like the forward's own, and py-spy finds it under the model's call frames
(``torch/nn/modules``, ``engine/model.py``): the model_forward region, where a slower device's
time lands. Outputs are unchanged (the hooks return nothing and touch no tensor of the model).

Where the cost lands: ``forward_ms`` and the step time, in every step of the window.
"""

from __future__ import annotations

import time

import torch

from engine.faults.registry import register
from spikelens_common.fault_params import SlowForwardParams

_SIDE = 64  # scratch products of 64 x 64: each well under a millisecond, so the stretch is exact


@register("unexplained.slow_forward")
class SlowForward:
    def __init__(self, params: SlowForwardParams):
        self.params = params
        self._handles: list = []
        self._t0 = 0.0
        self._scratch: torch.Tensor | None = None

    def start(self, engine) -> None:
        self._scratch = torch.full((_SIDE, _SIDE), 1.0 / _SIDE, device=engine.device)
        self._handles = [
            engine.model.register_forward_pre_hook(self._before),
            engine.model.register_forward_hook(self._after),
        ]

    def apply(self, engine) -> None:
        pass  # the cost is the forward's: see _after

    def _before(self, module, args) -> None:
        self._t0 = time.perf_counter()

    def _after(self, module, args, output) -> None:
        scratch = self._scratch
        if scratch is None:
            return
        cuda = scratch.is_cuda
        if cuda:
            torch.cuda.synchronize(scratch.device)
        until = self._t0 + self.params.factor * (time.perf_counter() - self._t0)
        out = torch.empty_like(scratch)
        while time.perf_counter() < until:
            torch.mm(scratch, scratch, out=out)
            if cuda:
                torch.cuda.synchronize(scratch.device)

    def stop(self, engine) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._scratch = None
