"""What an observed run's signals can and cannot tell, in words for its incident page.

A window imported from Prometheus has only the series that were scraped: the page says which
causes they can show and which they cannot, and what would add the missing ones, instead of
letting a cause without a signal pass for a cause that was ruled out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from warehouse.observed_windows import HISTOGRAMS

# (cause, pattern over metric names, what it tells when present, what is missing when absent)
_COVERAGE: tuple[tuple[str, str, str, str], ...] = (
    (
        "load",
        r":num_requests_(running|waiting)$",
        "load: running and waiting requests",
        "load: no running/waiting request series, so a queue cannot be seen",
    ),
    (
        "memory",
        r":(kv_cache_usage_perc|gpu_cache_usage_perc|num_preemptions(_total)?)$",
        "memory (KV cache): cache usage and preemptions",
        "memory (KV cache): no cache-usage or preemption series",
    ),
    (
        "memory",
        r"^python_gc_|^spikelens_agent_gc",
        "memory (GC): Python collections of the processes that export them (vLLM's API"
        " server; EngineCore's only through an agent beside it)",
        "memory (GC): no Python GC series; a GC stall would read as unexplained",
    ),
    (
        "host",
        r"^node_cpu_seconds_total$|^node_pressure_|^spikelens_agent_process_runqueue_wait",
        "host: CPU time and waits for a CPU (node_exporter's machine-wide series, or each"
        " engine process's run-queue wait through `spikelens agent`)",
        "host: no node_exporter or `spikelens agent` CPU series; CPU contention would read as"
        " unexplained",
    ),
    (
        "stacks",
        r"^spikelens_agent_stack_seconds",
        "which code each engine process ran (penalties, collectives, scheduler: py-spy through"
        " `spikelens agent`)",
        "which code each engine process ran: no stack samples (`spikelens agent` with py-spy)",
    ),
)


def signal_coverage(names: Iterable[str]) -> tuple[str, ...]:
    """Sentences, one per family of signals, of what the run's series can and cannot tell."""
    present = set(names)
    lines = []
    latency = [
        f"{series.upper()} from {next(n for n in candidates if n + '_bucket' in present)}"
        for series, candidates in HISTOGRAMS.items()
        if any(n + "_bucket" in present for n in candidates)
    ]
    lines.append(
        "latency: " + "; ".join(latency) + " (per query step, from histogram buckets)"
        if latency
        else "latency: no engine latency histogram, so no spike can be found"
    )
    for _, pattern, told, missing in _COVERAGE:
        found = any(re.search(pattern, n) for n in present)
        lines.append(("can tell " + told) if found else ("cannot tell " + missing))
    lines.append(
        "cannot tell client or network: Prometheus holds no client-side times;"
        " a load test (`spikelens replay`, `spikelens run`) measures both ends"
    )
    return tuple(lines)
