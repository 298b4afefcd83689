"""Kernel (b): min-p, top-k, top-p and the random draw per row, without sorting the vocabulary.

Design: every filter is a threshold — a kept token is one whose logit is >= the row's threshold
(min-p: max + log(min_p); top-k: the k-th largest value, ties kept; top-p: the smallest value whose
strictly-larger mass is < p). Logits are mapped to order-preserving int32 keys and each threshold
is found by a 16-way pivot search over the 2^32 key range: one pass over the row evaluates 16
pivots at once ([BLOCK, 16] compares), so 8 passes pin the exact key (32 bits / 4 bits per pass).
Total per row: 1 pass (max/argmax) + 8 (top-k) + 1 (mass) + 8 (top-p) + 1 (draw), each a streaming
read of the row (600 KB at V = 152k; how much of it L2 keeps between passes depends on the rows in
flight — unmeasured here); the kernel writes only B ids. A full sort instead moves V keys and V
indices through several radix passes and then a scatter back. Passes for a filter no row uses are
compiled out (USE_MIN_P / USE_TOP_K / USE_TOP_P), and greedy rows stop after the first pass.

The draw is Gumbel-max, argmax(logit + G) with G = -log(-log U), U from Philox keyed by the row's
seed and the column: identical to the exponential race argmax(probs / E) of the torch reference in
distribution, and per-row seeded, so a seeded row is reproducible whatever its batch neighbours.
With `noise` (Exp(1) draws, e.g. from the reference's generators) it computes argmax(logit - log E)
instead, the same race as the reference on the same noise — used to test equivalence.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.launch import block_size
from engine.sampling.metadata import SamplingMetadata

_PIVOTS = 16  # pivots evaluated per pass
_ROUNDS = 8  # 16^8 = 2^32: enough rounds to pin one int32 key


@triton.jit
def _key(x):
    """Order-preserving int32 key of fp32 values (negative floats have their magnitude bits flipped)."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


