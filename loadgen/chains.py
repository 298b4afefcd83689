"""A closed-loop replay's users: a trace's requests grouped by who sent them (pure).

Why: an open-loop replay sends each recorded request at its recorded time. That is faithful to
arrivals, but a closed loop's users sent their next request only when the last one ended: replayed
open loop against an engine that runs a little slower than the recorded one, the same requests
pile up (ρ ≥ 1), and against a faster one they come too late. `replay_loop: closed` replays each
recorded user instead, as a chain: its first request at its recorded time, each next one when the
last one ended plus the load's think time, its requests in order (again from its first when they
run out before it stops: a faster engine gets more of them, as the recorded users would have
sent), until the user stopped in the recording (`until_s`: a step or burst that ended) or the run
ends. The locustfile's `ClosedReplayUser` runs the chains; this module only builds them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from loadgen.errors import SpecError
from loadgen.replay import ReplayEntry


@dataclass(frozen=True)
class Chain:
    """One recorded user's requests, in send order."""

    index: int  # the chain's place in order of first send (chain j runs on worker j mod N)
    user: str  # the recorded user's name
    start_s: float  # its first request's send time (seconds after the replay's start)
    until_s: float | None  # when it stopped (seconds after the replay's start); None: it did not
    entries: tuple[ReplayEntry, ...]


def chains_of(entries: Iterable[ReplayEntry]) -> list[Chain]:
    """The trace's chains, in order of first send; raises SpecError naming the first request
    without a `user` (a closed-loop replay needs to know who sent each)."""
    by_user: dict[str, list[ReplayEntry]] = {}
    for i, entry in enumerate(entries):
        if entry.user is None:
            raise SpecError(
                f"load.replay_loop closed: request {i} of the trace names no 'user' (a recorded "
                "run's open-loop requests, or a trace without users, replay open loop only)"
            )
        by_user.setdefault(entry.user, []).append(entry)
    ordered = sorted(by_user.items(), key=lambda item: min(e.t_s for e in item[1]))
    chains = []
    for index, (user, mine) in enumerate(ordered):
        mine.sort(key=lambda e: e.t_s)
        stops = [e.until_s for e in mine if e.until_s is not None]
        until_s = max(stops) if stops else None
        chains.append(Chain(index, user, mine[0].t_s, until_s, tuple(mine)))
    return chains


def for_worker(chains: list[Chain], worker: int, n_workers: int) -> list[Chain]:
    """The chains Locust process `worker` (0-based) of `n_workers` runs."""
    return [c for c in chains if c.index % max(n_workers, 1) == worker]
