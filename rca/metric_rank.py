"""Attribution by metric ranking, for targets without step traces (an engine spikelens did not
start: vLLM, SGLang, TGI), from their Prometheus /metrics samples and NVML, and the client − server
time where the engine reported its own.

Each series (metric name + labels; counters — names ending in _total, _count or _sum — as
per-second rates of their last value per window) is scored like BARO: robust z = (value − median)
/ scale of the baseline windows, the largest z over the spike's windows. The scale is the IQR,
floored (ScoreConfig) by a share of the baseline's level and by the series' resolution — one event
per window for a counter that counts whole events, one unit for a whole-number gauge, a share of
the capacity for an occupancy fraction, else a share of the series' own magnitude — so a counter
that was 0 before the spike and counted one GC collection during it, or a gauge that never moved,
cannot score an infinite (or 1e9) z. Series are mapped to causes by their names (CAUSE_PATTERNS,
first match wins; vLLM's names are the reference) — occupancy fractions (KV cache, GPU memory)
count as memory only near capacity (≥ 0.9), else as load. The five highest-scoring series with
z > min_z vote with their z: a cause's share = its votes / all votes (no vote at all →
unexplained). Where a load generator counted what it asked
(rca.work_model), load first takes what that work predicts of the excess and the votes divide
the rest; the series that count work are in the prediction and do not vote again.
Confidence of a cause = its best series' z / (z + 3).
The collectors' per-process series (rca.process_evidence.process_series: stack-region shares,
GC ms/s, run-queue wait ms/s of every process of the engine's tree) are ranked beside them with
the same z, their scale floored also by the rise that counts as marked (RISE_FLOOR / MIN_Z, so a
rise below that floor cannot vote), each with the cause its region or signal speaks for; their
evidence names the process and the region. A process's run-queue wait does not vote when its own
CPU time rose with it (its own threads may be competing: rca.process_evidence.did_own_work).
The hypervisor's steal on the engine's CPUs (`rank_steal`, /proc/stat) is ranked the same way and
votes host, as does a steal series on /metrics (node_exporter's
`node_cpu_seconds_total{mode="steal"}` in an observed run).
What keeps the vote about causes rather than their consequences (rca.consequences):
  - series are classified by role (SERIES_ROLES): the engine's own latency series (TTFT, ITL,
    E2E, time per output token) restate the spike and do not vote; series that count work
    (requests, tokens, prompt tokens, a per-request histogram's count) vote load; by-products
    of work (GC collections, objects collected) are ranked per token streamed;
  - a run-queue wait votes for host only with the part of it no other process of the engine's
    tree gained as CPU time (its z scaled by that part);
  - on an engine known to run one rank, communication series (collective_wait, PCIe) do not vote;
  - when sequences were preempted in the spike (a preemption series with z >= PREEMPTED_MIN_Z),
    the queueing series that rose with it (queue time, waiting requests) and the KV occupancy are
    what preemption does — re-queue — so they vote for memory, and their evidence says that
    /metrics cannot split them from the cost the added work would have had without preemption.
    Series that count work (prompt tokens) are never read so: they are the work asked.
  - when requests waited while fewer ran than in the baseline (kv_held_windows), the engine had
    batch slots free and did not admit: vLLM admits a request only when the KV cache has blocks
    for it, so each sequence needed more of the cache than before and the queue's state (queue
    time, waiting requests, KV occupancy) votes for memory (read_kv_held_queue). More requests
    of the same size fill the batch first, so a burst keeps its queue as load; and a window in
    which the cache held less than its baseline median is not counted: the cache had room.
  - where the load generator counted what it asked (rca.work_model), the series that count work
    (requests, prompt tokens) are in load's predicted share and do not vote again; the queue's
    state (running and waiting requests, queue time, an occupancy below capacity) grows with
    more work or with slower service alike (Little's law): when the work asked did not rise and
    a series of another cause rose beyond MIN_Z, the queue is that cause's consequence and does
    not vote (queue_without_demand).

Outside the engine (`outside_shares`, rca.outside_causes): where the server timed the spike's
metric — vLLM's own queue + first-token time per request (--enable-per-request-metrics, macro
`transit_pairs`) — the growth of client − server time is the client's (up to the rise of its
own lag) and the network's, taken before the votes divide the rest. vLLM's times start after its
API server read the request, so the gap counts only while that front end did nothing different,
no engine process paused longer for GC and the host kept its CPUs.
Without a server time of the metric (ITL: vLLM reports one mean gap per request), another metric
that spiked in the same windows and that the server timed stands for it (its TTFT:
rca.outside_causes.server_timed_metric); with none, a late client is named only while no series
voted.

Pure: rows of warehouse queries `metric_windows` / `nvml_windows` in, an Attribution out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from rca.attribute import (
    Attribution,
    CauseShare,
    RunSignals,
    attribute_spike,
    window_masks,
)
from rca.config import CAUSES, AttributeConfig
from rca.consequences import (
    GC_COUNTS,
    GC_PAUSES_MEASURED_NOTE,
    NO_COLLECTIVES_NOTE,
    PER_TOKEN,
    SERIES_ROLES,
    cpu_given_to_siblings,
    has_collectives,
    per_work,
    series_role,
    sojourn_masks,
    work_series,
)
from rca.detect import Spike
from rca.evidence import Evidence, EvidenceBuilder, pearson
from rca.outside_causes import (
    OutsideExcess,
    OutsideInputs,
    host_contended,
    outside_excess,
    reported_gap_inside,
    server_timed_metric,
)
from rca.process_evidence import (
    RISE_FLOOR,
    ProcessSignals,
    describe_rise,
    did_own_work,
    own_cpu,
    process_series,
)
from rca.stepcost import mean_or_zero
from rca.window_columns import by_window, window_series
from rca.work_model import WorkPrediction, WorkSeries, predict_work
from warehouse.observed_windows import is_observed

CAUSE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("memory", r"cache_usage|kv_|preempt|gpu_memory|mem_fraction|memory|swap|gc_"),
    ("communication", r"nccl|all_?reduce|collective|comm|pcie|nvlink"),
    ("penalty", r"penalt|sampl|repetit"),
    ("host", r"steal"),  # CPU time a hypervisor gave another guest (node_exporter's mode)
    (
        "load",
        r"requests_running|requests_waiting|waiting|running|queue|arrival|request_success|"
        r"prompt_tokens|prefix_cache_queries|num_requests|open_fds",
    ),
)
# The engine's own latency series (and its HTTP server's), and a request's time in each phase of
# it: the spike itself, not a cause of it. Every `symptom` pattern of SERIES_ROLES, in one.
SYMPTOMS = "|".join(f"(?:{p})" for p, role, _ in SERIES_ROLES if role == "symptom")
# `spikelens agent`'s series (collectors/agent_metrics.py): the warehouse reads them back as the
# collectors' per-process rows (macros agent_samples, process_cpu_samples), ranked with
# rank_process_series like a load test's, so they are not ranked a second time as metrics.
AGENT_SERIES = "spikelens_agent_"
# Series that count preemptions themselves (not a per-request histogram's _count or _bucket).
PREEMPTION = r"preemptions?(_total|_sum)?$"
# A preemption series counts as "sequences were preempted" from this z: one preemption a window
# more than the baseline (the counter's resolution) already means the KV cache ran out, a rarer
# event than a queue or token rate moving by as much.
PREEMPTED_MIN_Z = 1.0
# What preempting sequences does to the queue and the prefill work (re-queued, recomputed), and
# the KV occupancy that made it preempt (vLLM preempts only when no block is free, so an occupancy
# whose window mean stays under NEAR_CAPACITY was still full when it mattered).
# (Series that count work — prompt tokens, prefix-cache queries, iteration tokens — are demand and
# stay load: rca.consequences.)
PREEMPTION_EFFECTS = r"queue|waiting|prefill|cache_usage"
# The engine's running and waiting requests (vLLM's gauges): the batch and the queue before it.
RUNNING = r"num_requests_running"
WAITING = r"num_requests_waiting"
# The KV cache's occupancy as vLLM reports it (a fraction; the older name says gpu).
KV_USAGE = r"(kv|gpu)_cache_usage_perc"
# Windows of a spike in which requests waited while fewer ran than in the baseline, from which
# the queue counts as held by the KV cache (read_kv_held_queue): one such window can be the
# instant between a request's finish and the next step's admission caught by a scrape; two are
# not that (none came up in any run without a KV fault in three held-out suites). A CI run of
# a 10x burst on vLLM (2026-12-07) had three such windows and was named memory: the windows now
# also need the cache at least as full as in the baseline (kv_held_windows).
KV_HELD_MIN_WINDOWS = 2
# Occupancy fractions (KV cache, GPU memory) grow with the number of sequences too: they point at
# memory only when they reach near capacity, else at load.
OCCUPANCY = r"cache_usage|mem_fraction"
NEAR_CAPACITY = 0.9
# The queue's state: requests in it and the KV they hold, which grow when more work arrives or
# when the same work is served more slowly (rca.consequences, "a queue needs demand"). A server's
# open file descriptors (prometheus_client's process_open_fds) are mostly its connections, one
# per request in the system, so they are the queue too.
QUEUE_STATE = r"running|waiting|queue|num_requests|open_fds|" + OCCUPANCY
COUNTER_SUFFIXES = ("_total", "_count", "_sum")
TOP_K = 5
MIN_Z = 3.0
# Two causes whose vote shares differ by less than this are tied: series floored by the same
# resolution reach the same z (a flat-0 series that jumps scores 1 / magnitude_share = 20), and
# the order of CAUSES must not decide between them.
TIE_SHARE = 0.02
# A tie is broken by how closely each cause's strongest series tracks the latency (Pearson r over
# the run) when the two r differ by at least this; else the verdict is that they cannot be told
# apart (unexplained, both shares kept).
TIE_R_MARGIN = 0.1


@dataclass(frozen=True)
class ScoreConfig:
    """Floors on the scale of a series' robust z (z = (spike max − baseline median) / scale)."""

    # The baseline's level: a series that sits still at 1,000 and moves by 5 has not spiked; 5 %
    # of the level is about the noise of a 1-s window of any busy-process gauge here.
    level_share: float = 0.05
    # A counter of whole events (collections, preemptions, requests) moves in steps of one event:
    # a rate of one event per window is the least change it can show, so it is the scale's floor.
    counter_events_per_window: float = 1.0
    # A whole-number gauge (running or waiting requests) moves in steps of one.
    gauge_step: float = 1.0
    # Any other series (fractions, seconds): this share of its own magnitude (largest |value|
    # over the run), so a move from a flat 0 to its peak scores at most 1 / share.
    magnitude_share: float = 0.05
    # An occupancy fraction (KV cache usage, GPU memory used: OCCUPANCY) has a known range, its
    # capacity (1.0): a move of under this share of the capacity is a trace, whatever the
    # series' own peak. (On vLLM-CPU, KV usage sits near 0: a move to 0.0009 of capacity scored
    # z 20 against its own magnitude.)
    occupancy_share: float = 0.05
    # Last resort for a series that is 0 everywhere (its z is then 0 anyway).
    epsilon: float = 1e-9

    def __post_init__(self) -> None:
        for f in fields(self):
            if not getattr(self, f.name) > 0:
                raise ValueError(f"ScoreConfig.{f.name} must be > 0, got {getattr(self, f.name)!r}")


