"""Triton kernels vs the torch reference, under TRITON_INTERPRET=1 in one subprocess.

Why a subprocess: the interpreter must be switched on before Triton is imported, and the variable
must not leak into the rest of the test session (other tests start engines that would pick it up).
The checks themselves live in tests/engine/kernel_checks.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKS = [
    "check_auto_runs_the_penalty_kernel_then_the_reference_draw",
    "check_penalties_temperature_match_reference",
    "check_kept_sets_match_reference",
    "check_same_noise_same_ids_as_reference",
    "check_multi_block_loops_match_reference",
    "check_greedy_rows_are_argmax_after_penalties",
    "check_philox_seeded_row_reproducible_alone_and_in_batch",
    "check_philox_samples_inside_kept_set",
    "check_philox_race_follows_the_distribution",
]


def _run_checks(device: str) -> dict:
    script = Path(__file__).with_name("kernel_checks.py")
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, str(script), f"--device={device}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def interpreted_results():
    pytest.importorskip("triton")
    pytest.importorskip("numpy")  # the interpreter needs it
    return _run_checks("cpu")


@pytest.fixture(scope="module")
def native_results():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the kernels run only under the interpreter here")
    return _run_checks("cuda")


def test_every_check_is_listed(interpreted_results):
    assert sorted(interpreted_results) == sorted(CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_kernel_matches_reference(interpreted_results, check):
    error = interpreted_results[check]
    assert error is None, error


@pytest.mark.parametrize("check", CHECKS)
def test_kernel_matches_reference_on_gpu(native_results, check):
    error = native_results[check]
    assert error is None, error
