"""Causes kept apart from their consequences: what a rising signal may and may not stand for.

A signal that rose in a spike is evidence for a cause only when the spike's cause could not have
raised it as a side effect. Three general facts about serving systems decide that here, for every
fault kind alike (none of them names a fault kind):

1. **Work-proportional series are read per unit of work** (SERIES_ROLES). Counters that count work
   (requests, tokens, prompt tokens, a per-request histogram's `_count`) rise with any load: they
   are demand, i.e. `load`, whatever their name says. Counters that are a by-product of work
   (Python GC collections and objects collected: CPython collects generation 0 every N
   allocations, and every request allocates) rise with load too; they are read per token
   generated (the engine's own token counter, scraped beside them; else the tokens the client
   received), so only more garbage *per unit of work* speaks for `memory`. Time series are causes
   (GC pause time, collective wait, run-queue wait): a GC pause that grew is memory however much
   work there was — those series keep their own cause.
   Where the GC hook measured the engine processes' pauses, the GC counts do not vote at all
   (`GC_PAUSES_MEASURED_NOTE`): a collection costs latency only through its pause, and the pause
   is then measured directly — more objects collected per token with no longer pauses is no cost.
2. **CPU time is conserved inside the engine's process tree** (`cpu_given_to_siblings`). A process
   that waited longer for a CPU lost that CPU to someone. When the engine's other processes (the
   collectors record every process of the tree with its role) gained as much CPU time in the
   same windows, the CPU stayed inside the engine — a sibling collecting garbage or recomputing
   preempted sequences — and the wait is a consequence of that sibling's cause, not `host`. Only
   the part of the wait no process of the tree gained is CPU lost outside the engine (`host`).
3. **Communication needs collectives** (`has_collectives`). An engine with one rank (tensor-,
   pipeline- and data-parallel size 1, no collective stage in its step trace) runs no
   all-reduce: a process's time in `collective_wait`-like code, or PCIe traffic, is then a wait
   on a sibling process (vLLM's Worker waiting on its EngineCore) or host↔device copies, and
   inherits the sibling's cause through the sibling's own signals. It is shown, it does not vote.
4. **A queue needs demand**. Requests in a queue = arrival rate × time in the system (Little's
   law): running and waiting requests, queue time and the KV occupancy they hold grow when more
   work arrives *or* when the same work is served more slowly. Where the load generator counted
   what it asked (rca.work_model), a queue that grew while the work asked did not is the
   consequence of whatever slowed the service: it does not vote `load` when a series of another
   cause rose (rca.metric_rank.queue_without_demand). With
   nothing else moved, the queue still stands for load (a closed loop at capacity sends no more
   requests per second however many users wait). The work asked is what the client pushed
   (`intensity`: a closed loop's users in flight, an open loop's schedule), not what it managed
   to send, read over the windows the spike's requests queued behind (`sojourn_masks`: a
   burst's queue outlives the burst). The stage decomposition of spikelens' engine asks the same
   question of its queue and of its batch (`work_asked`, rca.attribute._queue_cause,
   rca.cause_shares step 3).

Pure: dicts and numpy arrays in, numbers and booleans out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from rca.stepcost import mean_or_zero

# CPython's GC counts on /metrics (prometheus_client's python_gc_* series)
GC_COUNTS = r"gc_objects_collected|gc_collections|gc_objects_uncollectable"
# (pattern on the series name, role, why). First match wins. Roles:
#   symptom   the engine's own latency: restates the spike, never votes (a server-side time)
#   demand    counts work asked of the engine: votes `load`
#   per_work  a by-product that scales with work: ranked per token streamed, keeps its cause
# Any other series is a cause series and votes for the cause its name maps to.
SERIES_ROLES: tuple[tuple[str, str, str], ...] = (
    (
        r"time_to_first_token|inter_token_latency|e2e_request_latency|time_per_output_token|"
        r"http_request_duration",
        "symptom",
        "the engine's own latency: the spike as the server saw it",
    ),
    (
        r"request_(prefill|decode|inference)_time",
        "symptom",
        "a request's time in a phase of its own latency (TTFT, decode, both): where the time "
        "went, whatever slowed it",
    ),
    (
        GC_COUNTS,
        "per_work",
        "CPython collects every N allocations and every request allocates: scales with work",
    ),
    (
        r"^[^{]*(request|response)[^{]*_count(\{|$)",
        "demand",
        "a per-request (or per-response) histogram's count counts requests, whatever the "
        "histogram measures",
    ),
    (
        r"prompt_tokens|generation_tokens|iteration_tokens|prefix_cache_queries|"
        r"request_success|requests_total|arrival|"
        r"_tokens(_total|_sum|_count|_bucket)?(\{|$)",
        "demand",
        "requests and tokens asked of the engine: the work itself (any count of tokens processed, "
        "e.g. vLLM's request_prefill_kv_computed_tokens: the prompt tokens whose KV was computed)",
    ),
)
# Where a by-product series is read per unit of work, its name says so.
PER_TOKEN = " per token"


def series_role(name: str) -> tuple[str, str]:
    """(role, why) of a series by its name (see SERIES_ROLES); ('cause', '') when none matches."""
    for pattern, role, why in SERIES_ROLES:
        if re.search(pattern, name):
            return role, why
    return "cause", ""


# The engine's own count of the tokens it generated (vLLM's name; any engine's `*_tokens_total`
# of outputs): scraped at the same instants as the by-products it divides, so the ratio has no
# edge effects from two clocks. Without it, the tokens the client received per window.
WORK_COUNTERS = r"generation_tokens_total|output_tokens_total"


def work_series(series: dict[str, np.ndarray], client_tokens: np.ndarray) -> np.ndarray:
    """The work done per window: the engine's own generated-token rate when scraped (summed over
    its label sets), else the tokens the client received."""
    own = [v for k, v in sorted(series.items()) if re.search(WORK_COUNTERS, k.split("{")[0])]
    if own:
        return np.sum(own, axis=0)
    return client_tokens


def per_work(series: np.ndarray, work: np.ndarray) -> np.ndarray:
    """series / work per window (NaN where no work was streamed): a by-product per unit of work."""
    work = np.asarray(work, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.nan_to_num(work) > 0, series / np.where(work > 0, work, 1.0), np.nan)


# --- 2. CPU conservation in the engine's process tree -------------------------------------------


@dataclass(frozen=True)
class CpuWait:
    """One process's extra run-queue wait in a spike and where that CPU went."""

    wait_rise: float  # ms/s, spike − baseline mean
    siblings_gain: float  # ms/s the tree's other processes gained (net, over all of them)
    gainer: str  # "Role (pid N)" of the sibling that gained most ('' when none gained)

    @property
    def outside(self) -> float:
        """ms/s of the extra wait that no process of the engine's tree gained: lost outside it."""
        return max(0.0, self.wait_rise - max(0.0, self.siblings_gain))

    @property
    def outside_fraction(self) -> float:
        """outside / wait_rise in [0, 1] (0 when the wait did not rise)."""
        return (
            float(np.clip(self.outside / self.wait_rise, 0.0, 1.0)) if self.wait_rise > 0 else 0.0
        )

    def note(self) -> str:
        """Where the CPU went, in words (for evidence text)."""
        if self.wait_rise <= 0:
            return ""
        if self.outside_fraction >= 1.0:
            return (
                "no other process of the engine gained CPU time: it went outside the engine (host)"
            )
        return (
            f"{self.gainer} gained {self.siblings_gain:.0f} ms/s of CPU in the same windows: "
            f"{1 - self.outside_fraction:.0%} of the wait went to a sibling in the engine's own "
            "process tree (a consequence of what that sibling did, not host)"
        )


