"""Triton penalty and sampling kernels vs the torch reference on a GPU: time and achieved GB/s.

For B in {1, 16, 64, 256} and V in {32000, 128000, 152064} (Llama-3 and Qwen-2 sized vocabularies),
with a 512-id history per row and penalties + top-k 50 + top-p 0.9 + min-p 0.05 on every row:
- ``penalties``: kernel (a), fused penalties + temperature, vs the torch reference stage (sparse
  gather/scatter at the history ids, as the engine runs it) and the dense torch formula. Bytes moved
  by the kernel: read logits (4) + counts (4) + prompt bit (1), write (4) = 13 B per element.
- ``sampling``: kernel (b), threshold search + race, vs the torch reference (temperature, min-p,
  sort-based top-k/top-p, softmax, exponential race). ``min_bytes`` = one fp32 read of [B, V]
  (the unavoidable DRAM traffic); the kernel streams each row 19 times, mostly from L2.
Times are medians of CUDA-event timings after warm-up. ``peak_gbps`` is the device's DRAM peak from
NVML (2 x max memory clock x bus width), null when NVML cannot tell.

Without a GPU it prints {"gpu": false, ...} and exits 0. ``--smoke`` runs tiny shapes on the CPU
under the Triton interpreter (to check the script, not to time anything).

Run: ``python bench/kernels.py [--batch 1 16 64 256] [--vocab 32000 128000 152064] [--iters 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def dram_peak_gbps() -> float | None:
    """Theoretical DRAM bandwidth of GPU 0 from NVML, or None when NVML does not report it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            clock_mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
            bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
            return 2 * clock_mhz * 1e6 * bus_bits / 8 / 1e9
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML missing or the query unsupported: report null, never a guess
        return None


def timed_ms(fn, iters: int, device) -> float:
    """Median milliseconds of `fn` over `iters` runs (CUDA events on a GPU, wall clock on the CPU)."""
    import torch

    fn()
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _penalised_batch(batch: int, vocab: int, history: int, device, gen):
    """Sampling metadata of `batch` rows with every penalty and filter on, over `history`
    random tokens each (half prompt, half output)."""
    import torch

    from engine.sampling import PenaltyState, SamplingMetadata
    from engine.sampling_params import SamplingParams

    state = PenaltyState(batch, vocab, device)
    for slot in range(batch):
        ids = torch.randint(0, vocab, (history,), generator=gen)
        state.assign(slot, ids[: history // 2], ids[history // 2 :])
    params = [
        SamplingParams(
            temperature=0.8,
            top_k=50,
            top_p=0.9,
            min_p=0.05,
            repetition_penalty=1.1,
            frequency_penalty=0.3,
            presence_penalty=0.2,
        )
    ] * batch
    return SamplingMetadata.build(params, list(range(batch)), state)


def bench_shape(
    batch: int, vocab: int, history: int, iters: int, device, peak: float | None
) -> dict:
    import torch

    from engine.kernels.penalties import fused_penalties_temperature
    from engine.kernels.sample import row_seeds
    from engine.kernels.topk_topp_sample import filtered_sample
    from engine.sampling.penalties import apply_penalties
    from engine.sampling.sampler import reference_penalties, reference_sample

    gen = torch.Generator(device="cpu").manual_seed(0)
    meta = _penalised_batch(batch, vocab, history, device, gen)
    logits = (torch.randn(batch, vocab, generator=gen) * 3).to(device)
    scaled = fused_penalties_temperature(logits, meta)
    seeds = row_seeds(meta)
    elements = batch * vocab

    kernel_pen = timed_ms(lambda: fused_penalties_temperature(logits, meta), iters, device)
    torch_pen = timed_ms(lambda: reference_penalties(logits, meta), iters, device)
    torch_pen_dense = timed_ms(
        lambda: apply_penalties(
            logits,
            meta.prompt_mask(),
            meta.output_counts(),
            meta.repetition_penalty,
            meta.frequency_penalty,
            meta.presence_penalty,
        ),
        iters,
        device,
    )
    kernel_sample = timed_ms(lambda: filtered_sample(scaled, meta, seeds), iters, device)
    penalized = reference_penalties(logits, meta)
    torch_sample = timed_ms(lambda: reference_sample(penalized, meta), iters, device)

    def gbps(nbytes: float, ms: float) -> float:
        return round(nbytes / (ms * 1e-3) / 1e9, 1)

    pen_bytes = 13 * elements
    return {
        "batch": batch,
        "vocab": vocab,
        "penalties": {
            "kernel_ms": round(kernel_pen, 4),
            "torch_sparse_ms": round(torch_pen, 4),
            "torch_dense_ms": round(torch_pen_dense, 4),
            "bytes": pen_bytes,
            "kernel_gbps": gbps(pen_bytes, kernel_pen),
            "kernel_fraction_of_peak": round(gbps(pen_bytes, kernel_pen) / peak, 3)
            if peak
            else None,
            "speedup_vs_torch_sparse": round(torch_pen / kernel_pen, 2),
            "speedup_vs_torch_dense": round(torch_pen_dense / kernel_pen, 2),
        },
        "sampling": {
            "kernel_ms": round(kernel_sample, 4),
            "torch_ms": round(torch_sample, 4),
            "min_bytes": 4 * elements,
            "kernel_gbps_min_bytes": gbps(4 * elements, kernel_sample),
            "kernel_gbps_streamed": gbps(19 * 4 * elements, kernel_sample),
            "speedup_vs_torch": round(torch_sample / kernel_sample, 2),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--vocab", type=int, nargs="+", default=[32000, 128000, 152064])
    parser.add_argument("--history", type=int, default=512)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument(
        "--smoke", action="store_true", help="tiny shapes on the CPU under the Triton interpreter"
    )
    args = parser.parse_args()
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported (below)
    import torch

    if not args.smoke and not torch.cuda.is_available():
        print(
            json.dumps(
                {
                    "bench": "kernels",
                    "gpu": False,
                    "reason": "no CUDA device (torch.cuda.is_available() is False); "
                    "the kernels are checked on the CPU by tests/engine/test_kernels.py",
                }
            )
        )
        return 0
    from flows.requirements import require

    require("bench/kernels.py")  # Triton missing: say how to install it before any shape runs
    device = torch.device("cpu" if args.smoke else "cuda")
    batches, vocabs, iters = ([2], [512], 2) if args.smoke else (args.batch, args.vocab, args.iters)
    peak = None if args.smoke else dram_peak_gbps()
    results = [
        bench_shape(b, v, min(args.history, v), iters, device, peak)
        for v in vocabs
        for b in batches
    ]
    print(
        json.dumps(
            {
                "bench": "kernels",
                "gpu": not args.smoke,
                "smoke": args.smoke,
                "device": torch.cuda.get_device_name(0) if not args.smoke else "cpu (interpreter)",
                "peak_gbps": peak,
                "torch": torch.__version__,
                "results": results,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
