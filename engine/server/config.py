"""Serving limits of the HTTP layer (``ServerConfig``): what the server admits before the engine sees it.

Kept apart from ``EngineConfig`` because these knobs change how a request is *answered* (shed,
rejected) rather than how it is decoded. Optional ``server`` block of CONFIG.json; unknown keys are
an error naming the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spikelens_common.config_keys import ALL_UNKNOWN, strict_keys


@dataclass(frozen=True)
class ServerConfig:
    # The model id served by /v1/models and echoed in responses (loadgen sends "spikelens").
    model_name: str = "spikelens"
    # Request bodies above this answer 413 before parsing: a 1 MiB body already holds a prompt far
    # beyond any context we serve, so bigger ones are mistakes or abuse.
    max_body_bytes: int = 1 << 20
    # Requests admitted beyond the engine's running batch (max_num_seqs). More answer 429 with
    # Retry-After instead of queueing without bound; None = never shed (pure queueing, the "load"
    # cause in its raw form).
    max_waiting: int | None = 256
    # Seconds a shed client is told to wait (the Retry-After header).
    retry_after_s: int = 1
    # On SIGTERM, seconds open streams get to finish before they are cut and telemetry is flushed.
    graceful_shutdown_s: float = 5.0
    # gc.freeze() after start-up (vLLM does): full collections then skip the ~10^5 start-up objects,
    # so every GC pause shrinks — including those memory.gc_storm injects, whose defaults were
    # calibrated on the unfrozen heap. Off by default so fault magnitudes stay as measured.
    gc_freeze: bool = False

    def __post_init__(self):
        if not isinstance(self.model_name, str) or not self.model_name:
            raise ValueError(
                f"server.model_name: must be a non-empty string, got {self.model_name!r}"
            )
        _check_int("max_body_bytes", self.max_body_bytes, 1024)
        if self.max_waiting is not None:
            _check_int("max_waiting", self.max_waiting, 0)
        _check_int("retry_after_s", self.retry_after_s, 0)
        if not isinstance(self.gc_freeze, bool):
            raise ValueError(f"server.gc_freeze: must be true or false, got {self.gc_freeze!r}")
        if (
            isinstance(self.graceful_shutdown_s, bool)
            or not isinstance(self.graceful_shutdown_s, (int, float))
            or self.graceful_shutdown_s < 0
        ):
            raise ValueError(
                f"server.graceful_shutdown_s: must be a number >= 0, got {self.graceful_shutdown_s!r}"
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ServerConfig:
        """From CONFIG.json's ``server`` block: a preset name under ``preset`` plus overrides."""
        data = dict(data or {})
        preset = data.pop("preset", "default")
        if preset not in SERVER_PRESETS:
            raise ValueError(
                f"server.preset: unknown preset {preset!r}; presets: {', '.join(SERVER_PRESETS)}"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        strict_keys(
            data,
            known,
            "server",
            message=ALL_UNKNOWN,
            error=ValueError,
            sort_unknown=True,
            valid=["preset", *sorted(known)],
        )
        return dataclasses.replace(SERVER_PRESETS[preset], **data)


def _check_int(name: str, value: Any, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"server.{name}: must be an integer >= {lo}, got {value!r}")


SERVER_PRESETS: dict[str, ServerConfig] = {
    # Load tests: shed beyond 256 waiting requests.
    "default": ServerConfig(),
    # Overload experiments that want to watch queues grow without bound.
    "unbounded": ServerConfig(max_waiting=None),
}
