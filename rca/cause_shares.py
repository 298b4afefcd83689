"""Share out a spike's latency excess over causes, and leave uncovered what nobody measured.

1. client and network take the growth of client − server time (rca.outside_causes), first:
   it happened outside the engine whatever the engine did — but never the part of the excess the
   server's own times saw: the rise of the server's socket-side p99 (TTFT/E2E), else the step
   slowdown's coverage (ITL: the engine's step is the server-side inter-token time). So a late
   client is named only while the server-side times stay flat; with an engine stall beside it,
   the stall keeps its share. Where the server timed its own sockets, the engine causes below
   cover at most the rise of the server's own p99.
2. host takes the part of the spike's step time its engine process spent waiting for a CPU
   beyond baseline, out of the step components (contention slows every stage alike, so the
   time first comes out of the unexplained residual, then out of the others in proportion).
3. A batch that grew while the work asked did not (`demand_grew` False: no more requests sent,
   no longer requests) is a backlog: requests in the system = arrival rate × time in it, so the
   batch grew because something held requests longer. Its cost (the step's `load` component:
   forward and penalty time of the extra sequences, scheduling a longer queue) then goes to what
   held them: the queue's cause when one was measured (loops, preemptions), else the other step
   components above the noise floor in proportion, the unexplained residual among them (a
   forward slowdown nothing accounts for held them too; its part stays uncovered). With nothing
   else in the step it stays `load` (rca.consequences, fact 4: with nothing else moved, a queue
   stands for load).
4. The step slowdown covers `coverage` of the excess, shared over the step components; a
   component below `min_component_rel` of the baseline step is noise and stays uncovered, and
   so does the unexplained residual (forward growth nothing accounts for, time outside timers).
5. The rest of the excess goes to the cause that made the queue grow (loops, preemptions,
   arrivals: each also puts other work between a running request's tokens). Where that cause is
   more work asked and the service slowed too, the two grew it together: a queue grows with the
   utilisation, arrivals × service time, so load keeps log(work factor) / log(work factor ×
   service slowdown) of it and the step's other causes the rest (`_queue_owners`). Else, where the
   latency accumulates a queue (TTFT, E2E), to the step causes in proportion if the step
   slowdown itself was marked (>= `min_step_rise`): slower steps make requests wait; the
   residual's part (above the floor) stays uncovered, as in step 4. An ITL gap
   is one request's wait between two of its tokens; what its rise holds beyond the slowdown of
   the steps is no queue the steps built, so without a queue cause it stays uncovered. Except
   for the CPU: an engine that lost CPU outside itself (host, step 2) waits in every thread, also
   between its steps and in its writes, where no step timer sees it. Where the server's own
   times saw the rest (its socket stamps, its chunk writes) and the host's part of the step is
   above the floor, the rest is host's.
The uncovered share is the 'unexplained' share; shares sum to 1. The verdict is the largest
named share, or 'unexplained' when the named shares together cover less than
`min_explained_share`. Pure arithmetic on dicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rca.config import CAUSES, AttributeConfig
from rca.outside_causes import OutsideExcess

NAMED = tuple(c for c in CAUSES if c != "unexplained")


@dataclass(frozen=True)
class ShareInputs:
    components_ms: dict[str, float]  # cause → excess ms per step (rca.stepcost)
    coverage: float  # step slowdown / latency rise, 0..1
    step_marked: bool  # the step slowdown beat min_step_rise
    queue_cause: str | None  # what made the queue grow, if anything measured did
    base_step_ms: float  # mean baseline step
    spike_step_ms: float  # mean spike step
    outside: OutsideExcess
    queues: bool = True  # the latency accumulates waiting (TTFT, E2E), unlike one ITL gap
    # the load generator asked more work in the spike (rca.consequences.work_asked); None: not
    # counted (a run observed through monitoring), so the batch's growth keeps standing for load
    demand_grew: bool | None = None
    # how many times the work asked grew in the spike (rca.consequences.WorkAsked.factor), for
    # a queue whose cause is load; 1.0: not counted, the queue stays load's whole
    load_factor: float = 1.0


def _with_host(components: dict[str, float], host_ms: float) -> dict[str, float]:
    """Move host_ms out of the step components: out of the residual first, then in proportion."""
    comps = {c: max(0.0, v) for c, v in components.items()}
    host_ms = min(host_ms, sum(comps.values()))
    from_residual = min(host_ms, comps.get("unexplained", 0.0))
    comps["unexplained"] = comps.get("unexplained", 0.0) - from_residual
    rest = host_ms - from_residual
    others = sum(v for c, v in comps.items() if c != "unexplained")
    if rest > 0 and others > 0:
        for c in comps:
            if c != "unexplained":
                comps[c] -= rest * comps[c] / others
    comps["host"] = comps.get("host", 0.0) + host_ms
    return comps


def _slowed_service(components: dict[str, float], floor_ms: float) -> dict[str, float]:
    """The step components that slowed the service (all but the batch's growth, `load`), each
    at or above the noise floor `floor_ms`; the unexplained residual among them."""
    return {c: v for c, v in components.items() if c != "load" and v > 0 and v >= floor_ms}


def _backlog_to_its_cause(
    components: dict[str, float], queue_cause: str | None, floor_ms: float
) -> dict[str, float]:
    """Move the `load` component (the batch's growth) to what held the requests (docstring,
    step 3): the queue's cause if it is not load, else the other components at or above
    `floor_ms` in proportion (the residual's part moves to the residual); unchanged when there is
    none."""
    comps = dict(components)
    backlog = comps.get("load", 0.0)
    if backlog <= 0:
        return comps
    if queue_cause is not None and queue_cause != "load":
        targets = {queue_cause: 1.0}
    else:
        targets = _slowed_service(comps, floor_ms)
    total = sum(targets.values())
    if total <= 0:
        return comps
    comps["load"] = 0.0
    for c, v in targets.items():
        comps[c] = comps.get(c, 0.0) + backlog * v / total
    return comps


def _queue_owners(
    inputs: ShareInputs, components: dict[str, float], floor_ms: float
) -> dict[str, float]:
    """cause → its part of the queue grown by `inputs.queue_cause` (docstring, step 5). A queue
    grows with the engine's utilisation, arrivals × service time: more work asked (load, by its
    factor) and slower service (the step's non-load components at or above `floor_ms`, by
    (base + their sum) / base) multiply. Each factor gets its log's part of the product's log:
    the symmetric split of a product, the same whichever is counted first. The unexplained
    residual's part stays uncovered (not returned)."""
    cause = inputs.queue_cause
    if cause != "load" or inputs.load_factor <= 1.0 or inputs.base_step_ms <= 0:
        return {cause: 1.0} if cause is not None else {}
    service = _slowed_service(components, floor_ms)
    if not service:
        return {"load": 1.0}
    slowed_ms = sum(service.values())
    slower = 1.0 + slowed_ms / inputs.base_step_ms
    load_part = math.log(inputs.load_factor) / math.log(inputs.load_factor * slower)
    owners = {"load": load_part}
    for c, v in service.items():
        if c != "unexplained":
            owners[c] = (1.0 - load_part) * v / slowed_ms
    return owners


def cause_shares(inputs: ShareInputs, config: AttributeConfig) -> dict[str, float]:
    """cause → share of the latency excess, 'unexplained' = the uncovered rest (see docstring)."""
    shares = {c: 0.0 for c in CAUSES}
    # What the server's own times saw of the excess, the outside causes cannot have: without the
    # server's socket times (ITL), the engine's step slowdown is the server-side time.
    seen = inputs.outside.server_share
    outside_room = max(0.0, 1.0 - (inputs.coverage if seen is None else seen))
    shares["client"] = min(inputs.outside.client_share, outside_room)
    shares["network"] = min(inputs.outside.network_share, outside_room - shares["client"])
    room = max(0.0, 1.0 - shares["client"] - shares["network"])
    if inputs.outside.server_share is not None:  # the engine covers at most what its server saw
        room = min(room, inputs.outside.server_share)
    comps = _with_host(
        inputs.components_ms, inputs.outside.host_step_fraction * inputs.spike_step_ms
    )
    floor = config.min_component_rel * inputs.base_step_ms
    if inputs.demand_grew is False:
        comps = _backlog_to_its_cause(comps, inputs.queue_cause, max(floor, 1e-9))
    total = sum(comps.values())
    kept = {c: v for c, v in comps.items() if c != "unexplained" and v > 0 and v >= floor}
    coverage = min(inputs.coverage, room) if total > 1e-9 else 0.0
    for c, v in kept.items():
        shares[c] += coverage * v / total
    queue = room - coverage
    if inputs.queue_cause is not None:
        for c, part in _queue_owners(inputs, comps, floor).items():
            shares[c] += queue * part
    elif inputs.queues and inputs.step_marked and kept:
        residual = comps.get("unexplained", 0.0)
        kept_total = sum(kept.values()) + (residual if residual >= floor else 0.0)
        for c, v in kept.items():
            shares[c] += queue * v / kept_total
    elif "host" in kept and inputs.outside.server_share is not None:
        shares["host"] += queue  # CPU lost between the steps too (docstring, step 5)
    shares["unexplained"] = max(0.0, 1.0 - sum(shares[c] for c in NAMED))
    return shares


def verdict(shares: dict[str, float], config: AttributeConfig) -> str:
    """The largest named share, or 'unexplained' when the named ones cover too little."""
    covered = sum(shares[c] for c in NAMED)
    if covered < config.min_explained_share:
        return "unexplained"
    return max(NAMED, key=lambda c: shares[c])
