"""Telemetry files: columns of docs/design.md, one step row per step, repeatable atomic flush."""

import gc

import pyarrow.parquet as pq

from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.telemetry.gc_probe import GcProbe

STEP_COLUMNS = [
    "step",
    "rank",
    "start_ns",
    "end_ns",
    "batch_size",
    "prefill_tokens",
    "decode_tokens",
    "schedule_ms",
    "forward_ms",
    "penalty_ms",
    "sample_ms",
    "comm_ms",
    "kv_blocks_used",
    "kv_blocks_total",
    "preempted",
    "waiting",
]


def test_files_written_with_design_columns(tmp_path, tiny_config, run_to_completion):
    eng = LLMEngine(tiny_config(), run_dir=tmp_path)
    try:
        eng.add_request(
            "a", [1, 2, 3], SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True)
        )
        eng.add_request("b", [4, 5], SamplingParams(temperature=0.0, max_tokens=2, ignore_eos=True))
        run_to_completion(eng)
        gc.collect()
        written = {p.name for p in eng.flush()}
    finally:
        eng.telemetry.close()
    assert written == {"steps.parquet", "gc.parquet", "engine_requests.parquet", "faults.parquet"}
    steps = pq.read_table(tmp_path / "steps.parquet")
    assert steps.column_names == STEP_COLUMNS + [
        "page_faults",
        "alloc_retries",
    ]  # DESIGN's, then additive ones
    rows = steps.to_pylist()
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert (
        rows[0]["prefill_tokens"] == 5
        and rows[0]["decode_tokens"] == 0
        and rows[1]["decode_tokens"] == 2
    )
    assert all(
        r["end_ns"] >= r["start_ns"] and r["forward_ms"] > 0 and r["comm_ms"] == 0 for r in rows
    )
    assert all(
        r["page_faults"] >= 0 and r["alloc_retries"] is None for r in rows
    )  # CPU: no CUDA allocator
    assert rows[0]["kv_blocks_used"] == 2 and rows[0]["kv_blocks_total"] == 64
    assert pq.read_table(tmp_path / "gc.parquet").column_names == [
        "pid",
        "rank",
        "start_ns",
        "end_ns",
        "generation",
        "collected",
    ]
    reqs = {
        r["request_id"]: r for r in pq.read_table(tmp_path / "engine_requests.parquet").to_pylist()
    }
    assert reqs["a"]["output_tokens"] == 4 and reqs["b"]["finish_reason"] == "length"
    assert len(reqs["a"]["output_token_ids"]) == 4
    assert reqs["a"]["arrival_ns"] <= reqs["a"]["first_token_ns"] <= reqs["a"]["done_ns"]
    assert pq.read_table(tmp_path / "faults.parquet").column_names == [
        "kind",
        "cause",
        "start_ns",
        "end_ns",
        "params",
    ]


def test_context_manager_closes_and_writes(tmp_path, tiny_config, run_to_completion):
    with LLMEngine(tiny_config(), run_dir=tmp_path) as eng:
        eng.add_request("a", [1, 2], SamplingParams(temperature=0.0, max_tokens=2, ignore_eos=True))
        run_to_completion(eng)
    assert pq.read_table(tmp_path / "steps.parquet").num_rows == 2
    assert not eng.telemetry.gc.installed


def test_flush_is_repeatable_and_grows(tmp_path, tiny_config, run_to_completion):
    eng = LLMEngine(tiny_config(), run_dir=tmp_path)
    try:
        eng.add_request(
            "a", [1, 2, 3], SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True)
        )
        eng.step()
        eng.flush()
        assert pq.read_table(tmp_path / "steps.parquet").num_rows == 1
        run_to_completion(eng)
        eng.flush()
        assert pq.read_table(tmp_path / "steps.parquet").num_rows == 3
        assert not list(tmp_path.glob(".*tmp"))  # temp files renamed away
    finally:
        eng.telemetry.close()


def test_gc_probe_records_collections():
    probe = GcProbe(rank=2)
    probe.install()
    try:
        gc.collect(1)
        gc.collect(2)
    finally:
        probe.uninstall()
    rows = probe.buffer.to_table().to_pylist()
    assert [r["generation"] for r in rows][-2:] == [1, 2]
    assert all(r["rank"] == 2 and r["end_ns"] >= r["start_ns"] for r in rows)
    n = len(probe)
    gc.collect()
    assert len(probe) == n  # uninstalled: records nothing
