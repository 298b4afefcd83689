"""Causes outside the engine: the load generator, the path to the engine, the machine's CPUs.

  client   the load generator itself is late: its event-loop lag or read delay rose, or more of
           its first tokens came merged with a later packet (it read late); it then covers the
           growth of client − server time up to the rise of its lag / read delay (for an ITL
           gap the server did not time, that rise, against the engine's step: rca.cause_shares)
  network  the rest of the growth of client − server time: transit between them
  host     an engine process waited longer for a CPU (/proc run-queue delay) while doing no more
           work itself, and no other process of the engine's tree gained that CPU time
           (rca.consequences): the share of its spike step time spent waiting for CPU that went
           outside the engine, beyond baseline; and, apart from that, the hypervisor stole more of
           the engine CPUs' time (/proc/stat steal, collectors.cpu_steal): a stolen stretch is
           neither run-queue wait nor the process's CPU time, so no process counter shows it.
           Work needing W s of CPU takes W / (1 - s) with a share s stolen, so a rise from s_b
           to s_s stretches every stage and 1 - (1 - s_s) / (1 - s_b) of the spike's step time
           is the steal's (`steal_step_fraction`); the two parts add

client − server time is the p99 of each side's latency per window: the client's from its kernel
receive stamps, the server's from its own socket stamps (query `transit_windows`; for ITL, the
gaps between the server's writes of a request's text chunks), so their gap is what happened
between the two sockets and in the client, never inside the engine. An engine without socket
stamps may report its own times in the stream (macro `transit_pairs`: vLLM's queue time and
time to first token); those start after its front end (the API server) read and tokenized the
request, so their gap also holds the front end. It is outside the engine only while the front
end did nothing different, no process of the engine paused longer for GC (a pause after a
token's stamp delays its output too: `reported_gap_inside`) and the host kept its CPUs
(`host_contended`: contention delays the front end too); a front end that moved, or one nobody
measured, keeps the gap inside.
vLLM times no gap between chunks: an ITL spike there is read through a metric that spiked in the
same windows and that the server did time (`server_timed_metric`).
Each rise
must beat its floor in AttributeConfig and 3 standard deviations of its baseline windows.
Pure: window rows in, shares and Evidence out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rca.config import AttributeConfig
from rca.consequences import cpu_given_to_siblings
from rca.evidence import NOT_RISE, Evidence, EvidenceBuilder
from rca.process_evidence import (
    RISE_FLOOR,
    ProcessSignals,
    biggest_rise,
    did_own_work,
    per_pid,
)
from rca.stepcost import mean_or_zero
from rca.window_columns import by_window

# spike metric → (client p99 column, server p99 column) of query transit_windows
_TRANSIT = {
    "ttft_p99": ("client_ttft_p99_ms", "server_ttft_p99_ms"),
    "e2e_p99": ("client_e2e_p99_ms", "server_e2e_p99_ms"),
    "itl_p99": ("client_itl_p99_ms", "server_itl_p99_ms"),  # each text chunk's write (our engine)
}


@dataclass
class OutsideExcess:
    """What the signals outside the engine cover of one spike."""

    client_share: float = 0.0  # of the spike's latency excess
    network_share: float = 0.0
    # of the spike's mean step time: CPU wait (run-queue and stolen) beyond baseline
    host_step_fraction: float = 0.0
    transit_rise_ms: float = 0.0  # client − server p99, spike − baseline (0 when not marked)
    client_lag_rise_ms: float = 0.0  # the client's lag / read delay p99 rise (0 when not marked)
    # share of the excess the engine server's own p99 rise accounts for (None: no server times):
    # what engine causes can cover at most
    server_share: float | None = None
    client_late: bool = False
    host_pid: int | None = None
    steal_fraction: float = 0.0  # of host_step_fraction: the hypervisor's extra steal
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    signals: dict[str, np.ndarray] = field(default_factory=dict)  # cause → main window series


@dataclass(frozen=True)
class OutsideInputs:
    """The window series this module reads, each [n_windows] (NaN where not measured)."""

    metric: str
    latency_excess_ms: float  # spike mean of the metric − its baseline
    transit: list[dict]  # query transit_windows
    client: list[dict]  # query client_windows
    process: ProcessSignals
    n: int


def marked_rise(
    series: np.ndarray, in_spike: np.ndarray, in_base: np.ndarray, floor: float
) -> float:
    """spike mean − baseline mean when it beats `floor` and 3 baseline std, else 0."""
    s, b = series[in_spike], series[in_base]
    s, b = s[np.isfinite(s)], b[np.isfinite(b)]
    if not len(s) or not len(b):
        return 0.0
    rise = float(np.mean(s) - np.mean(b))
    noise = float(np.std(b)) if len(b) > 1 else 0.0
    return rise if rise > max(floor, 3 * noise) else 0.0


def _client_late(
    inputs: OutsideInputs, ev: EvidenceBuilder, config: AttributeConfig, out: OutsideExcess
) -> float:
    """Marks the client late when its lag p99, read delay or merged-first share rose; returns the
    ms by which its lag or read delay rose (what a late reader adds to a gap between chunks).
    The amount also reads the lag's window maximum: a client blocked for B ms holds back the
    chunks that arrive meanwhile by up to B, and a p99 of a window's gaps reaches its largest
    ones; but only one 10-ms probe fires late per block, so among a second's samples the lag
    p99 dilutes B (a 330-ms block every second read as a 70-ms p99). The maximum is not what
    marks the client late: one late timer on a shared box is not a late client."""
    lag = by_window(inputs.client, "lag_p99_ms", inputs.n)
    lag_max = by_window(inputs.client, "lag_max_ms", inputs.n)
    read = by_window(inputs.client, "read_delay_p99_ms", inputs.n)
    merged = by_window(inputs.transit, "merged_first_share", inputs.n)
    rises = [
        marked_rise(lag, ev.in_spike, ev.in_base, config.client_lag_rise_ms),
        marked_rise(read, ev.in_spike, ev.in_base, config.client_lag_rise_ms),
    ]
    merged_rise = marked_rise(merged, ev.in_spike, ev.in_base, config.merged_first_rise)
    out.client_late = max(rises) > 0 or merged_rise > 0
    if out.client_late:
        rises.append(marked_rise(lag_max, ev.in_spike, ev.in_base, config.client_lag_rise_ms))
    rows = [
        ev.series(
            "client_lag_p99_ms", lag, "ms", "load generator event-loop lag (p99, worst process)"
        ),
        ev.series("client_lag_max_ms", lag_max, "ms", "its longest block (lag max, worst process)"),
        ev.series(
            "client_read_delay_p99_ms", read, "ms", "stream data waiting in the client's socket"
        ),
        ev.series(
            "merged_first_share",
            merged,
            "fraction",
            "first tokens stamped only with a later packet (the client read late)",
        ),
        ev.series(
            "slot_waits_per_window",
            by_window(inputs.client, "slot_waits", inputs.n),
            "count",
            "arrivals that waited for a free client slot",
        ),
    ]
    out.evidence["client"] = [e for e in rows if e is not None]
    out.signals["client"] = np.fmax(lag, read)
    return max(rises)


def server_timed_metric(
    metric: str, metrics: list[str], transit: list[dict], masks: tuple[np.ndarray, np.ndarray]
) -> str:
    """The metric whose client − server time stands for the spike: its own where the server timed
    it in the spike and its baseline, else the first other metric of the spike (`metrics`, those
    that spiked in the same windows) the server timed there, else its own.

    Why another metric may stand for it: the requests of one window share what delayed them. An
    engine that slowed (a GC pause, a slower step, a queue) delays the first tokens it writes in
    those windows too, so its own time of them rises; a client that read late, or a path that
    held the bytes, delays them only after the server's stamp. vLLM times each request's queue
    and first token but not its gaps, so an ITL spike there is read through its TTFT."""
    n = len(masks[0])

    def timed(m: str) -> bool:
        if m not in _TRANSIT:
            return False
        server = by_window(transit, _TRANSIT[m][1], n)
        return all(np.isfinite(server[mask]).any() for mask in masks)

    if timed(metric):
        return metric
    return next((m for m in metrics if m != metric and timed(m)), metric)


def _transit(
    inputs: OutsideInputs, ev: EvidenceBuilder, config: AttributeConfig, out: OutsideExcess
) -> float | None:
    """client − server p99 rise in ms (0 when not marked); None when the server did not time the
    spike's metric (no stamps in the spike or its baseline: an older run's ITL)."""
    if inputs.metric not in _TRANSIT:
        return None
    client_col, server_col = _TRANSIT[inputs.metric]
    client = by_window(inputs.transit, client_col, inputs.n)
    server = by_window(inputs.transit, server_col, inputs.n)
    gap = client - server
    rows = [
        ev.series(
            f"{client_col[:-3]}_minus_server_ms",
            gap,
            "ms",
            "client − server p99: outside the engine",
        ),
        ev.series(
            server_col,
            server,
            "ms",
            "the engine server's own p99 (its socket stamps)",
            direction=NOT_RISE,
        ),
    ]
    out.evidence["network"] = [e for e in rows if e is not None]
    out.signals["network"] = gap
    if not (np.isfinite(server[ev.in_spike]).any() and np.isfinite(server[ev.in_base]).any()):
        return None
    rise = mean_or_zero(server[ev.in_spike]) - mean_or_zero(server[ev.in_base])
    excess = inputs.latency_excess_ms
    out.server_share = float(np.clip(rise / excess, 0.0, 1.0)) if excess > 0 else None
    return marked_rise(gap, ev.in_spike, ev.in_base, config.min_transit_rise_ms)


def steal_step_fraction(
    share: np.ndarray, in_spike: np.ndarray, in_base: np.ndarray, floor: float
) -> float:
    """The part of a spike's step time the hypervisor's extra steal explains: 0 unless the stolen
    share of the CPUs' wanted time rose by `floor` and 3 baseline std (marked_rise); else
    1 - (1 - s_spike) / (1 - s_base), from mean shares (see the module docstring)."""
    if marked_rise(share, in_spike, in_base, floor) <= 0:
        return 0.0
    s_spike, s_base = mean_or_zero(share[in_spike]), mean_or_zero(share[in_base])
    if s_base >= 1.0:
        return 0.0
    return float(np.clip(1.0 - (1.0 - s_spike) / (1.0 - s_base), 0.0, 1.0))


def _host(
    inputs: OutsideInputs, ev: EvidenceBuilder, config: AttributeConfig, out: OutsideExcess
) -> None:
    """CPU the engine lost outside itself: its run-queue wait and the hypervisor's steal."""
    _host_runq(inputs, ev, config, out)
    share = inputs.process.steal_share(inputs.n)
    stolen = steal_step_fraction(share, ev.in_spike, ev.in_base, config.steal_rise_share)
    row = ev.series(
        "cpu_steal_share",
        share,
        "fraction",
        "of the engine CPUs' wanted time, the hypervisor ran another guest (/proc/stat steal)"
        + (
            f": every stage {1 / (1 - stolen):.2f}× slower from it"
            if stolen > 0
            else ": not enough more than before to count"
        ),
    )
    if row is None:
        return
    out.evidence.setdefault("host", []).append(row)
    if stolen > 0:
        out.steal_fraction = stolen
        out.host_step_fraction = float(np.clip(out.host_step_fraction + stolen, 0.0, 1.0))
        if out.host_pid is None:  # no process waited for a CPU: the steal is the main series
            out.signals["host"] = share