def cpu_given_to_siblings(
    cpu: dict[int, tuple[str, np.ndarray]],
    pid: int,
    wait_rise: float,
    in_spike: np.ndarray,
    in_base: np.ndarray,
) -> CpuWait:
    """Where the `wait_rise` ms/s of process `pid` went: `cpu` = per-pid CPU ms/s of every process
    of the engine's tree (rca.process_evidence.per_pid of query process_cpu_windows). The siblings'
    gain is their net change (gains minus losses), so that noise across many idle processes does
    not add up to a phantom gain, and hogs outside the tree (which slow every sibling) give none."""
    gains: dict[int, float] = {}
    for other, (_, values) in cpu.items():
        if other == pid:
            continue
        s, b = values[in_spike], values[in_base]
        if np.isfinite(s).any() and np.isfinite(b).any():
            gains[other] = mean_or_zero(s) - mean_or_zero(b)
    top = max(gains, key=lambda p: gains[p], default=None)
    gainer = f"{cpu[top][0]} (pid {top})" if top is not None and gains[top] > 0 else ""
    return CpuWait(wait_rise, float(sum(gains.values())), gainer)


# --- 3. collectives -----------------------------------------------------------------------------

# Engine settings that put more than one rank behind a step (spikelens' engine: tp; vLLM:
# tensor/pipeline/data_parallel_size, also as command-line flags in extra_args).
_PARALLEL_KEYS = (
    "tp",
    "pp",
    "dp",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
)
_PARALLEL_FLAGS = re.compile(
    r"--(?:tensor|pipeline|data)-parallel-size[= ](\d+)|(?:^|\s)-(?:tp|pp|dp)[= ](\d+)"
)


