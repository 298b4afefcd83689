"""Open-loop arrival schedules: when each request is due, independent of any response.

What: `arrival_times(load, warmup_s, duration_s, seed, faults)` yields the send times (seconds
from the start of Locust's clock, warm-up included) of an `open` (evenly spaced) or `poisson`
(exponential gaps) shape at `load.rate` requests/s, multiplied inside load.burst windows. Rate
changes are exact for Poisson arrivals: the gap is redrawn at each change (memorylessness).
`for_worker` deals arrival i to worker i mod N, so N workers together keep the global rate.
Pure and seeded: the same arguments give the same schedule in every process.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence

from loadgen.spec import LoadSpec
from loadgen.traffic_faults import TrafficFault, burst_edges, burst_factor


def arrival_times(
    load: LoadSpec,
    warmup_s: float,
    duration_s: float,
    seed: int,
    faults: Sequence[TrafficFault] = (),
) -> Iterator[float]:
    """Send times in [0, warmup_s + duration_s), ascending (a generator: long runs stay small).
    Burst windows are times after load start, so they are shifted by warmup_s here."""
    if load.shape not in ("open", "poisson"):
        raise ValueError(f"load.shape {load.shape!r} has no rate schedule")
    end = warmup_s + duration_s
    if load.rate is None:
        raise ValueError(f"load.rate: required for load.shape {load.shape!r}")
    edges = [warmup_s + t for t in burst_edges(list(faults))] + [end]
    rng = random.Random(f"arrivals/{seed}")
    t = 0.0
    for edge in sorted(edges):
        if edge <= t:
            continue
        rate = load.rate * burst_factor(list(faults), t - warmup_s)
        if load.shape == "open":
            # evenly spaced from 0; a new rate applies from the first arrival after its change.
            # t = segment start + k / rate, not a running sum: no drift past the end
            segment_start, k = t, 0
            while (t := segment_start + k / rate) < edge:
                yield t
                k += 1
        else:
            while True:
                t_next = t + rng.expovariate(rate)
                if t_next >= edge:
                    t = edge  # redraw from the change: exact for a Poisson process
                    break
                t = t_next
                yield t
        if t >= end:
            return


def for_worker(times: Iterable[float], worker: int, n_workers: int) -> Iterator[tuple[int, float]]:
    """(global index, time) of the arrivals dealt to `worker` of `n_workers` (round robin)."""
    for i, t in enumerate(times):
        if i % n_workers == worker:
            yield i, t
