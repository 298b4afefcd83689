"""`client.stall`: the load generator's own process stops reading for a while, the engine untouched.

What: inside the fault window each Locust process blocks its whole interpreter (every greenlet:
sends, reads, the lag probe) for `pause_ms`, every `every_ms`, with the unpatched `time.sleep`
(gevent cannot switch away from it) — what a descheduled or SIGSTOPped client, or a long GC
pause in it, does. Bytes the engine sends meanwhile wait in the client's socket; the kernel stamps
them on arrival, but chunks that arrive together are read together, under the later packet's
stamp, so the client's ITL and TTFT grow while the server's own times do not. The stall writes
nothing; the window goes to faults.loadgen.parquet (loadgen.traffic_faults) as ground truth.
Its params dataclass, `StallParams`, is in spikelens_common.fault_params.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from spikelens_common.fault_params import StallParams

KIND = "client.stall"


def pause_starts(start_s: float, duration_s: float, params: StallParams) -> Iterator[float]:
    """Start times (s after load start) of the stalls of one window; the last may not run past it."""
    every, pause = params.every_ms / 1000.0, params.pause_ms / 1000.0
    k = 0
    while start_s + k * every + pause <= start_s + duration_s + 1e-9:
        yield start_s + k * every
        k += 1


def run_stalls(
    windows: list[tuple[float, float, StallParams]],
    now_s: Callable[[], float],
    wait_s: Callable[[float], None],
    block_s: Callable[[float], None],
) -> int:
    """Stall on the fault clock: for each pause, `wait_s` (cooperative) until it is due, then
    `block_s` (blocks the whole process). now_s: seconds since load start. Returns the stalls run;
    pauses already past (a late start) are skipped, not crammed in."""
    done = 0
    for start_s, duration_s, params in sorted(windows, key=lambda w: w[0]):
        for at in pause_starts(start_s, duration_s, params):
            late = now_s() - at
            if late > params.pause_ms / 1000.0:
                continue
            if late < 0:
                wait_s(-late)
            block_s(params.pause_ms / 1000.0)
            done += 1
    return done


def blocking_sleep() -> Callable[[float], None]:
    """time.sleep as it was before gevent patched it: blocks the process, every greenlet with it."""
    try:
        from gevent import monkey

        return monkey.get_original("time", "sleep")
    except ImportError:  # no gevent: time.sleep blocks anyway
        import time

        return time.sleep
