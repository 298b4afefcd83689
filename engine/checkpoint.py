"""Load a local Hugging Face Llama checkpoint folder: ``config.json``, ``*.safetensors`` (single or
sharded), ``tokenizer.json`` and, when present, ``tokenizer_config.json`` (EOS, BOS) and the chat
template (``chat_template.jinja``, ``chat_template.json`` or ``tokenizer_config.json``).

Only what our decoder implements is accepted; anything else (another architecture, biases,
sliding windows, unknown RoPE scaling) is an error naming the config key, never a silent mismatch.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from engine.config import HF_DEFAULT_MAX_POSITION, ModelArgs
from engine.model import DecoderModel
from engine.tokenizer import Tokenizer

SUPPORTED_MODEL_TYPES = ("llama",)


def model_args_from_hf(cfg: dict, where: str = "config.json") -> ModelArgs:
    """Map HF ``LlamaConfig`` keys onto ``ModelArgs``; unsupported features raise naming the key."""
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"{where}: model_type {model_type!r} is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    for key in ("attention_bias", "mlp_bias"):
        if cfg.get(key):
            raise ValueError(f"{where}: {key}=true is not supported")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{where}: hidden_act {cfg['hidden_act']!r} is not supported (only silu)")
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim")
    # transformers >= 5 writes RoPE settings as "rope_parameters" (theta + type + scaling fields);
    # older configs use top-level "rope_theta" and "rope_scaling".
    rope = cfg.get("rope_parameters") or {}
    rope_theta = cfg.get("rope_theta", rope.get("rope_theta", 10000.0))
    rope_scaling = cfg.get("rope_scaling") or (
        rope if rope.get("rope_type", "default") != "default" else None
    )
    return ModelArgs(
        dim=cfg["hidden_size"],
        n_layers=cfg["num_hidden_layers"],
        n_heads=heads,
        n_kv_heads=cfg.get("num_key_value_heads") or heads,
        ffn_dim=cfg["intermediate_size"],
        vocab_size=cfg["vocab_size"],
        rope_theta=float(rope_theta),
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        max_position=cfg.get("max_position_embeddings", HF_DEFAULT_MAX_POSITION),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        head_size=head_dim if head_dim and head_dim != cfg["hidden_size"] // heads else None,
        rope_scaling=rope_scaling,
    )


def load_safetensors(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of the folder's ``*.safetensors`` files (sharded or not), on the CPU."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"{folder}: no *.safetensors files (only safetensors checkpoints are supported)"
        )
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(load_file(str(f)))
    return tensors


def load_checkpoint(
    folder: Path, tp_rank: int = 0, tp_size: int = 1, chat_template: str | None = None
) -> tuple[DecoderModel, Tokenizer]:
    """Model with this rank's slice of the checkpoint's weights (fp32 on the CPU) and its tokenizer
    (its chat template: the ``chat_template`` setting's, else the checkpoint's own)."""
    cfg_file = folder / "config.json"
    if not cfg_file.exists():
        raise FileNotFoundError(
            f"{cfg_file} not found (engine.model must be a Hugging Face checkpoint folder)"
        )
    args = model_args_from_hf(json.loads(cfg_file.read_text()), str(cfg_file))
    model = DecoderModel(args, tp_rank, tp_size)
    model.load_full_state(load_safetensors(folder))
    return model, Tokenizer.from_hf_folder(folder, chat_template)
