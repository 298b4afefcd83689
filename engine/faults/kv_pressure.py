"""``memory.kv_pressure``: KV blocks really taken away for the window by a ballast allocation.

What a co-tenant or a leak does: blocks leave the free list without belonging to any sequence. At
each step the ballast takes free blocks until only ``fraction`` of the cache is left to sequences;
it takes nothing from a running sequence, so it grows as sequences finish or are preempted. The
scheduler then runs out of blocks the ordinary way: admissions wait, growing sequences preempt the
youngest, which are later recomputed (prefilled again).

Where the cost lands: in the scheduler's preemptions and in the recompute prefills of later steps
(``forward_ms``, ``prefill_tokens``), and in queueing; the ballast itself costs a few list pops
before the step's timers start. Signals: ``kv_blocks_used`` (ballast included) near
``kv_blocks_total``, which stays the cache's real size; ``preempted`` > 0. Liveness: when nothing
runs and the oldest waiting request cannot fit, the ballast yields just enough blocks for it (and a
lone running sequence reclaims ballast blocks in the allocator), so the engine never stalls.
``stop`` gives every ballast block back.
"""

from __future__ import annotations

from engine.faults.registry import register
from engine.kv_cache import blocks_needed
from spikelens_common.fault_params import KvPressureParams


@register("memory.kv_pressure")
class KvPressure:
    def __init__(self, params: KvPressureParams):
        self.params = params
        self._target = 0

    def start(self, engine) -> None:
        alloc = engine.kv.allocator
        keep = max(1, int(alloc.num_blocks * self.params.fraction))
        self._target = alloc.num_blocks - keep
        alloc.hold_ballast(self._target)

    def apply(self, engine) -> None:
        alloc = engine.kv.allocator
        alloc.hold_ballast(self._target)
        sched = engine.scheduler
        if not sched.running and sched.waiting:  # liveness: let the oldest request in
            need = blocks_needed(sched.waiting[0].num_tokens, engine.config.block_size)
            short = need - (alloc.num_blocks - alloc.num_used)
            if short > 0:
                alloc.release_ballast(short)  # admitted this step, so not re-taken next step

    def stop(self, engine) -> None:
        engine.kv.allocator.release_ballast()
        self._target = 0
