"""Scenario files: the declarative input of every flow (DESIGN.md "Scenarios").

A scenario is YAML. Unknown keys and bad values are errors that name the file, the line and the
key, so a typo in a nightly config fails loudly at load time instead of silently running the
wrong experiment. The blocks are validated by the folders that own them (`engine.config`,
`loadgen.spec`); this module only knows the top-level shape and where each key sits in the file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.config import EngineConfig
from loadgen.spec import LoadSpec, WorkloadSpec

# Fault kinds of DESIGN.md and the cause each stands for (the ground truth vocabulary).
FAULT_CAUSES: dict[str, str] = {
    "penalty.slow_path": "penalty",
    "penalty.repetition": "penalty",
    "memory.gc_storm": "memory",
    "memory.kv_pressure": "memory",
    "memory.alloc_churn": "memory",
    "comm.straggler": "communication",
    "comm.slow_link": "communication",
    "load.burst": "load",
}

_TOP_KEYS = {"name", "duration_s", "warmup_s", "engine", "target", "workload", "load", "faults",
             "seed", "slo", "description"}
_FAULT_KEYS = {"kind", "start_s", "duration_s", "params"}


class ScenarioError(ValueError):
    """A scenario file is invalid; the message names the file, line and key."""

    def __init__(self, path: str, line: int | None, key: str, message: str):
        self.path, self.line, self.key = path, line, key
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {key}: {message}")


@dataclass(frozen=True)
class FaultSpec:
    """One injected fault: what, when (seconds from the start of measured load), how strong."""

    kind: str
    start_s: float
    duration_s: float
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def cause(self) -> str:
        return FAULT_CAUSES[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "start_s": self.start_s, "duration_s": self.duration_s,
                "params": dict(self.params)}


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. `raw` is the mapping as given (stored in run.json and the report)."""

    name: str
    duration_s: float
    warmup_s: float
    engine: EngineConfig | None        # None when driving an external `target`
    target: str | None                 # base URL of an engine spikelens did not start
    workload: WorkloadSpec
    load: LoadSpec
    faults: tuple[FaultSpec, ...]
    seed: int
    path: str
    raw: dict[str, Any]
    text: str

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:32] or "run"


def _lines(node: yaml.Node, prefix: tuple = ()) -> dict[tuple, int]:
    """Map every key path of a composed YAML node to its 1-based line number."""
    out: dict[tuple, int] = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            path = prefix + (k.value,)
            out[path] = k.start_mark.line + 1
            out.update(_lines(v, path))
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[prefix + (i,)] = v.start_mark.line + 1
            out.update(_lines(v, prefix + (i,)))
    return out


