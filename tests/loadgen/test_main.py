"""`python -m loadgen summarize`: JSON summary of a run directory, clear errors on bad input."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loadgen.__main__ import main, parse_slo
from loadgen.errors import SpecError
from loadgen.metrics import SLO
from loadgen.recorder import REQUESTS_SCHEMA, TOKENS_SCHEMA

MS = 1_000_000


def write_run(run_dir):
    row = {name: None for name in REQUESTS_SCHEMA.names}
    row.update(
        request_id="a",
        phase="measure",
        status="ok",
        intended_send_ns=0,
        sent_ns=0,
        first_token_ns=100 * MS,
        done_ns=300 * MS,
        output_tokens=3,
        prompt_tokens=5,
        token_count_source="usage",
    )
    pq.write_table(
        pa.Table.from_pylist([row], schema=REQUESTS_SCHEMA), run_dir / "requests.parquet"
    )
    chunks = [
        {"request_id": "a", "index": i, "arrival_ns": t * MS, "n_tokens": 1}
        for i, t in enumerate((100, 200, 300))
    ]
    pq.write_table(pa.Table.from_pylist(chunks, schema=TOKENS_SCHEMA), run_dir / "tokens.parquet")


def test_summarize_prints_json(tmp_path, capsys):
    write_run(tmp_path)
    assert (
        main(["summarize", str(tmp_path), "--duration-s", "1", "--slo", "ttft_ms=150,tpot_ms=50"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["completed"] == 1 and out["vllm"]["itl_ms"]["mean"] == 100.0
    assert out["good_requests"] == 0  # TPOT (300 − 100) / 2 = 100 ms > 50 ms


def test_missing_files_and_bad_slo_are_errors(tmp_path, capsys):
    assert main(["summarize", str(tmp_path)]) == 2
    assert "requests.parquet: no such file" in capsys.readouterr().err
    write_run(tmp_path)
    assert main(["summarize", str(tmp_path), "--slo", "ttft=1"]) == 2
    assert "--slo: unknown key 'ttft'" in capsys.readouterr().err


def test_parse_slo():
    assert parse_slo("ttft_ms=500, e2e_ms=2000") == SLO(ttft_ms=500, e2e_ms=2000)
    with pytest.raises(SpecError, match="expected key=value"):
        parse_slo("ttft_ms")
