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
    assert (c.model, c.tp, c.max_num_seqs, c.kv_blocks, c.block_size, c.max_model_len, c.seed, c.dtype, c.threads) == \
        ("small", 1, 32, 512, 16, 2048, 0, "float32", 1)


def test_from_dict_unknown_key_is_named():
    with pytest.raises(ValueError, match="'max_seqs'"):
        EngineConfig.from_dict({"model": "tiny", "max_seqs": 3})


@pytest.mark.parametrize("field,value", [("tp", 0), ("max_num_seqs", 0), ("block_size", 0), ("threads", 0),
                                         ("dtype", "int8"), ("device", "tpu"), ("kv_blocks", 1), ("seed", -1)])
def test_out_of_range_names_field(field, value):
    with pytest.raises(ValueError, match=f"engine.{field}"):
        EngineConfig.from_dict({field: value})


def test_from_dict_roundtrip():
    c = EngineConfig.from_dict({"model": "tiny", "kv_blocks": 256, "max_num_batched_tokens": 4096})
    assert EngineConfig.from_dict(c.to_dict()) == c
    assert c.token_budget == 4096