def _host_runq(
    inputs: OutsideInputs, ev: EvidenceBuilder, config: AttributeConfig, out: OutsideExcess
) -> None:
    """The engine process whose run-queue wait rose most, when its own CPU time did not."""
    cpu_rows = inputs.process.cpu_windows
    runq = biggest_rise(
        per_pid(cpu_rows, "runq_wait_ms_per_s", inputs.n),
        ev.in_spike,
        ev.in_base,
        config.runq_rise_ms_per_s,
    )
    if runq is None:
        return
    tree_cpu = per_pid(cpu_rows, "cpu_ms_per_s", inputs.n)
    cpu = tree_cpu[runq.pid][1]
    invol = per_pid(cpu_rows, "involuntary_switches_per_s", inputs.n)[runq.pid][1]
    cpu_s, cpu_b = mean_or_zero(cpu[ev.in_spike]), mean_or_zero(cpu[ev.in_base])
    # CPU conservation (rca.consequences): only the wait no process of the engine's tree gained
    # is CPU lost outside the engine; its own threads competing is not host either
    went = cpu_given_to_siblings(
        tree_cpu, runq.pid, runq.during - runq.before, ev.in_spike, ev.in_base
    )
    outside = went.outside
    if runq.marked and outside > 0 and not did_own_work(cpu_s, cpu_b) and cpu_s + runq.during > 0:
        out.host_step_fraction = float(np.clip(outside / (cpu_s + runq.during), 0, 1))
        out.host_pid = runq.pid
    where = went.note()
    rows = [
        ev.series(
            "runq_wait_ms_per_s",
            runq.series,
            "ms/s",
            f"{runq.role} (pid {runq.pid}): runnable but waiting for a CPU (/proc schedstat)"
            + (f"; {where}" if runq.marked and where else ""),
        ),
        ev.series(
            "involuntary_switches_per_s",
            invol,
            "1/s",
            f"{runq.role} (pid {runq.pid}): taken off a CPU while it still had work",
        ),
        ev.series(
            "engine_cpu_ms_per_s",
            cpu,
            "ms/s",
            f"{runq.role} (pid {runq.pid}): its own CPU time",
            direction=NOT_RISE,
        ),
    ]
    out.evidence["host"] = [e for e in rows if e is not None]
    out.signals["host"] = runq.series


