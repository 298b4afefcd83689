"""The decoder: shapes, deterministic synthetic weights, paged decode == full recompute, usable logits."""

import torch

from engine.config import ModelArgs
from engine.kv_cache import KVCache
from engine.model import AttentionBatch, DecoderModel

ARGS = ModelArgs.from_name("tiny")
BS = 4  # block size


def build(seed=0):
    m = DecoderModel(ARGS)
    m.init_synthetic(seed)
    return m.eval()


def cache(blocks=16):
    return KVCache(
        ARGS.n_layers,
        blocks,
        BS,
        ARGS.n_kv_heads,
        ARGS.head_dim,
        torch.float32,
        torch.device("cpu"),
    )


def prefill(model, kv, ids, block_ids):
    n = len(ids)
    attn = AttentionBatch(
        slot_mapping=torch.tensor([block_ids[i // BS] * BS + i % BS for i in range(n)]),
        num_decode=0,
        decode_block_tables=torch.zeros(0, 0, dtype=torch.long),
        decode_context_lens=torch.zeros(0, dtype=torch.long),
        prefill_lens=[n],
        logits_indices=torch.tensor([n - 1]),
    )
    return model(torch.tensor(ids), torch.arange(n), attn, kv.layers)


def test_logits_shape_and_dtype():
    logits = prefill(build(), cache(), [1, 2, 3, 4, 5], [0, 1])
    assert logits.shape == (1, ARGS.vocab_size) and logits.dtype == torch.float32


def test_same_seed_same_weights_other_seed_differs():
    a, b, c = build(1), build(1), build(2)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["lm_head.weight"], sc["lm_head.weight"])


def test_paged_decode_matches_full_recompute():
    """Decoding two sequences one token at a time through the paged cache gives the logits that a
    fresh prefill of each whole sequence gives."""
    model, kv = build(), cache()
    seqs = {"a": ([10, 11, 12, 13, 14], [0, 1, 2]), "b": ([20, 21, 22], [3, 4, 5])}
    for ids, blocks in seqs.values():
        prefill(model, kv, ids, blocks)
    new = {"a": 15, "b": 23}
    slots = [blocks[len(ids) // BS] * BS + len(ids) % BS for ids, blocks in seqs.values()]
    attn = AttentionBatch(
        slot_mapping=torch.tensor(slots),
        num_decode=2,
        decode_block_tables=torch.tensor([blocks for _, blocks in seqs.values()]),
        decode_context_lens=torch.tensor([len(ids) + 1 for ids, _ in seqs.values()]),
        prefill_lens=[],
        logits_indices=torch.tensor([0, 1]),
    )
    decoded = model(
        torch.tensor(list(new.values())),
        torch.tensor([len(ids) for ids, _ in seqs.values()]),
        attn,
        kv.layers,
    )
    for row, (name, (ids, _)) in enumerate(seqs.items()):
        full = prefill(model, cache(), ids + [new[name]], [7, 8, 9])
        torch.testing.assert_close(decoded[row], full[0], rtol=1e-4, atol=1e-4)


def test_logits_are_not_degenerate():
    model = build()
    rows = torch.cat(
        [prefill(model, cache(), [t, t + 1, t + 2], [0]) for t in range(100, 1100, 100)]
    )
    std = rows.std(dim=-1)
    assert bool(((std > 1.0) & (std < 10.0)).all())  # neither flat noise nor a one-hot
    assert len(set(rows.argmax(-1).tolist())) > 5  # greedy choice depends on the input
    p = rows.softmax(-1)
    assert float(p.max()) < 0.9  # temperature-1 sampling is not forced onto one id


def test_fused_projections_are_views_that_loading_writes_through():
    """q/k/v and gate/up run as one matmul each; their HF-named weights are views of the fused
    tensor, so loading new weights (or re-fusing after a cast) keeps the matmul in step."""
    model = build(1)
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    assert (
        attn.q_proj.weight.untyped_storage().data_ptr()
        == attn.qkv_weight.untyped_storage().data_ptr()
    )
    assert (
        mlp.up_proj.weight.untyped_storage().data_ptr()
        == mlp.gate_up_weight.untyped_storage().data_ptr()
    )
    other = build(2).state_dict()
    model.load_full_state(other)  # copies into the views, then re-fuses
    torch.testing.assert_close(
        attn.qkv_weight,
        torch.cat([other[f"model.layers.0.self_attn.{n}_proj.weight"] for n in "qkv"]),
    )
    torch.testing.assert_close(
        mlp.gate_up_weight,
        torch.cat([other[f"model.layers.0.mlp.{n}_proj.weight"] for n in ("gate", "up")]),
    )
    # a cast copies each view apart; fuse_projections rebuilds the fused weights from them
    cast = build(1).to(torch.float64)
    cast.fuse_projections()
    a = cast.model.layers[1].self_attn
    assert a.qkv_weight.dtype == torch.float64
    torch.testing.assert_close(
        a.qkv_weight, torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])
    )


def test_decode_mask_is_built_once_per_batch():
    lens = torch.tensor([3, 6])
    attn = AttentionBatch(
        slot_mapping=torch.tensor([2, 5]),
        num_decode=2,
        decode_block_tables=torch.tensor([[0, 0], [1, 2]]),
        decode_context_lens=lens,
        prefill_lens=[],
        logits_indices=torch.tensor([0, 1]),
    )
    with_mask = attn.with_decode_mask(BS)
    assert attn.decode_mask is None and with_mask.with_decode_mask(BS) is with_mask
    assert with_mask.decode_mask.shape == (2, 1, 1, 2 * BS)
    assert with_mask.decode_mask[:, 0, 0].sum(-1).tolist() == [3, 6]
