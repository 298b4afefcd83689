"""bench/analysis_scale.py: the JSON it prints, on a tiny run (the real cases take minutes)."""

from __future__ import annotations

import json

from bench.analysis_scale import Case, build_run, spec_of


def test_figures_of_a_tiny_run_have_every_stage(tmp_path, monkeypatch, capsys):
    import bench.analysis_scale as bench

    tiny = Case("tiny", 20.0, 4)
    monkeypatch.setattr(bench, "CASES", (tiny,))
    bench.main(["--cases", "tiny", "--runs-dir", str(tmp_path / "runs")])
    out = json.loads(capsys.readouterr().out)
    figures = out["cases"]["tiny"]
    assert figures["duration_s"] == 20.0 and figures["users"] == 4
    assert figures["rows"] == sum(figures["rows_by_table"].values()) > 0
    assert figures["spikes"] >= 1  # the GC storm
    stages = figures["stages_s"]
    for stage in (
        "query.windows",
        "query.step_timeline",
        "query.process_stack_windows",
        "step_arrays",
        "detect",
        "attribute",
        "store",
        "other",
    ):
        assert stage in stages, stage
    assert all(v >= 0 for k, v in stages.items() if k != "other")
    assert abs(sum(stages.values()) - figures["analyse_s"]) < 0.01
    for key in ("ingest_s", "analyse_s", "render_s"):
        assert figures[key] > 0
    assert figures["analyse_rows_per_s"] > 0
    assert "ratio_1h_over_10min" not in out  # only when both cases ran


def test_long_runs_are_appended_segments_with_unique_ids(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    import bench.analysis_scale as bench

    monkeypatch.setattr(bench, "SEGMENT_S", 10.0)
    case = Case("segmented", 25.0, 3)
    run_dir = build_run(tmp_path, case)
    assert run_dir.name == spec_of(case).run_id
    requests = pq.read_table(run_dir / "requests.parquet").column("request_id").to_pylist()
    assert len(requests) == len(set(requests)) > 0
    steps = pq.read_table(run_dir / "steps.parquet").column("step").to_pylist()
    assert steps == sorted(steps) and len(steps) == len(set(steps))
    assert pq.read_table(run_dir / "faults.parquet").num_rows == 1
    assert build_run(tmp_path, case) == run_dir  # built once, then reused
