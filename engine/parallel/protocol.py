"""What rank 0 broadcasts to the workers: a fixed-size int64 header, then (for a step) one packed
int64 tensor with the step's model inputs. One header + one payload broadcast per step."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.model import AttentionBatch

OP_STEP, OP_ARM, OP_FLUSH, OP_STOP = 1, 2, 3, 4
# op, T, nd, max_blocks, n_prefill, B, step, kv_used, kv_total, preempted, waiting, arg
# (a step's arg: the extra all-reduce payload of comm.slow_link, decided by rank 0 for every rank)
HEADER_LEN = 12


@dataclass
class StepHeader:
    """The scalars of one step that workers need to run it and to write their steps row."""

    step: int
    num_tokens: int
    num_decode: int
    max_blocks: int
    num_prefill: int
    batch_size: int
    kv_used: int
    kv_total: int
    preempted: int
    waiting: int
    # comm.slow_link: extra fp32 elements every all-reduce of this step carries, on every rank (all
    # ranks must all-reduce buffers of one size, so rank 0's fault clock decides for all).
    link_extra_floats: int = 0

    def to_tensor(self) -> torch.Tensor:
        return torch.tensor(
            [
                OP_STEP,
                self.num_tokens,
                self.num_decode,
                self.max_blocks,
                self.num_prefill,
                self.batch_size,
                self.step,
                self.kv_used,
                self.kv_total,
                self.preempted,
                self.waiting,
                self.link_extra_floats,
            ],
            dtype=torch.long,
        )

    @classmethod
    def from_list(cls, h: list[int]) -> StepHeader:
        return cls(
            step=h[6],
            num_tokens=h[1],
            num_decode=h[2],
            max_blocks=h[3],
            num_prefill=h[4],
            batch_size=h[5],
            kv_used=h[7],
            kv_total=h[8],
            preempted=h[9],
            waiting=h[10],
            link_extra_floats=h[11],
        )

    @property
    def payload_len(self) -> int:
        return (
            3 * self.num_tokens
            + self.num_decode * self.max_blocks
            + self.num_decode
            + self.num_prefill
            + self.batch_size
        )


def control_header(op: int, arg: int = 0) -> torch.Tensor:
    h = torch.zeros(HEADER_LEN, dtype=torch.long)
    h[0], h[11] = op, arg
    return h


def pack_step(
    input_ids: torch.Tensor, positions: torch.Tensor, attn: AttentionBatch
) -> torch.Tensor:
    """One int64 tensor: ids[T] | positions[T] | slots[T] | tables[nd*mb] | ctx_lens[nd] | prefill_lens[np] | logits_idx[B]."""
    return torch.cat(
        [
            input_ids.cpu(),
            positions.cpu(),
            attn.slot_mapping.cpu(),
            attn.decode_block_tables.cpu().reshape(-1),
            attn.decode_context_lens.cpu(),
            torch.tensor(attn.prefill_lens, dtype=torch.long),
            attn.logits_indices.cpu(),
        ]
    )


def unpack_step(
    h: StepHeader, payload: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, AttentionBatch]:
    """Inverse of ``pack_step`` (views into ``payload``, on its device)."""
    T, nd, mb, npf, B = h.num_tokens, h.num_decode, h.max_blocks, h.num_prefill, h.batch_size
    ids, pos, slots, tables, ctx, plens, lidx = payload.split([T, T, T, nd * mb, nd, npf, B])
    attn = AttentionBatch(
        slot_mapping=slots,
        num_decode=nd,
        decode_block_tables=tables.view(nd, mb),  # [Bd, mb]
        decode_context_lens=ctx,
        prefill_lens=plens.tolist(),
        logits_indices=lidx,
    )
    return ids, pos, attn
