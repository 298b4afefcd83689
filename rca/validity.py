"""Spikes of an invalid run get no engine verdict unless the server's own times show them too.

A run is `invalid` (runs.status, flows.run_scenario) when its load generator saturated: the
latencies it recorded are partly its own lateness. A spike in those client-side times says
something about the engine only when a server-side time rose in the same windows:
  - the engine's step time (spikelens' engine: its step is the server-side inter-token time),
    by at least AttributeConfig.min_step_rise of the baseline step and beyond 3 baseline std;
  - the server's socket-side TTFT/ITL/E2E p99 (query transit_windows), beyond its floor and noise;
  - the engine's own latency series on /metrics (rca.consequences' `symptom` series: TTFT, ITL,
    E2E as vLLM saw them), by a robust z above rca.metric_rank.MIN_Z.
When none of them rose (or none was measured), the engine causes (penalty, memory,
communication, load, host) are withdrawn: their shares become 'unexplained', the outside causes
(client, network) keep theirs, and the summary says why. Pure: RunSignals in, Attribution out.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from rca.attribute import Attribution, RunSignals, window_masks
from rca.config import AttributeConfig
from rca.detect import Spike
from rca.metric_rank import MIN_Z, SYMPTOMS, metric_series, rank_series
from rca.outside_causes import marked_rise
from rca.stepcost import mean_or_zero
from rca.window_columns import window_series

INVALID = "invalid"
OUTSIDE = ("client", "network")


def _steps_rose(signals: RunSignals, spike: Spike, spikes: list[Spike], config) -> bool | None:
    """Did the engine's mean step time per window rise (None: no step trace)?"""
    n = len(signals.windows)
    dur = window_series(signals.step_windows, "step_mean_ms", n)
    if not np.isfinite(dur).any():
        dur = window_series(signals.step_windows, "dur_ms", n)
    if not np.isfinite(dur).any():
        return None
    in_spike, in_base = window_masks(
        n, spike, spikes, config.guard_windows, config.min_baseline_windows
    )
    base = mean_or_zero(dur[in_base])
    return marked_rise(dur, in_spike, in_base, config.min_step_rise * base) > 0


def _server_sockets_rose(
    signals: RunSignals, spike: Spike, spikes: list[Spike], config: AttributeConfig
) -> bool | None:
    """Did the server's socket-side p99 of the spike's metric rise (None: not measured)?"""
    column = {
        "ttft_p99": "server_ttft_p99_ms",
        "e2e_p99": "server_e2e_p99_ms",
        "itl_p99": "server_itl_p99_ms",  # the gaps between its writes of a request's chunks
    }.get(spike.metric)
    n = len(signals.windows)
    if column is None:
        return None
    series = np.full(n, np.nan)
    for r in signals.transit_windows:
        if r.get(column) is not None and 0 <= r["window"] < n:
            series[r["window"]] = float(r[column])
    if not np.isfinite(series).any():
        return None
    in_spike, in_base = window_masks(
        n, spike, spikes, config.guard_windows, config.min_baseline_windows
    )
    floor = max(config.min_transit_rise_ms, config.min_step_rise * mean_or_zero(series[in_base]))
    return marked_rise(series, in_spike, in_base, floor) > 0


def _server_metrics_rose(
    signals: RunSignals, spike: Spike, spikes: list[Spike], config
) -> bool | None:
    """Did one of the engine's own latency series on /metrics rise (None: none scraped)?"""
    n = len(signals.windows)
    series = metric_series(signals.metric_windows, n, signals.window_s)
    own = _histogram_means({k: v for k, v in series.items() if re.search(SYMPTOMS, k)})
    if not own:
        return None
    in_spike, in_base = window_masks(
        n, spike, spikes, config.guard_windows, config.min_baseline_windows
    )
    return any(r.z > MIN_Z for r in rank_series(own, in_spike, in_base, signals.window_s))


def _histogram_means(series: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Latency histograms as their mean per window (rate of _sum / rate of _count): the rate of a
    latency sum alone stays flat under closed-loop load (fewer, slower requests); other series
    as they are, counts left out (they count requests, not time)."""
    out = {}
    for name, values in series.items():
        base, _, labels = name.partition("{")
        if base.endswith("_count"):
            continue
        count = series.get(base[: -len("_sum")] + "_count" + (f"{{{labels}" if labels else ""))
        if base.endswith("_sum") and count is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                out[base[: -len("_sum")] + "_mean" + (f"{{{labels}" if labels else "")] = np.where(
                    count > 0, values / np.where(count > 0, count, 1.0), np.nan
                )
        else:
            out[name] = values
    return out


def server_saw_spike(
    spike: Spike, spikes: list[Spike], signals: RunSignals, config: AttributeConfig
) -> bool:
    """True when any server-side time rose in the spike's windows (see module docstring)."""
    checks = (_steps_rose, _server_sockets_rose, _server_metrics_rose)
    return any(check(signals, spike, spikes, config) for check in checks)


def withhold_engine_verdict(attribution: Attribution, config: AttributeConfig) -> Attribution:
    """The attribution with the engine causes' shares moved to 'unexplained' (see docstring)."""
    kept = [c for c in attribution.causes if c.cause in OUTSIDE]
    named = sum(c.share for c in kept)
    uncovered = round(max(0.0, 1.0 - named), 4)
    causes = [*kept]
    if uncovered > 1e-4:
        causes.append(
            dataclasses.replace(
                next(
                    (c for c in attribution.causes if c.cause == "unexplained"),
                    _unexplained(attribution),
                ),
                share=uncovered,
            )
        )
    causes.sort(key=lambda c: -c.share)
    top = (
        max(kept, key=lambda c: c.share).cause
        if kept and named >= config.min_explained_share
        else "unexplained"
    )
    why = (
        "run invalid (the load generator saturated) and no server-side time rose with the spike: "
        "no engine verdict"
    )
    withdrawn = [c.cause for c in attribution.causes if c.cause not in (*OUTSIDE, "unexplained")]
    if withdrawn:
        why += f" (signals pointed at {', '.join(withdrawn)})"
    return dataclasses.replace(
        attribution,
        causes=causes,
        top_cause=top,
        summary=f"{why}; {attribution.summary}",
        uncovered=uncovered,
    )


def _unexplained(attribution: Attribution):
    from rca.attribute import CauseShare

    return CauseShare("unexplained", 0.0, 1.0, 0.0)


def check_validity(
    attributions: dict[int, Attribution],
    spikes: list[Spike],
    signals: RunSignals,
    config: AttributeConfig,
) -> dict[int, Attribution]:
    """Attributions of a run's spikes with the rule above applied when the run is invalid."""
    if signals.run_status != INVALID:
        return attributions
    return {
        s.spike_id: (
            attributions[s.spike_id]
            if server_saw_spike(s, spikes, signals, config)
            else withhold_engine_verdict(attributions[s.spike_id], config)
        )
        for s in spikes
    }
