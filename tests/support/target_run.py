"""A `spikelens run` against an engine spikelens did not start (`target:`), for the vLLM tests
that drive a hand-started vLLM (test_vllm_target.py, test_agent_e2e.py)."""

import json
from pathlib import Path

import duckdb

from tests.support.spikelens_cli import run_cli


def run_against_target(tmp_path: Path, url: str, endpoint: str) -> dict:
    """`spikelens run` of a 5-s scenario whose `target:` is `url` (an engine spikelens did not
    start) over `endpoint` (chat or completions): the report, the requests that succeeded and
    failed, run.json and stdout."""
    scenario = tmp_path / f"vllm-target-{endpoint}.yaml"
    scenario.write_text(f"""\
name: vllm-target-{endpoint}
duration_s: 5
warmup_s: 1
target: {url}
endpoint: {endpoint}
workload:
  prompt_tokens: {{mean: 24, std: 4, min: 8, max: 48}}
  output_tokens: {{mean: 16, std: 4, min: 4, max: 24}}
load: {{shape: constant, users: 3}}
""")
    home = tmp_path / "state"
    proc = run_cli(["run", str(scenario)], home, timeout=400)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    report = Path(proc.stdout.strip().splitlines()[-1])
    run_id = report.parent.name
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as db:
        ok, failed = db.execute(
            "SELECT count(*) FILTER (status = 'ok'), count(*) FILTER (status = 'error') "
            "FROM requests WHERE run_id = ?",
            [run_id],
        ).fetchone()
    run_json = json.loads((home / "runs" / run_id / "run.json").read_text())
    return {"report": report, "ok": ok, "failed": failed, "run": run_json, "stdout": proc.stdout}
