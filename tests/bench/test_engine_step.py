"""bench/engine_step.py: one row per (batch, sampler) with the stage means of the step trace, on
the device and sampler it names (the CPU here; scripts/gpu-check.sh runs it on CUDA)."""

from bench.engine_step import bench


def test_a_row_names_its_device_and_sampler_and_times_every_stage():
    rows = [bench("tiny", 2, 4, 1, "cpu", sampler) for sampler in ("auto", "torch")]
    assert [(r["device"], r["sampler"], r["batch"], r["steps"]) for r in rows] == [
        ("cpu", "auto", 2, 4),
        ("cpu", "torch", 2, 4),
    ]
    for row in rows:
        assert 0 < row["step_ms_p50"] <= row["step_ms_p99"]
        assert row["forward_ms"] > 0 and row["sample_ms"] > 0
