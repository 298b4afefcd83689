"""CPU last resort for rows whose kept set is too large for candidates: exact thresholds, no sort.

What: `threshold_sample(x, sub, seeded_noise, generator)` finds each row's kept set as
`logit / T >= threshold` and draws from it. min-p and top-k thresholds come from the row maximum
and a top-k; the top-p threshold is located with a histogram of the probability mass over
fixed-width bins of (max - logit / T), then resolved exactly inside the one bin where the mass
crosses p (only that bin's few tokens are ranked). Why: a full sort of [64, 128k] costs ~1.2 s on
one core; this is ~15 streaming passes, over blocks of a few rows (`rows_per_block`). Same kept-set
semantics as the reference (keep a token iff the mass strictly above it is < p of the kept mass);
sums run in another order, so the two can differ only when the cumulative mass is within rounding
of p.
"""

from __future__ import annotations

import math

import torch

from engine.sampling.draw import draw_kept
from engine.sampling.metadata import SamplingMetadata

# Bins per unit of (max - logit / T), over BINS / BINS_PER_UNIT = 64 units below the maximum (a
# token 64 units down weighs e^-64 of the top one); lower logits share the last bin.
BINS_PER_UNIT = 64
BINS = 4096

# Bytes of one fp64 [rows, V] temporary per block of rows. The search makes about ten [rows, V]
# temporaries (fp64 weights, int64 bins, masks); over a whole [64, 128k] batch the 8-byte ones are
# 62.5 MiB, above glibc's largest mmap threshold (32 MiB), so each is a fresh mapping paid in page
# faults (a [64, 128k] .double(): 40-52 ms fresh, 12.5 ms from reused heap memory). Blocks of 4 MB
# stay cached and reuse freed memory: the search over [64, 128k] on one core, 441 -> 147 ms.
BLOCK_BYTES = 4 << 20


def rows_per_block(vocab: int, bytes_per_value: int = 8) -> int:
    """Rows of a [rows, vocab] block whose temporaries of `bytes_per_value` fit BLOCK_BYTES (>= 1)."""
    return max(1, BLOCK_BYTES // (vocab * bytes_per_value))


def threshold_sample(
    x: torch.Tensor,
    sub: SamplingMetadata,
    seeded_noise: dict[int, torch.Tensor],
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Token ids [b] for penalized fp32 logits x [b, V] whose rows all sample. Pure; CPU (reads values).

    Rows are independent: they are searched in blocks of `rows_per_block` (same result as one pass,
    the unseeded rows' uniforms drawn from `generator` in row order either way).
    """
    batch, block = x.shape[0], rows_per_block(x.shape[1])
    if batch <= block:
        return _threshold_block(x, sub, seeded_noise, generator)
    ids = torch.empty(batch, dtype=torch.long)
    for start in range(0, batch, block):
        stop = min(start + block, batch)
        noise = {row - start: n for row, n in seeded_noise.items() if start <= row < stop}
        ids[start:stop] = _threshold_block(
            x[start:stop], sub.select(range(start, stop)), noise, generator
        )
    return ids


def _threshold_block(
    x: torch.Tensor,
    sub: SamplingMetadata,
    seeded_noise: dict[int, torch.Tensor],
    generator: torch.Generator | None,
) -> torch.Tensor:
    """`threshold_sample` of one block of rows."""
    vocab = x.shape[1]
    scaled = x / sub.temperature.unsqueeze(1)  # [b, V], bitwise the reference's logits / T
    top = scaled.amax(dim=-1, keepdim=True)  # [b, 1]
    floor = torch.full_like(top, -math.inf)
    if not sub.no_min_p:
        floor = torch.maximum(floor, top + torch.log(sub.min_p).unsqueeze(1))
    if not sub.no_top_k:
        k_max = max(p.top_k for p in sub.params if p.top_k_enabled and p.top_k < vocab)
        values = scaled.topk(k_max, dim=-1).values  # [b, k_max] descending
        kth = values.gather(1, (sub.top_k.clamp(max=k_max) - 1).unsqueeze(1))
        floor = torch.where((sub.top_k <= k_max).unsqueeze(1), torch.maximum(floor, kth), floor)
    weight = (
        None  # [b, V] fp64 exp(scaled - top): the top-p search's and the draw's (the top is kept)
    )
    if not sub.no_top_p:
        weight = torch.exp(scaled - top).double()
        floor = torch.maximum(floor, _top_p_threshold(scaled, top, floor, sub.top_p, weight))
    keep = scaled >= floor
    return draw_kept(scaled, keep, seeded_noise, generator, weight)


def _top_p_threshold(
    scaled: torch.Tensor,
    top: torch.Tensor,
    floor: torch.Tensor,
    top_p: torch.Tensor,
    weight: torch.Tensor,
) -> torch.Tensor:
    """[b, 1] smallest kept value under top-p (-inf for rows with p = 1), over tokens >= floor.
    ``weight``: exp(scaled - top) in fp64, not modified."""
    if bool(torch.isfinite(floor).any()):  # min-p / top-k drop some tokens first
        weight = torch.where(scaled >= floor, weight, 0.0)  # [b, V]
    target = top_p.double().unsqueeze(1) * weight.sum(dim=-1, keepdim=True)  # [b, 1]
    bucket = (
        (top - scaled).mul_(BINS_PER_UNIT).clamp_(max=BINS - 1).long()
    )  # [b, V]; bin 0 holds the max
    mass = torch.zeros(scaled.shape[0], BINS, dtype=torch.float64).scatter_add_(1, bucket, weight)
    above = mass.cumsum(dim=-1) - mass  # [b, BINS] mass in the bins above each bin
    crossing = ((above + mass) < target).sum(dim=-1, keepdim=True).clamp(max=BINS - 1)  # [b, 1]
    in_bin = (bucket == crossing) & (weight > 0)
    width = max(int(in_bin.sum(dim=-1).max()), 1)  # host read: tokens of the fullest crossing bin
    values = (
        torch.where(in_bin, scaled, -math.inf).topk(width, dim=-1).values
    )  # [b, width] descending
    in_weight = torch.where(torch.isfinite(values), torch.exp(values - top), 0.0).double()
    strictly_above = above.gather(1, crossing) + in_weight.cumsum(dim=-1) - in_weight
    kept = (strictly_above < target) & torch.isfinite(values)
    threshold = torch.where(kept, values, math.inf).amin(dim=-1, keepdim=True)
    off = (top_p >= 1.0).unsqueeze(1) | torch.isinf(
        threshold
    )  # p = 1, or no mass found: keep the floor's set
    return torch.where(off, -math.inf, threshold)
