"""What every tool's output is reduced to before the comparison (stdlib only, so the parsers
can be tested without the peers' virtualenv)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolRequest:
    """One completed request as the tool recorded it (wall-clock ns, time.time_ns' clock)."""

    server_id: str | None  # the id the no-op server recorded for it (None: cannot be matched)
    sent_ns: int  # the tool's send stamp (start of its TTFT)
    first_token_ns: int  # the tool's stamp of the first content token (end of its TTFT)
    clock: str | None = (
        None  # how the tool took first_token_ns, where it says (loadgen's arrival_clock)
    )


@dataclass
class ToolReport:
    """A tool's run as the tool itself reports it."""

    tool: str
    version: str
    requests_per_s: float  # the tool's own throughput figure (completed requests / s)
    completed: int  # completed requests in its measured phase
    ttft_p50_ms: float | None  # the tool's own TTFT percentiles
    ttft_p99_ms: float | None
    window_start_ns: int  # the tool's measured phase, for CPU accounting
    window_end_ns: int
    requests: list[ToolRequest] = field(default_factory=list)
    match_note: str = ""  # how requests were matched to the server's stamps (or why not)


def percentile(values: list[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def distribution(values: list[float]) -> dict:
    """p50 / p99 / max / count of values (ms)."""
    return {
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
        "count": len(values),
    }