@triton.jit
def _key_to_float(key):
    bits = tl.where(key >= 0, key, key ^ 0x7FFFFFFF)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _pivot_search(
    row_ptr,
    vocab_size,
    floor_key,
    row_max,
    limit,
    BY_MASS: tl.constexpr,
    BLOCK: tl.constexpr,
    PIVOTS: tl.constexpr,
    ROUNDS: tl.constexpr,
):
    """Smallest key K in [floor_key, INT32_MAX] with  measure(key > K) < limit, among keys >= floor_key.

    measure = count (BY_MASS False) or sum of exp(x - row_max) (BY_MASS True). The predicate is
    monotone in K and true at INT32_MAX, so each round keeps the sub-interval holding the first
    true pivot.
    """
    lo = floor_key.to(tl.int64)
    hi = tl.full([], 2147483647, tl.int64)
    pivot_ids = tl.arange(0, PIVOTS)
    for _ in tl.static_range(ROUNDS):
        step = (hi - lo + PIVOTS) // PIVOTS  # ceil((hi - lo + 1) / PIVOTS)
        pivots = tl.minimum(
            lo + (pivot_ids + 1).to(tl.int64) * step - 1, hi
        )  # [PIVOTS], last == hi
        pivots32 = pivots.to(
            tl.int32
        )  # always inside the int32 key range; halves the compare registers
        measure = tl.zeros([PIVOTS], dtype=tl.float32)
        for start in range(0, vocab_size, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(row_ptr + cols, mask=cols < vocab_size, other=float("-inf"))
            keys = _key(x)
            counted = (keys >= floor_key) & (cols < vocab_size)
            if BY_MASS:
                weight = tl.where(counted, tl.exp(x - row_max), 0.0)
            else:
                weight = tl.where(counted, 1.0, 0.0)
            above = keys[:, None] > pivots32[None, :]  # [BLOCK, PIVOTS]
            measure += tl.sum(tl.where(above, weight[:, None], 0.0), axis=0)
        first_true = tl.min(tl.where(measure < limit, pivot_ids, PIVOTS - 1), axis=0)
        new_hi = tl.sum(tl.where(pivot_ids == first_true, pivots, 0), axis=0)
        below = tl.sum(tl.where(pivot_ids == first_true - 1, pivots, 0), axis=0)
        lo = tl.where(first_true == 0, lo, below + 1)
        hi = new_hi
    return hi


@triton.jit
def _row_max(row_ptr, vocab_size, BLOCK: tl.constexpr):
    """Pass 1: the row's max and its first index (the greedy token; torch.argmax takes the
    first too)."""
    best = tl.full([], float("-inf"), tl.float32)
    best_col = tl.full([], 0, tl.int32)
    for start in range(0, vocab_size, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < vocab_size, other=float("-inf"))
        block_max, block_arg = tl.max(x, axis=0, return_indices=True)
        best_col = tl.where(block_max > best, start + block_arg, best_col)
        best = tl.maximum(best, block_max)
    return best, best_col


@triton.jit
def _floor_key(
    row_ptr,
    batch_row,
    vocab_size,
    best,
    top_k_ptr,
    top_p_ptr,
    min_p_ptr,
    USE_MIN_P: tl.constexpr,
    USE_TOP_K: tl.constexpr,
    USE_TOP_P: tl.constexpr,
    BLOCK: tl.constexpr,
    PIVOTS: tl.constexpr,
    ROUNDS: tl.constexpr,
):
    """The lowest key a token may have to stay in the race: min-p, then top-k, then top-p
    (each over what the previous ones kept)."""
    floor_key = tl.full([], -2147483648, tl.int32)  # keep everything
    if USE_MIN_P:
        # p < min_p * p_max  <=>  x < max + log(min_p); min_p == 0 keeps all.
        min_p = tl.load(min_p_ptr + batch_row)
        min_p_key = _key(best + tl.log(tl.where(min_p > 0, min_p, 1.0)))
        floor_key = tl.where(min_p > 0, tl.maximum(floor_key, min_p_key), floor_key)
    if USE_TOP_K:
        top_k = tl.load(top_k_ptr + batch_row).to(tl.float32)
        kth = _pivot_search(
            row_ptr, vocab_size, floor_key, best, top_k, False, BLOCK, PIVOTS, ROUNDS
        )
        floor_key = tl.maximum(floor_key, kth.to(tl.int32))
    if USE_TOP_P:
        mass = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, vocab_size, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(row_ptr + cols, mask=cols < vocab_size, other=float("-inf"))
            keep = (_key(x) >= floor_key) & (cols < vocab_size)
            mass += tl.where(keep, tl.exp(x - best), 0.0)
        limit = tl.load(top_p_ptr + batch_row) * tl.sum(mass, axis=0)
        nucleus = _pivot_search(
            row_ptr, vocab_size, floor_key, best, limit, True, BLOCK, PIVOTS, ROUNDS
        )
        floor_key = tl.maximum(floor_key, nucleus.to(tl.int32))
    return floor_key


@triton.jit
def _race(
    row_ptr,
    batch_row,
    vocab_size,
    floor_key,
    best_col,
    seeds_ptr,
    noise_ptr,
    noise_row_stride,
    HAS_NOISE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Last pass: the race among kept tokens (x - log(E), E exponential noise); the winner."""
    seed = tl.load(seeds_ptr + batch_row)
    race_best = tl.full([], float("-inf"), tl.float32)
    race_col = best_col  # the top token is always kept; it wins if every score underflows
    for start in range(0, vocab_size, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < vocab_size, other=float("-inf"))
        if HAS_NOISE:
            exp_noise = tl.load(
                noise_ptr + batch_row * noise_row_stride + cols,
                mask=cols < vocab_size,
                other=1.0,
            )
        else:
            # U is in [0, 1); the smallest normal fp32 keeps -log(U) finite when U == 0.
            exp_noise = -tl.log(tl.maximum(tl.rand(seed, cols), 1.1754943508222875e-38))
        score = x - tl.log(exp_noise)
        score = tl.where((_key(x) >= floor_key) & (cols < vocab_size), score, float("-inf"))
        block_max, block_arg = tl.max(score, axis=0, return_indices=True)
        race_col = tl.where(block_max > race_best, start + block_arg, race_col)
        race_best = tl.maximum(race_best, block_max)
    return race_col


@triton.jit
def _filtered_sample_kernel(
    x_ptr,
    x_row_stride,
    ids_ptr,
    threshold_ptr,
    seeds_ptr,
    noise_ptr,
    noise_row_stride,
    greedy_ptr,
    top_k_ptr,
    top_p_ptr,
    min_p_ptr,
    vocab_size,
    USE_MIN_P: tl.constexpr,
    USE_TOP_K: tl.constexpr,
    USE_TOP_P: tl.constexpr,
    HAS_NOISE: tl.constexpr,
    BLOCK: tl.constexpr,
    PIVOTS: tl.constexpr,
    ROUNDS: tl.constexpr,
):
    batch_row = tl.program_id(0).to(tl.int64)
    row_ptr = x_ptr + batch_row * x_row_stride
    best, best_col = _row_max(row_ptr, vocab_size, BLOCK)
    if tl.load(greedy_ptr + batch_row) != 0:
        tl.store(ids_ptr + batch_row, best_col.to(tl.int64))
        tl.store(threshold_ptr + batch_row, best)
    else:
        floor_key = _floor_key(
            row_ptr,
            batch_row,
            vocab_size,
            best,
            top_k_ptr,
            top_p_ptr,
            min_p_ptr,
            USE_MIN_P,
            USE_TOP_K,
            USE_TOP_P,
            BLOCK,
            PIVOTS,
            ROUNDS,
        )
        race_col = _race(
            row_ptr,
            batch_row,
            vocab_size,
            floor_key,
            best_col,
            seeds_ptr,
            noise_ptr,
            noise_row_stride,
            HAS_NOISE,
            BLOCK,
        )
        tl.store(ids_ptr + batch_row, race_col.to(tl.int64))
        tl.store(threshold_ptr + batch_row, _key_to_float(floor_key))


def filtered_sample(
    scaled_logits: torch.Tensor,
    meta: SamplingMetadata,
    seeds: torch.Tensor,
    noise: torch.Tensor | None = None,
    compiled_block: int = 512,
    num_warps: int = 8,
    block: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one id per row from penalized, temperature-scaled fp32 logits [B, V].

    Greedy rows take the argmax. `seeds` [B] int64: the Philox seed of each row's draw (ignored
    when `noise` [B, V] Exp(1) is given). Returns (ids [B] int64, thresholds [B] fp32: each row kept
    exactly the logits >= its threshold). Pure; no host sync (one launch, one program per row).
    """
    batch, vocab = scaled_logits.shape
    if scaled_logits.dtype != torch.float32 or scaled_logits.stride(1) != 1:
        raise ValueError("scaled_logits must be contiguous fp32 rows [B, V]")
    ids = torch.empty(batch, dtype=torch.int64, device=scaled_logits.device)
    thresholds = torch.empty(batch, dtype=torch.float32, device=scaled_logits.device)
    if noise is not None and (noise.shape != scaled_logits.shape or noise.stride(1) != 1):
        raise ValueError(f"noise must be contiguous rows shaped {tuple(scaled_logits.shape)}")
    _filtered_sample_kernel[(batch,)](
        scaled_logits,
        scaled_logits.stride(0),
        ids,
        thresholds,
        seeds,
        noise if noise is not None else scaled_logits,
        noise.stride(0) if noise is not None else 0,
        meta.greedy.view(torch.uint8),
        meta.top_k,
        meta.top_p,
        meta.min_p,
        vocab,
        USE_MIN_P=not meta.no_min_p,
        USE_TOP_K=not meta.no_top_k,
        USE_TOP_P=not meta.no_top_p,
        HAS_NOISE=noise is not None,
        BLOCK=block_size(vocab, compiled_block, block),
        PIVOTS=_PIVOTS,
        ROUNDS=_ROUNDS,
        num_warps=num_warps,  # [BLOCK, PIVOTS] compares per step: more threads, fewer registers each
    )
    return ids, thresholds
