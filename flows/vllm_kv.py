"""The KV cache size spikelens gives vLLM's CPU build when the scenario gives none.

Why: without a size, vLLM-CPU reserves `--gpu-memory-utilization` (0.92) of the NUMA node's
memory and its worker refuses to start when less than that is free ("Available memory on node 0
(9.23/11.21 GiB) on startup is less than desired CPU memory utilization (0.92, 10.32 GiB)"): on
any machine that runs anything else. So a start with only `model` failed.

What: `derive_kv_cache(config, available_bytes)` sizes the cache for what the scenario can ask
of it: `max_num_seqs` sequences of `max_model_len` tokens, each token costing
2 (K and V) × layers × KV heads × head_dim × dtype bytes, read from the checkpoint's config.json.
In whole GiB, at least MIN_GIB: vLLM 0.32 reads VLLM_CPU_KVCACHE_SPACE as an integer and turns
it into `kv_cache_memory_bytes` (vllm/platforms/cpu.py), which also skips the worker's 92 %
check. At most half the memory free at the start (beyond that the machine would swap; vLLM then
fits fewer sequences at once and says so in its log).
The result goes into run.json (`extra.vllm.kv_cache`) with every figure it came from.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flows.vllm_config import VllmConfig

GIB = 2**30
MIN_GIB = 1
MAX_SHARE_OF_FREE = 0.5  # of the memory available when vLLM starts
# vLLM 0.32's --max-num-seqs when none is given, per tensor-parallel rank, for the OpenAI server
# on the CPU platform (vllm/engine/arg_utils.py, get_batch_defaults: 128 * world_size).
VLLM_CPU_DEFAULT_MAX_NUM_SEQS = 128
# Bytes per element of the dtypes config.json and `engine.dtype` name.
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "float64": 8,
}


@dataclass(frozen=True)
class KvShape:
    """What one token's K and V cost, from a checkpoint's config.json."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    max_position_embeddings: int | None

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config (multimodal checkpoints nest it)."""
    nested = config.get("text_config")
    return {**config, **nested} if isinstance(nested, dict) else config


def kv_shape(model: str, dtype: str = "auto") -> KvShape | None:
    """The KV shape of a local checkpoint folder; None when config.json is missing or lacks
    what the size needs (a Hub id, an unusual architecture)."""
    path = Path(model).expanduser() / "config.json"
    try:
        config = _text_config(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    # "auto" runs the checkpoint's dtype (or a narrower one): its width is an upper bound
    named = dtype if dtype != "auto" else config.get("torch_dtype") or config.get("dtype")
    positions = config.get("max_position_embeddings")
    return KvShape(
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        dtype_bytes=DTYPE_BYTES.get(str(named), 4),  # unknown: float32's, the widest usual
        max_position_embeddings=int(positions) if isinstance(positions, int) else None,
    )


@dataclass(frozen=True)
class KvCacheSize:
    """The KV cache vLLM-CPU gets (VLLM_CPU_KVCACHE_SPACE, whole GiB) and where it came from."""

    gib: int
    source: str  # 'derived' (from the checkpoint) | 'floor' (nothing to derive from)
    needed_bytes: int | None = None  # max_num_seqs × max_model_len × bytes_per_token
    bytes_per_token: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    dtype_bytes: int | None = None
    capped_gib: int | None = None  # half the free memory, when that was below the need
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"env": "VLLM_CPU_KVCACHE_SPACE", **asdict(self)}


def derive_kv_cache(config: VllmConfig, available_bytes: int) -> KvCacheSize:
    """The KV cache for `config` on the CPU build (see the module docstring)."""
    shape = kv_shape(config.model, config.dtype)
    cap = max(MIN_GIB, math.floor(available_bytes * MAX_SHARE_OF_FREE / GIB))
    max_model_len = config.max_model_len or (shape.max_position_embeddings if shape else None)
    if shape is None or max_model_len is None:
        return KvCacheSize(
            gib=MIN_GIB,
            source="floor",
            note=f"{config.model}: no config.json with layers, heads and max_position_embeddings "
            f"to size the cache from; {MIN_GIB} GiB (set engine.kv_cache_space_gib to change)",
        )
    seqs = config.max_num_seqs or VLLM_CPU_DEFAULT_MAX_NUM_SEQS * config.tensor_parallel_size
    needed = seqs * max_model_len * shape.bytes_per_token
    wanted = max(MIN_GIB, math.ceil(needed / GIB))
    return KvCacheSize(
        gib=min(wanted, cap),
        source="derived",
        needed_bytes=needed,
        bytes_per_token=shape.bytes_per_token,
        max_num_seqs=seqs,
        max_model_len=max_model_len,
        layers=shape.layers,
        kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        dtype_bytes=shape.dtype_bytes,
        capped_gib=cap if wanted > cap else None,
        note=f"{seqs} sequences x {max_model_len} tokens x {shape.bytes_per_token} B"
        + (f"; capped at half the free memory ({cap} GiB)" if wanted > cap else ""),
    )
