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
