"""EngineProcess before start(): a clear error instead of an AttributeError on a missing child."""

from __future__ import annotations

import pytest

from engine.server.launch import EngineProcess


def test_a_process_not_started_has_no_child_to_signal(tmp_path):
    proc = EngineProcess({"engine": {}}, tmp_path)
    with pytest.raises(RuntimeError, match=r"EngineProcess is not started: call start\(\) first"):
        proc.running()
    assert proc.stop() == -1  # stopping what never started stays a no-op


def test_an_engine_that_cannot_start_fails_in_one_line_from_its_log(tmp_path):
    """A bad CONFIG.json: the server prints its one `error:` line and exits 2; the launcher's
    failure is that line, the log's path, and no traceback (spikelens_common.startup_failure)."""
    from spikelens_common.startup_failure import StartupFailure

    proc = EngineProcess({"run_id": "x", "engine": {"kv_blocks": -3}, "faults": []}, tmp_path)
    with pytest.raises(StartupFailure) as caught:
        proc.start()
    assert str(caught.value) == (
        "engine did not start: engine.kv_blocks: must be in [1, 10000000], got -3 "
        f"(log: {tmp_path / 'engine.log'})"
    )
