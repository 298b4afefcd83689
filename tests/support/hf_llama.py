"""Tiny random Llama checkpoints saved by transformers, with the project's tokenizer and a chat
template: what the checkpoint, CLI and vLLM tests load (each picks the sizes it needs); and copies
of one with its chat template elsewhere or nowhere (`with_template_in`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from engine.chat_template import JINJA_FILE, JSON_FILE, PROJECT_TEMPLATE_PATH, TOKENIZER_CONFIG
from engine.tokenizer import DEFAULT_TOKENIZER_PATH

# The project tokenizer's chat template, over its special tokens (vLLM's chat endpoint needs one).
CHAT_TEMPLATE = PROJECT_TEMPLATE_PATH.read_text()
# What every tiny checkpoint shares: the tokenizer's vocabulary and special ids, two layers,
# Llama's usual RoPE base and norm epsilon, an output head of its own.
_BASE_CONFIG: dict[str, Any] = {
    "vocab_size": 32000,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 2,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}


def save_tiny_llama(
    folder: Path, tokenizer_config: dict[str, Any], lm_head_scale: float = 1.0, **config: Any
) -> Path:
    """Save a random Llama (seed 0; `config` over the shared LlamaConfig fields) into `folder`
    with tokenizer.json and `tokenizer_config` (the chat template added). `lm_head_scale`
    widens HF's near-uniform initial logits, so that greedy decoding is meaningful."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**_BASE_CONFIG, **config))
    model.eval()
    if lm_head_scale != 1.0:
        with torch.no_grad():
            model.lm_head.weight.mul_(lm_head_scale)
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(DEFAULT_TOKENIZER_PATH, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({**tokenizer_config, "chat_template": CHAT_TEMPLATE})
    )
    return folder


def with_template_in(src: Path, dst: Path, where: str | None, template: str = CHAT_TEMPLATE) -> Path:
    """A copy of checkpoint `src` (weights linked, not copied) whose chat template is only in
    `where`: chat_template.jinja, chat_template.json ({"chat_template": ...}),
    tokenizer_config.json, or nowhere (None)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name not in (JINJA_FILE, JSON_FILE, TOKENIZER_CONFIG):
            (dst / f.name).symlink_to(f.resolve())
    config = json.loads((src / TOKENIZER_CONFIG).read_text())
    config.pop("chat_template", None)
    if where == TOKENIZER_CONFIG:
        config["chat_template"] = template
    elif where == JSON_FILE:
        (dst / JSON_FILE).write_text(json.dumps({"chat_template": template}))
    elif where == JINJA_FILE:
        (dst / JINJA_FILE).write_text(template)
    elif where is not None:
        raise ValueError(f"where: {where!r} is not a place transformers reads a template from")
    (dst / TOKENIZER_CONFIG).write_text(json.dumps(config))
    return dst