def cause_of(series_name: str) -> str:
    """The cause a metric name stands for; 'unexplained' when no pattern matches. A series that
    counts work (rca.consequences.SERIES_ROLES: requests, tokens, a per-request histogram's
    `_count` — vllm:request_num_preemptions_count rises with any burst) is load."""
    if series_role(series_name)[0] == "demand":
        return "load"
    for cause, pattern in CAUSE_PATTERNS:
        if re.search(pattern, series_name):
            return cause
    return "unexplained"


@dataclass
class RankedSeries:
    name: str  # name{labels}
    cause: str
    z: float
    spike_value: float
    baseline_value: float
    series: np.ndarray  # [n_windows]
    unit: str = ""
    note: str = ""  # what the series is, for a per-process series (process and region)
    votes: bool = True  # False: ranked and shown, but its rise cannot tell its cause (see note)


def metric_series(rows: list[dict], n: int, window_s: float) -> dict[str, np.ndarray]:
    """{name{labels}: values [n_windows]} from `metric_windows` rows; counters become rates."""
    by_series: dict[str, np.ndarray] = {}
    for r in rows:
        key = r["name"] + ("" if r["labels"] in (None, "{}") else r["labels"])
        arr = by_series.setdefault(key, np.full(n, np.nan))
        if 0 <= r["window"] < n and r["last_value"] is not None:
            arr[r["window"]] = float(r["last_value"])
    for key, arr in by_series.items():
        if is_counter(key):
            rate = np.full(n, np.nan)
            rate[1:] = np.diff(arr) / window_s  # NaN where either window is missing
            by_series[key] = np.where(rate < 0, np.nan, rate)  # a counter reset is not a rate
    return by_series


