"""Engine configuration: model size presets (``ModelArgs``) and serving knobs (``EngineConfig``).

Both are dataclasses validated on construction; ``from_dict`` rejects unknown keys by name, so a
typo in a scenario's ``engine:`` block fails loudly instead of silently running the default.

The context length (``max_model_len``) defaults the way vLLM's does: the model's own
(``max_position_embeddings`` of a checkpoint, ``max_position`` of a preset), capped by what the
KV cache can hold (``kv_blocks * block_size``: a longer sequence could never run). An explicit
value above the model's is an error naming the field and the valid range.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spikelens_common.config_keys import ALL_UNKNOWN, strict_keys

# The project tokenizer's vocabulary (engine/assets/tokenizer.json).
PROJECT_VOCAB_SIZE = 32000
# A Llama config.json without max_position_embeddings: transformers' LlamaConfig default.
HF_DEFAULT_MAX_POSITION = 2048


def _check_keys(cls, data: Mapping[str, Any], where: str) -> None:
    strict_keys(
        data,
        (f.name for f in dataclasses.fields(cls)),
        where,
        message=ALL_UNKNOWN,
        error=ValueError,
        sort_unknown=True,
    )


def _check_range(name: str, value, lo=None, hi=None, where: str = "engine") -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}.{name}: must be a number, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"{where}.{name}: must be in {rng}, got {value!r}")


def _check_int(name: str, value, lo=None, hi=None, where: str = "engine") -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}.{name}: must be an integer, got {value!r}")
    _check_range(name, value, lo, hi, where)


@dataclass(frozen=True)
class ModelArgs:
    """Shape of a Llama-style decoder."""

    dim: int  # hidden size: sets the cost of every projection
    n_layers: int  # decoder blocks: forward time scales linearly with it
    n_heads: int  # query heads; head_dim = dim // n_heads
    n_kv_heads: int  # key/value heads (< n_heads = grouped-query attention, as in Llama 2/3)
    ffn_dim: int  # SwiGLU inner size
    vocab_size: int = PROJECT_VOCAB_SIZE  # the tokenizer's; penalty and sampling cost scale with it
    rope_theta: float = 10000.0  # RoPE base frequency (Llama 2 uses 1e4)
    norm_eps: float = 1e-5  # RMSNorm epsilon
    max_position: int = 4096  # longest position RoPE tables are built for
    tie_embeddings: bool = False  # some small HF checkpoints share embedding and lm_head
    head_size: int | None = None  # per-head size when a checkpoint sets it; None = dim // n_heads
    # RoPE scaling of HF checkpoints (e.g. Llama 3 "llama3"); None = plain RoPE.
    rope_scaling: dict | None = None
    # Synthetic weights only: target std of the logits, so temperature-1 sampling gives varied
    # tokens (~3 puts a few % of mass on the top token of 32k) instead of uniform noise or one id.
    logit_std: float = 3.0

    def __post_init__(self):
        where = "model"
        for name in (
            "dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "ffn_dim",
            "vocab_size",
            "max_position",
        ):
            _check_int(name, getattr(self, name), 1, None, where)
        if self.head_size is None and self.dim % self.n_heads:
            raise ValueError(f"model.n_heads: must divide dim={self.dim}, got {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"model.n_kv_heads: must divide n_heads={self.n_heads}, got {self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"model: head_dim={self.head_dim} must be even for RoPE")

    @property
    def head_dim(self) -> int:
        return self.head_size if self.head_size is not None else self.dim // self.n_heads

    @classmethod
    def from_name(cls, name: str) -> ModelArgs:
        """A named preset (see ``MODEL_PRESETS``)."""
        try:
            return MODEL_PRESETS[name]
        except KeyError:
            raise ValueError(
                f"model: unknown preset {name!r}; presets: {', '.join(MODEL_PRESETS)} (or a Hugging Face checkpoint folder)"
            ) from None


MODEL_PRESETS: dict[str, ModelArgs] = {
    # Unit tests: a forward of a few tokens takes well under a millisecond of matmul; the lm_head
    # over the real 32k vocabulary is most of the cost.
    "tiny": ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128, max_position=2048),
    # Default: a batched decode step costs a few ms on one CPU core (see bench/ figures in
    # docs/engine-core.md), so stage timings and spikes look like a real engine's.
    # The 32k-vocabulary lm_head is about 80% of its weights.
    # max_position 2048 is the context a preset serves by default (max_model_len unset).
    "small": ModelArgs(
        dim=128, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=384, max_position=2048
    ),
    # Heavier CPU runs / GPU: ~10x the small model's weights.
    "medium": ModelArgs(
        dim=768, n_layers=8, n_heads=12, n_kv_heads=4, ffn_dim=2048, max_position=2048
    ),
}


def read_hf_config(folder: str | Path) -> dict[str, Any]:
    """A checkpoint folder's ``config.json`` (a ValueError naming ``engine.model`` if unreadable)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise ValueError(
            f"engine.model: {str(folder)!r} is neither a preset ({', '.join(MODEL_PRESETS)}) "
            f"nor a checkpoint folder with a config.json"
        )
    try:
        cfg = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"engine.model: {path} is not readable JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"engine.model: {path} must hold a JSON object")
    return cfg


