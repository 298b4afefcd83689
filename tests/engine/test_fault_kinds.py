"""Each engine fault kind leaves the signal docs/design.md names for its cause in steps.parquet, inside its
recorded window and not outside it. Magnitudes here are the kinds' defaults unless a test says why."""

import statistics

from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def split(rows):
    inside = [r for r in rows if r["inside"] is True]
    outside = [r for r in rows if r["inside"] is False]
    assert len(inside) >= 5 and len(outside) >= 5
    return inside, outside


def sampled(n):
    return SamplingParams(
        temperature=1.0, frequency_penalty=0.5, max_tokens=48, ignore_eos=True, seed=n
    )


def test_penalty_slow_path_raises_penalty_ms_and_keeps_outputs(tiny_config, run_with_fault):
    eng = LLMEngine(
        tiny_config(max_num_seqs=4),
        faults=[{"kind": "penalty.slow_path", "start_s": 0.4, "duration_s": 0.6}],
    )
    rows, faults = run_with_fault(eng, 1.4, users=4, make_params=sampled)
    assert [f["cause"] for f in faults] == ["penalty"]
    inside, outside = split(rows)
    # Signal: the penalty stage, and only it, grows (a ratio of medians with a wide margin).
    assert median(inside, "penalty_ms") > 5 * median(outside, "penalty_ms")
    assert eng.penalty_slow_path is None  # hook removed when the window closed


def test_slow_path_counts_equal_the_persistent_ones(tiny_config, run_to_completion):
    from engine.faults.penalty_slow_path import recount_histories

    eng = LLMEngine(tiny_config())
    eng.add_request(
        "a", [5, 6, 7, 5], SamplingParams(temperature=1.0, max_tokens=20, seed=3, ignore_eos=True)
    )
    for _ in range(10):
        eng.step()
    seq = eng.scheduler.running[0]
    before = (
        eng.penalty_state.output_counts[seq.slot].clone(),
        eng.penalty_state.prompt_mask[seq.slot].clone(),
    )
    recount_histories(eng, [seq])
    assert bool((eng.penalty_state.output_counts[seq.slot] == before[0]).all())
    assert bool((eng.penalty_state.prompt_mask[seq.slot] == before[1]).all())


def test_kv_pressure_preempts_inside_only(tiny_config, run_with_fault):
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
    assert {r["kv_blocks_total"] for r in outside} == {64} and {
        r["kv_blocks_total"] for r in inside
    } == {9}
    assert (
        max(r["kv_blocks_used"] for r in outside) > 9
    )  # normally the batch holds more than the shrunk budget
    assert eng.kv.allocator.budget == 64  # restored


def test_alloc_churn_page_faults_inside_only(tiny_config, run_with_fault):
    # One 40 MiB tensor: still above glibc's 32 MiB mmap threshold, lighter on the shared box.
    eng = LLMEngine(
        tiny_config(),
        faults=[
            {
                "kind": "memory.alloc_churn",
                "start_s": 0.4,
                "duration_s": 0.8,
                "params": {"mb_per_step": 40, "tensors": 1},
            }
        ],
    )
    rows, faults = run_with_fault(eng, 1.6, users=4, make_params=sampled)
    assert [f["cause"] for f in faults] == ["memory"]
    inside, outside = split(rows)
    assert median(inside, "page_faults") > 10 * median(outside, "page_faults") + 100
