"""Paged KV cache: a block allocator and the per-layer K/V block tensors.

A sequence owns a list of block ids (its block table); token ``i`` of the sequence lives in block
``table[i // block_size]`` at offset ``i % block_size``. The allocator hands out whole blocks and has
a *budget* (usable blocks, ≤ total) and a *ballast*: blocks really taken off the free list by
something other than a sequence (the ``memory.kv_pressure`` fault: a co-tenant or a leak). Ballast
blocks count as used, so ``num_used / num_blocks`` shows the pressure against the real capacity.
"""

from __future__ import annotations

import torch


class OutOfBlocks(RuntimeError):
    """Raised by ``BlockAllocator.allocate`` when the budget cannot cover the request."""


class BlockAllocator:
    """Free-list allocator of KV block ids ``0..num_blocks-1`` (host-side bookkeeping only)."""

    def __init__(self, num_blocks: int):
        if num_blocks < 1:
            raise ValueError(f"kv_blocks: must be >= 1, got {num_blocks}")
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))  # pop() hands out 0, 1, 2, … first
        self._budget = num_blocks
        self._ballast: list[int] = []  # blocks held by no sequence (see hold_ballast)

    @property
    def num_used(self) -> int:
        """Blocks off the free list: held by sequences or by the ballast."""
        return self.num_blocks - len(self._free)

    @property
    def budget(self) -> int:
        """Blocks that may be in use at once (``num_blocks`` unless shrunk by a fault)."""
        return self._budget

    @property
    def num_available(self) -> int:
        return max(0, self._budget - self.num_used)

    def set_budget(self, budget: int | None) -> None:
        """Limit usable blocks to ``budget`` (None = all). Blocks already held stay valid; the
        scheduler preempts until ``num_used <= budget``."""
        if budget is None:
            self._budget = self.num_blocks
            return
        if not 1 <= budget <= self.num_blocks:
            raise ValueError(f"kv budget: must be in [1, {self.num_blocks}], got {budget}")
        self._budget = budget

    @property
    def num_ballast(self) -> int:
        return len(self._ballast)

    def hold_ballast(self, target: int) -> int:
        """Move free blocks into the ballast until it holds ``target`` (or the free list is empty);
        returns the blocks it holds. Nothing is taken from sequences: it grows as they free blocks."""
        if isinstance(target, bool) or not isinstance(target, int) or target < 0:
            raise ValueError(f"ballast target: must be an integer >= 0, got {target!r}")
        while len(self._ballast) < target and self._free:
            self._ballast.append(self._free.pop())
        return len(self._ballast)

    def release_ballast(self, n: int | None = None) -> None:
        """Give ``n`` ballast blocks (None = all) back to the free list."""
        n = len(self._ballast) if n is None else min(n, len(self._ballast))
        for _ in range(n):
            self._free.append(self._ballast.pop())

    def can_allocate(self, n: int) -> bool:
        return n <= self.num_available

    def allocate(self, n: int, ignore_budget: bool = False) -> list[int]:
        """Take ``n`` blocks; ``ignore_budget`` lets the scheduler keep one sequence alive under a
        budget smaller than that sequence (the physical free list, then the ballast, limit it)."""
        if ignore_budget and n > len(self._free):
            self.release_ballast(n - len(self._free))  # liveness: the lone sequence reclaims
        if not (self.can_allocate(n) or (ignore_budget and n <= len(self._free))):
            raise OutOfBlocks(
                f"need {n} KV blocks, {self.num_available} available (budget {self._budget})"
            )
        return [self._free.pop() for _ in range(n)]

    def free(self, block_ids: list[int]) -> None:
        self._free.extend(reversed(block_ids))


def blocks_needed(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


class KVCache:
    """Per-layer K and V tensors ``[num_blocks, block_size, n_kv_heads_local, head_dim]``."""

    def __init__(
        self,
        n_layers: int,
        num_blocks: int,
        block_size: int,
        n_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ):
        shape = (num_blocks, block_size, n_kv_heads, head_dim)
        self.block_size = block_size
        self.layers = [
            (
                torch.zeros(shape, dtype=dtype, device=device),
                torch.zeros(shape, dtype=dtype, device=device),
            )
            for _ in range(n_layers)
        ]
        self.allocator = BlockAllocator(num_blocks)
