"""What a scenario runs against: exactly one of spikelens' own engine, a vLLM server the flow
starts, or a target URL someone else runs. `Scenario.runtime` holds one of them.

In the YAML: `engine: {...}` (ours), `engine: {kind: vllm, ...}` (vLLM), `target: URL` or
`target: {url, model}`. Code asks which with `isinstance` (or `match`), never with None checks
on three fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import EngineConfig
from flows.vllm_config import VllmConfig

OWN_ENGINE_MODEL = "spikelens"  # the model id spikelens' own engine answers to


@dataclass(frozen=True)
class OurEngine:
    """`engine: {...}`: spikelens' own engine, started by the flow, with every probe on it."""

    config: EngineConfig


@dataclass(frozen=True)
class VllmEngine:
    """`engine: {kind: vllm, ...}`: a vLLM server the flow starts and watches from outside."""

    config: VllmConfig


@dataclass(frozen=True)
class Target:
    """`target: URL | {url, model}`: a server spikelens did not start; loadgen only drives it."""

    url: str  # the server root (loadgen adds /v1/...)
    # the model id every request names; None: the first id the server's /v1/models lists
    model: str | None = None


Runtime = OurEngine | VllmEngine | Target


def engine_settings(runtime: Runtime) -> dict | None:
    """The started engine's settings as run.json records them (None for a target)."""
    if isinstance(runtime, Target):
        return None
    return runtime.config.to_dict()
