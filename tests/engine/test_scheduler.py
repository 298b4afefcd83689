from engine.kv_cache import BlockAllocator
from engine.sampling_params import SamplingParams
from engine.scheduler import Scheduler
from engine.sequence import Sequence, SequenceStatus


def seq(rid, n_prompt):
    return Sequence(rid, list(range(1, n_prompt + 1)), SamplingParams(max_tokens=100), arrival_ns=0)


def fake_step(batch):
    """What the engine does after a forward: everything fed is computed, one token is appended."""
    for s in batch.sequences:
        s.num_computed = s.num_tokens
        s.output_ids.append(7)


def test_new_requests_join_between_steps():
    sch = Scheduler(BlockAllocator(32), block_size=4, max_num_seqs=4, token_budget=64)
    a = seq("a", 5)
    sch.add(a)
    b1 = sch.schedule()
    assert b1.prefill == [a] and b1.decode == []
    fake_step(b1)
    b = seq("b", 3)
    sch.add(b)
    b2 = sch.schedule()
    assert b2.decode == [a] and b2.prefill == [b]  # b prefills in the same step a decodes
    assert b2.sequences == [a, b] and b2.num_prefill_tokens == 3


def test_max_num_seqs_limits_running():
    sch = Scheduler(BlockAllocator(32), block_size=4, max_num_seqs=2, token_budget=64)
    seqs = [seq(str(i), 2) for i in range(3)]
    for s in seqs:
        sch.add(s)
    b = sch.schedule()
    assert b.prefill == seqs[:2] and list(sch.waiting) == [seqs[2]]
    fake_step(b)
    sch.finish(seqs[0], "length", 1)
    assert seqs[0].block_ids == [] and seqs[0].slot is None
    b = sch.schedule()
    assert b.decode == [seqs[1]] and b.prefill == [seqs[2]]


def test_token_budget_defers_prefill():
    sch = Scheduler(BlockAllocator(32), block_size=4, max_num_seqs=4, token_budget=8)
    a, b = seq("a", 6), seq("b", 6)
    sch.add(a)
    sch.add(b)
    assert sch.schedule().prefill == [a]  # 6 + 6 > 8


def test_preemption_by_recompute_when_blocks_run_out():
    sch = Scheduler(BlockAllocator(3), block_size=2, max_num_seqs=4, token_budget=64)
    a, b = seq("a", 2), seq("b", 2)  # one block each
    sch.add(a)
    sch.add(b)
    fake_step(sch.schedule())  # both now 3 tokens: need 2 blocks each = 4 > 3
    batch = sch.schedule()
    assert batch.preempted == 1 and batch.decode == [a] and batch.prefill == []
    assert b.status is SequenceStatus.WAITING and b.block_ids == [] and b.num_computed == 0
    assert b.output_ids == [7]  # kept: recomputed from prompt + output later
    assert list(sch.waiting) == [b] and sch.total_preemptions == 1
    sch.finish(a, "stop", 1)
    again = sch.schedule()
    assert again.prefill == [b] and b.is_prefill and len(b.block_ids) == 2


def test_shrunk_budget_preempts_until_under_it():
    alloc = BlockAllocator(8)
    sch = Scheduler(alloc, block_size=2, max_num_seqs=4, token_budget=64)
    seqs = [seq(str(i), 4) for i in range(3)]  # 2 blocks each
    for s in seqs:
        sch.add(s)
    fake_step(sch.schedule())
    alloc.set_budget(4)
    batch = sch.schedule()
    assert batch.preempted >= 1 and alloc.num_used <= 4
