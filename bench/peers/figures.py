"""One tool's figures from its own report, the no-op server's stamps and its process tree's CPU.

TTFT error: for every completed request the tool recorded and the server can name (an id the
server saw, see each parser), |tool's first-token stamp − server's stamp just before it wrote the
first content chunk|. A client cannot see the chunk before the server writes it, so the difference
is how late the tool noticed it: the error in the TTFT it reports (the send side is reported
apart, as server arrival − tool's send stamp, which also holds the loopback transit).
"""

from __future__ import annotations

import statistics

from .process_tree import TreeSampler
from .report import ToolReport, distribution


def ttft_error(report: ToolReport, served: list) -> dict:
    """Match the tool's requests to the server's by id; error distributions in ms."""
    by_id = {s.request_id: s for s in served if s.first_chunk_ns is not None}
    first_err, signed, send_gap, server_ttft, unmatched = [], [], [], [], 0
    by_clock: dict[str, list[float]] = {}
    for req in report.requests:
        s = by_id.get(req.server_id) if req.server_id is not None else None
        if s is None:
            unmatched += 1
            continue
        diff_ms = (req.first_token_ns - s.first_chunk_ns) / 1e6
        first_err.append(abs(diff_ms))
        if req.clock is not None:
            by_clock.setdefault(req.clock, []).append(abs(diff_ms))
        signed.append(diff_ms)
        send_gap.append((s.arrival_ns - req.sent_ns) / 1e6)
        server_ttft.append((s.first_chunk_ns - s.arrival_ns) / 1e6)
    out = {
        "matched": len(first_err),
        "unmatched": unmatched,
        "how": report.match_note,
        "first_token_abs_err_ms": distribution(first_err),
        "first_token_signed_err_ms_p50": distribution(signed)["p50"],
        "send_to_server_arrival_ms": distribution(send_gap),
        "server_ttft_ms": distribution(server_ttft),
    }
    if by_clock:  # loadgen: the error of first tokens read alone vs merged with a later packet
        out["first_token_abs_err_ms_by_clock"] = {
            c: distribution(v) for c, v in sorted(by_clock.items())
        }
    return out


def tool_figures(
    report: ToolReport, served: list, sampler: TreeSampler, *, returncode: int, wall_s: float
) -> dict:
    """The comparison's row for one tool (see bench/loadgen.py's docstring for each field)."""
    start, end = report.window_start_ns, report.window_end_ns
    span_s = max((end - start) / 1e9, 1e-9)
    cpu_s = sampler.cpu_between(start, end)
    active = sampler.active_processes(start, end)
    n_active = max(len(active), 1)
    server_cpu = sampler.also_between(start, end)
    served_in_window = sum(1 for s in served if s.done_ns is not None and start <= s.done_ns <= end)
    return {
        "version": report.version,
        "returncode": returncode,
        "wall_s": round(wall_s, 2),
        "requests_per_s": report.requests_per_s,
        "completed": report.completed,
        "server_requests_per_s": served_in_window / span_s,
        "measured_window_s": round(span_s, 3),
        "processes_seen": len(sampler.names),
        "active_processes": n_active,
        "active": active,
        "requests_per_s_per_process": report.requests_per_s / n_active,
        "cpu_s_measured": round(cpu_s, 3),
        "cpu_s_total": round(sampler.total(), 3),
        "cpu_percent_measured": 100 * cpu_s / span_s,
        "cpu_ms_per_request": 1e3 * cpu_s / max(report.completed, 1),
        "ttft_ms_reported": {"p50": report.ttft_p50_ms, "p99": report.ttft_p99_ms},
        "ttft_error": ttft_error(report, served),
        "server_cpu_percent": None if server_cpu is None else 100 * server_cpu / span_s,
    }


# The figures whose median over rounds `median_of_runs` takes (dotted paths into tool_figures).
MEDIAN_KEYS = (
    "requests_per_s",
    "server_requests_per_s",
    "requests_per_s_per_process",
    "active_processes",
    "cpu_ms_per_request",
    "ttft_ms_reported.p50",
    "ttft_ms_reported.p99",
    "ttft_error.first_token_abs_err_ms.p50",
    "ttft_error.first_token_abs_err_ms.p99",
    "ttft_error.server_ttft_ms.p50",
    "server_cpu_percent",
)


def _get(d: dict, dotted: str):
    for key in dotted.split("."):
        d = d[key]
    return d


def median_of_runs(runs: dict[str, list[dict]]) -> dict:
    """tool -> {dotted figure: median over that tool's runs}."""
    return {
        tool: {k: statistics.median(_get(r, k) for r in rows) for k in MEDIAN_KEYS}
        for tool, rows in runs.items()
    }


def peer_ratios(median: dict, goal_ratio: float = 2.0, goal_err_p99_ms: float = 0.1) -> dict:
    """loadgen ("spikelens") against the best peer: raw requests/s, and requests/s per active
    process (the goal's measure); the goal is that ratio >= goal_ratio with loadgen's TTFT error
    p99 <= goal_err_p99_ms."""
    peers = [t for t in median if t != "spikelens"]
    if "spikelens" not in median or not peers:
        raise ValueError(f"need spikelens and at least one peer, got {sorted(median)}")
    best = max(peers, key=lambda t: median[t]["requests_per_s"])
    best_pp = max(peers, key=lambda t: median[t]["requests_per_s_per_process"])
    mine = median["spikelens"]
    per_process = mine["requests_per_s_per_process"] / median[best_pp]["requests_per_s_per_process"]
    err_p99 = mine["ttft_error.first_token_abs_err_ms.p99"]
    return {
        "best_peer": best,
        "requests_per_s": mine["requests_per_s"] / median[best]["requests_per_s"],
        "best_peer_per_process": best_pp,
        "requests_per_s_per_process": per_process,
        "goal": {
            "per_process_at_least": goal_ratio,
            "ttft_error_p99_ms_at_most": goal_err_p99_ms,
            "per_process_met": per_process >= goal_ratio,
            "ttft_error_met": err_p99 is not None and err_p99 <= goal_err_p99_ms,
        },
    }
