import pytest

from engine.kv_cache import BlockAllocator, OutOfBlocks, blocks_needed


def test_allocate_free_reuse():
    a = BlockAllocator(4)
    x = a.allocate(3)
    assert sorted(x) == [0, 1, 2] and a.num_used == 3 and a.num_available == 1
    with pytest.raises(OutOfBlocks):
        a.allocate(2)
    a.free(x[:2])
    y = a.allocate(3)
    assert len(set(y) | {x[2]}) == 4 and a.num_available == 0


def test_budget_shrinks_availability_without_touching_held_blocks():
    a = BlockAllocator(8)
    held = a.allocate(4)
    a.set_budget(5)
    assert a.budget == 5 and a.num_available == 1 and not a.can_allocate(2)
    a.set_budget(3)
    assert a.num_available == 0 and a.num_used == 4  # scheduler must preempt to get under budget
    a.free(held)
    a.set_budget(None)
    assert a.num_available == 8
    with pytest.raises(ValueError, match="kv budget"):
        a.set_budget(9)


def test_blocks_needed():
    assert [blocks_needed(n, 4) for n in (1, 4, 5, 8, 9)] == [1, 1, 2, 2, 3]


def test_ballast_takes_only_free_blocks_and_counts_as_used():
    a = BlockAllocator(10)
    held = a.allocate(4)
    assert a.hold_ballast(8) == 6  # only the free blocks: nothing is taken from a sequence
    assert (a.num_used, a.num_available, a.budget) == (10, 0, 10)
    a.free(held)
    assert a.hold_ballast(8) == 8 and a.num_used == 8  # it grows as blocks are freed
    with pytest.raises(OutOfBlocks):
        a.allocate(3)
    assert len(a.allocate(3, ignore_budget=True)) == 3  # a lone sequence reclaims ballast blocks
    assert a.num_ballast == 7
    a.release_ballast()
    assert (a.num_ballast, a.num_used) == (0, 3)
    with pytest.raises(ValueError, match="ballast target"):
        a.hold_ballast(-1)