def _nvml(rows: list[dict], n: int) -> dict[str, np.ndarray]:
    out = {}
    for key in ("util_gpu", "mem_fraction", "power_w", "sm_clock", "pcie_tx", "pcie_rx"):
        arr = np.full(n, np.nan)
        for r in rows:
            if r.get(key) is not None and 0 <= r["window"] < n:
                arr[r["window"]] = np.nanmax([arr[r["window"]], float(r[key])])
        if np.isfinite(arr).any():
            out[f"nvml_{key}"] = arr
    return out


def is_counter(series_name: str) -> bool:
    """Prometheus counters by name (ranked as per-second rates)."""
    return series_name.split("{")[0].endswith(COUNTER_SUFFIXES)


def resolution(values: np.ndarray, counter: bool, window_s: float, config: ScoreConfig) -> float:
    """The least change the series can show (see ScoreConfig): from its values over the run."""
    finite = values[np.isfinite(values)]
    if not len(finite):
        return config.epsilon
    if counter and np.allclose(finite * window_s, np.round(finite * window_s)):
        return config.counter_events_per_window / window_s  # rate of a counter of whole events
    if not counter and np.allclose(finite, np.round(finite)):
        return config.gauge_step
    return max(config.magnitude_share * float(np.abs(finite).max()), config.epsilon)


def robust_scale(
    base: np.ndarray, values: np.ndarray, counter: bool, window_s: float, config: ScoreConfig
) -> float:
    """IQR of the baseline, floored by its level and by the series' resolution."""
    iqr = float(np.subtract(*np.percentile(base, [75, 25])))
    level = config.level_share * abs(float(np.median(base)))
    return max(iqr, level, resolution(values, counter, window_s, config), config.epsilon)


