"""min-p, top-k and top-p filters on temperature-scaled fp32 logits, torch reference (step 4).

What: each filter sets the logits of dropped tokens to -inf and keeps the rest unchanged. Order in
the sampler is min_p, then top-k (ties at the k-th value kept), then top-p over the mass left after
the first two (the top token always kept). HF applies top-k, top-p, then min-p: min-p and top-k
commute with everything (they compare against the row maximum / the k-th value, which the other
filters never remove), but top-p measures mass, so when min-p removes tail mass first, our top-p
keeps fewer tokens than HF's default chain would. None of these functions syncs host and device.
"""

from __future__ import annotations

import math

import torch


def apply_min_p(logits: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """Drop tokens with prob < min_p x max prob. logits [B, V] fp32, min_p [B] in [0, 1].

    Computed in the log domain (logit < max_logit + log(min_p)), which is the same test without a
    softmax; min_p = 0 gives log 0 = -inf and drops nothing. Pure (returns a new tensor); no sync.
    """
    row_max = logits.amax(dim=-1, keepdim=True)  # [B, 1]
    threshold = row_max + torch.log(min_p).unsqueeze(1)  # [B, 1]
    return logits.masked_fill(logits < threshold, -math.inf)


def apply_top_k_top_p(
    logits: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None
) -> torch.Tensor:
    """Top-k (ties kept) then top-p (top token kept) with one ascending sort shared by both.

    logits [B, V] fp32; top_k [B] int64 in [1, V] (V = off) or None; top_p [B] in (0, 1] (1 = off)
    or None. Top-p removes the sorted tokens whose ascending cumulative probability is <= 1 - p,
    exactly as HF's TopPLogitsWarper and vLLM do. Pure (returns a new tensor); no sync.
    """
    if top_k is None and top_p is None:
        return logits
    sorted_logits, order = logits.sort(
        dim=-1, descending=False
    )  # [B, V] ascending, and where each came from
    vocab = logits.shape[-1]
    if top_k is not None:
        kth_position = (vocab - top_k).clamp(min=0).unsqueeze(1)  # [B, 1] index of the k-th largest
        kth_value = sorted_logits.gather(1, kth_position)
        sorted_logits = sorted_logits.masked_fill(
            sorted_logits < kth_value, -math.inf
        )  # ties survive
    if top_p is not None:
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)  # [B, V] ascending mass
        drop = cumulative <= (1.0 - top_p).unsqueeze(1)
        drop[:, -1] = False  # the top token always survives
        sorted_logits = sorted_logits.masked_fill(drop, -math.inf)
    return torch.empty_like(logits).scatter_(1, order, sorted_logits)  # back to vocabulary order
