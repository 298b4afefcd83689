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


def with_template_in(
    src: Path, dst: Path, where: str | None, template: str = CHAT_TEMPLATE
) -> Path:
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


# The project tokenizer's 7 special tokens renamed to Llama 3's: a vocabulary without the
# project's chat tokens (no <|end|>), as a real Llama checkpoint's is, with Llama 3's template.
LLAMA3_SPECIAL_TOKENS = {
    "<|bos|>": "<|begin_of_text|>",
    "<|eos|>": "<|end_of_text|>",
    "<|pad|>": "<|finetune_right_pad_id|>",
    "<|system|>": "<|start_header_id|>",
    "<|user|>": "<|end_header_id|>",
    "<|assistant|>": "<|reserved_special_token_0|>",
    "<|end|>": "<|eot_id|>",
}
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>"
    "{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def llama3_tokenizer_json(dst: Path) -> Path:
    """The project's tokenizer.json with Llama 3's special tokens (same ids) written to `dst`."""
    data = json.loads(DEFAULT_TOKENIZER_PATH.read_text())
    for token in data["added_tokens"]:
        token["content"] = LLAMA3_SPECIAL_TOKENS.get(token["content"], token["content"])
    vocab = data["model"]["vocab"]
    for old, new in LLAMA3_SPECIAL_TOKENS.items():
        vocab[new] = vocab.pop(old)
    dst.write_text(json.dumps(data, ensure_ascii=False))
    return dst


def save_llama3_style_tokenizer(folder: Path, chat_template: str | None = LLAMA3_TEMPLATE) -> Path:
    """Replace `folder`'s tokenizer with the Llama 3-token one, saved by transformers'
    `save_pretrained` with `chat_template`: current transformers writes the template to
    chat_template.jinja, not into tokenizer_config.json."""
    import transformers

    source = llama3_tokenizer_json(folder / "source-tokenizer.json")
    for name in (TOKENIZER_CONFIG, JINJA_FILE, JSON_FILE):
        (folder / name).unlink(missing_ok=True)
    transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(source),
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|finetune_right_pad_id|>",
        chat_template=chat_template,
    ).save_pretrained(folder)
    source.unlink()
    return folder
