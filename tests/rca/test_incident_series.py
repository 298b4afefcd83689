"""rca.incident_series: an incident's verdict taken on the series its signals cover best."""

import numpy as np

from rca.attribute import attribute_spike
from rca.config import DetectConfig
from rca.detect import Interval, merge_incidents
from tests.support.spikesignals import SpikeRun, spike_signals

BURST = (33, 34)  # windows of an ITL burst right after the TTFT spike, no fault behind it


def _merged_incident(transit_rise_ms: float):
    """A TTFT spike (windows 26-31) and an unrelated ITL burst (33-34) with the larger relative
    peak, merged by detection into one ITL-primary incident."""
    run = SpikeRun(
        first=26,
        last=31,
        base_latency_ms=100.0,
        latency_rise_ms=800.0,
        transit_rise_ms=transit_rise_ms,
    )
    _, signals = spike_signals(run)
    rng = np.random.default_rng(1)
    for w in signals.windows:
        burst = BURST[0] <= w["window"] <= BURST[1]
        w["itl_p99_ms"] = (600.0 if burst else 20.0) + float(rng.normal(0.0, 0.5))
    intervals = [
        Interval("ttft_p99", 26, 31, 900.0, 100.0, list(range(26, 32)), 48.0),
        Interval("itl_p99", *BURST, 600.0, 20.0, list(range(BURST[0], BURST[1] + 1)), 58.0),
    ]
    (spike,) = merge_incidents(intervals, 1.0, DetectConfig())
    assert spike.metric == "itl_p99" and spike.metrics == ["itl_p99", "ttft_p99"]
    return spike, signals


def test_a_merged_itl_burst_does_not_hide_the_covered_ttft_spike():
    spike, signals = _merged_incident(transit_rise_ms=800.0)
    attr = attribute_spike(spike, [spike], signals)
    assert attr.top_cause == "network", (attr.top_cause, attr.summary)
    assert attr.metric == "ttft_p99"
    network = next(c for c in attr.causes if c.cause == "network")
    assert network.share >= 0.8 and attr.uncovered <= 0.2
    assert "ttft_p99" in attr.summary


def test_an_incident_no_series_of_which_is_covered_stays_unexplained():
    spike, signals = _merged_incident(transit_rise_ms=0.0)
    attr = attribute_spike(spike, [spike], signals)
    assert attr.top_cause == "unexplained" and attr.uncovered >= 0.9
    assert attr.metric == "itl_p99"  # nothing better covered: the primary series speaks
