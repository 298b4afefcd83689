"""`spikelens compare RUN_A RUN_B` on a real warehouse file: a slowed copy regresses, an identical
copy does not, and an unknown run id is a usage error (exit 2) naming it."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flows.compare import CompareUsageError, compare_stored_runs
from tests.support.runbuilder import SimSpec, write_run
from warehouse.ingest import ingest_run


def copy_run(src: Path, run_id: str, slow: float = 1.0) -> Path:
    """A copy of a run directory under a new id; every latency (from each request's send) × slow."""
    dst = src.parent / run_id
    shutil.copytree(src, dst)
    meta = json.loads((dst / "run.json").read_text())
    meta["run_id"] = run_id
    (dst / "run.json").write_text(json.dumps(meta))
    req = pq.read_table(dst / "requests.parquet")
    sent = req["sent_ns"].to_pylist()
    for name in ("first_token_ns", "done_ns"):
        col = [
            None if t is None or s is None else s + int((t - s) * slow)
            for s, t in zip(sent, req[name].to_pylist())
        ]
        req = req.set_column(req.schema.get_field_index(name), name, pa.array(col, req[name].type))
    pq.write_table(req, dst / "requests.parquet")
    tok = pq.read_table(dst / "tokens.parquet")
    sent_of = {r: s for r, s in zip(req["request_id"].to_pylist(), sent) if s is not None}
    arrivals = [
        t if r not in sent_of else sent_of[r] + int((t - sent_of[r]) * slow)
        for r, t in zip(tok["request_id"].to_pylist(), tok["arrival_ns"].to_pylist())
    ]
    tok = tok.set_column(
        tok.schema.get_field_index("arrival_ns"),
        "arrival_ns",
        pa.array(arrivals, tok["arrival_ns"].type),
    )
    pq.write_table(tok, dst / "tokens.parquet")
    return dst


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("state")
    runs = home / "runs"
    a = write_run(runs, SimSpec(run_id="20261201T000000Z-incident-a-0001", duration_s=30, users=6))
    for d in (
        a,
        copy_run(a, "20261201T000100Z-incident-same-0002"),
        copy_run(a, "20261201T000200Z-incident-slow-0003", slow=1.6),
    ):
        ingest_run(home / "warehouse.duckdb", d)
    return home


A, SAME, SLOW = (
    "20261201T000000Z-incident-a-0001",
    "20261201T000100Z-incident-same-0002",
    "20261201T000200Z-incident-slow-0003",
)


def test_a_slowed_copy_regresses_with_the_nightly_verdicts(home):
    result = compare_stored_runs(A, SLOW, state_home=str(home))
    verdicts = {v["metric"]: v for v in result.verdicts}
    assert (
        verdicts["itl_p50"]["verdict"] == "regressed"
        and verdicts["e2e_p50"]["verdict"] == "regressed"
    )
    assert verdicts["itl_p50"]["ci_low"] > 0 and abs(verdicts["itl_p50"]["rel_delta"] - 0.6) < 0.1
    assert verdicts["error_rate"]["verdict"] == "unchanged"
    page = result.report.read_text()
    assert result.report == home / "reports" / SLOW / f"vs-{A}" / "index.html"
    assert A in page and SLOW in page and "regressed" in page
    index = (home / "reports" / "index.html").read_text()
    assert f"{SLOW}/vs-{A}/index.html" in index


def test_identical_runs_do_not_regress(home):
    result = compare_stored_runs(A, SAME, state_home=str(home))
    assert result.regressed == []
    assert {v["verdict"] for v in result.verdicts} <= {"unchanged", "insufficient"}
    assert all(v["delta"] == 0 for v in result.verdicts if v["verdict"] == "unchanged")


def test_unknown_run_id_is_a_usage_error_that_names_it(home):
    with pytest.raises(CompareUsageError, match="unknown run id.*nope-1.*recent runs: 2026"):
        compare_stored_runs(A, "nope-1", state_home=str(home))
    with pytest.raises(CompareUsageError, match="same run"):
        compare_stored_runs(A, A, state_home=str(home))
    with pytest.raises(CompareUsageError, match="no warehouse"):
        compare_stored_runs(A, SLOW, state_home=str(home / "empty"))


def test_cli_exit_codes(home, monkeypatch):
    from flows.cli import app

    monkeypatch.setenv("SPIKELENS_HOME", str(home))
    monkeypatch.delenv("SPIKELENS_DB", raising=False)
    runner = CliRunner()
    slow = runner.invoke(app, ["compare", A, SLOW])
    assert slow.exit_code == 1, slow.output
    assert runner.invoke(app, ["compare", A, SAME]).exit_code == 0
    unknown = runner.invoke(app, ["compare", A, "nope-1"])
    assert unknown.exit_code == 2 and "unknown run id(s): nope-1" in unknown.output
