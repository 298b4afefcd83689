"""``memory.gc_storm``: allocation churn of short-lived cyclic objects inside the serving loop.

Each step of the window allocates ``objects_per_step`` small reference cycles and keeps them alive
for ``live_steps`` steps (a ring), then drops them. Because they outlive young collections they are
promoted to the oldest generation, which makes CPython run full (generation 2) collections often;
each full pass walks the whole heap (the engine process holds ~180k tracked objects; an optional
``ballast_objects`` heap kept alive during the window makes the pauses longer). The collections happen inside
allocation, i.e. inside engine steps — what a leaky request-handling path does to a real server.

Outside the window nothing is allocated and nothing is retained: ``stop`` drops the ring and the
ballast and collects once, so the garbage left behind does not cause pauses later.
"""

from __future__ import annotations

import gc
from collections import deque
from dataclasses import dataclass

from engine.faults.registry import register


@dataclass(frozen=True)
class GcStormParams:
    # Defaults measured with bench/gc_storm.py (small model, 16 users, 2 shared cores): ~1.7 full
    # collections/s of ~230 ms each inside the window, none outside; step p99 2.7x the baseline.
    objects_per_step: int = (
        10_000  # cycles allocated per step (each: two dicts pointing at each other)
    )
    live_steps: int = (
        4  # steps a cycle stays reachable before it becomes garbage (→ promoted to gen 2)
    )
    # Extra GC-tracked containers kept alive during the window: each full pass walks them too, so
    # pauses grow with it (the engine's own heap, ~180k objects, is walked anyway); 0 = none.
    ballast_objects: int = 0

    def __post_init__(self):
        for name, lo, hi in (
            ("objects_per_step", 1, 10_000_000),
            ("live_steps", 1, 10_000),
            ("ballast_objects", 0, 50_000_000),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(
                    f"memory.gc_storm.params.{name}: must be an integer in [{lo}, {hi}], got {v!r}"
                )


@register("memory.gc_storm", GcStormParams)
class GcStorm:
    def __init__(self, params: GcStormParams):
        self.params = params
        self._ring: deque[list] = deque(maxlen=params.live_steps)
        self._ballast: list | None = None

    def start(self, engine) -> None:
        # [i] lists: tracked by the GC, so every full collection walks them.
        self._ballast = (
            [[i] for i in range(self.params.ballast_objects)]
            if self.params.ballast_objects
            else None
        )

    def apply(self, engine) -> None:
        batch = []
        for i in range(self.params.objects_per_step):
            a: dict = {"i": i}
            b: dict = {"peer": a}
            a["peer"] = b  # a reference cycle: only the cyclic GC can free it
            batch.append(a)
        self._ring.append(batch)  # the batch from live_steps ago falls out and becomes garbage

    def stop(self, engine) -> None:
        self._ring.clear()
        self._ballast = None
        gc.collect()  # reclaim the storm's garbage now, inside the recorded window
