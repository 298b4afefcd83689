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

from dataclasses import dataclass

from engine.faults.registry import register


def _check(kind: str, name: str, value, lo, hi, integer: bool = False) -> None:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not lo <= value <= hi:
        raise ValueError(
            f"{kind}.params.{name}: must be {'an integer' if integer else 'a number'} in [{lo}, {hi}], got {value!r}"
        )


@dataclass(frozen=True)
class StragglerParams:
    rank: int = -1  # the late rank; -1 = the last rank
    delay_ms: float = 30.0  # how late it arrives
    every_collective: bool = False  # False: once per step (before its first all-reduce)

    def __post_init__(self):
        _check("comm.straggler", "rank", self.rank, -1, 1023, integer=True)
        _check("comm.straggler", "delay_ms", self.delay_ms, 0, 10_000)
        if not isinstance(self.every_collective, bool):
            raise ValueError(
                f"comm.straggler.params.every_collective: must be a boolean, got {self.every_collective!r}"
            )


@register("comm.straggler", StragglerParams)
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


@dataclass(frozen=True)
class SlowLinkParams:
    # Extra fp32 elements every all-reduce carries in the same collective (a link that must move
    # more bytes per call). The default, 4 MiB per all-reduce, measured with bench/slow_link.py on
    # gloo over loopback (2 shared cores): median all-reduce 0.24 -> 5.9 ms, about what the old
    # 5 ms sleep added; the small model's activations are a few KiB, 1 MiB adds only ~0.5 ms.
    extra_floats: int = 1_048_576

    def __post_init__(self):
        _check("comm.slow_link", "extra_floats", self.extra_floats, 1, 1 << 28, integer=True)


@register("comm.slow_link", SlowLinkParams)
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
