"""bench/fault_signal.py: a kind's step signals inside its window against outside, on the device
it names (the CPU here; scripts/gpu-check.sh runs it on CUDA)."""

import pytest

from bench.fault_signal import FaultRun, run_kind

# Timed against a fault window: `make test-fast` runs the "cpu_timing" group one test at a time.
pytestmark = pytest.mark.xdist_group("cpu_timing")


def test_the_slow_forward_row_shows_the_forward_stretched_inside_its_window():
    run = FaultRun(model="tiny", users=4, duration=1.6, start=0.5, window=0.6)
    row = run_kind("unexplained.slow_forward", run)
    assert (row["kind"], row["device"], row["tp"], row["params"]) == (
        "unexplained.slow_forward",
        "cpu",
        1,
        {"factor": 2.0},
    )
    inside, outside = row["rank0_inside"], row["rank0_outside"]
    assert inside["steps"] >= 5 and outside["steps"] >= 5
    # factor 2: the forward about doubles; the sampler's stage does not follow it
    assert inside["forward_ms_p50"] > 1.5 * outside["forward_ms_p50"]
    assert inside["sample_ms_p50"] < outside["sample_ms_p50"] + outside["forward_ms_p50"]
