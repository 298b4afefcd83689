"""CPU fast path of the filters and the draw: work on each row's top-K candidates, not the vocabulary.

What: `candidate_sample(penalized, meta)` finds each sampled row's top-K logits with one
`torch.topk` (K = the batch's largest top_k, or a pool of CANDIDATE_POOLS when a row has no top_k),
applies temperature, min-p, top-k and top-p on the [B, K] candidates, and draws among the kept ones.
Why: a full sort of [64, 128k] costs ~1.2 s on one core; top-K plus [B, K] work costs tens of ms.
A row whose kept set might leave its candidates (no top-k and a top-p mass not reached within them)
is retried with more candidates, and finally decided on its whole row by the exact threshold search
of threshold.py (no sort). Rows whose top-p mass provably lies beyond a pool skip it: each candidate
weighs at most the top token, so K candidates hold at most K top-weights of mass, and a row that
needs more (p x its kept mass, one pass over the row that the top-p target needs anyway) goes on
without the pool's topk — near-uniform rows, whose nucleus spans thousands of tokens. (The N(0, 3)
rows of bench/sampling.py hold only ~10 top-weights of mass: they still try both pools.) The draw
is draw.py's: inverse CDF for unseeded rows, the race on the reference's noise for seeded ones.
Exactness: min-p / top-k kept sets are the reference's (same float ops on the same values); top-p
sums the mass in descending order where the reference sums ascending, so the two can differ only
when the cumulative mass is within fp32 rounding of p. A seeded row's noise is drawn over the whole
vocabulary and indexed by token id, so its token is the same as the reference's and in any batch.

Reads the device to decide which rows are decided: use on the CPU only (the CUDA torch fallback
uses the sync-free reference).
"""

from __future__ import annotations

import math

import torch

from engine.sampling.draw import draw_kept
from engine.sampling.metadata import SamplingMetadata
from engine.sampling.row_argmax import row_argmax
from engine.sampling.threshold import threshold_sample

# Candidates per row when some row has no top-k, tried in turn: 128 holds the nucleus of a peaked
# LLM distribution; rows it cannot decide get 1024; the rest go to the exact threshold search over
# the whole row (threshold.py). (torch.topk on one core: ~27 ms for k=50, ~110 ms for k=1024 on [64, 32k].)
CANDIDATE_POOLS: tuple[int, ...] = (128, 1024)


