"""Shared builders for engine tests (fixtures, since --import-mode=importlib forbids importing
conftest): ``tiny_config(**overrides)`` and ``run_to_completion(engine)``."""

from __future__ import annotations

import pytest

from engine.config import EngineConfig


def _tiny_config(**overrides) -> EngineConfig:
    base = dict(model="tiny", max_num_seqs=4, kv_blocks=64, block_size=4, max_model_len=128)
    base.update(overrides)
    return EngineConfig(**base)


def _run_to_completion(engine, max_steps: int = 10_000) -> dict[str, list[int]]:
    """Step until idle; returns request_id → generated ids (and fails if it does not terminate)."""
    out: dict[str, list[int]] = {}
    for _ in range(max_steps):
        if not engine.has_unfinished():
            return out
        for o in engine.step():
            out.setdefault(o.request_id, []).extend(o.new_token_ids)
    raise AssertionError(f"engine did not finish within {max_steps} steps")


@pytest.fixture
def tiny_config():
    return _tiny_config


@pytest.fixture
def run_to_completion():
    return _run_to_completion


def _run_with_fault(engine, seconds: float, users: int, make_params, prompt_len: int = 8):
    """Keep ``users`` requests in flight for ``seconds`` with the engine's faults armed at start.

    Returns (step rows, fault rows); each step row gets ``inside``: True when the step lies within a
    recorded window, False when it does not touch one, None for a step straddling a boundary.
    """
    import time

    t0 = time.time_ns()
    engine.arm_faults(t0)
    n = 0
    while time.time_ns() - t0 < seconds * 1e9:
        while len(engine.scheduler.running) + len(engine.scheduler.waiting) < users:
            engine.add_request(
                f"r{n}", [(n * 7 + j) % 1000 + 10 for j in range(prompt_len)], make_params(n)
            )
            n += 1
        engine.step()
    engine.faults.shutdown(engine)
    faults = engine.faults.records()
    rows = engine.telemetry.steps.buffer.to_table().to_pylist()
    engine.telemetry.close()
    for r in rows:
        within = any(f["start_ns"] <= r["start_ns"] and r["end_ns"] <= f["end_ns"] for f in faults)
        touches = any(r["start_ns"] <= f["end_ns"] and f["start_ns"] <= r["end_ns"] for f in faults)
        r["inside"] = True if within else (None if touches else False)
    return rows, faults


@pytest.fixture
def run_with_fault():
    return _run_with_fault