def rank_series(
    series: dict[str, np.ndarray],
    in_spike: np.ndarray,
    in_base: np.ndarray,
    window_s: float = 1.0,
    config: ScoreConfig | None = None,
    floors: dict[str, float] | None = None,
) -> list[RankedSeries]:
    """Every series with data on both sides, by robust z (largest first); counters (by name)
    are rates per second over windows of window_s. `floors`: a further floor on the scale of
    some series (a per-work series' resolution: `read_per_work`)."""
    config = config or ScoreConfig()
    floors = floors or {}
    ranked = []
    for name, values in series.items():
        base, spike = values[in_base], values[in_spike]
        base, spike = base[np.isfinite(base)], spike[np.isfinite(spike)]
        if len(base) < 3 or not len(spike):
            continue
        median = float(np.median(base))
        scale = robust_scale(base, values, is_counter(name), window_s, config)
        scale = max(scale, floors.get(name, 0.0))
        occupancy = re.search(OCCUPANCY, name) is not None
        if occupancy:
            scale = max(scale, config.occupancy_share)
        z = float((spike.max() - median) / scale)
        cause = cause_of(name)
        if occupancy and spike.max() < NEAR_CAPACITY:
            cause = "load"
        ranked.append(RankedSeries(name, cause, z, float(spike.mean()), median, values))
    ranked.sort(key=lambda r: -r.z)
    return ranked


def rank_process_series(
    signals: RunSignals,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    config: ScoreConfig | None = None,
    steal_floor: float = AttributeConfig.steal_rise_share,
) -> list[RankedSeries]:
    """The collectors' per-process series, scored like /metrics gauges, notes attached, and the
    hypervisor's steal on the engine's CPUs (`rank_steal`)."""
    config = config or ScoreConfig()
    n, w = len(in_spike), signals.window_s
    ranked = []
    for ps in process_series(signals.process, n, w):
        base, spike = ps.values[in_base], ps.values[in_spike]
        base, spike = base[np.isfinite(base)], spike[np.isfinite(spike)]
        if len(base) < 3 or not len(spike):
            continue
        median = float(np.median(base))
        scale = max(robust_scale(base, ps.values, False, w, config), RISE_FLOOR[ps.kind] / MIN_Z)
        z = float((spike.max() - median) / scale)
        cpu = (
            own_cpu(signals.process, ps.pid, in_spike, in_base)
            if ps.kind == "runq_wait_ms_per_s"
            else None
        )
        ambiguous = cpu is not None and did_own_work(*cpu)
        note = describe_rise(ps, in_spike, in_base, cpu)
        if ps.kind == "runq_wait_ms_per_s":
            z, note = _outside_part(signals, ps, z, note, in_spike, in_base)
        ranked.append(
            RankedSeries(
                ps.name,
                ps.cause,
                z,
                float(spike.mean()),
                median,
                ps.values,
                ps.unit,
                note,
                votes=not ambiguous,
            )
        )
    steal = rank_steal(signals.process, (in_spike, in_base), w, config, steal_floor)
    return ranked + ([steal] if steal is not None else [])


def rank_steal(
    process: ProcessSignals,
    masks: tuple[np.ndarray, np.ndarray],
    window_s: float,
    config: ScoreConfig,
    floor: float,
) -> RankedSeries | None:
    """The hypervisor's steal on the engine's CPUs (rca.outside_causes: CPU lost outside the
    guest, in no process counter), scored like a gauge and voting host; its scale is floored by
    `floor` (AttributeConfig.steal_rise_share) / MIN_Z, so a rise below it cannot vote."""
    in_spike, in_base = masks
    values = process.steal_share(len(in_spike))
    base, spike = values[in_base], values[in_spike]
    base, spike = base[np.isfinite(base)], spike[np.isfinite(spike)]
    if len(base) < 3 or not len(spike):
        return None
    median = float(np.median(base))
    scale = max(robust_scale(base, values, False, window_s, config), floor / MIN_Z)
    note = (
        f"the engine's CPUs: the hypervisor ran another guest for {spike.mean():.1%} of the time "
        f"they wanted to run during the spike vs {median:.1%} before (/proc/stat steal)"
    )
    return RankedSeries(
        "cpu_steal_share",
        "host",
        float((spike.max() - median) / scale),
        float(spike.mean()),
        median,
        values,
        "fraction",
        note,
    )


def _outside_part(
    signals: RunSignals,
    ps,
    z: float,
    note: str,
    in_spike: np.ndarray,
    in_base: np.ndarray,
) -> tuple[float, str]:
    """A run-queue wait votes for host only with the part of it that no other process of the
    engine's tree gained as CPU time (rca.consequences): its z scaled by that part."""
    n = len(in_spike)
    rise = mean_or_zero(ps.values[in_spike]) - mean_or_zero(ps.values[in_base])
    if not rise > 0:
        return z, note
    went = cpu_given_to_siblings(
        signals.process.by_pid("cpu_windows", "cpu_ms_per_s", n), ps.pid, rise, in_spike, in_base
    )
    return z * went.outside_fraction, f"{note}; {went.note()}"