def candidate_sample(
    penalized: torch.Tensor, meta: SamplingMetadata, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Next ids [B] int64 from penalized fp32 logits [B, V]. Pure; reads the device (CPU only)."""
    batch, vocab = penalized.shape
    sampled_rows = [row for row, p in enumerate(meta.params) if not p.is_greedy]
    ids = (
        row_argmax(penalized) if len(sampled_rows) < batch else torch.empty(batch, dtype=torch.long)
    )
    if not sampled_rows:
        return ids
    sub = meta if len(sampled_rows) == batch else meta.select(sampled_rows)
    x = penalized if len(sampled_rows) == batch else penalized[sampled_rows]
    seeded_noise = {
        row: torch.empty(vocab).exponential_(generator=g) for row, g in sub.generators.items()
    }

    picked = torch.empty(len(sampled_rows), dtype=torch.long)
    pending = list(range(len(sampled_rows)))
    hopeless: list[int] = []  # rows no larger pool can decide: straight to the threshold search
    pools = [pool for pool in CANDIDATE_POOLS if pool < vocab]
    # kept mass (before top-p) of the top-p rows without a top-k: [b] fp32 (NaN for the other
    # rows), or None when there are none. A top-k row's kept mass depends on its k-th value.
    open_rows = (
        [
            row
            for row, p in enumerate(sub.params)
            if p.top_p < 1.0 and not (p.top_k_enabled and p.top_k < vocab)
        ]
        if pools
        else []
    )
    mass = _open_row_mass(x, sub, open_rows) if open_rows else None
    for pool, next_pool in zip(pools, pools[1:] + [None]):
        fits = [_fits(sub, mass, row, pool) for row in pending]
        waiting = [row for row, ok in zip(pending, fits) if not ok]  # provably beyond this pool
        pending = [row for row, ok in zip(pending, fits) if ok]
        if pending:
            everything = len(pending) == len(sampled_rows)  # no row copies on the first pass
            part = sub if everything else sub.select(pending)
            part_noise = {
                new: seeded_noise[row] for new, row in enumerate(pending) if row in seeded_noise
            }
            part_mass = None if mass is None else (mass if everything else mass[pending])
            part_ids, covered, can_grow = _sample_candidates(
                x if everything else x[pending],
                part,
                pool,
                next_pool,
                part_noise,
                generator,
                part_mass,
            )
            decided = [new for new, ok in enumerate(covered) if ok]
            picked[[pending[new] for new in decided]] = part_ids[decided]
            hopeless += [
                row for row, ok, grow in zip(pending, covered, can_grow) if not ok and not grow
            ]
            pending = [row for row, ok, grow in zip(pending, covered, can_grow) if not ok and grow]
        if next_pool is None:
            hopeless += waiting  # beyond the largest pool: the threshold search decides them
        else:
            pending = sorted(pending + waiting)
        if not pending:
            break
    pending = sorted(pending + hopeless)
    if pending:
        rest = sub if len(pending) == len(sampled_rows) else sub.select(pending)
        rest_noise = {
            new: seeded_noise[row] for new, row in enumerate(pending) if row in seeded_noise
        }
        rest_x = x if len(pending) == len(sampled_rows) else x[pending]
        picked[pending] = threshold_sample(rest_x, rest, rest_noise, generator)
    ids[sampled_rows] = picked
    return ids


def _open_row_mass(x: torch.Tensor, sub: SamplingMetadata, rows: list[int]) -> torch.Tensor:
    """[b] fp32: for `rows` (rows without a top-k), the mass min-p keeps, sum of exp(logit / T -
    max) — their kept mass before top-p; NaN for the other rows. One pass over those rows; pure."""
    every = len(rows) == x.shape[0]  # index (copy) only a strict subset
    rows_x = x if every else x[rows]
    temperature = sub.temperature if every else sub.temperature[rows]
    # max(x) / T is the max of x / T bitwise (T > 0: division keeps the order)
    top = rows_x.amax(dim=-1, keepdim=True) / temperature.unsqueeze(1)  # [o, 1]
    floor = (
        None
        if sub.no_min_p
        else top + torch.log(sub.min_p if every else sub.min_p[rows]).unsqueeze(1)
    )
    mass = torch.full((x.shape[0],), math.nan)
    mass[rows] = _floored_mass(rows_x, temperature, top, floor)
    return mass


def _floored_mass(
    x: torch.Tensor, temperature: torch.Tensor, top: torch.Tensor, floor: torch.Tensor | None
) -> torch.Tensor:
    """[o]: each row's sum of exp(x / T - top) over the tokens with x / T >= floor (all of them
    when floor is None). One pass over x [o, V]; pure."""
    full = x / temperature.unsqueeze(1)  # [o, V], bitwise the reference's logits / T
    drop = None if floor is None else full < floor  # before the in-place exp below
    full.sub_(top).exp_()
    if drop is not None:
        full.masked_fill_(drop, 0.0)
    return full.sum(dim=-1)


def _fits(sub: SamplingMetadata, mass: torch.Tensor | None, row: int, pool: int) -> bool:
    """Whether `pool` candidates might decide `row`: False only when it provably cannot — no
    top-k of at most `pool`, and p x its kept mass above `pool` (each candidate weighs <= the top
    token's weight of 1)."""
    params = sub.params[row]
    if mass is None or (params.top_k_enabled and params.top_k <= pool) or params.top_p >= 1.0:
        return True
    known = float(mass[row])
    return math.isnan(known) or params.top_p * known <= pool


def _sample_candidates(
    x: torch.Tensor,
    sub: SamplingMetadata,
    pool: int,
    next_pool: int | None,
    seeded_noise: dict[int, torch.Tensor],
    generator: torch.Generator | None,
    mass: torch.Tensor | None = None,
) -> tuple[torch.Tensor, list[bool], list[bool]]:
    """Draw among each row's kept top-K candidates: (ids [b], whether the candidates decide each row,
    whether `next_pool` candidates could decide an undecided row).

    All rows of `sub` sample (no greedy rows). K = the largest top_k, or `pool` when a row has none.
    `mass`: `_open_row_mass` of these rows when already computed (saves a pass over the rows).
    """
    vocab = x.shape[1]
    top_ks = [p.top_k if p.top_k_enabled and p.top_k < vocab else vocab for p in sub.params]
    finite_ks = [k for k in top_ks if k < vocab]
    k_max = min(max(finite_ks) if len(finite_ks) == len(top_ks) else max(finite_ks + [pool]), vocab)
    values, order = x.topk(k_max, dim=-1)  # [b, K] descending, and their token ids
    scaled = values / sub.temperature.unsqueeze(
        1
    )  # bitwise the reference's logits / T at those ids
    floor = torch.full_like(scaled[:, :1], -math.inf)  # [b, 1]: keep scaled >= floor
    if not sub.no_min_p:
        floor = torch.maximum(floor, scaled[:, :1] + torch.log(sub.min_p).unsqueeze(1))
    if not sub.no_top_k:
        has_k = (sub.top_k <= k_max).unsqueeze(1)  # rows whose k-th value is a candidate
        kth = scaled.gather(1, (sub.top_k.clamp(max=k_max) - 1).unsqueeze(1))
        floor = torch.where(has_k, torch.maximum(floor, kth), floor)
    keep = scaled >= floor
    # The kept set lies inside the candidates when the last candidate is already dropped.
    closed = torch.full_like(keep[:, 0], k_max == vocab) | ~keep[:, -1]
    can_grow = torch.full_like(closed, next_pool is not None)
    if not sub.no_top_p:
        weight = torch.where(
            keep, torch.exp(scaled - scaled[:, :1]), 0.0
        )  # [b, K] unnormalised probs
        target = sub.top_p * _kept_mass(x, sub, floor, scaled[:, :1], weight, closed, mass)  # [b]
        above = weight.cumsum(dim=-1) - weight  # mass of the candidates ranked above each one
        keep &= above < target.unsqueeze(1)
        keep[:, 0] = True  # the top token stays, even when a tiny top_p rounds to 0 in fp32
        if next_pool is not None:
            # The next pool adds next_pool - K tokens, none heavier than the last candidate: if even
            # that cannot reach the target, a top-p row cannot be decided by it.
            reach = weight.sum(dim=-1) + (next_pool - k_max) * weight[:, -1]
            can_grow &= (sub.top_p >= 1.0) | (reach >= target)
    covered = (closed | ~keep[:, -1]).tolist()  # host read: which rows the candidates fully decide

    # Kept candidates form a prefix of each row: nothing past the longest one is looked at.
    width = int(keep.any(dim=0).nonzero().max()) + 1
    noise_at = {row: full[order[row, :width]] for row, full in seeded_noise.items()}  # by token id
    column = draw_kept(scaled[:, :width], keep[:, :width], noise_at, generator)
    return order.gather(1, column.unsqueeze(1)).squeeze(1), covered, can_grow.tolist()


def _kept_mass(
    x: torch.Tensor,
    sub: SamplingMetadata,
    floor: torch.Tensor,
    top: torch.Tensor,
    weight: torch.Tensor,
    closed: torch.Tensor,
    known: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sum of exp(scaled - top) over each row's kept set (before top-p), [b].

    From the candidates when they hold the whole kept set; otherwise `known` (`_open_row_mass`,
    rows without a top-k) or one pass over the row.
    """
    mass = weight.sum(dim=-1)
    open_rows = (~closed).nonzero().flatten().tolist()
    if open_rows and known is not None and not bool(known[open_rows].isnan().any()):
        mass[open_rows] = known[open_rows]
    elif open_rows:
        every = len(open_rows) == x.shape[0]  # index (copy) only a strict subset
        floored = not (sub.no_min_p and sub.no_top_k)  # else every floor is -inf: nothing to drop
        mass[open_rows] = _floored_mass(
            x if every else x[open_rows],
            sub.temperature if every else sub.temperature[open_rows],
            top if every else top[open_rows],
            (floor if every else floor[open_rows]) if floored else None,
        )
    return mass
