"""Each engine fault kind leaves the signal docs/design.md names for its cause in steps.parquet, inside its
recorded window and not outside it. Magnitudes here are the kinds' defaults unless a test says why."""

import statistics

import pytest

from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

# Timed against their fault windows, and the hog test takes a CPU: `make test-fast` runs the
# "cpu_timing" group in one xdist worker, one test at a time (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("cpu_timing")


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def split(rows):
    inside = [r for r in rows if r["inside"] is True]
    outside = [r for r in rows if r["inside"] is False]
    assert len(inside) >= 5 and len(outside) >= 5
    return inside, outside


def with_fault(tiny_config, kind, params, **config):
    """An engine whose one fault of `kind` runs from 0.4 s to 1.0 s after arming."""
    fault = {"kind": kind, "start_s": 0.4, "duration_s": 0.6, "params": params}
    return LLMEngine(tiny_config(**config), faults=[fault])


def sampled(n):
    return SamplingParams(
        temperature=1.0, frequency_penalty=0.5, max_tokens=48, ignore_eos=True, seed=n
    )


def test_slow_path_cost_lands_in_the_sampler_not_in_penalty_ms(tiny_config, run_with_fault):
    # 4 passes: a signal well above the shared box's noise in 0.6 s of steps.
    eng = with_fault(tiny_config, "penalty.slow_path", {"passes": 4}, max_num_seqs=4)
    rows, faults = run_with_fault(eng, 1.4, users=4, make_params=sampled)
    assert [f["cause"] for f in faults] == ["penalty"]
    inside, outside = split(rows)
    step = lambda r: (r["end_ns"] - r["start_ns"]) / 1e6  # noqa: E731
    grown = median(inside, "sample_ms") - median(outside, "sample_ms")
    # The recount is real work in the sampler's state update: sample_ms and the step grow ...
    assert grown > 0.5 * median(outside, "sample_ms")
    assert statistics.median(map(step, inside)) > statistics.median(map(step, outside)) + grown / 2
    # ... and the penalty stage's own timer does not carry it.
    assert median(inside, "penalty_ms") - median(outside, "penalty_ms") < 0.2 * grown
    assert eng.penalty_state.recount_passes == 0  # switched off when the window closed


def test_slow_path_leaves_outputs_unchanged(tiny_config, run_to_completion):
    def outputs(passes):
        eng = LLMEngine(tiny_config())
        eng.penalty_state.recount_passes = passes
        for i in range(3):
            eng.add_request(
                f"r{i}",
                [5, 6, 7, 5 + i],
                SamplingParams(
                    temperature=1.0,
                    frequency_penalty=1.5,
                    repetition_penalty=1.3,
                    max_tokens=20,
                    seed=i,
                    ignore_eos=True,
                ),
            )
        return run_to_completion(eng)

    assert outputs(1) == outputs(0)


def test_kv_pressure_takes_blocks_and_reports_the_real_capacity(tiny_config, run_with_fault):
    eng = LLMEngine(
        tiny_config(max_num_seqs=4, kv_blocks=64, block_size=4, max_model_len=128),
        faults=[
            {
                "kind": "memory.kv_pressure",
                "start_s": 0.4,
                "duration_s": 0.6,
                "params": {"fraction": 0.15},
            }
        ],
    )
    rows, faults = run_with_fault(eng, 1.4, users=4, make_params=sampled, prompt_len=12)
    assert [f["cause"] for f in faults] == ["memory"]
    inside, outside = split(rows)
    assert sum(r["preempted"] for r in inside) >= 1 and sum(r["preempted"] for r in outside) == 0
    # The capacity reported is the cache's real size throughout; the ballast shows as used blocks.
    assert {r["kv_blocks_total"] for r in rows} == {64}
    # 55 = 64 - int(64 * 0.15) blocks held by the ballast once it has filled.
    assert median(inside, "kv_blocks_used") >= 55 > median(outside, "kv_blocks_used")
    alloc = eng.kv.allocator
    assert alloc.num_ballast == 0 and alloc.budget == 64  # everything given back


