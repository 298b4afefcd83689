"""Shared by the vLLM end-to-end tests: a tiny Llama checkpoint vLLM's CPU build can serve, and
the interpreter of the virtualenv `make setup-vllm` builds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psutil
import pytest

from engine.tokenizer import DEFAULT_TOKENIZER_PATH
from flows.vllm_config import DEFAULT_VLLM_PYTHON

# vLLM's chat endpoint needs a template; the completions endpoint does not.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# vLLM on 2 busy cores: /health after 26-60 s quiet, a few minutes when the box is contended.
STARTUP_TIMEOUT_S = 600


def vllm_python() -> str:
    """The vLLM virtualenv's interpreter; skips the test where it was not built."""
    if not DEFAULT_VLLM_PYTHON.is_file():
        pytest.skip(f"{DEFAULT_VLLM_PYTHON} missing: run `make setup-vllm`")
    return str(DEFAULT_VLLM_PYTHON)


def build_tiny_llama(folder: Path) -> Path:
    """A random 2-layer Llama (head_dim 64: vLLM's CPU attention rejects 16) with the project's
    tokenizer and a chat template, saved by transformers; ~70 MB in float32."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    cfg = transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).eval().save_pretrained(folder, safe_serialization=True)
    shutil.copy(DEFAULT_TOKENIZER_PATH, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|bos|>",
                "eos_token": "<|eos|>",
                "pad_token": "<|pad|>",
                "model_max_length": 512,
                "chat_template": CHAT_TEMPLATE,
            }
        )
    )
    return folder


def processes_using(path: Path) -> list[psutil.Process]:
    """Live processes whose command line names `path` (a vLLM serving that checkpoint)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(str(path) in a for a in p.info["cmdline"] or ()):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def vllm_scenario(
    path: Path,
    ckpt: Path,
    *,
    duration_s: float,
    warmup_s: float,
    users: int,
    faults: tuple[str, ...] = (),
) -> Path:
    """A short `engine: {kind: vllm}` scenario over `ckpt` (the tiny checkpoint's settings:
    fp32, eager, 512 positions, 1 GiB of KV cache), written to `path`; `faults` are YAML flow
    mappings, one per fault."""
    fault_lines = "".join(f"  - {f}\n" for f in faults)
    path.write_text(
        f"""\
name: {path.stem}
duration_s: {duration_s}
warmup_s: {warmup_s}
engine:
  kind: vllm
  model: {ckpt}
  dtype: float32
  enforce_eager: true
  max_model_len: 512
  max_num_seqs: 8
  kv_cache_space_gib: 1
  startup_timeout_s: {STARTUP_TIMEOUT_S}
workload:
  prompt_tokens: {{mean: 24, std: 4, min: 8, max: 48}}
  output_tokens: {{mean: 16, std: 4, min: 4, max: 24}}
load: {{shape: constant, users: {users}}}
"""
        + (f"faults:\n{fault_lines}" if faults else "")
    )
    return path