# The role the collectors give an engine's front end: the process that reads, parses and
# tokenizes a request before the engine core queues it (collectors/roles.py: vLLM's API server).
FRONT_END_ROLE = "api_server"


def reported_gap_inside(
    process: ProcessSignals,
    in_spike: np.ndarray,
    in_base: np.ndarray,
    config: AttributeConfig,
    window_s: float = 1.0,
) -> str:
    """'' when nothing the engine's reported times leave out moved in the spike; else what moved,
    in words. Reported times start after the front end (FRONT_END_ROLE processes) read the
    request and end when a token is stamped, before its output leaves the process that made it
    (vLLM's EngineCore hands it to the API server after the stamp). So the gap between them and
    the client's times lies outside the engine only while the front end did no more work (its
    own CPU time) and waited no longer for a CPU, and no process of the engine paused longer for
    GC (each rise beyond its floor and 3 baseline std). A run whose front end was not measured
    says so: the gap cannot then be shown to lie outside the engine."""
    n = len(in_spike)

    def front_end(row: dict) -> bool:
        return row.get("role") == FRONT_END_ROLE

    cpu = per_pid(process.cpu_windows, "cpu_ms_per_s", n, where=front_end)
    if not cpu:
        return "the engine's front end was not measured"
    for pid, (_, values) in cpu.items():
        if did_own_work(mean_or_zero(values[in_spike]), mean_or_zero(values[in_base])):
            return f"its front end (pid {pid}) did more work"
    runq = per_pid(process.cpu_windows, "runq_wait_ms_per_s", n, where=front_end)
    for pid, (_, values) in runq.items():
        if marked_rise(values, in_spike, in_base, config.runq_rise_ms_per_s) > 0:
            return f"its front end (pid {pid}) waited longer for a CPU"
    pauses = per_pid(process.gc_windows, "pause_ms", n, fill=0.0)  # no pause row: no pause
    for pid, (role, values) in pauses.items():
        if marked_rise(values, in_spike, in_base, RISE_FLOOR["gc_ms_per_s"] * window_s) > 0:
            if role == FRONT_END_ROLE:
                return f"its front end (pid {pid}) paused longer for GC"
            return f"{role} (pid {pid}) paused longer for GC, after its own stamps too"
    return ""