def test_alloc_churn_page_faults_inside_only(tiny_config, run_with_fault):
    # One 40 MiB tensor: still above glibc's 32 MiB mmap threshold, lighter on the shared box.
    eng = LLMEngine(
        tiny_config(),
        faults=[
            {
                "kind": "memory.alloc_churn",
                "start_s": 0.4,
                # 1.6 s: a fresh-clone CI once ran one 930-ms step across a 0.8-s window (the
                # box's two cores shared with the other test worker), leaving 1 step inside
                "duration_s": 1.6,
                "params": {"mb_per_step": 40, "tensors": 1},
            }
        ],
    )
    rows, faults = run_with_fault(eng, 2.4, users=4, make_params=sampled)
    assert [f["cause"] for f in faults] == ["memory"]
    inside, outside = split(rows)
    assert median(inside, "page_faults") > 10 * median(outside, "page_faults") + 100


def test_kv_pressure_below_one_sequence_still_makes_progress(tiny_config, run_to_completion):
    import time

    # One block of 64 left to sequences, prompts of 3 blocks: the ballast yields what the oldest
    # request needs when nothing runs, and a lone sequence reclaims blocks as it grows.
    eng = LLMEngine(
        tiny_config(kv_blocks=64, block_size=4),
        faults=[
            {
                "kind": "memory.kv_pressure",
                "start_s": 0,
                "duration_s": 60,
                "params": {"fraction": 0.02},
            }
        ],
    )
    eng.arm_faults(time.time_ns())
    for i in range(3):
        eng.add_request(f"r{i}", [10 + i] * 12, sampled(i))
    out = run_to_completion(eng)
    assert sorted(len(v) for v in out.values()) == [48, 48, 48]
    # The pressure held: the ballast gave back only what the last lone sequence (60 tokens) took.
    assert eng.kv.allocator.num_ballast >= 64 - 60 // 4
    eng.faults.shutdown(eng)
    assert eng.kv.allocator.num_ballast == 0


def test_slow_forward_stretches_the_forward_alone(tiny_config, run_with_fault):
    eng = with_fault(tiny_config, "unexplained.slow_forward", {"factor": 3.0}, max_num_seqs=4)
    rows, faults = run_with_fault(eng, 1.4, users=4, make_params=sampled)
    assert [f["cause"] for f in faults] == ["unexplained"]
    inside, outside = split(rows)
    # the forward grows; the batch and the other stages do not move. How much it grows is not
    # asserted here: on a loaded box the steps outside the window are slowed too (fresh-clone CI
    # runs measured 4.69 and 1.09 at factor 3, 3.46 on a quiet one), so the stretch itself is
    # checked against a forward of known length below
    assert median(inside, "forward_ms") > median(outside, "forward_ms")
    for stage in ("schedule_ms", "penalty_ms"):
        assert median(inside, stage) < median(outside, stage) + 0.5 * median(outside, "forward_ms")
    assert median(inside, "batch_size") == median(outside, "batch_size")
    assert not eng.model._forward_hooks and not eng.model._forward_pre_hooks  # removed at close


def test_slow_forward_makes_a_pass_take_factor_times_as_long():
    """A module whose forward sleeps 20 ms: hooked at factor 3, each call lasts at least 60 ms
    (the hook computes until then, however the box schedules it), and far less than a runaway."""
    import time

    import torch

    from engine.faults.slow_forward import SlowForward
    from spikelens_common.fault_params import SlowForwardParams

    class Sleeper(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.02)
            return x

    engine = type("E", (), {"model": Sleeper(), "device": torch.device("cpu")})()
    fault = SlowForward(SlowForwardParams(3.0))
    fault.start(engine)
    took = []
    for _ in range(3):
        t0 = time.perf_counter()
        engine.model(torch.zeros(1))
        took.append(time.perf_counter() - t0)
    fault.stop(engine)
    assert all(0.06 <= t < 0.5 for t in took), took
    assert not engine.model._forward_hooks and not engine.model._forward_pre_hooks  # stopped


def test_slow_forward_leaves_outputs_unchanged(tiny_config, run_to_completion):
    from engine.faults.slow_forward import SlowForward
    from spikelens_common.fault_params import SlowForwardParams

    def outputs(factor):
        eng = LLMEngine(tiny_config())
        if factor:
            SlowForward(SlowForwardParams(factor)).start(eng)
        for i in range(3):
            eng.add_request(f"r{i}", [5, 6, 7, 5 + i], sampled(i))
        return run_to_completion(eng)

    assert outputs(2.0) == outputs(0)
