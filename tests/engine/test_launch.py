"""EngineProcess before start(): a clear error instead of an AttributeError on a missing child."""

from __future__ import annotations

import pytest

from engine.server.launch import EngineProcess


def test_a_process_not_started_has_no_child_to_signal(tmp_path):
    proc = EngineProcess({"engine": {}}, tmp_path)
    with pytest.raises(RuntimeError, match=r"EngineProcess is not started: call start\(\) first"):
        proc.running()
    assert proc.stop() == -1  # stopping what never started stays a no-op
