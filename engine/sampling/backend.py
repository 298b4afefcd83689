"""Which implementation of the penalty and sampling stages runs: the torch reference or Triton.

What: `select_backend(device, requested)` decides once per Sampler. Triton runs only on CUDA (on the
CPU it exists only as a slow interpreter for tests); anything else, or a Triton that fails to import,
falls back to the torch reference, and the reason is logged once per process.
"""

from __future__ import annotations

import functools
import logging

import torch

log = logging.getLogger(__name__)

BACKENDS = ("auto", "torch", "triton")


@functools.cache
def _log_once(message: str) -> None:
    log.warning(message)


def triton_kernels_importable() -> tuple[bool, str]:
    """(True, "") when engine.kernels (and Triton) import; else (False, why)."""
    try:
        import engine.kernels  # noqa: F401  (imports triton)
    except Exception as exc:  # ImportError, or Triton's own errors at import on odd hosts
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def select_backend(device: torch.device, requested: str = "auto") -> str:
    """Return "torch" or "triton" for tensors on `device`.

    "auto": Triton on CUDA when importable (the Sampler then runs its penalty kernel and torch's
    draw: the faster of each on an H200), else torch (fallback logged once); never Triton on the
    CPU, even with TRITON_INTERPRET=1 in the environment (the interpreter is for tests, far too slow to
    serve). "triton": Triton or an error — on a non-CUDA device only under TRITON_INTERPRET=1.
    """
    if requested not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {requested!r}")
    if requested == "torch":
        return "torch"
    if device.type != "cuda" and not (requested == "triton" and _triton_interpreter_on()):
        if requested == "triton":
            raise ValueError(
                f"backend 'triton' needs a CUDA device (or TRITON_INTERPRET=1), got {device}"
            )
        return "torch"
    ok, why = triton_kernels_importable()
    if ok:
        return "triton"
    if requested == "triton":
        raise ValueError(f"backend 'triton' unavailable: {why}")
    _log_once(f"Triton sampling kernels unavailable on {device} ({why}); using the torch reference")
    return "torch"


def _triton_interpreter_on() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET", "") == "1"
