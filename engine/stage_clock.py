"""Stage timestamps for the step loop without hidden host-device syncs.

On the CPU a mark is ``time.perf_counter_ns()``. On CUDA a mark is a recorded ``torch.cuda.Event``
and durations are read only after the step's one unavoidable sync (reading the sampled ids), so
timing adds no sync of its own.
"""

from __future__ import annotations

import time

import torch


class StageClock:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter_ns()

    def ms(self, start, end) -> float:
        """Milliseconds between two marks (CUDA: call after the stream has passed ``end``)."""
        if self.cuda:
            return start.elapsed_time(end)
        return (end - start) / 1e6
