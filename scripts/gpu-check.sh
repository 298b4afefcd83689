#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one pass (docs/engine-sampling.md, "On a GPU"):
#   1. the Triton penalty and sampling kernels, natively, against the torch reference
#      (tests/engine/kernel_checks.py, the same checks the CPU runs under the interpreter);
#   2. the GPU side of the unit tests (kernels, NVML sampler) through pytest;
#   3. kernel time, GB/s against the NVML DRAM peak, and speed-up over the torch reference
#      (bench/kernels.py), with the NVML sampler recording the GPU meanwhile;
#   4. our engine's decode step on CUDA (bench/engine_step.py) and its tokens/s against
#      transformers' generate on the same GPU and weights (bench/decode.py);
#   5. the single-rank engine fault kinds on CUDA: each one's step signals inside its window vs
#      outside (bench/fault_signal.py);
#   6. whether vLLM's CUDA build imports and sees the GPU.
# Each step's output lands in OUT_DIR and its exit code in OUT_DIR/steps.jsonl; a failed step
# does not stop the others. Run from the repository root:
#   bash scripts/gpu-check.sh [OUT_DIR]        (PYTHON=... picks the interpreter)
set -u
out=${1:-${OUT:-/tmp/gpu-check}}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
unset TRITON_INTERPRET

step() {  # step NAME LIMIT_S OUTFILE CMD...: run CMD with its stdout in OUTFILE, record rc and time
    local name=$1 limit=$2 file=$3 t0 rc
    shift 3
    t0=$(date +%s)
    echo "== $name"
    timeout "$limit" "$@" >"$out/$file" 2>"$out/$name.err"
    rc=$?
    printf '{"step": "%s", "rc": %d, "wall_s": %d}\n' "$name" "$rc" "$(($(date +%s) - t0))" |
        tee -a "$out/steps.jsonl"
    tail -c 1500 "$out/$name.err"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
        --format=csv
    "$py" -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.version.cuda, "triton", triton.__version__, "gpu", torch.cuda.is_available())'
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

step kernel_checks 90 kernel_checks.json "$py" tests/engine/kernel_checks.py --device=cuda
step pytest_gpu 150 pytest_gpu.txt "$py" -m pytest -q -p no:cacheprovider \
    tests/engine/test_kernels.py tests/collectors/test_nvml_sampler.py
tail -n 5 "$out/pytest_gpu.txt"

"$py" -m collectors.nvml_sampler --run-dir "$out/nvml" --interval-ms 100 >/dev/null 2>&1 &
sampler=$!
step kernels_bench 150 kernels.json "$py" bench/kernels.py --iters 20
step engine_step 60 engine_step.jsonl "$py" bench/engine_step.py --device cuda \
    --model small --batch 1 8 32 128 --steps 100 --sampler auto triton
step decode_vs_hf 120 decode.json "$py" bench/decode.py --device cuda --preset small \
    --concurrency 1 32 --repeats 3
kill -TERM "$sampler" 2>/dev/null
wait "$sampler"
step nvml_summary 60 nvml_summary.json "$py" -c '
import json, sys, pyarrow.parquet as pq
status = json.load(open(sys.argv[1] + "/nvml_status.json"))
try:
    t = pq.read_table(sys.argv[1] + "/nvml.parquet").to_pylist()
except FileNotFoundError:
    t = []
def peak(k):
    vals = [r[k] for r in t if r.get(k) is not None]
    return max(vals) if vals else None
print(json.dumps({"status": status, "rows": len(t), "columns": sorted(t[0]) if t else [],
    "peak": {k: peak(k) for k in ("util_gpu", "util_mem", "power_w", "mem_used", "sm_clock",
    "temp_c", "pcie_tx", "pcie_rx")}, "first": t[0] if t else None}, default=str, indent=1))' "$out/nvml"

step faults_cuda 120 faults.jsonl "$py" bench/fault_signal.py --device cuda --duration 6 \
    --kinds unexplained.slow_forward memory.alloc_churn memory.kv_pressure penalty.slow_path

step vllm_cuda 30 vllm.txt "$py" -c 'import torch, vllm
print("vllm", vllm.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())'
cat "$out/vllm.txt"
