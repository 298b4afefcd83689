"""The churn thread of `memory.gc_storm` in a process spikelens cannot change: it churns in its
role's windows and collects once at the window's end, except when automatic GC is off (confirm's
gc_off arm), where its garbage stays a leak rather than becoming one forced pause."""

import gc
import json
import time
import types

import pytest

from injectors.process_churn import _run_fault_schedule


def _schedule(tmp_path, role: str):
    path = tmp_path / "schedule.json"
    fault = {
        "kind": "memory.gc_storm",
        "start_s": 0.0,
        "duration_s": 0.1,
        "params": {
            "role": role,
            "objects_per_tick": 10,
            "live_ticks": 2,
            "tick_s": 0.01,
            "ballast_objects": 0,
        },
    }
    path.write_text(json.dumps({"t0_ns": time.time_ns(), "faults": [fault]}))
    return str(path)


ROLES = types.SimpleNamespace(read_cmdline=lambda: [], role_of=lambda argv, is_root, word: "core")


@pytest.mark.parametrize("automatic_gc, collections", [(True, 1), (False, 0)])
def test_the_window_ends_with_one_collection_only_when_automatic_gc_is_on(
    tmp_path, monkeypatch, automatic_gc, collections
):
    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(a) or 0)
    was_enabled = gc.isenabled()
    gc.enable() if automatic_gc else gc.disable()
    try:
        _run_fault_schedule(_schedule(tmp_path, "core"), ROLES)
    finally:
        gc.enable() if was_enabled else gc.disable()
    assert len(calls) == collections


def test_a_window_for_another_role_is_left_alone(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(a) or 0)
    started = time.monotonic()
    _run_fault_schedule(_schedule(tmp_path, "worker"), ROLES)
    assert calls == [] and time.monotonic() - started < 0.1
