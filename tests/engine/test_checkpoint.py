"""A tiny random Llama saved by transformers loads into our decoder with logits within 1e-4 (fp32),
through prefill and through paged decode steps, and the engine serves it (greedy == HF generate)."""

import shutil

import pytest
import torch

from engine.checkpoint import model_args_from_hf
from engine.config import EngineConfig
from engine.kv_cache import KVCache
from engine.llm_engine import LLMEngine
from engine.model import AttentionBatch
from engine.sampling_params import SamplingParams
from engine.tokenizer import DEFAULT_TOKENIZER_PATH
from tests.support.hf_llama import save_tiny_llama

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    # HF's init (std 0.02) gives near-uniform logits; widen them so greedy is meaningful
    return save_tiny_llama(
        tmp_path_factory.mktemp("tiny-llama"),
        {"bos_token": "<|bos|>", "eos_token": {"content": "<|eos|>"}},
        lm_head_scale=50,
        hidden_size=64,
        intermediate_size=160,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )


@pytest.fixture(scope="module")
def hf_model(hf_folder):
    return transformers.LlamaForCausalLM.from_pretrained(
        hf_folder, torch_dtype=torch.float32
    ).eval()


def test_logits_match_transformers_prefill_and_paged_decode(hf_folder, hf_model):
    eng = LLMEngine(
        EngineConfig(
            model=str(hf_folder), max_num_seqs=2, kv_blocks=16, block_size=4, max_model_len=64
        )
    )
    model, bs = eng.model, 4
    ids = [5, 900, 31000, 42, 7, 123, 4567]
    with torch.no_grad():
        ref = hf_model(torch.tensor([ids])).logits[0].float()  # [L, V]
    kv = KVCache(2, 16, bs, 2, 16, torch.float32, torch.device("cpu"))
    blocks = [3, 1, 7]
    n = 4  # prefill the first 4 tokens, then decode the rest one by one through the paged cache
    attn = AttentionBatch(
        torch.tensor([blocks[i // bs] * bs + i % bs for i in range(n)]),
        0,
        torch.zeros(0, 0, dtype=torch.long),
        torch.zeros(0, dtype=torch.long),
        [n],
        torch.tensor([n - 1]),
    )
    got = [model(torch.tensor(ids[:n]), torch.arange(n), attn, kv.layers)[0]]
    for p in range(n, len(ids)):
        attn = AttentionBatch(
            torch.tensor([blocks[p // bs] * bs + p % bs]),
            1,
            torch.tensor([blocks]),
            torch.tensor([p + 1]),
            [],
            torch.tensor([0]),
        )
        got.append(model(torch.tensor([ids[p]]), torch.tensor([p]), attn, kv.layers)[0])
    torch.testing.assert_close(torch.stack(got), ref[n - 1 :], rtol=0, atol=1e-4)
    eng.telemetry.close()


def test_engine_greedy_equals_hf_generate(hf_folder, hf_model):
    eng = LLMEngine(
        EngineConfig(
            model=str(hf_folder), max_num_seqs=2, kv_blocks=32, block_size=4, max_model_len=64
        )
    )
    prompt = eng.tokenizer.apply_chat_template([{"role": "user", "content": "Hello"}])
    assert (
        eng.tokenizer.decode(prompt, skip_special_tokens=False)
        == "<|bos|><|user|>\nHello<|end|>\n<|assistant|>\n"
    )
    eng.add_request("g", prompt, SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True))
    got = []
    while eng.has_unfinished():
        got += [t for o in eng.step() for t in o.new_token_ids]
    eng.telemetry.close()
    with torch.no_grad():
        ref = hf_model.generate(
            torch.tensor([prompt]), max_new_tokens=12, do_sample=False, min_new_tokens=12
        )[0, len(prompt) :]
    assert got == ref.tolist()
    assert eng.tokenizer.eos_token_id == 1


def test_unsupported_config_is_named():
    with pytest.raises(ValueError, match="model_type"):
        model_args_from_hf({"model_type": "gpt2"})
    with pytest.raises(ValueError, match="attention_bias"):
        model_args_from_hf({"model_type": "llama", "attention_bias": True})


def test_tied_embeddings_explicit_head_dim_and_llama3_rope(tmp_path):
    """Variants small real checkpoints use: tie_word_embeddings, head_dim != hidden/heads, llama3 RoPE scaling."""
    cfg = transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
        bos_token_id=0,
        eos_token_id=1,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    )
    torch.manual_seed(1)
    hf = transformers.LlamaForCausalLM(cfg).eval()
    hf.save_pretrained(tmp_path, safe_serialization=True)
    shutil.copy(DEFAULT_TOKENIZER_PATH, tmp_path / "tokenizer.json")
    eng = LLMEngine(
        EngineConfig(
            model=str(tmp_path), max_num_seqs=1, kv_blocks=16, block_size=4, max_model_len=64
        )
    )
    assert eng.model.args.head_dim == 32 and eng.model.args.tie_embeddings
    ids = list(range(100, 140))  # 40 positions: reaches the scaled low frequencies
    n = len(ids)
    kv = KVCache(1, 16, 4, 1, 32, torch.float32, torch.device("cpu"))
    attn = AttentionBatch(
        torch.arange(n),
        0,
        torch.zeros(0, 0, dtype=torch.long),
        torch.zeros(0, dtype=torch.long),
        [n],
        torch.tensor([n - 1]),
    )
    got = eng.model(torch.tensor(ids), torch.arange(n), attn, kv.layers)[0]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1].float()
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-4)
    eng.telemetry.close()


def test_checkpoint_under_tp2_matches_tp1(hf_folder):
    """Each rank slices the checkpoint's full tensors; greedy output equals tp: 1."""
    outs = []
    for tp in (1, 2):
        with LLMEngine(
            EngineConfig(
                model=str(hf_folder),
                tp=tp,
                max_num_seqs=2,
                kv_blocks=32,
                block_size=4,
                max_model_len=64,
            )
        ) as eng:
            eng.add_request(
                "g",
                [5, 900, 31000, 42],
                SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True),
            )
            got = []
            while eng.has_unfinished():
                got += [t for o in eng.step() for t in o.new_token_ids]
            outs.append(got)
    assert outs[0] == outs[1] and len(outs[0]) == 8
