"""The churn thread of `memory.gc_storm` inside a process of an engine spikelens cannot change.

What: `start(roles)` starts a daemon thread (`spikelens-fault-schedule`) that waits for the
schedule file named by SPIKELENS_FAULT_SCHEDULE (written by the flow at load start,
injectors/process_faults.py `arm`) and, in each window whose `params.role` is this process's
role, allocates short-lived reference cycles (injectors/process_faults.py describes the
params), then collects once when the window ends (not when automatic GC is off, as in confirm's
gc_off arm: there the garbage is a leak, as it would be for the leaky task the storm stands for;
engine/faults/gc_storm.py says why).
How it gets into the process: the GC hook (collectors/site/sitecustomize.py) loads this file by
path when SPIKELENS_FAULT_HOOK names it, and calls `start` with its roles module. So, like the
hook, it imports only the standard library and needs nothing of spikelens on the path.
Ground truth stays apart: the thread writes nothing; the collectors drop its stack samples
(collectors/regions.py INJECTOR_FILES names this file).
"""

import os
import sys

_ROLE_ENV, _ROOT_ENV = "SPIKELENS_COLLECT_ROLE", "SPIKELENS_COLLECT_ROOT_PID"


def _run_fault_schedule(path, roles):
    """Daemon thread body: wait for the schedule, then churn in each window meant for this role."""
    import gc
    import json
    import time
    from collections import deque

    while not os.path.exists(path):
        time.sleep(0.05)
    with open(path) as f:
        schedule = json.load(f)
    t0 = schedule["t0_ns"] / 1e9
    for fault in sorted(schedule["faults"], key=lambda x: x["start_s"]):
        if fault["kind"] != "memory.gc_storm":
            continue
        p = fault["params"]
        start, end = t0 + fault["start_s"], t0 + fault["start_s"] + fault["duration_s"]
        if time.time() < start:
            time.sleep(start - time.time())
        root = os.environ.get(_ROOT_ENV)
        role = roles.role_of(
            roles.read_cmdline(),
            root is None or root == str(os.getpid()),
            os.environ.get(_ROLE_ENV),
        )
        if role != p["role"]:
            continue
        ballast = [[i] for i in range(p["ballast_objects"])] if p["ballast_objects"] else None
        ring = deque(maxlen=p["live_ticks"])
        while time.time() < end:
            batch = []
            for i in range(p["objects_per_tick"]):
                a = {"i": i}
                a["peer"] = {"peer": a}  # a reference cycle: only the cyclic GC frees it
                batch.append(a)
            ring.append(batch)  # the batch of live_ticks ago becomes garbage
            time.sleep(p["tick_s"])
        ring.clear()
        del ballast
        if gc.isenabled():  # reclaim the storm's garbage inside the window
            gc.collect()


def start(roles):
    """Start the churn thread on the schedule named by SPIKELENS_FAULT_SCHEDULE (None: unset)."""
    path = os.environ.get("SPIKELENS_FAULT_SCHEDULE")
    if not path:
        return None
    import threading

    def body():
        try:
            _run_fault_schedule(path, roles)
        except Exception as exc:  # a bad schedule must not stop the process
            sys.stderr.write(f"spikelens fault schedule ignored: {type(exc).__name__}: {exc}\n")

    thread = threading.Thread(target=body, name="spikelens-fault-schedule", daemon=True)
    thread.start()
    return thread
