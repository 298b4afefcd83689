"""``memory.alloc_churn``: large tensors allocated, touched and freed every step.

On the CPU each tensor is bigger than glibc's mmap threshold (32 MiB at most), so every step maps
fresh pages and takes a page fault per 4 KiB page when they are written (``page_faults`` in
steps.parquet), then unmaps them. On CUDA the caching allocator is emptied after each step so the
next step goes back to ``cudaMalloc`` (allocator retries/fragmentation under memory pressure).

Where the cost lands: inside the forward pass (``forward_ms``), where a model's activation
buffers are allocated; the injector's ``forward`` hook runs there, not in the scheduler.
"""

from __future__ import annotations

import torch

from engine.faults.registry import register
from spikelens_common.fault_params import AllocChurnParams


@register("memory.alloc_churn")
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
