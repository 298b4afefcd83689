"""Timed collectives for one tensor-parallel rank, with the hooks the ``comm.*`` faults use.

``comm_ms`` of a step is the wall time this rank spent inside all-reduces (on rank 0 also the
broadcast of the step's inputs) — i.e. waiting for the slowest peer plus the transfer. On CUDA the
time is taken with events around each collective (read after the step's sync). Faults:
- straggler: this rank sleeps *before* entering a collective (it arrives late), so the *other*
  ranks' ``comm_ms`` grows while its own does not;
- slow link: every all-reduce carries ``link_extra_floats`` more fp32 elements in the same
  collective (one padded buffer), so the transport really moves more bytes and every rank's
  ``comm_ms`` grows with the transfer; ``bytes_reduced`` counts what this rank all-reduced.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist


class TPComm:
    def __init__(self, rank: int, world_size: int, device: torch.device):
        self.rank, self.world_size, self.device = rank, world_size, device
        self.cuda = device.type == "cuda"
        self._ns = 0  # CPU: accumulated ns this step
        self._events: list[tuple] = []  # CUDA: (start, end) event pairs this step
        self._first_in_step = True
        # Fault hooks (set by comm.straggler / comm.slow_link injectors).
        self.straggle_ms = 0.0
        self.straggle_every_collective = False
        self.link_extra_floats = 0  # extra fp32 payload carried by every all-reduce
        self._link_buffer: torch.Tensor | None = None  # [n + extra], reused while sizes allow
        self.bytes_reduced = 0  # payload bytes this rank has all-reduced (cumulative)

    def begin_step(self) -> None:
        self._first_in_step = True

    def all_reduce(self, t: torch.Tensor) -> None:
        """In-place sum across ranks (mutates ``t``); timed into this step's comm_ms."""
        if self.straggle_ms and (self._first_in_step or self.straggle_every_collective):
            time.sleep(self.straggle_ms / 1e3)  # arrive late: not part of this rank's comm time
        self._first_in_step = False
        self._timed(lambda: self._all_reduce_slow_link(t))

    def _all_reduce_slow_link(self, t: torch.Tensor) -> None:
        if not self.link_extra_floats:
            dist.all_reduce(t)
            self.bytes_reduced += t.numel() * t.element_size()
            return
        n = t.numel()
        buf = self._padded_buffer(n + self.link_extra_floats, t.dtype)
        buf[:n].copy_(t.reshape(-1))
        buf[n:].zero_()  # the padding sums zeros: only the transfer changes
        dist.all_reduce(buf)
        t.copy_(buf[:n].view(t.shape))
        self.bytes_reduced += buf.numel() * buf.element_size()

    def _padded_buffer(self, size: int, dtype: torch.dtype) -> torch.Tensor:
        buf = self._link_buffer
        if buf is None or buf.numel() < size or buf.dtype != dtype:
            buf = torch.zeros(size, dtype=dtype, device=self.device)
            self._link_buffer = buf
        buf = buf[:size]
        return buf

    def broadcast(self, t: torch.Tensor, src: int = 0, timed: bool = True) -> None:
        """Broadcast from ``src`` (mutates ``t`` on receivers)."""
        if timed:
            self._timed(lambda: dist.broadcast(t, src))
        else:
            dist.broadcast(t, src)

    def _timed(self, fn) -> None:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            self._events.append((start, end))
        else:
            t0 = time.perf_counter_ns()
            fn()
            self._ns += time.perf_counter_ns() - t0

    def take_ms(self) -> float:
        """This step's comm time in ms, and reset (CUDA: call after the step's sync)."""
        if self.cuda:
            ms = sum(s.elapsed_time(e) for s, e in self._events)
            self._events.clear()
            return ms
        ms, self._ns = self._ns / 1e6, 0
        return ms