def has_collectives(engine: dict | str | None, steps: dict[str, np.ndarray] | None) -> bool | None:
    """Does the engine run collectives? True when a step trace has several ranks or a collective
    stage, or its settings (run.json's engine block) put more than one rank behind a step; False
    when the trace or the settings are known and say one rank; None when nothing is known (a
    `target:` spikelens only drives, without a step trace)."""
    steps = steps or {}
    traced = len(steps.get("t_s", ())) > 0
    if traced:
        ranks, comm = steps.get("n_ranks"), steps.get("comm_ms")
        if ranks is not None and (np.nan_to_num(ranks) > 1).any():
            return True
        if comm is not None and (np.nan_to_num(comm) > 0).any():
            return True
    if isinstance(engine, str):
        try:
            engine = json.loads(engine)
        except ValueError:
            engine = None
    if not isinstance(engine, dict) or not engine:
        return False if traced else None  # one rank, no collective stage in the trace
    sizes = [int(engine[k]) for k in _PARALLEL_KEYS if isinstance(engine.get(k), int)]
    extra = engine.get("extra_args") or ()
    flags = " ".join(str(a) for a in extra) if isinstance(extra, (list, tuple)) else str(extra)
    sizes += [int(a or b) for a, b in _PARALLEL_FLAGS.findall(flags)]
    # settings known: an unset size is its default, one rank
    return any(s > 1 for s in sizes)


# --- 4. a queue needs demand -------------------------------------------------------------------

# Half a request a window on top of the relative rise: at 2 requests/s, one more request in a
# 2-window spike is Poisson noise, not more work.
ARRIVALS_SLACK = 0.5


@dataclass(frozen=True)
class WorkAsked:
    """The work the client asked of the engine in a spike against its baseline windows."""

    more_requests: bool  # the load's intensity rose by the load rise (see `intensity`)
    outputs_grew: bool  # finished requests' mean output length grew by the inflation factor
    prompts_grew: bool  # requests sent with prompts longer on average by the same factor
    # how many times the work asked grew: the product of the ratios (spike / baseline) of those
    # that rose above (intensity, output length, prompt length); 1.0 where none did
    factor: float = 1.0


@dataclass(frozen=True)
class Workload:
    """What the load generator sent and got back, per window [n_windows] (query `windows`)."""

    arrivals: np.ndarray  # requests sent
    prompt_tokens: np.ndarray  # mean prompt length of the requests sent (NaN: none sent)
    output_tokens: np.ndarray  # mean output length of the requests finished (NaN: none)
    scheduled: np.ndarray | None = None  # open-loop requests by their scheduled send time
    in_flight: np.ndarray | None = None  # requests open at the client (query `client_windows`)


def intensity(
    arrivals: np.ndarray, scheduled: np.ndarray | None, in_flight: np.ndarray | None
) -> tuple[str, np.ndarray, float]:
    """(loop, series, slack): the series that counts how hard the client pushed, whatever the
    engine made of it, and the slack a rise must clear beyond the load rise.
    - open loop (requests scheduled): the schedule, with ARRIVALS_SLACK for Poisson noise. Its
      sends are not it: a client that stalled sends its backlog late, at once;
    - closed loop: its requests in flight, i.e. its users, each waiting for its answer (with no
      think time a slower engine leaves the count as it was). Its sends are not it: a slower
      engine gets fewer of them, and a backlog flushed gets more;
    - neither counted (a run from before these columns, a replay without client health): the
      requests sent, with ARRIVALS_SLACK."""
    if scheduled is not None and np.nan_to_num(scheduled).sum() > 0:
        return "open", np.nan_to_num(scheduled), ARRIVALS_SLACK
    if in_flight is not None and np.nan_to_num(in_flight).sum() > 0:
        return "closed", np.asarray(in_flight, dtype=np.float64), 0.0
    return "sent", np.asarray(arrivals, dtype=np.float64), ARRIVALS_SLACK