def _blame(lines: dict[tuple, int], block: tuple, message: str) -> tuple[int | None, str]:
    """Find the line of the key an error message names inside `block` (else the block's line).

    A quoted key ('max_num_seqz') wins; otherwise a key named as a word before any list of
    valid keys. The message's list of valid keys must not be mistaken for the culprit.
    """
    keys = sorted(((p, ln) for p, ln in lines.items()
                   if p[: len(block)] == block and len(p) > len(block) and isinstance(p[-1], str)),
                  key=lambda kv: -len(kv[0]))
    head = re.split(r"valid", message, maxsplit=1)[0]
    for pattern in (r"['\"]{key}['\"]", r"\b{key}\b"):
        text = message if pattern.startswith("[") else head
        for path, line in keys:
            if re.search(pattern.format(key=re.escape(path[-1])), text):
                return line, ".".join(str(p) for p in path)
    return lines.get(block), ".".join(str(p) for p in block)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with `over` laid on top, mappings merged key by key (inputs unchanged)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """Read and validate a scenario file. Raises ScenarioError naming file, line and key."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ScenarioError(path, None, "file", f"cannot read: {e.strerror}") from None
    try:
        node = yaml.compose(text)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ScenarioError(path, mark.line + 1 if mark else None, "yaml",
                            f"not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(path, 1, "scenario", "must be a mapping of keys (name, duration_s, …)")
    raw = deep_merge(raw, overrides or {})
    return parse_scenario(raw, path=path, text=text, lines=_lines(node) if node else {})


def parse_scenario(raw: dict[str, Any], path: str = "<scenario>", text: str = "",
                   lines: dict[tuple, int] | None = None) -> Scenario:
    """Validate a scenario mapping (from YAML or built in code)."""
    lines = lines or {}

    def fail(block: tuple, message: str) -> ScenarioError:
        line, key = _blame(lines, block, message)
        return ScenarioError(path, line, key, message)

    for key in raw:
        if key not in _TOP_KEYS:
            raise ScenarioError(path, lines.get((key,)), str(key),
                                f"unknown key; valid keys: {', '.join(sorted(_TOP_KEYS))}")

    def number(key: str, default: float | None, lo: float, hi: float) -> float:
        value = raw.get(key, default)
        if value is None:
            raise ScenarioError(path, None, key, "is required")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise ScenarioError(path, lines.get((key,)), key,
                                f"must be a number in [{lo:g}, {hi:g}], got {value!r}")
        return float(value)

    duration_s = number("duration_s", None, 1, 86_400)
    warmup_s = number("warmup_s", 5, 0, 3_600)
    seed = int(number("seed", 0, 0, 2**31 - 1))
    name = raw.get("name") or Path(path).stem
    if not isinstance(name, str):
        raise ScenarioError(path, lines.get(("name",)), "name", "must be a string")

    if ("engine" in raw) == ("target" in raw):
        raise ScenarioError(path, None, "engine/target",
                            "give exactly one of `engine:` (start our engine) or `target:` (a URL)")
    engine = None
    target = raw.get("target")
    if "engine" in raw:
        block = raw["engine"] or {}
        if not isinstance(block, dict):
            raise fail(("engine",), "must be a mapping")
        try:
            engine = EngineConfig.from_dict(block)
        except (ValueError, KeyError, TypeError) as e:
            raise fail(("engine",), str(e).strip("'\"")) from None
    elif not (isinstance(target, str) and re.match(r"^https?://", target)):
        raise ScenarioError(path, lines.get(("target",)), "target",
                            f"must be an http(s) URL, got {target!r}")

    try:
        workload = WorkloadSpec.from_dict(raw.get("workload") or {})
    except (ValueError, KeyError, TypeError) as e:
        raise fail(("workload",), str(e).strip("'\"")) from None
    try:
        load = LoadSpec.from_dict(raw.get("load") or {})
    except (ValueError, KeyError, TypeError) as e:
        raise fail(("load",), str(e).strip("'\"")) from None

    if "slo" in raw:   # goodput objectives, e.g. {ttft_ms: 500, tpot_ms: 50}
        from loadgen.metrics import SLO

        try:
            SLO.from_dict(raw["slo"] if isinstance(raw["slo"], dict) else {"": raw["slo"]})
        except (ValueError, TypeError) as e:
            raise fail(("slo",), str(e)) from None

    faults = []
    for i, f in enumerate(raw.get("faults") or []):
        if not isinstance(f, dict):
            raise ScenarioError(path, lines.get(("faults", i)), f"faults[{i}]", "must be a mapping")
        for key in f:
            if key not in _FAULT_KEYS:
                raise ScenarioError(path, lines.get(("faults", i, key)), f"faults[{i}].{key}",
                                    f"unknown key; valid keys: {', '.join(sorted(_FAULT_KEYS))}")
        kind = f.get("kind")
        if kind not in FAULT_CAUSES:
            raise ScenarioError(path, lines.get(("faults", i, "kind")), f"faults[{i}].kind",
                                f"unknown fault kind {kind!r}; valid: {', '.join(FAULT_CAUSES)}")
        start, dur = f.get("start_s"), f.get("duration_s")
        for key, value in (("start_s", start), ("duration_s", dur)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ScenarioError(path, lines.get(("faults", i, key)), f"faults[{i}].{key}",
                                    f"must be a number ≥ 0 (seconds from the start of measured load), got {value!r}")
        if start + dur > duration_s:
            raise ScenarioError(path, lines.get(("faults", i)), f"faults[{i}]",
                                f"window {start:g}–{start + dur:g} s ends after duration_s={duration_s:g}")
        params = f.get("params") or {}
        if not isinstance(params, dict):
            raise ScenarioError(path, lines.get(("faults", i, "params")), f"faults[{i}].params",
                                "must be a mapping")
        faults.append(FaultSpec(kind, float(start), float(dur), params))

    return Scenario(name=name, duration_s=duration_s, warmup_s=warmup_s, engine=engine,
                    target=target, workload=workload, load=load, faults=tuple(faults), seed=seed,
                    path=path, raw=raw, text=text or yaml.safe_dump(raw, sort_keys=False))
