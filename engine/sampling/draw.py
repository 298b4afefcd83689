"""The draw among kept tokens on the CPU paths: inverse CDF for unseeded rows, the race for seeded ones.

What: `draw_kept(scaled, keep, seeded_noise, generator)` returns, per row, the column of the drawn
token. Why two methods: an unseeded row needs one uniform (inverse CDF over the kept weights, fp64
cumulative sums), where the race needs one Exp(1) draw per kept token (~0.8 s for [64, 128k] on one
core); a seeded row must pick the reference's token, so it races on the reference's noise (drawn
over the vocabulary by its own generator, indexed by token id).
"""

from __future__ import annotations

import math

import torch

from engine.sampling.row_argmax import row_argmax


def draw_kept(
    scaled: torch.Tensor,
    keep: torch.Tensor,
    seeded_noise: dict[int, torch.Tensor],
    generator: torch.Generator | None = None,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Column [b] int64 drawn with probability ∝ exp(scaled) among each row's kept columns.

    scaled [b, W] fp32 (logit / T); keep [b, W] bool, at least one True per row (the top token);
    seeded_noise {row: Exp(1) noise [W] of that row's columns}; weight: exp(scaled - row max) in
    fp64 when the caller has it (the row's maximum is kept, so these are the kept weights).
    Pure; CPU (no device concerns).
    """
    if weight is None:
        top = torch.where(keep, scaled, -math.inf).amax(dim=-1, keepdim=True)  # [b, 1]
        weight = torch.exp(scaled - top).double()
    weight = torch.where(keep, weight, 0.0)
    cdf = weight.cumsum(dim=-1)
    uniform = torch.rand(keep.shape[0], 1, dtype=torch.float64, generator=generator) * cdf[:, -1:]
    column = torch.searchsorted(cdf, uniform, right=True).clamp(max=keep.shape[1] - 1).squeeze(1)
    if seeded_noise:
        rows = list(seeded_noise)
        noise = torch.stack([seeded_noise[row] for row in rows])  # [s, W]
        score = torch.where(keep[rows], scaled[rows] - torch.log(noise), -math.inf)
        column[rows] = row_argmax(score)
    return column