def carried(loop: str, base: np.ndarray) -> float:
    """The intensity the baseline windows carried, with calm latency: for a closed loop the most
    users any of them held. Its count is exact (users waiting for their answers), and a calm
    window with as many users shows that many make no spike: a step in users well before or
    after a spike is not its cause, though it lifts the spike above the baseline's mean. An open
    loop's schedule and the sends are counts of a random process, whose maximum is its noise:
    their mean."""
    values = np.asarray(base, dtype=np.float64)
    values = values[np.isfinite(values)]
    if loop == "closed" and len(values):
        return float(values.max())
    return mean_or_zero(values)


def sojourn_masks(
    masks: tuple[np.ndarray, np.ndarray], latency_ms: float, window_s: float, least: int
) -> tuple[np.ndarray, np.ndarray]:
    """(spike, baseline) window masks [n_windows] for the work asked: the work a spike's requests
    queued behind arrived within their time in the system (Little's law), so a burst that ended
    as its queue peaked still counts. The spike's span reaches back `latency_ms` (its peak:
    `lookback_windows`) and those windows leave the baseline (their work built the queue, it
    was not calm). Unchanged when the baseline would keep fewer than `least` windows."""
    in_spike, in_base = masks
    reach, first = lookback_windows(latency_ms, window_s), np.flatnonzero(in_spike)
    if reach <= 0 or not len(first):
        return in_spike, in_base
    idx = np.arange(len(in_spike))
    span = in_spike | ((idx >= first[0] - reach) & (idx < first[0]))
    base = in_base & ~span
    if base.sum() < least:
        return in_spike, in_base
    return span, base


def lookback_windows(latency_ms: float, window_s: float) -> int:
    """How many whole windows a request `latency_ms` in the system reaches back (to the nearest:
    a latency well under a window reaches none)."""
    if not (np.isfinite(latency_ms) and latency_ms > 0 and window_s > 0):
        return 0
    return int(np.floor(latency_ms / 1000.0 / window_s + 0.5))


def work_asked(
    load: Workload,
    masks: tuple[np.ndarray, np.ndarray],
    sent: tuple[np.ndarray, np.ndarray],
    load_rise: float,
    inflation: float,
) -> WorkAsked:
    """Did more work arrive in the spike? The load's intensity (`intensity`) rose by `load_rise`
    (plus its slack) over what the baseline windows carried (`carried`), or requests grew by
    `inflation`: their mean output length (finished requests) or their mean prompt length
    (requests sent). Series counted by send time (intensity, prompts) are read over `sent`
    (`sojourn_masks`: the work the spike's requests queued behind); the outputs, counted as
    requests finish, over the spike's own windows (`masks`): a finish already lags its send."""
    loop, pushed, slack = intensity(load.arrivals, load.scheduled, load.in_flight)
    spike, base = mean_or_zero(pushed[sent[0]]), carried(loop, pushed[sent[1]])

    def grew(values: np.ndarray, over: tuple[np.ndarray, np.ndarray]) -> tuple[bool, float]:
        """(the mean beat `inflation` × its baseline, spike / baseline where it did and the
        baseline counted any, else 1.0)."""
        values = np.asarray(values, dtype=np.float64)
        now, before = mean_or_zero(values[over[0]]), mean_or_zero(values[over[1]])
        rose = now > inflation * before
        return rose, now / before if rose and before > 0 else 1.0

    more = spike > (1 + load_rise) * base + slack
    outputs, prompts = grew(load.output_tokens, masks), grew(load.prompt_tokens, sent)
    more_ratio = spike / base if more and base > 0 else 1.0
    return WorkAsked(
        more_requests=more,
        outputs_grew=outputs[0],
        prompts_grew=prompts[0],
        factor=more_ratio * outputs[1] * prompts[1],
    )


GC_PAUSES_MEASURED_NOTE = (
    "the GC hook measured the engine processes' pauses themselves: a collection costs latency "
    "only through its pause, so a count of collections or objects is shown and does not vote"
)
NO_COLLECTIVES_NOTE = (
    "the engine runs one rank (no tensor/pipeline/data parallelism, no collective stage): "
    "there is no collective to wait for, so this is a wait on a sibling process (or host↔device "
    "copies) and it does not vote — the sibling's own signals speak for its cause"
)
