"""Per-step seeds of seeded requests.

What: `step_seed(seed, position)` mixes a request's seed with the index of the token being drawn.
Why: a seeded request then draws the same noise for its n-th token whatever its batch neighbours,
its batch row, or a preemption in between, with no generator state to carry across steps.
"""

from __future__ import annotations

_MASK64 = (1 << 64) - 1


def _splitmix64(value: int) -> int:
    """One round of SplitMix64 (Steele et al.), a well-mixed 64-bit bijection."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def step_seed(seed: int, position: int) -> int:
    """Seed of the draw for output token `position` (0-based) of a request seeded with `seed`.

    Pure host arithmetic; returns an int in [0, 2**63) (torch.Generator.manual_seed accepts it).
    """
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position}")
    return _splitmix64(_splitmix64(seed & _MASK64) ^ position) >> 1