def model_max_position(model: str) -> int:
    """The longest sequence ``model`` (a preset name or a checkpoint folder) was built for."""
    if model in MODEL_PRESETS:
        return MODEL_PRESETS[model].max_position
    value = read_hf_config(model).get("max_position_embeddings", HF_DEFAULT_MAX_POSITION)
    _check_int("max_position_embeddings", value, 1, None, f"{model}/config.json")
    return value


DTYPES = ("float32", "bfloat16", "float16")
# vLLM's spellings of the same dtypes; "auto" = the checkpoint's own dtype (float32 for a preset).
DTYPE_ALIASES = {
    "float": "float32",
    "half": "float16",
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
}
DEVICES = ("cpu", "cuda", "auto")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
_SIZE_UNITS = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}


def parse_size(value: int | str, where: str) -> int:
    """Bytes from an int or a human-readable size ("512MiB", "2GiB", "1G", "1.5G"); >= 1."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?)?b?\s*", value.lower())
        if not match:
            raise ValueError(
                f"{where}: must be a size in bytes such as 1073741824, 512MiB or 2GiB, got {value!r}"
            )
        value = int(float(match.group(1)) * _SIZE_UNITS[match.group(2) or ""])
    _check_int(where.split(".")[-1], value, 1, None, where.rsplit(".", 1)[0])
    return value


@dataclass
class EngineConfig:
    """Serving configuration (the scenario's ``engine:`` block)."""

    model: str = (
        "small"  # preset name (tiny/small/medium) or a Hugging Face Llama checkpoint folder
    )
    tp: int = 1  # tensor-parallel ranks (torch.distributed; gloo on CPU, NCCL on CUDA)
    max_num_seqs: int = 32  # running-batch limit: more requests wait in the queue (load signal)
    kv_blocks: int = (
        512  # paged KV cache size in blocks: running out forces preemption (memory signal)
    )
    block_size: int = 16  # tokens per KV block (vLLM's default)
    # Prompt + output limit per sequence; None = the model's own (checkpoint max_position_embeddings,
    # preset max_position), capped by the KV cache's kv_blocks * block_size, as vLLM derives it.
    # Resolved on construction, so the field always holds an int afterwards.
    max_model_len: int | None = None
    seed: int = 0  # synthetic weights and the engine's sampling stream for unseeded requests
    # Weights/activations; logits and penalties are always fp32. Also vLLM's names (half, float) and
    # auto (a checkpoint's torch_dtype when it is one of DTYPES, else float32).
    dtype: str = "float32"
    threads: int = 1  # torch intra-op threads: 1 keeps a 2-core box responsive for the client
    # KV cache size per rank in bytes (int, or "512MiB", "2GiB", "1G"), as vLLM's
    # --kv-cache-memory-bytes; when set it replaces kv_blocks: the blocks of the model's shape
    # (2 x layers x KV heads per rank x head_dim x block_size x dtype bytes each) that fit in it.
    kv_cache_memory_bytes: int | str | None = None
    # Token budget of one step (prefill + decode tokens); None = max_model_len, so any prompt fits.
    max_num_batched_tokens: int | None = None
    device: str = "cpu"  # cpu, cuda, or auto (cuda when available)
    # The chat template, as vLLM's --chat-template: a template file (kept as its absolute path) or
    # the Jinja template itself; None = the checkpoint's own (engine.chat_template: which files).
    chat_template: str | None = None

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(
                f"engine.model: must be a preset name ({', '.join(MODEL_PRESETS)}) or a checkpoint folder, got {self.model!r}"
            )
        _check_int("tp", self.tp, 1, 64)
        _check_int("max_num_seqs", self.max_num_seqs, 1, 4096)
        _check_int("block_size", self.block_size, 1, 1024)
        self.dtype = self._resolve_dtype()
        if self.kv_cache_memory_bytes is not None:
            self.kv_cache_memory_bytes = parse_size(
                self.kv_cache_memory_bytes, "engine.kv_cache_memory_bytes"
            )
            self.kv_blocks = self.kv_cache_memory_bytes // self.kv_block_bytes()
            if self.kv_blocks < 1:
                raise ValueError(
                    f"engine.kv_cache_memory_bytes: {self.kv_cache_memory_bytes} bytes hold no KV "
                    f"block; one block of this model takes {self.kv_block_bytes()} bytes"
                )
        _check_int("kv_blocks", self.kv_blocks, 1, 10_000_000)
        self._resolve_max_model_len()
        _check_int("seed", self.seed, 0, 2**63 - 1)
        _check_int("threads", self.threads, 1, 1024)
        if self.device not in DEVICES:
            raise ValueError(
                f"engine.device: must be one of {', '.join(DEVICES)}, got {self.device!r}"
            )
        if self.chat_template is not None:
            from engine.chat_template import check_setting

            try:
                self.chat_template = check_setting(self.chat_template)
            except ValueError as e:
                raise ValueError(f"engine.chat_template: {e}") from None
        if self.kv_blocks * self.block_size < self.max_model_len:
            raise ValueError(
                f"engine.kv_blocks: kv_blocks*block_size ({self.kv_blocks}*{self.block_size}) must hold "
                f"one max_model_len={self.max_model_len} sequence; need kv_blocks >= {-(-self.max_model_len // self.block_size)}"
            )
        if self.max_num_batched_tokens is not None:
            _check_int(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                self.max_model_len,
                10_000_000,
            )

    def kv_block_bytes(self) -> int:
        """Bytes of one KV block on one rank: K and V of every layer for block_size tokens."""
        if self.model in MODEL_PRESETS:
            args = MODEL_PRESETS[self.model]
        else:
            from engine.checkpoint import model_args_from_hf

            args = model_args_from_hf(read_hf_config(self.model), f"{self.model}/config.json")
        kv_heads = max(args.n_kv_heads // self.tp, 1)
        return (
            2 * args.n_layers * kv_heads * args.head_dim * self.block_size * DTYPE_BYTES[self.dtype]
        )

    def _resolve_dtype(self) -> str:
        if self.dtype == "auto":
            if self.model in MODEL_PRESETS:
                return "float32"
            cfg = read_hf_config(self.model)
            own = cfg.get("torch_dtype") or cfg.get("dtype")
            return own if own in DTYPES else "float32"
        dtype = (
            DTYPE_ALIASES.get(self.dtype, self.dtype) if isinstance(self.dtype, str) else self.dtype
        )
        if dtype not in DTYPES:
            raise ValueError(
                f"engine.dtype: must be one of {', '.join(DTYPES)} (or auto, "
                f"{', '.join(DTYPE_ALIASES)}), got {self.dtype!r}"
            )
        return dtype

    def _resolve_max_model_len(self) -> None:
        """Fill an unset ``max_model_len`` from the model; check an explicit one against it."""
        model_len = model_max_position(self.model)
        if self.max_model_len is None:
            self.max_model_len = max(2, min(model_len, self.kv_blocks * self.block_size, 1_000_000))
            return
        _check_int("max_model_len", self.max_model_len, 2, 1_000_000)
        if self.max_model_len > model_len:
            raise ValueError(
                f"engine.max_model_len: must be in [2, {model_len}] (the model's "
                f"max_position_embeddings is {model_len}), got {self.max_model_len}"
            )

    @property
    def context_len(self) -> int:
        """``max_model_len`` as construction resolved it (an int from then on)."""
        if self.max_model_len is None:
            raise ValueError("engine.max_model_len: unresolved (EngineConfig resolves it on init)")
        return self.max_model_len

    @property
    def token_budget(self) -> int:
        """Tokens one step may process (prefill + decode)."""
        return (
            self.max_num_batched_tokens
            if self.max_num_batched_tokens is not None
            else max(self.context_len, self.max_num_seqs)
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> EngineConfig:
        """Build from a scenario/CONFIG.json ``engine`` mapping; unknown keys raise naming the key."""
        data = dict(data or {})
        _check_keys(cls, data, "engine")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
