"""Launch-shape choices shared by the kernels.

Why: a compiled kernel wants blocks of ~1-2k elements (register pressure), while the Triton
interpreter costs ~2 ms per program instance and per loop iteration, so there the widest block that
covers the row is far cheaper. Both compute the same thing.
"""

from __future__ import annotations

import os

import triton


def interpreted() -> bool:
    """True when Triton runs in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def block_size(vocab_size: int, compiled_block: int, block: int | None = None) -> int:
    """Elements per block along the vocabulary: `compiled_block` on a GPU, the whole row (<= 32k)
    interpreted; `block` (a power of two) overrides both (tests use it to run the multi-block loops)."""
    if block is not None:
        if block < 16 or block & (block - 1):
            raise ValueError(f"block must be a power of two >= 16, got {block}")
        return block
    if interpreted():
        return min(triton.next_power_of_2(vocab_size), 32768)
    return min(triton.next_power_of_2(vocab_size), compiled_block)
