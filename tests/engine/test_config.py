import pytest

from engine.config import MODEL_PRESETS, EngineConfig, ModelArgs


def test_presets_by_name():
    tiny = ModelArgs.from_name("tiny")
    assert tiny is MODEL_PRESETS["tiny"]
    assert tiny.vocab_size >= 32000 and ModelArgs.from_name("small").vocab_size >= 32000
    assert tiny.n_heads % tiny.n_kv_heads == 0 and tiny.n_kv_heads < tiny.n_heads  # GQA


def test_unknown_preset_names_it():
    with pytest.raises(ValueError, match="'huge'"):
        ModelArgs.from_name("huge")


def test_engine_config_defaults_match_interfaces():
    c = EngineConfig()
    assert (
        c.model,
        c.tp,
        c.max_num_seqs,
        c.kv_blocks,
        c.block_size,
        c.max_model_len,
        c.seed,
        c.dtype,
        c.threads,
    ) == ("small", 1, 32, 512, 16, 2048, 0, "float32", 1)


def test_from_dict_unknown_key_is_named():
    with pytest.raises(ValueError, match="'max_seqs'"):
        EngineConfig.from_dict({"model": "tiny", "max_seqs": 3})


@pytest.mark.parametrize(
    "field,value",
    [
        ("tp", 0),
        ("max_num_seqs", 0),
        ("block_size", 0),
        ("threads", 0),
        ("dtype", "int8"),
        ("device", "tpu"),
        ("kv_blocks", 0),
        ("seed", -1),
    ],
)
def test_out_of_range_names_field(field, value):
    with pytest.raises(ValueError, match=f"engine.{field}"):
        EngineConfig.from_dict({field: value})


def test_from_dict_roundtrip():
    c = EngineConfig.from_dict({"model": "tiny", "kv_blocks": 256, "max_num_batched_tokens": 4096})
    assert EngineConfig.from_dict(c.to_dict()) == c
    assert c.token_budget == 4096


def _checkpoint_config(tmp_path, **cfg):
    (tmp_path / "config.json").write_text(__import__("json").dumps({"model_type": "llama", **cfg}))
    return str(tmp_path)


def test_max_model_len_comes_from_the_checkpoint(tmp_path):
    folder = _checkpoint_config(tmp_path, max_position_embeddings=256)
    assert EngineConfig(model=folder).max_model_len == 256
    assert EngineConfig(model=folder, max_model_len=128).max_model_len == 128


def test_max_model_len_is_capped_by_the_kv_cache(tmp_path):
    folder = _checkpoint_config(tmp_path, max_position_embeddings=131072)
    assert EngineConfig(model=folder, kv_blocks=64, block_size=16).max_model_len == 1024
    assert EngineConfig(model="tiny", kv_blocks=8, block_size=4).max_model_len == 32
    assert EngineConfig(model="small").max_model_len == MODEL_PRESETS["small"].max_position == 2048


def test_explicit_max_model_len_above_the_model_names_the_range(tmp_path):
    folder = _checkpoint_config(tmp_path, max_position_embeddings=256)
    with pytest.raises(ValueError, match=r"engine.max_model_len: must be in \[2, 256\].*got 2048"):
        EngineConfig.from_dict({"model": folder, "max_model_len": 2048})


def test_a_model_that_is_neither_preset_nor_checkpoint_is_named(tmp_path):
    with pytest.raises(ValueError, match="engine.model: .*neither a preset"):
        EngineConfig(model=str(tmp_path / "missing"))


def test_vllm_dtype_spellings_and_auto(tmp_path):
    assert EngineConfig(model="tiny", dtype="half").dtype == "float16"
    assert EngineConfig(model="tiny", dtype="auto").dtype == "float32"
    folder = _checkpoint_config(tmp_path, torch_dtype="bfloat16")
    assert EngineConfig(model=folder, dtype="auto").dtype == "bfloat16"


def test_explicit_max_model_len_beyond_the_kv_cache_names_kv_blocks():
    with pytest.raises(ValueError, match="engine.kv_blocks: .*need kv_blocks >= 128"):
        EngineConfig.from_dict({"model": "tiny", "kv_blocks": 1, "max_model_len": 2048})


def test_kv_cache_size_in_bytes_gives_the_blocks_that_fit():
    from engine.llm_engine import LLMEngine

    config = EngineConfig(model="tiny", kv_cache_memory_bytes="4MiB", max_num_seqs=2)
    tiny = MODEL_PRESETS["tiny"]
    per_block = 2 * tiny.n_layers * tiny.n_kv_heads * tiny.head_dim * 16 * 4
    assert config.kv_block_bytes() == per_block and config.kv_blocks == (4 << 20) // per_block
    eng = LLMEngine(config)
    allocated = sum(
        k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in eng.kv.layers
    )
    assert allocated == config.kv_blocks * per_block <= 4 << 20
    eng.telemetry.close()
    assert (
        EngineConfig(model="tiny", kv_cache_memory_bytes="4MiB", dtype="half").kv_blocks
        == 2 * config.kv_blocks
    )


@pytest.mark.parametrize(
    "value,needle", [("lots", "such as"), (0, r"\[1, inf\]"), ("1KiB", "hold no KV block")]
)
def test_bad_kv_cache_sizes_name_the_field(value, needle):
    with pytest.raises(ValueError, match=f"engine.kv_cache_memory_bytes: .*{needle}"):
        EngineConfig(model="tiny", kv_cache_memory_bytes=value)
