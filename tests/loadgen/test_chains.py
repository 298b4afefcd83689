import pytest

from loadgen.chains import chains_of, for_worker
from loadgen.errors import SpecError
from loadgen.replay import ReplayEntry


def entry(t_s, user, until_s=None, tokens=8):
    return ReplayEntry(t_s, prompt_tokens=tokens, user=user, until_s=until_s)


def test_chains_group_a_users_requests_in_send_order_and_order_users_by_first_send():
    trace = [
        entry(0.5, "b", until_s=9.0, tokens=1),
        entry(0.2, "a", tokens=2),
        entry(1.5, "b", until_s=9.0, tokens=3),
        entry(0.9, "a", tokens=4),
        entry(3.0, "c", until_s=4.0, tokens=5),
    ]
    chains = chains_of(trace)
    assert [(c.index, c.user, c.start_s, c.until_s) for c in chains] == [
        (0, "a", 0.2, None),
        (1, "b", 0.5, 9.0),
        (2, "c", 3.0, 4.0),
    ]
    assert [e.prompt_tokens for e in chains[0].entries] == [2, 4]
    assert [e.prompt_tokens for e in chains[1].entries] == [1, 3]
    assert [c.user for c in for_worker(chains, 0, 2)] == ["a", "c"]
    assert [c.user for c in for_worker(chains, 1, 2)] == ["b"]
    assert [c.user for c in for_worker(chains, 0, 1)] == ["a", "b", "c"]


def test_a_closed_replay_of_requests_without_users_names_the_first_one():
    with pytest.raises(SpecError, match="request 1 of the trace names no 'user'"):
        chains_of([entry(0.0, "a"), ReplayEntry(0.5, prompt_tokens=8)])
