"""Penalties on fp32 logits, torch reference (steps 1-2 of the decode-step order in docs/design.md).

What: repetition penalty over prompt ∪ output tokens (HF / vLLM), then frequency and presence
penalties over output tokens only (OpenAI / vLLM). Why pure functions: the Triton kernel in
engine/kernels is tested against exactly these. None of them syncs host and device.
"""

from __future__ import annotations

import torch


def apply_repetition_penalty(
    logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor
) -> torch.Tensor:
    """Return logits where, at tokens in `seen`, logit > 0 -> logit / r, else logit x r.

    logits [B, V] fp32, seen [B, V] bool (prompt ∪ output), penalty [B] fp32 (> 0; 1 = off).
    Pure (returns a new tensor); no sync.
    """
    r = penalty.unsqueeze(1)  # [B, 1] broadcast over V
    penalized = torch.where(logits > 0, logits / r, logits * r)
    return torch.where(seen, penalized, logits)


def apply_frequency_presence_penalties(
    logits: torch.Tensor,
    output_counts: torch.Tensor,
    frequency: torch.Tensor,
    presence: torch.Tensor,
) -> torch.Tensor:
    """Return `logits - f * count - p * (count > 0)` (OpenAI formula, output tokens only).

    logits [B, V] fp32, output_counts [B, V] int32, frequency/presence [B] fp32. Pure; no sync.
    """
    counts = output_counts.to(logits.dtype)
    return (
        logits
        - frequency.unsqueeze(1) * counts
        - presence.unsqueeze(1) * (counts > 0).to(logits.dtype)
    )


def apply_penalties(
    logits: torch.Tensor,
    prompt_mask: torch.Tensor,
    output_counts: torch.Tensor,
    repetition: torch.Tensor,
    frequency: torch.Tensor,
    presence: torch.Tensor,
) -> torch.Tensor:
    """Both penalty steps in docs/design.md's order: repetition (prompt ∪ output), then frequency/presence.

    logits [B, V] fp32; prompt_mask [B, V] bool; output_counts [B, V] int32; params [B] fp32.
    Pure (returns a new tensor); no sync.
    """
    seen = prompt_mask | (output_counts > 0)
    logits = apply_repetition_penalty(logits, seen, repetition)
    return apply_frequency_presence_penalties(logits, output_counts, frequency, presence)


def apply_penalties_at(
    logits: torch.Tensor,
    token_ids: torch.Tensor,
    prompt_mask_at: torch.Tensor,
    output_counts_at: torch.Tensor,
    repetition: torch.Tensor,
    frequency: torch.Tensor,
    presence: torch.Tensor,
) -> torch.Tensor:
    """`apply_penalties`, evaluated only at `token_ids` [B, L] (each row's history: prompt ∪ output ids).

    prompt_mask_at / output_counts_at [B, L] are the mask and counts at those ids. Same formula on
    the gathered values, so the result is bitwise that of the dense version whenever every seen token
    of a row is among its ids; a duplicate id writes the same value twice. O(B·L) instead of O(B·V)
    plus one copy of the logits. Pure (returns a new tensor); no sync.
    """
    penalized_at = apply_penalties(
        logits.gather(1, token_ids),
        prompt_mask_at,
        output_counts_at,
        repetition,
        frequency,
        presence,
    )
    return logits.clone().scatter_(1, token_ids, penalized_at)
