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


def block_size(vocab_size: int, compiled_block: int) -> int:
    """Elements per block along the vocabulary: `compiled_block` on a GPU, the whole row (<= 32k) interpreted."""
    if interpreted():
        return min(triton.next_power_of_2(vocab_size), 32768)
    return min(triton.next_power_of_2(vocab_size), compiled_block)
