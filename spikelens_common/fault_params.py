"""The params dataclass of every fault kind: its magnitudes, their defaults and their ranges.

What: one frozen dataclass per (kind, applier); `fault_catalogue` names which one each applier
of a kind takes. A dataclass checks its own ranges in `__post_init__` (a ValueError naming
`<kind>.params.<field>`); unknown keys are checked by whoever builds it from a scenario mapping.
Why here and not beside each injector: the catalogue, the flows' validation and the appliers
(engine, loadgen, injectors) all need them, and none of those may import another.
Two kinds have two classes, one per applier: `memory.gc_storm` (the engine's own churn thread;
the GC hook's churn in a chosen process of an engine spikelens cannot change) and
`memory.kv_pressure` (the engine's KV ballast; loadgen's long prompts against vLLM).
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---- applied by spikelens' engine (engine/faults) ------------------------------------------------


@dataclass(frozen=True)
class SlowPathParams:
    # Recount passes per step: 1 is the naive path; more scales the cost (e.g. to stand out on a GPU).
    passes: int = 1

    def __post_init__(self):
        if (
            isinstance(self.passes, bool)
            or not isinstance(self.passes, int)
            or not 1 <= self.passes <= 100
        ):
            raise ValueError(
                f"penalty.slow_path.params.passes: must be an integer in [1, 100], got {self.passes!r}"
            )


@dataclass(frozen=True)
class GcStormParams:
    # Defaults follow the process hook's: 50 ticks/s of 20k cycles (two dicts each), ~1M cycles/s.
    objects_per_tick: int = 20_000
    live_ticks: int = 4  # ticks a batch stays reachable (it outlives young collections)
    tick_s: float = 0.02  # pause between batches
    # Extra GC-tracked containers kept alive during the window: each full pass walks them too, so
    # pauses grow with it (the engine's own heap, ~180k objects, is walked anyway); 0 = none.
    ballast_objects: int = 0

    def __post_init__(self):
        for name, lo, hi in (
            ("objects_per_tick", 1, 10_000_000),
            ("live_ticks", 1, 10_000),
            ("ballast_objects", 0, 50_000_000),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(
                    f"memory.gc_storm.params.{name}: must be an integer in [{lo}, {hi}], got {v!r}"
                )
        t = self.tick_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.001 <= t <= 10:
            raise ValueError(f"memory.gc_storm.params.tick_s: must be in [0.001, 10], got {t!r}")


@dataclass(frozen=True)
class KvPressureParams:
    # Share of kv_blocks left to sequences while the ballast holds the rest; (0, 1].
    fraction: float = 0.05

    def __post_init__(self):
        f = self.fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise ValueError(f"memory.kv_pressure.params.fraction: must be in (0, 1], got {f!r}")


@dataclass(frozen=True)
class AllocChurnParams:
    # MiB allocated and written per step: ~24k page faults; measured ~100-200 ms per step on the
    # shared 2-core box (bench/fault_signal.py), a few tens of ms on a quiet one.
    mb_per_step: int = 96
    tensors: int = (
        2  # split into this many tensors; keep each > 32 MiB (glibc's largest mmap threshold)
    )

    def __post_init__(self):
        for name, lo, hi in (("mb_per_step", 1, 1_000_000), ("tensors", 1, 1024)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(
                    f"memory.alloc_churn.params.{name}: must be an integer in [{lo}, {hi}], got {v!r}"
                )


@dataclass(frozen=True)
class SlowForwardParams:
    # How much longer the model's forward takes: 2.0 doubles it (the device at half speed).
    factor: float = 2.0

    def __post_init__(self):
        v = self.factor
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1.0 < v <= 20.0:
            raise ValueError(
                f"unexplained.slow_forward.params.factor: must be a number in (1, 20], got {v!r}"
            )


def _check(kind: str, name: str, value, lo, hi, integer: bool = False) -> None:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not lo <= value <= hi:
        raise ValueError(
            f"{kind}.params.{name}: must be {'an integer' if integer else 'a number'} in [{lo}, {hi}], got {value!r}"
        )


@dataclass(frozen=True)
class StragglerParams:
    rank: int = -1  # the late rank; -1 = the last rank
    delay_ms: float = 30.0  # how late it arrives
    every_collective: bool = False  # False: once per step (before its first all-reduce)

    def __post_init__(self):
        _check("comm.straggler", "rank", self.rank, -1, 1023, integer=True)
        _check("comm.straggler", "delay_ms", self.delay_ms, 0, 10_000)
        if not isinstance(self.every_collective, bool):
            raise ValueError(
                f"comm.straggler.params.every_collective: must be a boolean, got {self.every_collective!r}"
            )


@dataclass(frozen=True)
class SlowLinkParams:
    # Extra fp32 elements every all-reduce carries in the same collective (a link that must move
    # more bytes per call). The default, 4 MiB per all-reduce, measured with bench/slow_link.py on
    # gloo over loopback (2 shared cores): median all-reduce 0.24 -> 5.9 ms, about what the old
    # 5 ms sleep added; the small model's activations are a few KiB, 1 MiB adds only ~0.5 ms.
    extra_floats: int = 1_048_576

    def __post_init__(self):
        _check("comm.slow_link", "extra_floats", self.extra_floats, 1, 1 << 28, integer=True)


# ---- applied by loadgen (loadgen/traffic_faults.py, loadgen/client_stall.py) ---------------------


@dataclass(frozen=True)
class BurstParams:
    factor: float = 3.0  # arrivals multiply by this inside the window (users or rate)


@dataclass(frozen=True)
class RepetitionParams:
    honours_eos = True  # class constant: these requests never send ignore_eos (they may stop)
    temperature: float = 0.0  # greedy: a small model falls into a loop and rarely picks EOS
    max_tokens: int | None = None  # None: the workload's output_tokens.max (the longest it allows)
    frequency_penalty: float = (
        -2.0
    )  # the most negative allowed: each repeat makes the next likelier
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0

    def sampling_overrides(self) -> dict:
        return {
            "temperature": self.temperature,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "repetition_penalty": self.repetition_penalty,
        }

    def output_tokens(self, drawn: int, longest: int) -> int:
        return self.max_tokens or longest


@dataclass(frozen=True)
class HeavyTrafficParams:
    honours_eos = False  # the workload's own ignore_eos stays: only the penalties change
    share: float = 0.5  # fraction of the window's requests that carry the penalties, in (0, 1]
    frequency_penalty: float = 1.0  # OpenAI ranges; all three on, so every penalty path runs
    presence_penalty: float = 0.5
    repetition_penalty: float = 1.2

    def sampling_overrides(self) -> dict:
        return {
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "repetition_penalty": self.repetition_penalty,
        }

    def output_tokens(self, drawn: int, longest: int) -> int:
        return drawn


@dataclass(frozen=True)
class LongPromptParams:
    # prompt length in tokens of the window's requests: with their output it must fit the
    # engine's max_model_len; a few of them together must exceed its KV cache
    prompt_tokens: int = 384
    share: float = 1.0  # fraction of the window's requests that get the long prompt, in (0, 1]
    max_tokens: int | None = None  # None: the drawn output length
    honours_eos = False  # the workload's own ignore_eos stays: only the prompt grows

    def sampling_overrides(self) -> dict:
        return {}

    def prompt_length(self, drawn: int) -> int:
        return self.prompt_tokens

    def output_tokens(self, drawn: int, longest: int) -> int:
        return self.max_tokens or drawn


@dataclass(frozen=True)
class StallParams:
    pause_ms: float = 200.0  # how long each stall blocks the process
    every_ms: float = 500.0  # a stall starts this often inside the window (> pause_ms)

    def __post_init__(self) -> None:
        for name, low, high in (("pause_ms", 1.0, 10_000.0), ("every_ms", 2.0, 60_000.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not low <= v <= high:
                raise ValueError(
                    f"client.stall.params.{name}: must be a number in [{low:g}, {high:g}], got {v!r}"
                )
        if self.every_ms <= self.pause_ms:
            raise ValueError(
                f"client.stall.params.every_ms: must be > pause_ms ({self.pause_ms:g}), got {self.every_ms:g}"
            )


# ---- applied by the injectors beside an engine (injectors/) --------------------------------------


@dataclass(frozen=True)
class DelayParams:
    delay_ms: float = 50.0  # added to every chunk, each direction
    jitter_ms: float = 0.0  # uniform extra in [0, jitter_ms] per chunk (order kept)

    def __post_init__(self) -> None:
        for name in ("delay_ms", "jitter_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 10_000:
                raise ValueError(
                    f"network.delay.params.{name}: must be a number in [0, 10000], got {v!r}"
                )


@dataclass(frozen=True)
class CpuContentionParams:
    processes: int | None = None  # hog processes; None: one per CPU in the engine's affinity mask

    def __post_init__(self):
        v = self.processes
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1024):
            raise ValueError(
                f"host.cpu_contention.params.processes: must be an integer in [1, 1024] or null, got {v!r}"
            )


@dataclass(frozen=True)
class ProcessGcStormParams:
    role: str = "EngineCore"  # processes whose role (collectors/roles.py) this is churn
    objects_per_tick: int = 20_000  # cycles (two dicts each) allocated per tick
    live_ticks: int = 4  # ticks a cycle stays reachable: it outlives young collections
    tick_s: float = 0.02  # 50 ticks/s: ~1M cycles/s at the default size
    ballast_objects: int = 0  # extra tracked objects kept alive in the window: longer passes

    def __post_init__(self):
        where = "memory.gc_storm.params"
        if not isinstance(self.role, str) or not self.role:
            raise ValueError(
                f"{where}.role: must be a process role such as 'EngineCore', got {self.role!r}"
            )
        for name, lo, hi in (
            ("objects_per_tick", 1, 10_000_000),
            ("live_ticks", 1, 10_000),
            ("ballast_objects", 0, 50_000_000),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{where}.{name}: must be an integer in [{lo}, {hi}], got {v!r}")
        if (
            isinstance(self.tick_s, bool)
            or not isinstance(self.tick_s, (int, float))
            or not 0.001 <= self.tick_s <= 10
        ):
            raise ValueError(
                f"{where}.tick_s: must be a number in [0.001, 10], got {self.tick_s!r}"
            )
