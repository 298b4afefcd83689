"""``comm.straggler`` and ``comm.slow_link``: delays in the tensor-parallel collectives.

Both act through the rank's ``TPComm`` (``engine.comm``); with ``tp: 1`` there are no collectives and
they change nothing. Defaults follow STACK-NOTES: gloo all-reduce on 2 CPU cores has p99 ≈ 8 ms, so
a straggler delay needs ≥ ~20 ms to stand out.

- straggler: rank ``rank`` sleeps ``delay_ms`` before the first all-reduce of every step (or before
  each one with ``every_collective``): the *other* ranks' ``comm_ms`` rises, the straggler's does not.
- slow link: every collective on every rank takes ``delay_ms`` longer and/or carries
  ``extra_floats`` more payload: ``comm_ms`` rises on all ranks alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

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
    delay_ms: float = 5.0  # added to every collective on every rank
    extra_floats: int = 0  # extra fp32 elements all-reduced with every collective (bandwidth)

    def __post_init__(self):
        _check("comm.slow_link", "delay_ms", self.delay_ms, 0, 10_000)
        _check("comm.slow_link", "extra_floats", self.extra_floats, 0, 1 << 30, integer=True)


@register("comm.slow_link", SlowLinkParams)
class SlowLink:
    def __init__(self, params: SlowLinkParams):
        self.params = params

    def start(self, engine) -> None:
        comm = getattr(engine, "comm", None)
        if comm is None:
            return
        comm.link_delay_ms = self.params.delay_ms
        if self.params.extra_floats:
            comm.link_extra = torch.zeros(
                self.params.extra_floats, dtype=torch.float32, device=comm.device
            )

    def apply(self, engine) -> None:
        pass

    def stop(self, engine) -> None:
        comm = getattr(engine, "comm", None)
        if comm is not None:
            comm.link_delay_ms, comm.link_extra = 0.0, None
