"""``memory.alloc_churn``: large tensors allocated, touched and freed every step.

On the CPU each tensor is bigger than glibc's mmap threshold (32 MiB at most), so every step maps
fresh pages and takes a page fault per 4 KiB page when they are written (``page_faults`` in
steps.parquet), then unmaps them. On CUDA the caching allocator is emptied after each step so the
next step goes back to ``cudaMalloc`` (allocator retries/fragmentation under memory pressure).

Where the cost lands: inside the forward pass (``forward_ms``), where a model's activation
buffers are allocated; the injector's ``forward`` hook runs there, not in the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.faults.registry import register


@dataclass(frozen=True)
class AllocChurnParams:
    # MiB allocated and written per step: ~24k page faults; measured ~100-200 ms per step on the
    # shared 2-core box (bench/fault_signal.py), a few tens of ms on a quiet one.
    mb_per_step: int = 96
    tensors: int = (
        2  # split into this many tensors; keep each > 32 MiB (glibc's largest mmap threshold)
    )

    def __post_init__(self):
        for name, lo, hi in (("mb_per_step", 1, 1_000_000), ("tensors", 1, 1024)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(
                    f"memory.alloc_churn.params.{name}: must be an integer in [{lo}, {hi}], got {v!r}"
                )


@register("memory.alloc_churn", AllocChurnParams)
class AllocChurn:
    def __init__(self, params: AllocChurnParams):
        self.params = params

    def start(self, engine) -> None:
        pass

    def apply(self, engine) -> None:
        pass  # the cost is the forward's: see forward

    def forward(self, engine) -> None:
        n = (
            self.params.mb_per_step * (1 << 20) // 4 // self.params.tensors
        )  # fp32 elements per tensor
        for _ in range(self.params.tensors):
            t = torch.empty(n, dtype=torch.float32, device=engine.device)
            t.fill_(1.0)  # touch every page
            del t
        if engine.device.type == "cuda":
            torch.cuda.empty_cache()  # give it back so the next step pays cudaMalloc again

    def stop(self, engine) -> None:
        pass