def host_contended(out: OutsideExcess) -> str:
    """'' unless the engine lost CPU time outside itself in the spike (`_host`: a process of its
    tree waited longer for a CPU that no process of the tree gained, or the hypervisor stole
    more); else that, in words. Contention of the host delays every process on its CPUs, the
    front end included, also where the front end's own run-queue wait stayed under its floor
    (it waits less often than a busy worker, so its rise is smaller): a gap that the server's
    reported times leave to the front end is then not shown to lie outside the engine."""
    if out.host_pid is not None:
        return f"the engine lost CPU outside itself (pid {out.host_pid} waited for it), front end included"
    if out.steal_fraction > 0:
        return "the hypervisor stole more of the engine's CPUs, front end included"
    return ""


def outside_excess(
    inputs: OutsideInputs, ev: EvidenceBuilder, config: AttributeConfig
) -> OutsideExcess:
    """Shares of the latency excess that the client and the network cover, and the host's part of
    the step time (see module docstring)."""
    out = OutsideExcess()
    read_rise = _client_late(inputs, ev, config, out)
    transit = _transit(inputs, ev, config, out)
    _host(inputs, ev, config, out)
    excess = inputs.latency_excess_ms
    if excess <= 0:
        return out
    out.transit_rise_ms = transit or 0.0
    out.client_lag_rise_ms = read_rise
    # A late reader stretches the client's own times by about its lag / read delay: that much
    # of the client − server gap is the client's, the rest of it is transit. An ITL gap the
    # server did not time is left to cause_shares, which compares it with the engine's step.
    client_ms = read_rise if out.client_late else 0.0
    if transit is not None or inputs.metric != "itl_p99":
        client_ms = min(client_ms, transit or 0.0)
    out.client_share = float(np.clip(client_ms / excess, 0.0, 1.0))
    out.network_share = float(
        np.clip(((transit or 0.0) - client_ms) / excess, 0.0, 1.0 - out.client_share)
    )
    return out
