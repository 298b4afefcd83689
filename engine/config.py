"""Engine configuration: model size presets (``ModelArgs``) and serving knobs (``EngineConfig``).

Both are dataclasses validated on construction; ``from_dict`` rejects unknown keys by name, so a
typo in a scenario's ``engine:`` block fails loudly instead of silently running the default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from engine.config_keys import ALL_UNKNOWN, strict_keys

# The project tokenizer's vocabulary (engine/assets/tokenizer.json).
PROJECT_VOCAB_SIZE = 32000


def _check_keys(cls, data: Mapping[str, Any], where: str) -> None:
    strict_keys(data, (f.name for f in dataclasses.fields(cls)), where, message=ALL_UNKNOWN, error=ValueError,
                sort_unknown=True)


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
        for name in ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "vocab_size", "max_position"):
            _check_int(name, getattr(self, name), 1, None, where)
        if self.head_size is None and self.dim % self.n_heads:
            raise ValueError(f"model.n_heads: must divide dim={self.dim}, got {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"model.n_kv_heads: must divide n_heads={self.n_heads}, got {self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"model: head_dim={self.head_dim} must be even for RoPE")

    @property
    def head_dim(self) -> int:
        return self.head_size if self.head_size is not None else self.dim // self.n_heads

    @classmethod
    def from_name(cls, name: str) -> "ModelArgs":
        """A named preset (see ``MODEL_PRESETS``)."""
        try:
            return MODEL_PRESETS[name]
        except KeyError:
            raise ValueError(f"model: unknown preset {name!r}; presets: {', '.join(MODEL_PRESETS)} (or a Hugging Face checkpoint folder)") from None


MODEL_PRESETS: dict[str, ModelArgs] = {
    # Unit tests: a forward of a few tokens takes well under a millisecond of matmul; the lm_head
    # over the real 32k vocabulary is most of the cost.
    "tiny": ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128, max_position=2048),
    # Default: a batched decode step costs a few ms on one CPU core (see bench/ figures in
    # docs/engine-core.md), so stage timings and spikes look like a real engine's.
    # The 32k-vocabulary lm_head is about 80% of its weights.
    "small": ModelArgs(dim=128, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=384),
    # Heavier CPU runs / GPU: ~10x the small model's weights.
    "medium": ModelArgs(dim=768, n_layers=8, n_heads=12, n_kv_heads=4, ffn_dim=2048),
}

DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "auto")


@dataclass
class EngineConfig:
    """Serving configuration (the scenario's ``engine:`` block)."""

    model: str = "small"  # preset name (tiny/small/medium) or a Hugging Face Llama checkpoint folder
    tp: int = 1  # tensor-parallel ranks (torch.distributed; gloo on CPU, NCCL on CUDA)
    max_num_seqs: int = 32  # running-batch limit: more requests wait in the queue (load signal)
    kv_blocks: int = 512  # paged KV cache size in blocks: running out forces preemption (memory signal)
    block_size: int = 16  # tokens per KV block (vLLM's default)
    max_model_len: int = 2048  # prompt + output limit per sequence
    seed: int = 0  # synthetic weights and the engine's sampling stream for unseeded requests
    dtype: str = "float32"  # weights/activations; logits and penalties are always fp32
    threads: int = 1  # torch intra-op threads: 1 keeps a 2-core box responsive for the client
    # Token budget of one step (prefill + decode tokens); None = max_model_len, so any prompt fits.
    max_num_batched_tokens: int | None = None
    device: str = "cpu"  # cpu, cuda, or auto (cuda when available)

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"engine.model: must be a preset name ({', '.join(MODEL_PRESETS)}) or a checkpoint folder, got {self.model!r}")
        _check_int("tp", self.tp, 1, 64)
        _check_int("max_num_seqs", self.max_num_seqs, 1, 4096)
        _check_int("kv_blocks", self.kv_blocks, 1, 10_000_000)
        _check_int("block_size", self.block_size, 1, 1024)
        _check_int("max_model_len", self.max_model_len, 2, 1_000_000)
        _check_int("seed", self.seed, 0, 2**63 - 1)
        _check_int("threads", self.threads, 1, 1024)
        if self.dtype not in DTYPES:
            raise ValueError(f"engine.dtype: must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.device not in DEVICES:
            raise ValueError(f"engine.device: must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.kv_blocks * self.block_size < self.max_model_len:
            raise ValueError(
                f"engine.kv_blocks: kv_blocks*block_size ({self.kv_blocks}*{self.block_size}) must hold "
                f"one max_model_len={self.max_model_len} sequence; need kv_blocks >= {-(-self.max_model_len // self.block_size)}")
        if self.max_num_batched_tokens is not None:
            _check_int("max_num_batched_tokens", self.max_num_batched_tokens, self.max_model_len, 10_000_000)

    @property
    def token_budget(self) -> int:
        """Tokens one step may process (prefill + decode)."""
        return self.max_num_batched_tokens if self.max_num_batched_tokens is not None else max(self.max_model_len, self.max_num_seqs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "EngineConfig":
        """Build from a scenario/CONFIG.json ``engine`` mapping; unknown keys raise naming the key."""
        data = dict(data or {})
        _check_keys(cls, data, "engine")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
