"""Scenario files: the declarative input of every flow (docs/design.md "Scenarios").

A scenario is YAML. Unknown keys and bad values are errors that name the file, the line and the
key, so a typo in a nightly config fails loudly at load time instead of silently running the
wrong experiment. The blocks are validated by the modules that own them (`engine.config`, or
`flows.vllm_config` for `engine: {kind: vllm}`; `loadgen.spec`; each fault by the applier
`flows.fault_routing` routes it to); this module knows the top-level
shape (with `target: URL | {url, model}` and `endpoint: chat | completions`) and where each key
sits in the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from engine.config import EngineConfig
from flows.fault_routing import FaultRouteError, check_params, route_faults
from flows.priority import why_not
from flows.runtime import OurEngine, Runtime, Target, VllmEngine
from flows.vllm_config import VllmConfig, engine_kind
from loadgen.spec import LoadSpec, WorkloadSpec
from rca.config import PRESETS
from spikelens_common.config_keys import ALL_UNKNOWN as ALL_UNKNOWN_KEYS
from spikelens_common.config_keys import UnknownKeyError, strict_keys
from spikelens_common.fault_spec import FaultSpec, parse_fault_specs

_TOP_KEYS = {
    "name",
    "duration_s",
    "warmup_s",
    "engine",
    "target",
    "workload",
    "load",
    "faults",
    "seed",
    "slo",
    "description",
    "endpoint",
    "intervention",
    "detector",
}
# `intervention:` (written by `spikelens confirm` for its cause-removed arm): what the flow changes
# in the engine's processes beyond the scenario's own keys. gc_off: automatic GC off in every
# process of the engine's tree (through the GC hook, collectors.gc_hook.GC_OFF_ENV); nice: the
# engine's processes started at that (raised) priority (flows/priority.py).
_INTERVENTION_KEYS = ("gc_off", "nice")
_TARGET_KEYS = ("url", "model")
ENDPOINTS = ("chat", "completions")
_T = TypeVar("_T")


class ScenarioError(ValueError):
    """A scenario file is invalid; the message names the file, line and key."""

    def __init__(self, path: str, line: int | None, key: str, message: str):
        self.path, self.line, self.key = path, line, key
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {key}: {message}")


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. `raw` is the mapping as given (stored in run.json and the report)."""

    name: str
    duration_s: float
    warmup_s: float
    runtime: Runtime  # what it runs against: our engine, a vLLM we start, or a target URL
    workload: WorkloadSpec
    load: LoadSpec
    faults: tuple[FaultSpec, ...]
    seed: int
    path: str
    raw: dict[str, Any]
    text: str
    # chat → /v1/chat/completions, completions → /v1/completions (see `default_endpoint`).
    endpoint: str = "chat"
    gc_off: bool = False  # intervention.gc_off: automatic GC off in the engine's processes
    nice: int | None = None  # intervention.nice: the engine's processes' raised priority
    # the spike detector's preset (rca.config.PRESETS): how the run is analysed, and re-analysed
    detector: str = "default"

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:32] or "run"


def default_endpoint(own_engine: bool) -> str:
    """`chat` for spikelens' own engine (as before), `completions` for vLLM and any target: a
    completions request works with every checkpoint, while a chat request to a checkpoint
    without a chat template gets 400 from vLLM, and the prompt's token count is what was sent
    (no template tokens added). A scenario's `endpoint:` overrides it."""
    return "chat" if own_engine else "completions"


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


def _field_path(field: str) -> tuple:
    """'faults[0].params.x' → ('faults', 0, 'params', 'x')."""
    return tuple(
        int(t[1:-1]) if t.startswith("[") else t for t in re.findall(r"\[\d+\]|[^.\[\]]+", field)
    )


def _blame(
    lines: dict[tuple, int], block: tuple, message: str, field: str | None = None
) -> tuple[int | None, str]:
    """Find the line of the key an error names inside `block` (else the block's line).

    An error that carries its `field` (spikelens_common.config_keys.strict_keys) names it; for
    the others, a quoted key ('max_num_seqz') in the message wins, else a key named as a word
    before any list of valid keys. The message's list of valid keys must not be mistaken for the
    culprit.
    """
    if field:
        path = _field_path(field)
        for candidate in (path, block + path):
            if candidate[: len(block)] == block and candidate in lines:
                return lines[candidate], _key_name(candidate)
    keys = sorted(
        (
            (p, ln)
            for p, ln in lines.items()
            if p[: len(block)] == block and len(p) > len(block) and isinstance(p[-1], str)
        ),
        key=lambda kv: -len(kv[0]),
    )
    head = re.split(r"valid", message, maxsplit=1)[0]
    for pattern in (r"['\"]{key}['\"]", r"\b{key}\b"):
        text = message if pattern.startswith("[") else head
        for path, line in keys:
            if re.search(pattern.format(key=re.escape(path[-1])), text):
                return line, _key_name(path)
    return lines.get(block), _key_name(block)


