"""bench/serve.py's pure parts: figures from hand-built requests/tokens tables (numbers worked
out in comments), medians over rounds, the ratio and overhead maths, and the argument checks.
No engine is started here."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.serve import (
    Arm,
    _parser,
    arm_figures,
    check_args,
    engine_ratios,
    median_figures,
    omp_cores,
    overhead_pct,
    ratio,
    vllm_env_hook,
    workload,
)
from tests.support.sample_tables import MS, requests_table, tokens_table

SERVE = Path(__file__).resolve().parents[2] / "bench" / "serve.py"


def req(rid, sent, first, done, out, status="ok", phase="measure"):
    return {
        "request_id": rid,
        "intended_send_ns": sent * MS,
        "sent_ns": sent * MS,
        "first_token_ns": None if first is None else first * MS,
        "done_ns": done * MS,
        "output_tokens": out,
        "prompt_tokens": 8,
        "status": status,
        "phase": phase,
        "token_count_source": "usage",
    }


def test_arm_figures_from_a_requests_table():
    # a: sent 0, chunks 20, 30, 40, 50 → TTFT 20, gaps 10, 10, 10
    # b: sent 0, chunks 40, 60, 80, 100 → TTFT 40, gaps 20, 20, 20
    # f: an error (no tokens); w: warm-up, left out
    requests = requests_table(
        [
            req("a", 0, 20, 50, 4),
            req("b", 0, 40, 100, 4),
            req("f", 0, None, 5, 0, status="error"),
            req("w", -900, -800, -700, 4, phase="warmup"),
        ]
    )
    tokens = tokens_table(
        {"a": [20, 30, 40, 50], "b": [40, 60, 80, 100], "w": [-800, -790, -780, -770]}
    )
    fig = arm_figures(requests, tokens, duration_s=2.0)
    assert fig["completed"] == 2 and fig["failed"] == 1 and fig["cancelled"] == 0
    assert fig["tokens_per_s"] == pytest.approx(8 / 2.0)  # 4 + 4 output tokens over 2 s
    assert fig["output_tokens_mean"] == 4
    # gaps pooled: 10, 10, 10, 20, 20, 20 → p50 15 (linear), p99 = 20
    assert fig["itl_p50_ms"] == pytest.approx(15.0)
    assert fig["itl_p99_ms"] == pytest.approx(20.0)
    # TTFTs 20 and 40: p50 30, p99 20 + 0.99 * 20
    assert fig["ttft_p50_ms"] == pytest.approx(30.0)
    assert fig["ttft_p99_ms"] == pytest.approx(39.8)


def test_arm_figures_of_a_run_without_completions_are_nulls():
    requests = requests_table([req("f", 0, None, 5, 0, status="error")])
    fig = arm_figures(requests, tokens_table({}), duration_s=1.0)
    assert fig["completed"] == 0 and fig["tokens_per_s"] == 0
    assert fig["itl_p50_ms"] is None and fig["output_tokens_mean"] is None


def test_median_over_rounds_skips_missing_figures():
    runs = [
        {"tokens_per_s": 100.0, "itl_p50_ms": 5.0, "itl_p99_ms": None},
        {"tokens_per_s": 300.0, "itl_p50_ms": 7.0, "itl_p99_ms": 20.0},
        {"tokens_per_s": 200.0, "itl_p50_ms": 6.0, "itl_p99_ms": 40.0},
    ]
    median = median_figures(runs)
    assert median["tokens_per_s"] == 200.0
    assert median["itl_p50_ms"] == 6.0
    assert median["itl_p99_ms"] == 30.0  # median of the two rounds that have it
    assert median["ttft_p50_ms"] is None  # no round has it


def test_ratios_and_overhead():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None and ratio(1.0, 0) is None and ratio(1.0, None) is None
    ours = {"tokens_per_s": 960.0, "itl_p50_ms": 8.0, "itl_p99_ms": 20.0}
    theirs = {"tokens_per_s": 1000.0, "itl_p50_ms": 10.0, "itl_p99_ms": 40.0}
    r = engine_ratios(ours, theirs)
    assert r["tokens_per_s"] == pytest.approx(0.96)
    assert r["itl_p99_ms"] == pytest.approx(0.5)
    assert r["ttft_p50_ms"] is None  # missing on both sides
    with_ = {"tokens_per_s": 970.0, "itl_p50_ms": 10.3, "itl_p99_ms": 40.0}
    o = overhead_pct(with_, theirs)
    assert o["itl_p50_ms"] == pytest.approx(3.0)
    assert o["itl_p99_ms"] == pytest.approx(0.0)
    assert o["tokens_per_s"] == pytest.approx(-3.0)


@pytest.fixture
def ckpt(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    return tmp_path


def parse(ckpt, *flags):
    return _parser().parse_args(
        ["--checkpoint", str(ckpt), "--vllm-python", sys.executable, *flags]
    )


def test_defaults_pass_the_checks_and_fix_every_length(ckpt):
    args = parse(ckpt)
    check_args(args)
    assert (args.users, args.output_tokens, args.max_num_seqs) == (16, 64, 16)
    assert workload(args) == {
        "prompt_tokens": 32,
        "output_tokens": 64,
        "sampling": {"temperature": 1.0},
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--users", "0"], r"--users must be an integer in \[1, 256\], got 0"),
        (["--repeats", "21"], r"--repeats must be an integer in \[1, 20\]"),
        (["--duration-s", "0.5"], r"--duration-s must be in \[1, 600\]"),
        (["--warmup-s", "-1"], r"--warmup-s must be in \[0, 120\]"),
        (["--prime-s", "200"], r"--prime-s must be in \[0, 120\], got 200"),
        (["--dtype", "float16"], r"--dtype must be float32 or bfloat16"),
        (["--max-model-len", "1024"], r"--max-model-len must be in \[96, 512\]"),
        (["--output-tokens", "500"], r"--prompt-tokens \+ --output-tokens must be <= 512.*got 532"),
        (["--max-num-batched-tokens", "256"], r"--max-num-batched-tokens must be >= "),
    ],
)
def test_bad_arguments_name_the_flag_and_range(ckpt, flags, message):
    with pytest.raises(ValueError, match=message):
        check_args(parse(ckpt, *flags))


def test_server_cpus_leave_one_for_the_load_generator_and_set_vllms_cores(ckpt):
    every = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    with pytest.raises(ValueError, match="--server-cpus must be distinct CPU ids among .* leaving"):
        check_args(parse(ckpt, "--server-cpus", every, "--threads", str(len(every.split(",")))))
    with pytest.raises(SystemExit):  # argparse: not a list of ids
        parse(ckpt, "--server-cpus", "zero")
    if len(os.sched_getaffinity(0)) >= 2:
        cpu = str(min(os.sched_getaffinity(0)))
        with pytest.raises(ValueError, match=r"--threads must equal the number of --server-cpus"):
            check_args(parse(ckpt, "--server-cpus", cpu, "--threads", "2"))
        args = parse(ckpt, "--server-cpus", cpu)
        check_args(args)
        assert omp_cores(args.threads, None, args.server_cpus) == cpu


def test_missing_checkpoint_and_interpreter_are_named(tmp_path, ckpt):
    with pytest.raises(ValueError, match=r"--checkpoint .*no config.json.*make checkpoint"):
        check_args(parse(tmp_path / "none"))
    args = _parser().parse_args(
        ["--checkpoint", str(ckpt), "--vllm-python", str(tmp_path / "no-python")]
    )
    with pytest.raises(ValueError, match=r"--vllm-python .*make setup-vllm"):
        check_args(args)


def test_the_script_rejects_bad_flags_before_starting_anything(ckpt):
    out = subprocess.run(
        [sys.executable, str(SERVE), "--checkpoint", str(ckpt), "--users", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "--users must be an integer in [1, 256], got 0" in out.stderr
    assert out.stdout == ""


class _Server:
    """What Arm needs of a server: `running()` (the root process)."""

    def __init__(self, proc):
        self.proc = proc

    def running(self):
        return self.proc


def wait_for_states(arm, done, timeout_s=5.0):
    """True once `done(states of the arm's processes)` holds (within timeout_s)."""
    deadline = time.monotonic() + timeout_s
    while not done({p.status() for p in arm.procs()}):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_an_idle_arm_is_frozen_with_its_children_and_thawed_for_its_turn():
    # a root with a child, as vLLM's API server has EngineCore and a worker
    proc = subprocess.Popen(["bash", "-c", "sleep 30 & wait"])
    try:
        arm = Arm("vllm", _Server(proc))
        deadline = time.monotonic() + 5
        while len(arm.procs()) < 2 and time.monotonic() < deadline:  # bash forks its child
            time.sleep(0.02)
        assert len(arm.procs()) == 2
        arm.freeze()  # SIGSTOP takes effect when the kernel next schedules the process
        assert wait_for_states(arm, lambda states: states == {psutil.STATUS_STOPPED})
        arm.thaw()
        assert wait_for_states(arm, lambda states: psutil.STATUS_STOPPED not in states)
        assert arm.cpu_s() >= 0.0
    finally:
        for p in psutil.Process(proc.pid).children():
            p.kill()
        proc.kill()
        proc.wait()


def test_vllm_computes_on_as_many_cores_as_the_engine_has_threads(tmp_path):
    assert omp_cores(1) == "0" and omp_cores(2) == "0-1"
    assert omp_cores(1, "auto") == "auto"  # vLLM's default: every core
    plain = vllm_env_hook("0", None)({"A": "1"})
    assert plain == {"A": "1", "VLLM_CPU_OMP_THREADS_BIND": "0"}
    hooked = vllm_env_hook("0", tmp_path)({})
    # the GC hook a run gives vLLM: its site dir first on PYTHONPATH, gc files under collect/
    assert hooked["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert hooked["SPIKELENS_COLLECT_DIR"] == str((tmp_path / "collect").resolve())
    assert hooked["PYTHONPATH"].split(os.pathsep)[0].endswith("collectors/site")