def read_per_work(
    series: dict[str, np.ndarray], work: np.ndarray, in_spike: np.ndarray, window_s: float
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(`series` with every work-proportional by-product — rca.consequences.SERIES_ROLES: GC
    collections and objects collected — replaced by its value per token of `work` in the window
    (rca.consequences.work_series), the scale floor of each such series). The floor is the least
    change a count per token can show where the spike did the least work: one event per window
    over that work (a gen-0 collection count of 5 per 100 tokens moves by 20 % on one event).
    Without a measure of work such a series cannot be read and is left out."""
    out, floors = {}, {}
    spike_work = work[in_spike & (np.nan_to_num(work) > 0)]
    for name, values in series.items():
        if series_role(name)[0] != "per_work":
            out[name] = values
        elif len(spike_work):
            out[name + PER_TOKEN] = per_work(values, work)
            floors[name + PER_TOKEN] = 1.0 / (window_s * float(spike_work.min()))
    return out, floors


def not_voting(
    ranked: list[RankedSeries], silenced: Callable[[RankedSeries], bool], note: str
) -> list[RankedSeries]:
    """`ranked` with each series `silenced` picks shown but non-voting, `note` saying why."""
    return [
        dataclasses.replace(r, votes=False, note=(f"{r.note}; " if r.note else "") + note)
        if silenced(r)
        else r
        for r in ranked
    ]


def gc_counts_as_context(ranked: list[RankedSeries], pauses_measured: bool) -> list[RankedSeries]:
    """`ranked` with /metrics' GC counts (collections, objects collected, rca.consequences.GC_COUNTS)
    made non-voting when the GC hook measured the engine processes' pauses: those pause series
    speak for memory themselves (rank_process_series)."""
    if not pauses_measured:
        return ranked
    return not_voting(ranked, lambda r: bool(re.search(GC_COUNTS, r.name)), GC_PAUSES_MEASURED_NOTE)


def without_collectives(ranked: list[RankedSeries], collectives: bool | None) -> list[RankedSeries]:
    """`ranked` with communication series made non-voting when the engine is known to run no
    collectives (rca.consequences.has_collectives is False): a wait on a sibling process."""
    if collectives is not False:
        return ranked
    return not_voting(ranked, lambda r: r.cause == "communication", NO_COLLECTIVES_NOTE)


def read_as_memory(ranked: list[RankedSeries], pattern: str, why: str) -> list[RankedSeries]:
    """`ranked` with the series matching `pattern` that were read as load or unexplained read as
    memory, `why` their note; the series that count work stay load: they are the work asked
    (rca.consequences)."""
    return [
        dataclasses.replace(r, cause="memory", note=why)
        if r.cause in ("load", "unexplained")
        and re.search(pattern, r.name)
        and series_role(r.name)[0] != "demand"
        else r
        for r in ranked
    ]


def read_preemption_effects(ranked: list[RankedSeries]) -> list[RankedSeries]:
    """`ranked` with queueing and prefill series read as memory when sequences were preempted in
    the spike (see module docstring); the preemption series is moved into the top TOP_K, as the
    reason for that reading (it votes only above MIN_Z, like any series). Unchanged when no
    preemption series reached PREEMPTED_MIN_Z."""
    preempted = [
        r for r in ranked if re.search(PREEMPTION, r.name.split("{")[0]) and r.z >= PREEMPTED_MIN_Z
    ]
    if not preempted:
        return ranked
    cause = preempted[0]
    why = (
        f"counted as memory: vLLM preempted sequences in the spike ({cause.name.split('{')[0]} "
        f"{cause.spike_value:.3g}/s vs {cause.baseline_value:.3g}), which re-queues and recomputes "
        f"them; /metrics cannot split this from what the added work costs without preemption"
    )
    out = read_as_memory(ranked, PREEMPTION_EFFECTS, why)
    out.remove(cause)
    natural = next((i for i, r in enumerate(out) if r.z <= cause.z), len(out))
    out.insert(min(TOP_K - 1, natural), cause)
    return out


def kv_held_windows(
    series: dict[str, np.ndarray], in_spike: np.ndarray, in_base: np.ndarray
) -> int:
    """Spike windows in which more requests waited and fewer ran than the baseline's medians: the
    engine had batch slots free and still did not admit. vLLM's scheduler admits a waiting
    request when a slot is free *and* the KV cache has blocks for it, so a queue beside free
    slots is held by the cache: each sequence needs more of it than before (longer prompts or
    outputs). More requests of the same size fill the slots first (running at or above its
    baseline), so a burst is not read so. Where the engine reports its KV occupancy (KV_USAGE),
    a window counts only if the cache held at least its baseline median: a cache holding less
    than it did while it admitted everyone had room, so it did not hold the queue (a scrape
    caught between a finish and the next admission, or a front end behind with its updates).
    0 unless the engine reports both request gauges (the first series of each name: one
    engine's)."""
    running = _first(series, RUNNING)
    waiting = _first(series, WAITING)
    if running is None or waiting is None:
        return 0
    run_base, wait_base = _finite(running[in_base]), _finite(waiting[in_base])
    if not len(run_base) or not len(wait_base):
        return 0
    with np.errstate(invalid="ignore"):
        held = (waiting > np.median(wait_base)) & (running < np.median(run_base)) & in_spike
        usage = _first(series, KV_USAGE)
        if usage is not None and len(usage_base := _finite(usage[in_base])):
            held &= usage >= np.median(usage_base)
    return int(held.sum())


def _first(series: dict[str, np.ndarray], pattern: str) -> np.ndarray | None:
    """The first series whose name matches `pattern` (one engine's), or None."""
    return next((v for k, v in series.items() if re.search(pattern, k)), None)


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def read_kv_held_queue(ranked: list[RankedSeries], held: int) -> list[RankedSeries]:
    """`ranked` with the queue's state (QUEUE_STATE series read as load or unexplained, not
    counts of work) read as memory when the queue was held by the KV cache in `held` >=
    KV_HELD_MIN_WINDOWS spike windows (kv_held_windows); unchanged otherwise."""
    if held < KV_HELD_MIN_WINDOWS:
        return ranked
    why = (
        f"counted as memory: in {held} windows of the spike requests waited while fewer ran "
        "than before; vLLM admits a request only when the KV cache has blocks for it, so the "
        "queue was held by the cache, not by the batch"
    )
    return read_as_memory(ranked, QUEUE_STATE, why)


def queue_without_demand(
    ranked: list[RankedSeries], work: WorkPrediction | None
) -> list[RankedSeries]:
    """`ranked` with the queue's state (QUEUE_STATE series still read as load, not counts of work)
    made non-voting when the work asked did not rise (rca.work_model) and a voting series of
    another cause rose beyond MIN_Z: the queue is then that cause's consequence. Unchanged when
    the work asked was not counted (`work` None), when it rose, or when nothing else moved (the
    queue alone is load)."""
    if work is None or work.predicted_ratio > 1.0:
        return ranked
    if not any(r.votes and r.z > MIN_Z and r.cause not in ("load", "unexplained") for r in ranked):
        return ranked

    def is_queue(r: RankedSeries) -> bool:
        return (
            r.cause == "load"
            and series_role(r.name)[0] != "demand"
            and bool(re.search(QUEUE_STATE, r.name))
        )

    return not_voting(ranked, is_queue, work.queue_note())


def settle_tie(
    causes: list[CauseShare], voters: list[RankedSeries], latency: np.ndarray
) -> tuple[str, str]:
    """(top cause, what was said about a tie) for `causes` sorted by share. Causes within
    TIE_SHARE of the first are tied; the one whose strongest series has the largest Pearson r with
    the latency wins when it leads the next by TIE_R_MARGIN, else the verdict is 'unexplained'
    ("cannot tell apart"). No tie: the first cause and ''."""
    tied = [cs.cause for cs in causes if causes[0].share - cs.share < TIE_SHARE]
    if len(tied) < 2:
        return causes[0].cause, ""

    def r_of(cause: str) -> float:
        lead = next((r for r in voters if r.cause == cause), None)
        return (pearson(lead.series, latency) if lead is not None else None) or 0.0

    by_r = sorted(((r_of(c), c) for c in tied), reverse=True)
    shares = " and ".join(tied)
    if by_r[0][0] - by_r[1][0] >= TIE_R_MARGIN:
        return by_r[0][1], (
            f"{shares} tie on votes; {by_r[0][1]}'s strongest series tracks the latency most "
            f"closely (r {by_r[0][0]:.2f} vs {by_r[1][0]:.2f})"
        )
    return "unexplained", (
        f"cannot tell {shares} apart: equal votes and equal co-movement with the latency "
        f"(r {by_r[0][0]:.2f} vs {by_r[1][0]:.2f})"
    )


def ranked_series(
    signals: RunSignals,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    attribute: AttributeConfig | None = None,
) -> list[RankedSeries]:
    """Every /metrics, NVML and per-process series of the run ranked for one spike, with the
    readings that keep consequences from voting (see module docstring), largest z first."""
    n = len(in_spike)
    series = {
        **metric_series(signals.metric_windows, n, signals.window_s),
        **_nvml(signals.nvml_windows, n),
    }
    symptoms = {k for k in series if re.search(SYMPTOMS, k)}
    kept = {k: v for k, v in series.items() if k not in symptoms and not k.startswith(AGENT_SERIES)}
    work = work_series(kept, window_series(signals.windows, "tokens", n))
    kept, floors = read_per_work(kept, work, in_spike, signals.window_s)
    ranked = rank_series(kept, in_spike, in_base, signals.window_s, floors=floors)
    steal_floor = (attribute or AttributeConfig()).steal_rise_share
    ranked = sorted(
        ranked + rank_process_series(signals, in_spike, in_base, steal_floor=steal_floor),
        key=lambda r: -r.z,
    )
    ranked = read_preemption_effects(ranked)
    ranked = read_kv_held_queue(ranked, kv_held_windows(kept, in_spike, in_base))
    ranked = without_collectives(ranked, has_collectives(signals.engine, signals.steps))
    return gc_counts_as_context(ranked, bool(signals.process.gc_windows))


@dataclass(frozen=True)
class OutsideShares:
    """What the client and the network take of a spike's excess before the metric votes."""

    client: float = 0.0
    network: float = 0.0
    excess: OutsideExcess | None = None  # their evidence and series (None: nothing measured)
    withheld: str = ""  # why a gap or a late client took nothing, where it could have
    read_through: str = ""  # which metric's server time stood for the spike's (none: its own)


def outside_shares(
    spike: Spike,
    signals: RunSignals,
    masks: tuple[np.ndarray, np.ndarray],
    latency: np.ndarray,
    config: AttributeConfig,
    engine_moved: bool,
) -> OutsideShares:
    """The client's and the network's shares (rca.outside_causes): the growth of client − server
    time where the server timed the spike's metric. The server's reported times start after its
    front end, so their gap counts only while the front end did nothing different, no engine
    process paused longer for GC (rca.outside_causes.reported_gap_inside) and the host kept its
    CPUs (host_contended). Without a server-side time of the metric (an ITL spike
    on vLLM, which reports one mean gap per request), another metric of the spike that the server
    timed stands for it (rca.outside_causes.server_timed_metric); with none, a late client is
    named only while no engine series moved (`engine_moved`: some series voted or counted
    demand)."""
    if not signals.transit_windows and not signals.client_windows:
        return OutsideShares()
    in_spike, in_base = masks
    metric = server_timed_metric(spike.metric, spike.metrics, signals.transit_windows, masks)
    baseline, read_through = spike.baseline_ms, ""
    if metric != spike.metric:  # shares of the witness' excess stand for the spike's
        latency = window_series(signals.windows, f"{metric}_ms")
        baseline = mean_or_zero(latency[in_base])
        read_through = (
            f"the server did not time {spike.metric}; its {metric} of the same windows stood for it"
        )
    inputs = OutsideInputs(
        metric,
        mean_or_zero(latency[in_spike]) - baseline,
        signals.transit_windows,
        signals.client_windows,
        signals.process,
        len(in_spike),
    )
    out = outside_excess(inputs, EvidenceBuilder(latency, in_spike, in_base), config)
    if inputs.latency_excess_ms <= 0:
        return OutsideShares(excess=out)
    claimed = out.client_share + out.network_share > 0 or out.client_late
    if out.server_share is None:
        if engine_moved:
            why = "no server-side time of this metric, and engine series moved: a late client "
            return OutsideShares(
                excess=out, withheld=why + "is not told from them" if claimed else ""
            )
        late = out.client_lag_rise_ms if out.client_late else 0.0  # the engine flat: the client's
        return OutsideShares(float(np.clip(late / inputs.latency_excess_ms, 0, 1)), 0.0, out)
    if signals.transit_source == "reported":
        moved = reported_gap_inside(
            signals.process, in_spike, in_base, config, signals.window_s
        ) or host_contended(out)
        if moved:
            why = f"client − server time rose, but the server's times start after its front end: {moved}"
            return OutsideShares(excess=out, withheld=why if claimed else "")
    note = read_through if out.client_share + out.network_share > 0 else ""
    return OutsideShares(out.client_share, out.network_share, out, read_through=note)


def _cause_shares(
    votes: dict[str, float], outside: OutsideShares, predicted_load: float | None
) -> dict[str, float]:
    """Every cause's share: the client's and the network's first; then load takes the part of
    the rest the work asked predicts (`predicted_load`, rca.work_model; 0 where not counted) and
    the votes divide what is left by their z. Nothing voted: what is left is unexplained."""
    rest = max(0.0, 1.0 - outside.client - outside.network)
    predicted = rest * (predicted_load or 0.0)
    total = sum(votes.values())
    shares = {
        c: (rest - predicted) * votes.get(c, 0.0) / total if total > 0 else 0.0 for c in CAUSES
    }
    shares["load"] += predicted
    if total <= 0:
        shares["unexplained"] = rest - predicted
    shares["client"] += outside.client
    shares["network"] += outside.network
    return shares


def work_prediction(
    spike: Spike,
    signals: RunSignals,
    masks: tuple[np.ndarray, np.ndarray],
    latency: np.ndarray,
    config: AttributeConfig,
) -> WorkPrediction | None:
    """What the work the load generator asked predicts of the spike (rca.work_model); None for
    a run observed through monitoring (no load generator) or one that counted no requests. The
    work is read over the windows whose work was in the system in the spike
    (rca.consequences.sojourn_masks), the latency over the spike's own."""
    if is_observed(signals.engine):
        return None
    n = len(masks[0])
    work = WorkSeries(
        window_series(signals.windows, "arrivals", n),
        window_series(signals.windows, "asked_tokens_mean", n),
        window_series(signals.windows, "scheduled", n),
        by_window(signals.client_windows, "in_flight", n),
    )
    base = spike.baseline_ms
    observed = mean_or_zero(latency[masks[0]]) / base if base > 0 else 1.0
    sojourn = sojourn_masks(masks, spike.peak_ms, signals.window_s, config.min_baseline_windows)
    return predict_work(work, sojourn, observed, config.load_rise)


def _cause_rows(
    shares: dict[str, float],
    voters: list[RankedSeries],
    ranked: list[RankedSeries],
    outside: OutsideShares,
    latency: np.ndarray,
    masks: tuple[np.ndarray, np.ndarray],
    work: WorkPrediction | None = None,
) -> list[CauseShare]:
    """CauseShare rows (largest share first): a metric cause's evidence is its voting series
    (load's also the work asked, where counted), the client's and the network's their outside
    rows."""
    ev = EvidenceBuilder(latency, *masks)
    causes = []
    for c in CAUSES:
        if shares[c] <= 1e-4:
            continue
        added = work.evidence() if c == "load" and work is not None else []
        if c in ("client", "network") and outside.excess is not None:
            found = outside.excess.evidence.get(c, [])
            series = outside.excess.signals.get(c)
            conf = ev.strength(series) if series is not None else 0.0
            causes.append(CauseShare(c, round(shares[c], 4), round(conf, 4), 0.0, found))
            continue
        mine = [r for r in voters if r.cause == c]
        conf = mine[0].z / (mine[0].z + 3.0) if mine else 0.0
        evidence = [
            Evidence(
                r.name,
                r.spike_value,
                r.baseline_value,
                r.unit,
                (f"{r.note}; " if r.note else "") + f"robust z = {r.z:.1f} (rank "
                f"{ranked.index(r) + 1} of {len(ranked)})",
                pearson(r.series, latency),
            )
            for r in mine
        ]
        causes.append(CauseShare(c, round(shares[c], 4), round(conf, 4), 0.0, evidence + added))
    causes.sort(key=lambda cs: -cs.share)
    overshoot = sum(cs.share for cs in causes) - 1.0
    if overshoot > 0:
        causes[0].share = round(causes[0].share - overshoot, 4)
    return causes


def _voters(
    ranked: list[RankedSeries], counted: bool
) -> tuple[list[RankedSeries], list[RankedSeries]]:
    """(series that vote, demand series shown beside them): the TOP_K highest-scoring voting
    series beyond MIN_Z. Where the work asked was `counted` (rca.work_model), the series that
    count work (role 'demand': requests, prompt tokens) are already in its prediction: they are
    shown as load's evidence and do not vote, and TOP_K of the others vote."""
    voting = [r for r in ranked if r.votes and r.z > MIN_Z]
    if not counted:
        return voting[:TOP_K], []

    def demand(r: RankedSeries) -> bool:
        return series_role(r.name)[0] == "demand"

    return [r for r in voting if not demand(r)][:TOP_K], [r for r in voting if demand(r)][:TOP_K]


def attribute_by_metrics(
    spike: Spike, spikes: list[Spike], signals: RunSignals, config: AttributeConfig | None = None
) -> Attribution:
    """Attribution of one spike from /metrics and NVML series and, where the server timed the
    spike's metric, the client − server time (see module docstring)."""
    config = config or AttributeConfig()
    n = len(signals.windows)
    masks = window_masks(n, spike, spikes, config.guard_windows, config.min_baseline_windows)
    latency = window_series(signals.windows, f"{spike.metric}_ms")
    work = work_prediction(spike, signals, masks, latency, config)
    ranked = queue_without_demand(ranked_series(signals, *masks, config), work)
    voters, demand = _voters(ranked, counted=work is not None)
    votes = {c: sum(r.z for r in voters if r.cause == c) for c in CAUSES}
    # the engine moved when any of its series did, the demand series (they don't vote) included
    outside = outside_shares(spike, signals, masks, latency, config, bool(voters or demand))
    shares = _cause_shares(votes, outside, None if work is None else work.load_share)
    causes = _cause_rows(shares, voters + demand, ranked, outside, latency, masks, work)
    top, tie = settle_tie(causes, voters, latency)
    lead = next((r for r in voters if r.cause == top), None)  # the verdict's strongest series
    if top == "network" and outside.excess is not None:
        summary = (
            f"client − server time rose {outside.excess.transit_rise_ms:.0f} ms while the "
            "server's own time did not: outside the engine"
        )
    elif top == "client" and outside.excess is not None:
        summary = (
            f"the load generator ran late: its lag rose {outside.excess.client_lag_rise_ms:.0f} ms"
        )
    elif top == "load" and work is not None and work.load_share > 0:
        summary = (
            f"the work asked predicts {work.predicted_ratio:.2g}× the baseline latency, "
            f"{work.observed_ratio:.2g}× observed ({work.load_share:.0%} of the excess)"
        )
    elif lead is not None:
        summary = f"top metric for {top}: {lead.name} (robust z {lead.z:.1f})"
    else:
        summary = "no metric moved beyond its baseline noise"
    summary = "; ".join(x for x in (tie, summary, outside.withheld, outside.read_through) if x)
    return Attribution(
        spike.spike_id,
        causes,
        top,
        0.0,
        0.0,
        {c: 0.0 for c in CAUSES},
        summary,
        "metric_rank",
        uncovered=round(shares["unexplained"], 4),
        metric=spike.metric,
    )


def attribute_any(
    spike: Spike, spikes: list[Spike], signals: RunSignals, config: AttributeConfig | None = None
) -> Attribution:
    """The analysis' attribution of a spike: by stage decomposition where the run has step
    traces, else by ranking its /metrics and NVML series (an engine without step traces)."""
    if len(signals.steps["t_s"]) == 0 and bool(signals.metric_windows or signals.nvml_windows):
        return attribute_by_metrics(spike, spikes, signals, config)
    return attribute_spike(spike, spikes, signals, config)
