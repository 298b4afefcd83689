"""Kernel (a): fused penalties + temperature over [B, V] fp32 logits with per-row parameters.

What: one pass reads each logit, its int32 output count and its prompt bit, applies repetition
(prompt ∪ output), then frequency/presence (output only), then divides by the row's temperature,
and writes fp32. Why fused: the torch reference makes ~8 [B, V] passes (masks, where, casts); this
makes one read of logits (4 B) + counts (4 B) + prompt mask (1 B) and one write (4 B) per element —
the memory traffic the `penalty` cause is about. Counts and mask are read straight from
PenaltyState's storage through the per-row `rows` index, so no [B, V] gather is made.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.launch import block_size
from engine.sampling.metadata import SamplingMetadata


@triton.jit
def _penalties_temperature_kernel(
    logits_ptr,
    logits_row_stride,
    out_ptr,
    out_row_stride,
    counts_ptr,
    prompt_ptr,
    state_row_stride,
    rows_ptr,
    repetition_ptr,
    frequency_ptr,
    presence_ptr,
    temperature_ptr,
    vocab_size,
    APPLY_PENALTIES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    batch_row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_vocab = cols < vocab_size
    x = tl.load(logits_ptr + batch_row * logits_row_stride + cols, mask=in_vocab, other=0.0).to(
        tl.float32
    )
    if APPLY_PENALTIES:
        state_row = tl.load(rows_ptr + batch_row)  # int64 row of PenaltyState storage
        counts = tl.load(counts_ptr + state_row * state_row_stride + cols, mask=in_vocab, other=0)
        in_prompt = tl.load(
            prompt_ptr + state_row * state_row_stride + cols, mask=in_vocab, other=0
        )
        repetition = tl.load(repetition_ptr + batch_row)
        frequency = tl.load(frequency_ptr + batch_row)
        presence = tl.load(presence_ptr + batch_row)
        in_output = counts > 0
        seen = (in_prompt != 0) | in_output
        # div_rn: IEEE round-to-nearest division (Triton's `/` is approximate on GPUs), so the result is
        # bitwise the torch reference's.
        x = tl.where(seen, tl.where(x > 0, tl.div_rn(x, repetition), x * repetition), x)
        x = x - frequency * counts.to(tl.float32) - presence * in_output.to(tl.float32)
    x = tl.div_rn(x, tl.load(temperature_ptr + batch_row))
    tl.store(out_ptr + batch_row * out_row_stride + cols, x, mask=in_vocab)


def fused_penalties_temperature(
    logits: torch.Tensor,
    meta: SamplingMetadata,
    apply_temperature: bool = True,
    apply_penalties: bool = True,
    compiled_block: int = 2048,
    block: int | None = None,
) -> torch.Tensor:
    """Penalties (unless off or the batch has none) then / temperature (unless off), as a new fp32 [B, V].

    Greedy rows carry temperature 1, so their argmax is the argmax after penalties. Pure (does not
    mutate `logits` or the state); no host sync (one launch).
    """
    batch, vocab = logits.shape
    if logits.stride(1) != 1:
        raise ValueError("logits rows must be contiguous (stride 1 along the vocabulary)")
    out = torch.empty(batch, vocab, dtype=torch.float32, device=logits.device)
    ones = torch.ones_like(meta.temperature)
    block = block_size(vocab, compiled_block, block)
    _penalties_temperature_kernel[(batch, triton.cdiv(vocab, block))](
        logits,
        logits.stride(0),
        out,
        out.stride(0),
        meta.counts_storage,
        meta.prompt_storage.view(torch.uint8),
        meta.counts_storage.stride(0),
        meta.rows,
        meta.repetition_penalty,
        meta.frequency_penalty,
        meta.presence_penalty,
        meta.temperature if apply_temperature else ones,
        vocab,
        APPLY_PENALTIES=apply_penalties and not meta.no_penalties,
        BLOCK=block,
    )
    return out
