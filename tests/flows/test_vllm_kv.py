"""flows.vllm_kv: the KV cache vLLM-CPU gets when the scenario gives none, from the
checkpoint's config.json and the scenario's max_num_seqs / max_model_len."""

import json

import pytest

from flows.vllm_config import VllmConfig
from flows.vllm_kv import GIB, derive_kv_cache, kv_shape

PLENTY = 64 * GIB  # free memory that caps nothing


def checkpoint(tmp_path, **config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


TINY = dict(  # scripts/build_llama_checkpoint.py's defaults, as transformers 5 writes them
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    head_dim=64,
    hidden_size=256,
    max_position_embeddings=512,
    dtype="float32",
)
LLAMA_8B = dict(  # Llama-3.1-8B's shape: GQA, 8 KV heads of 128, bf16
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    hidden_size=4096,
    max_position_embeddings=131072,
    torch_dtype="bfloat16",
)


def test_the_tiny_checkpoint_needs_less_than_the_1_gib_floor(tmp_path):
    size = derive_kv_cache(VllmConfig(model=checkpoint(tmp_path, **TINY)), PLENTY)
    # 2 (K, V) x 2 layers x 4 heads x 64 x 4 B = 4 KiB a token; vLLM-CPU's default 128
    # sequences x 512 tokens = 256 MiB
    assert size.bytes_per_token == 4096
    assert (size.max_num_seqs, size.max_model_len) == (128, 512)
    assert size.needed_bytes == 128 * 512 * 4096 == 256 * 2**20
    assert size.gib == 1 and size.source == "derived" and size.capped_gib is None
    assert size.to_dict()["env"] == "VLLM_CPU_KVCACHE_SPACE"


def test_the_scenario_and_the_dtype_size_it(tmp_path):
    model = checkpoint(tmp_path, **LLAMA_8B)
    shape = kv_shape(model)
    assert shape is not None and (shape.kv_heads, shape.head_dim, shape.dtype_bytes) == (8, 128, 2)
    config = VllmConfig(model=model, max_num_seqs=16, max_model_len=8192)
    size = derive_kv_cache(config, PLENTY)
    assert size.bytes_per_token == 2 * 32 * 8 * 128 * 2  # 128 KiB
    assert size.needed_bytes == 16 * 8192 * 131072 == 16 * GIB and size.gib == 16
    fp32 = derive_kv_cache(
        VllmConfig(model=model, max_num_seqs=16, max_model_len=8192, dtype="float32"), PLENTY
    )
    assert fp32.gib == 32
    two_ranks = derive_kv_cache(
        VllmConfig(model=model, max_model_len=1024, tensor_parallel_size=2), PLENTY
    )
    assert two_ranks.max_num_seqs == 256  # vLLM-CPU's default is 128 per rank


def test_half_the_free_memory_caps_it(tmp_path):
    config = VllmConfig(model=checkpoint(tmp_path, **LLAMA_8B))  # 128 x 131072 tokens: 2 TiB
    size = derive_kv_cache(config, 20 * GIB)
    assert size.gib == size.capped_gib == 10
    assert "capped at half the free memory (10 GiB)" in size.note
    assert derive_kv_cache(config, GIB // 2).gib == 1  # never under the floor


@pytest.mark.parametrize(
    "config",
    [None, {}, {"num_hidden_layers": 2}, {**TINY, "max_position_embeddings": None}],
    ids=["no-config", "empty", "partial", "no-positions"],
)
def test_without_the_figures_it_takes_the_floor_and_says_why(tmp_path, config):
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
    model = str(tmp_path) if config is not None else "org/hub-model"
    size = derive_kv_cache(VllmConfig(model=model), PLENTY)
    assert size.gib == 1 and size.source == "floor"
    assert "engine.kv_cache_space_gib" in size.note


def test_a_multimodal_config_is_read_from_its_text_config(tmp_path):
    model = checkpoint(tmp_path, architectures=["X"], text_config=TINY)
    shape = kv_shape(model)
    assert shape is not None and shape.bytes_per_token == 4096
    assert shape.max_position_embeddings == 512
