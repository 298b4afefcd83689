"""EngineRunConfig (CONFIG.json of ``python -m engine serve``): what it accepts and how it refuses the rest."""

import json
import subprocess
import sys

import pytest

from engine.server.serve import EngineRunConfig


def _write(tmp_path, data) -> str:
    path = tmp_path / "config.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_loads_engine_faults_and_server_blocks(tmp_path):
    cfg = EngineRunConfig.load(
        _write(
            tmp_path,
            {
                "run_id": "r1",
                "engine": {"model": "tiny", "max_num_seqs": 4},
                "faults": [
                    {"kind": "memory.gc_storm", "start_s": 1, "duration_s": 2, "params": {}}
                ],
                "server": {"max_waiting": 8},
            },
        )
    )
    assert (cfg.run_id, cfg.engine.model, cfg.engine.max_num_seqs, cfg.server.max_waiting) == (
        "r1",
        "tiny",
        4,
        8,
    )
    assert cfg.faults[0]["kind"] == "memory.gc_storm"


@pytest.mark.parametrize(
    "data,needle",
    [
        ({"engine": {}, "scenario": {}}, "'scenario'"),
        ({"engine": {"modle": "tiny"}}, "'modle'"),
        ({"engine": {}, "faults": {"kind": "x"}}, "faults"),
        ({"engine": {}, "server": {"max_wait": 1}}, "'max_wait'"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_config_names_the_problem(tmp_path, data, needle):
    with pytest.raises(ValueError, match=needle):
        EngineRunConfig.load(_write(tmp_path, data))


def test_cli_reports_a_bad_config_with_exit_code_2(tmp_path):
    path = _write(tmp_path, {"engine": {"model": "tiny", "tp": 0}})
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "serve", "--config", path, "--run-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "engine.tp" in proc.stderr
