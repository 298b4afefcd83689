"""``comm.straggler`` and ``comm.slow_link``: delays in the tensor-parallel collectives.

Both act through the rank's ``TPComm`` (``engine.comm``); with ``tp: 1`` there are no collectives and
they change nothing. Defaults follow STACK-NOTES: gloo all-reduce on 2 CPU cores has p99 ≈ 8 ms, so
a straggler delay needs ≥ ~20 ms to stand out.

- straggler: rank ``rank`` sleeps ``delay_ms`` before the first all-reduce of every step (or before
  each one with ``every_collective``): the *other* ranks' ``comm_ms`` rises, the straggler's does not.
- slow link: every all-reduce on every rank carries ``extra_floats`` more payload in the same
  collective, so the transport moves more bytes: ``comm_ms`` rises on all ranks alike.

Where the cost lands: in the collectives themselves (``comm_ms``, and ``forward_ms``, which contains
the all-reduces): the straggler's sleep is outside its own timed region (it arrives late), the slow
link's cost is the real transfer of a bigger buffer; neither runs in the scheduler.
"""

from __future__ import annotations

from engine.faults.registry import register
from spikelens_common.fault_params import SlowLinkParams, StragglerParams


@register("comm.straggler")
class Straggler:
    def __init__(self, params: StragglerParams):
        self.params = params

    def _mine(self, engine) -> bool:
        comm = getattr(engine, "comm", None)
        if comm is None:
            return False
        target = self.params.rank if self.params.rank >= 0 else comm.world_size - 1
        return comm.rank == target

    def start(self, engine) -> None:
        if self._mine(engine):
            engine.comm.straggle_ms = self.params.delay_ms
            engine.comm.straggle_every_collective = self.params.every_collective

    def apply(self, engine) -> None:
        pass

    def stop(self, engine) -> None:
        if self._mine(engine):
            engine.comm.straggle_ms = 0.0


@register("comm.slow_link")
class SlowLink:
    """Rank 0 sets the payload; the step header carries it to every worker for the same step
    (all ranks must all-reduce buffers of one size)."""

    def __init__(self, params: SlowLinkParams):
        self.params = params

    def start(self, engine) -> None:
        comm = getattr(engine, "comm", None)
        if comm is not None and comm.rank == 0:
            comm.link_extra_floats = self.params.extra_floats

    def apply(self, engine) -> None:
        pass

    def stop(self, engine) -> None:
        comm = getattr(engine, "comm", None)
        if comm is not None and comm.rank == 0:
            comm.link_extra_floats = 0