def _key_name(path: tuple) -> str:
    """('faults', 0, 'start_s') → 'faults[0].start_s'."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


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
        raise ScenarioError(
            path,
            mark.line + 1 if mark else None,
            "yaml",
            f"not valid YAML: {getattr(e, 'problem', e)}",
        ) from None
    if not isinstance(raw, dict):
        raise ScenarioError(path, 1, "scenario", "must be a mapping of keys (name, duration_s, …)")
    raw = deep_merge(raw, overrides or {})
    return parse_scenario(raw, path=path, text=text, lines=_lines(node) if node else {})


@dataclass(frozen=True)
class _Source:
    """The scenario mapping being parsed, with where it came from: every step's errors name the
    file, the line and the key through it."""

    raw: dict[str, Any]
    path: str
    lines: dict[tuple, int]

    def error(self, key: str, message: str, at: tuple | None = None) -> ScenarioError:
        """An error on `key`, at the line of the key path `at` (None: no line)."""
        return ScenarioError(self.path, self.lines.get(at) if at else None, key, message)

    def fail(self, block: tuple, message: str, error: Exception | None = None) -> ScenarioError:
        """An error somewhere inside `block`, at the line of the key the message names."""
        line, key = _blame(self.lines, block, message, getattr(error, "field", None))
        return ScenarioError(self.path, line, key, message)


def parse_scenario(
    raw: dict[str, Any],
    path: str = "<scenario>",
    text: str = "",
    lines: dict[tuple, int] | None = None,
) -> Scenario:
    """Validate a scenario mapping (from YAML or built in code), one section after the other:
    top-level keys, run length and seed, engine or target, endpoint, workload and load, SLO,
    faults. The first error found is raised."""
    src = _Source(raw, path, lines or {})
    _check_top_keys(src)
    duration_s = _number(src, "duration_s", None, 1, 86_400)
    warmup_s = _number(src, "warmup_s", 5, 0, 3_600)
    seed = int(_number(src, "seed", 0, 0, 2**31 - 1))
    name = raw.get("name") or Path(path).stem
    if not isinstance(name, str):
        raise src.error("name", "must be a string", ("name",))
    runtime = _runtime(src)
    endpoint = _endpoint(src, own_engine=isinstance(runtime, OurEngine))
    workload = _section(src, "workload", WorkloadSpec.from_dict)
    load = _section(src, "load", LoadSpec.from_dict)
    _check_slo(src)
    faults = _faults(src, runtime)
    _check_fault_windows(src, faults, duration_s)
    gc_off, nice = _intervention(src, runtime)
    detector = _detector(src)
    return Scenario(
        name=name,
        duration_s=duration_s,
        warmup_s=warmup_s,
        runtime=runtime,
        workload=workload,
        load=load,
        faults=tuple(faults),
        seed=seed,
        path=path,
        raw=raw,
        text=text or yaml.safe_dump(raw, sort_keys=False),
        endpoint=endpoint,
        gc_off=gc_off,
        nice=nice,
        detector=detector,
    )


def _intervention(src: _Source, runtime: Runtime) -> tuple[bool, int | None]:
    """`intervention: {gc_off: bool, nice: int}`: (gc_off, nice); both need an engine the flow
    starts (the GC hook; the server's start), and a raised nice the right to raise it."""
    block = src.raw.get("intervention") or {}
    if not isinstance(block, dict):
        raise src.error("intervention", "must be a mapping", ("intervention",))
    try:
        strict_keys(block, _INTERVENTION_KEYS, "intervention", message=ALL_UNKNOWN_KEYS)
    except UnknownKeyError as e:
        raise src.error(e.field, str(e), ("intervention", e.unknown[0])) from None
    gc_off = block.get("gc_off", False)
    if not isinstance(gc_off, bool):
        raise src.error("intervention.gc_off", f"must be true or false, got {gc_off!r}")
    if gc_off and isinstance(runtime, Target):
        raise src.error("intervention.gc_off", "needs an engine spikelens starts, not a target")
    nice = block.get("nice")
    if nice is None:
        return gc_off, None
    if isinstance(nice, bool) or not isinstance(nice, int) or not -20 <= nice <= 19:
        raise src.error("intervention.nice", f"must be an integer in [-20, 19], got {nice!r}")
    if isinstance(runtime, Target):
        raise src.error("intervention.nice", "needs an engine spikelens starts, not a target")
    if (why := why_not(nice)) is not None:
        raise src.error("intervention.nice", why)
    return gc_off, nice


def _detector(src: _Source) -> str:
    """`detector: NAME`, one of rca.config.PRESETS (default: "default")."""
    name = src.raw.get("detector", "default")
    if name not in PRESETS:
        raise src.error(
            "detector", f"must be one of {', '.join(PRESETS)}, got {name!r}", ("detector",)
        )
    return name


def _check_top_keys(src: _Source) -> None:
    try:
        strict_keys(src.raw, _TOP_KEYS, "", message="unknown key; valid keys: {valid}")
    except UnknownKeyError as e:
        raise src.error(e.field, str(e), (e.unknown[0],)) from None


def _number(src: _Source, key: str, default: float | None, lo: float, hi: float) -> float:
    """A top-level number in [lo, hi]; `default` None: the key is required."""
    value = src.raw.get(key, default)
    if value is None:
        raise src.error(key, "is required")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise src.error(key, f"must be a number in [{lo:g}, {hi:g}], got {value!r}", (key,))
    return float(value)


def _runtime(src: _Source) -> Runtime:
    """`engine:` (ours, or `kind: vllm`) or `target:`, exactly one of them."""
    raw = src.raw
    if ("engine" in raw) == ("target" in raw):
        raise src.error(
            "engine/target", "give exactly one of `engine:` (start our engine) or `target:` (a URL)"
        )
    if "target" in raw:
        target, model = _target(raw["target"], src.path, src.lines)
        return Target(url=target, model=model)
    block = raw["engine"] or {}
    if not isinstance(block, dict):
        raise src.fail(("engine",), "must be a mapping")
    try:
        if engine_kind(block) == "vllm":
            return VllmEngine(VllmConfig.from_dict(block))
        engine = EngineConfig.from_dict({k: v for k, v in block.items() if k != "kind"})
    except (ValueError, KeyError, TypeError) as e:
        raise src.fail(("engine",), str(e).strip("'\""), e) from None
    return OurEngine(engine)


def _endpoint(src: _Source, own_engine: bool) -> str:
    endpoint = src.raw.get("endpoint", default_endpoint(own_engine))
    if endpoint not in ENDPOINTS:
        raise src.error(
            "endpoint", f"must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}", ("endpoint",)
        )
    return endpoint


def _section(src: _Source, key: str, parse: Callable[[dict[str, Any]], _T]) -> _T:
    """A block validated by the module that owns it (`workload:`, `load:`); absent: defaults."""
    try:
        return parse(src.raw.get(key) or {})
    except (ValueError, KeyError, TypeError) as e:
        raise src.fail((key,), str(e).strip("'\""), e) from None


def _check_slo(src: _Source) -> None:
    """Goodput objectives, e.g. {ttft_ms: 500, tpot_ms: 50}, checked by loadgen.metrics."""
    if "slo" not in src.raw:
        return
    from loadgen.metrics import SLO

    slo = src.raw["slo"]
    try:
        SLO.from_dict(slo if isinstance(slo, dict) else {"": slo})
    except (ValueError, TypeError) as e:
        raise src.fail(("slo",), str(e), e) from None


def _faults(src: _Source, runtime: Runtime) -> list[FaultSpec]:
    """The fault list: its shape (spikelens_common.fault_spec), then routed to the appliers the
    catalogue names for this runtime (flows.fault_routing), each of which checks its params.
    Messages start with `faults[i]` (or name the kind's params field)."""
    try:
        faults = parse_fault_specs(src.raw.get("faults"))
    except (ValueError, TypeError) as e:
        raise _fault_error(src, e) from None
    try:
        routes = route_faults(faults, runtime)
    except FaultRouteError as e:
        raise src.error(e.field, str(e).removeprefix(f"{e.field}: "), ("faults", e.index)) from None
    try:
        check_params(routes)
    except (ValueError, TypeError) as e:
        raise _fault_error(src, e) from None
    return faults


def _fault_error(src: _Source, e: Exception) -> ScenarioError:
    index = re.match(r"faults\[(\d+)\]", str(e))
    block = ("faults", int(index.group(1))) if index else ("faults",)
    return src.fail(block, str(e), e)


def _check_fault_windows(src: _Source, faults: list[FaultSpec], duration_s: float) -> None:
    """Each fault's window ends inside the measured duration."""
    for i, f in enumerate(faults):
        if f.start_s + f.duration_s > duration_s:
            raise src.error(
                f"faults[{i}]",
                f"window {f.start_s:g}–{f.start_s + f.duration_s:g} s ends after "
                f"duration_s={duration_s:g}",
                ("faults", i),
            )


def _target(value: Any, path: str, lines: dict[tuple, int]) -> tuple[str, str | None]:
    """`target: URL` or `target: {url: URL, model: ID}` → (url, model or None)."""
    model = None
    if isinstance(value, dict):
        try:
            strict_keys(
                value,
                _TARGET_KEYS,
                "target",
                message="unknown key; valid keys: {valid}",
                valid=_TARGET_KEYS,
            )
        except UnknownKeyError as e:
            raise ScenarioError(
                path, lines.get(("target", e.unknown[0])), e.field, str(e)
            ) from None
        model = value.get("model")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ScenarioError(
                path,
                lines.get(("target", "model")),
                "target.model",
                f"must be a model id (a non-empty string), got {model!r}",
            )
        where: tuple[str, ...] = ("target", "url")
        key, value = "target.url", value.get("url")
    else:
        where, key = ("target",), "target"
    if not (isinstance(value, str) and re.match(r"^https?://", value)):
        raise ScenarioError(path, lines.get(where), key, f"must be an http(s) URL, got {value!r}")
    if value.rstrip("/").endswith("/v1"):
        raise ScenarioError(
            path,
            lines.get(where),
            key,
            f"give the server root, without /v1 (loadgen adds /v1/...), got {value!r}",
        )
    return value, model
