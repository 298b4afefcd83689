"""The engine's processes at a raised CPU priority: `spikelens confirm`'s host intervention.

A host cause is CPU taken by something outside the engine (`host.cpu_contention`'s hogs, a noisy
neighbour). Started at nice RAISED_NICE, the engine's processes (their children inherit it) get
the CPU ahead of anything at the default priority: CFS weights nice −10 at 9548 against 1024 for
nice 0, so one hog on the engine's CPU keeps about a tenth of it instead of half. The spike
should mostly go; a contention at a higher priority, or one for something other than CPU time
(memory bandwidth, caches), stays.

Raising a priority needs root, CAP_SYS_NICE or an RLIMIT_NICE that allows it (`why_not`).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

from flows.supervisor import die_with_parent

RAISED_NICE = -10  # strong enough to win the CPU from default-priority work, short of realtime
_CAP_SYS_NICE = 23  # bit of CapEff in /proc/self/status (linux/capability.h)


def why_not(nice: int) -> str | None:
    """None when this process may start children at `nice`; else why it may not."""
    if nice >= os.getpriority(os.PRIO_PROCESS, 0) or os.geteuid() == 0:
        return None
    try:
        with open("/proc/self/status") as f:
            caps = next(line for line in f if line.startswith("CapEff:"))
        if int(caps.split()[1], 16) >> _CAP_SYS_NICE & 1:
            return None
    except (OSError, StopIteration, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    if soft == resource.RLIM_INFINITY or 20 - soft <= nice:
        return None
    return (
        f"raising the engine's priority to nice {nice} needs root, CAP_SYS_NICE or "
        f"RLIMIT_NICE ≥ {20 - nice} (this process has {soft})"
    )


def engine_preexec(nice: int | None) -> Callable[[], None]:
    """preexec_fn of an engine server: dies with its parent, and runs at `nice` when given."""
    if nice is None:
        return die_with_parent

    def preexec() -> None:
        die_with_parent()
        os.setpriority(os.PRIO_PROCESS, 0, nice)

    return preexec
