"""comm.slow_link magnitude: all-reduce time on gloo (2 ranks, loopback) with and without the
fault's extra payload, through the engine's own TPComm. Prints JSON.

Run: ``python bench/slow_link.py [--extra 262144] [--floats 768] [--calls 400]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.multiprocessing as mp

from engine.parallel.comm import TPComm
from engine.parallel.group import free_port
from engine.parallel.worker import init_group


def _rank(rank: int, port: int, floats: int, extra: int, calls: int, out) -> None:
    torch.set_num_threads(1)
    init_group(rank, 2, port, torch.device("cpu"))
    comm = TPComm(rank, 2, torch.device("cpu"))
    result = {}
    for label, n_extra in (("base", 0), ("slow_link", extra), ("base_again", 0)):
        comm.link_extra_floats = n_extra
        times = []
        bytes0 = comm.bytes_reduced
        for _ in range(calls):
            t = torch.ones(floats)
            t0 = time.perf_counter_ns()
            comm.all_reduce(t)
            times.append((time.perf_counter_ns() - t0) / 1e6)
            assert float(t[0]) == 2.0  # the payload's sum is unchanged by the padding
        times.sort()
        result[label] = {
            "median_ms": round(statistics.median(times), 3),
            "p90_ms": round(times[int(0.9 * len(times))], 3),
            "bytes_per_call": (comm.bytes_reduced - bytes0) // calls,
        }
    if rank == 0:
        out.put(result)
    torch.distributed.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extra", type=int, default=262_144)
    ap.add_argument("--floats", type=int, default=768)  # ~6 tokens x dim 128: a decode step
    ap.add_argument("--calls", type=int, default=400)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=_rank, args=(r, port, a.floats, a.extra, a.calls, q)) for r in (0, 1)
    ]
    for p in procs:
        p.start()
    result = q.get(timeout=300)
    for p in procs:
        p.join(60)
    print(json.dumps({"floats": a.floats, "extra_floats": a.extra, **result}, indent=1))


if __name__ == "__main__":
    main()
