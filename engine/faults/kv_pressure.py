"""``memory.kv_pressure``: the KV block budget shrinks for the window.

The allocator's budget drops to ``fraction`` of the cache; the scheduler preempts the youngest
sequences until the rest fit, and every preempted sequence is later recomputed (prefilled again).
Signals: ``kv_blocks_used`` ≈ ``kv_blocks_total`` (the budget), ``preempted`` > 0, prefill tokens
and step time up, queueing. ``stop`` restores the full cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.faults.registry import register


@dataclass(frozen=True)
class KvPressureParams:
    # Share of kv_blocks still usable (e.g. a co-tenant or a leak took the rest); (0, 1].
    fraction: float = 0.05

    def __post_init__(self):
        f = self.fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise ValueError(f"memory.kv_pressure.params.fraction: must be in (0, 1], got {f!r}")


@register("memory.kv_pressure", KvPressureParams)
class KvPressure:
    def __init__(self, params: KvPressureParams):
        self.params = params

    def start(self, engine) -> None:
        alloc = engine.kv.allocator
        alloc.set_budget(max(1, int(alloc.num_blocks * self.params.fraction)))

    def apply(self, engine) -> None:
        pass  # the budget is state; the scheduler enforces it every step

    def stop(self, engine) -> None:
        engine.kv.allocator.set_budget(None)
