"""The traffic of an incident imported from Prometheus, as requests a replay can send.

What: `incident_requests(conn, run_id, window_s)` reads an observed run's counters per window
(query `metric_rate_windows`) and returns the requests to send, as (send time, prompt tokens,
output tokens) from the window's start:
- how many: the requests the engine finished in each window (`vllm:request_success_total`, else
  its E2E histogram's `_count`), carried over windows so fractions are not lost;
- when: evenly over the window they finished in, moved back by that window's mean E2E
  (`_sum / _count` of the E2E histogram): a request finishes about one E2E after it was sent;
- how long: the window's prompt and generated tokens per finished request
  (`vllm:prompt_tokens_total`, `vllm:generation_tokens_total`); a window without a figure takes
  the run's mean.
Why: a production incident has no request log; the engine's own counters, scraped all along,
say how many requests it served per step and how long they were, which is what a replay needs
to put the same load on an engine spikelens starts (`spikelens replay --from-incident`).
Limits: every request of a window gets the window's mean lengths (the counters keep no
per-request spread), prompts are cut from the corpus (prefix-cache hits are not reproduced),
and sampling parameters are the engine's defaults (no counter records them).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from warehouse.db import DbConnection
from warehouse.queries import query

FINISHED = ("vllm:request_success_total", "vllm:e2e_request_latency_seconds_count")
PROMPT_TOKENS = "vllm:prompt_tokens_total"
OUTPUT_TOKENS = "vllm:generation_tokens_total"
E2E_SUM, E2E_COUNT = (
    "vllm:e2e_request_latency_seconds_sum",
    "vllm:e2e_request_latency_seconds_count",
)


class NoTrafficError(ValueError):
    """The run's series cannot size a replay (no finished-request counter, no request)."""


@dataclass(frozen=True)
class IncidentRequest:
    t_s: float  # send time, seconds from the incident window's start (>= 0)
    prompt_tokens: int  # >= 1
    output_tokens: int  # >= 1


def _rates(rows: list[dict]) -> dict[str, dict[int, float]]:
    """name → window → rate per second, summed over the series' label sets."""
    out: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        if r["rate_per_s"] is not None:
            out[r["name"]][int(r["window"])] += float(r["rate_per_s"])
    return out


def _per_request(numerator: dict[int, float], finished: dict[int, float]) -> dict[int, float]:
    """window → numerator per finished request, where both were measured and requests finished."""
    return {w: numerator[w] / f for w, f in finished.items() if f > 0 and w in numerator}


def _run_mean(per_window: dict[int, float], weights: dict[int, float]) -> float | None:
    total = sum(weights[w] for w in per_window)
    return sum(v * weights[w] for w, v in per_window.items()) / total if total > 0 else None


def incident_requests(conn: DbConnection, run_id: str, window_s: float) -> list[IncidentRequest]:
    """The requests of a replay of observed run `run_id` (module docstring), in send order."""
    rates = _rates(query(conn, "metric_rate_windows", run_id=run_id, window_s=window_s))
    source = next((name for name in FINISHED if rates.get(name)), None)
    if source is None:
        raise NoTrafficError(
            f"run {run_id}: no {' or '.join(FINISHED)} series, so the requests the engine"
            " served cannot be counted"
        )
    finished = rates[source]
    prompt = _per_request(rates.get(PROMPT_TOKENS, {}), finished)
    output = _per_request(rates.get(OUTPUT_TOKENS, {}), finished)
    e2e = _per_request(rates.get(E2E_SUM, {}), rates.get(E2E_COUNT, {}))
    mean_prompt, mean_output = _run_mean(prompt, finished), _run_mean(output, finished)
    if mean_prompt is None or mean_output is None:
        raise NoTrafficError(
            f"run {run_id}: no {PROMPT_TOKENS} or {OUTPUT_TOKENS} series, so the requests'"
            " lengths are not known"
        )
    requests: list[IncidentRequest] = []
    carry = 0.0
    for w in sorted(finished):
        carry += finished[w] * window_s
        n, carry = int(carry), carry - int(carry)
        lengths = (
            max(1, round(prompt.get(w, mean_prompt))),
            max(1, round(output.get(w, mean_output))),
        )
        start = w * window_s - e2e.get(w, 0.0)
        requests += [
            IncidentRequest(max(0.0, start + (i + 0.5) * window_s / n), *lengths) for i in range(n)
        ]
    if not requests:
        raise NoTrafficError(f"run {run_id}: the engine finished no request in the window")
    return sorted(requests, key=lambda r: r.t_s)
