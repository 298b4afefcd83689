"""``memory.gc_storm``: a thread of the server process churns cyclic garbage for the window.

What a leaky background task (a metrics exporter, a request logger) does to a server: a daemon
thread allocates ``objects_per_tick`` small reference cycles every ``tick_s``, keeps each batch
reachable for ``live_ticks`` ticks (so it outlives young collections and is promoted to the oldest
generation), then drops it. CPython therefore runs full (generation 2) collections often; each pass
walks the whole heap (the engine process holds ~180k tracked objects; ``ballast_objects`` kept
alive during the window makes every pass longer). The parameters are those of the GC hook that
injects the same storm into an engine spikelens cannot change (collectors' process faults).

Where the cost lands: a collection runs in whichever thread's allocation triggers it, under the
GIL, so the step loop stalls whether it triggered the pass or waits for the GIL while the churn
thread's pass runs; the pauses show up in ``gc.parquet`` (the process's own GC probe) and as
longer steps, in whatever stage was running. Nothing runs inside the step loop on the fault's
behalf. ``stop`` ends the thread, drops its garbage and collects once, when automatic GC is on.

With automatic GC off (`spikelens confirm`'s gc_off arm), the storm's cycles are a leak, as they
would be for the leaky task it stands for: ``stop`` does not collect them. One forced pass over
a 10-s window's garbage (~6.5M cycles) took 1.4 s on this CPU: a pause the real phenomenon with
GC off never has, landing in the spike's windows of the very arm that removes the cause.
"""

from __future__ import annotations

import gc
import threading
from collections import deque

from engine.faults.registry import register
from spikelens_common.fault_params import GcStormParams

_BALLAST_CHUNK = 25_000  # ballast lists added per tick until it is complete (keeps stop prompt)


def churn_batch(n: int) -> list[dict]:
    """``n`` reference cycles (two dicts pointing at each other): only the cyclic GC frees them."""
    batch = []
    for i in range(n):
        a: dict = {"i": i}
        b: dict = {"peer": a}
        a["peer"] = b
        batch.append(a)
    return batch


@register("memory.gc_storm")
class GcStorm:
    def __init__(self, params: GcStormParams):
        self.params = params
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self.batches = 0  # batches allocated by the thread (for tests and benches)

    def start(self, engine) -> None:
        self._halt.clear()
        self._thread = threading.Thread(target=self._run, name="gc-storm", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        p = self.params
        # [i] lists: tracked by the GC, so every full collection walks them. Grown a chunk a tick
        # beside the churn, so the storm starts at once and a closing window stops it promptly.
        ballast: list[list[int]] = []
        ring: deque[list] = deque(maxlen=p.live_ticks)
        while not self._halt.wait(p.tick_s):
            if len(ballast) < p.ballast_objects:
                ballast += [
                    [i] for i in range(min(_BALLAST_CHUNK, p.ballast_objects - len(ballast)))
                ]
            ring.append(churn_batch(p.objects_per_tick))  # the oldest batch becomes garbage
            self.batches += 1
        ring.clear()
        del ballast

    def apply(self, engine) -> None:
        pass  # the thread does the work

    def stop(self, engine) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if gc.isenabled():  # reclaim the storm's garbage now, inside the recorded window
            gc.collect()
