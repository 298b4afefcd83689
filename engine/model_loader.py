"""Build the model and tokenizer an ``EngineConfig`` names: a size preset with synthetic weights
(project tokenizer), or a Hugging Face Llama checkpoint folder (its weights and tokenizer)."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.config import MODEL_PRESETS, EngineConfig, ModelArgs
from engine.model import DecoderModel
from engine.tokenizer import Tokenizer

DTYPE_BY_NAME = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(config: EngineConfig) -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("engine.device: 'cuda' requested but torch sees no CUDA device")
    return torch.device(config.device)


def load_model(
    config: EngineConfig, device: torch.device, tp_rank: int = 0, tp_size: int = 1
) -> tuple[DecoderModel, Tokenizer]:
    """Model (eval mode, no grads, on ``device`` in ``config.dtype``) and its tokenizer."""
    dtype = DTYPE_BY_NAME[config.dtype]
    if config.model in MODEL_PRESETS:
        args = ModelArgs.from_name(config.model)
        tokenizer = Tokenizer.default(config.chat_template)
        model = DecoderModel(args, tp_rank, tp_size)
        model.init_synthetic(config.seed)
    elif Path(config.model).is_dir():
        from engine.checkpoint import load_checkpoint

        model, tokenizer = load_checkpoint(
            Path(config.model), tp_rank, tp_size, config.chat_template
        )
    else:
        raise ValueError(
            f"engine.model: {config.model!r} is neither a preset ({', '.join(MODEL_PRESETS)}) nor a checkpoint folder"
        )
    if tokenizer.vocab_size > model.args.vocab_size:
        raise ValueError(
            f"engine.model: tokenizer has {tokenizer.vocab_size} tokens but the model only {model.args.vocab_size}"
        )
    model.requires_grad_(False)
    model.eval()
    model = model.to(device=device, dtype=dtype)
    model.rope_cos, model.rope_sin = (
        model.rope_cos.float(),
        model.rope_sin.float(),
    )  # RoPE tables stay fp32
    model.fuse_projections()  # .to() copied the fused q/k/v, gate/up views apart
    return model, tokenizer
