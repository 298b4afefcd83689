"""How much of a spike's excess an intervention took away, and the verdict (pure).

Each arm of `spikelens confirm` replays the spike's stretch: baseline windows, then the spike's
windows. Per arm (`measure_arm`), on the spike's metric's 1-s windows, the arm's own baseline is
the detector's (rca.detect.baseline over the windows before the spike, less a guard), and

    excess_ms = mean over the spike's windows (its times rounded to the 1-s grid) of
                (window p99 − baseline median)

The arm reproduced the spike when the detectors would call its spike windows a spike
(rca.detect.windows_spike: at least `DetectConfig.min_windows` of them above the threshold, or a
sustained stretch whose mean beats it with the spread shrunk by √n: the tests that find
spikes). Across arms (`share_removed`):

    share removed = 1 − mean(excess, cause removed) / mean(excess, as recorded)

with an interval that is the min and max of the same ratio over every (recorded, removed) pair
of repeats — with K repeats each, K² pairs; not a confidence interval, the spread the repeats
showed. Verdict (`verdict`): inconclusive when no intervention exists or when the recorded arms
did not reproduce the spike (most of them under the threshold); else confirmed when the share
removed is at least CONFIRM_SHARE, not confirmed when it is less.

Client and network causes have no engine knob; they are confirmed by measurement instead, on the
recorded run alone (`measure_outside`): the client's p99 and the server's own (its socket stamps,
query `transit_windows`) over the same requests, each against its baseline windows as above.
The share of the client's excess that the server did not see happened outside the engine:

    share outside = 1 − server excess / client excess

judged like a share removed (confirmed at CONFIRM_SHARE or more). TTFT spikes compare TTFT;
every other metric compares the whole stream (the server's last byte vs the client's last
read), since the server stamps no inter-token times.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rca.config import DetectConfig
from rca.detect import baseline, series, windows_spike

CONFIRM_SHARE = 0.5
GUARD_WINDOWS = 2  # windows just before the spike left out of the baseline (its run-up)
EXIT_CODES = {"confirmed": 0, "not confirmed": 1, "inconclusive": 3}


@dataclass(frozen=True)
class ArmMeasure:
    """One arm's spike-window excess against its own baseline stretch."""

    arm: str  # 'recorded' | 'removed'
    repeat: int
    run_id: str
    baseline_ms: float | None  # median of the baseline windows
    threshold_ms: float | None  # the detector's threshold on them
    spike_ms: float | None  # mean of the spike windows
    excess_ms: float | None  # spike_ms − baseline_ms
    windows_above: int  # spike windows above the threshold
    reproduced: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_arm(
    windows: list[dict],
    metric: str,
    spike_s: tuple[float, float],
    arm: str,
    repeat: int,
    run_id: str,
    config: DetectConfig = DetectConfig(),
) -> ArmMeasure:
    """The excess of `metric` ('itl_p99', …) in the windows of `spike_s` (arm seconds) over the
    windows before it; `windows`: the windows query's rows (t_s and the percentiles)."""
    values = series(windows, metric, config)
    t = np.array([float(w["t_s"]) for w in windows])
    # the spike's windows on the arm's grid: a replay lands within a second of the recorded
    # times, so the nearest window boundaries
    first, end = round(spike_s[0]), max(round(spike_s[1]), round(spike_s[0]) + 1)
    inside = (t >= first) & (t < end)
    before = t < first - GUARD_WINDOWS
    base = baseline(values[before], metric, config)
    spike_values = values[inside][~np.isnan(values[inside])]
    if base is None or len(spike_values) == 0:
        why = "too few baseline windows" if base is None else "no sample in the spike's windows"
        return ArmMeasure(arm, repeat, run_id, None, None, None, None, 0, False, why)
    spike_ms = float(np.mean(spike_values))
    above = int(np.sum(spike_values > base.threshold_ms))
    return ArmMeasure(
        arm,
        repeat,
        run_id,
        base.median_ms,
        base.threshold_ms,
        spike_ms,
        spike_ms - base.median_ms,
        above,
        windows_spike(spike_values, base, config),
    )


@dataclass(frozen=True)
class Share:
    """The share of the recorded excess the removal took away, with its min–max over pairs."""

    point: float
    low: float
    high: float
    pairs: int


def share_removed(recorded: list[ArmMeasure], removed: list[ArmMeasure]) -> Share | None:
    """1 − mean removed excess / mean recorded excess; None without a positive recorded excess
    or without a measured removed arm."""
    rec = [m.excess_ms for m in recorded if m.excess_ms is not None]
    rem = [m.excess_ms for m in removed if m.excess_ms is not None]
    if not rec or not rem or float(np.mean(rec)) <= 0:
        return None
    point = 1.0 - float(np.mean(rem)) / float(np.mean(rec))
    ratios = [1.0 - b / a for a in rec if a > 0 for b in rem]
    if not ratios:
        return None
    return Share(point, min(ratios), max(ratios), len(ratios))


@dataclass(frozen=True)
class Verdict:
    verdict: str  # confirmed | not confirmed | inconclusive
    reason: str

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


def verdict(
    recorded: list[ArmMeasure],
    share: Share | None,
    intervention_reason: str = "",
) -> Verdict:
    """The verdict of a confirmation; `intervention_reason` non-empty: no intervention exists
    (inconclusive, saying why)."""
    if intervention_reason:
        return Verdict("inconclusive", f"no intervention: {intervention_reason}")
    reproduced = sum(m.reproduced for m in recorded)
    if not recorded or 2 * reproduced < len(recorded):
        return Verdict(
            "inconclusive",
            f"the as-recorded arm did not reproduce the spike ({reproduced} of {len(recorded)} "
            "repeats above the detector's threshold)",
        )
    if share is None:
        return Verdict("inconclusive", "the removed arm could not be measured")
    if share.point >= CONFIRM_SHARE:
        return Verdict("confirmed", f"removing the cause took {share.point:.0%} of the excess away")
    return Verdict(
        "not confirmed",
        f"removing the cause took only {share.point:.0%} of the excess away "
        f"(< {CONFIRM_SHARE:.0%}): the verdict is suspect",
    )


# spike metric → (client p99, server p99) columns of query transit_windows; the whole stream
# (E2E) where the metric has none, or its server side was not stamped (ITL before the server
# stamped each text chunk)
_OUTSIDE_COLUMNS = {
    "ttft_p99": ("client_ttft_p99_ms", "server_ttft_p99_ms"),
    "itl_p99": ("client_itl_p99_ms", "server_itl_p99_ms"),
}
_STREAM_COLUMNS = ("client_e2e_p99_ms", "server_e2e_p99_ms")
_COMPARED = {"client_ttft_p99_ms": "TTFT", "client_itl_p99_ms": "ITL"}


@dataclass(frozen=True)
class OutsideMeasure:
    """Client and server excess over the same requests in a spike's windows (recorded run)."""

    compared: str  # 'TTFT' | 'the whole stream'
    client_baseline_ms: float
    client_excess_ms: float
    server_baseline_ms: float
    server_excess_ms: float
    windows_above: int  # spike windows where the client's p99 is above its threshold
    reproduced: bool  # the client's side shows the spike (as the detector would flag it)

    @property
    def share_outside(self) -> Share | None:
        """1 − server excess / client excess; None without a positive client excess."""
        if self.client_excess_ms <= 0:
            return None
        point = 1.0 - max(0.0, self.server_excess_ms) / self.client_excess_ms
        return Share(point, point, point, 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_outside(
    transit: list[dict],
    metric: str,
    spike_s: tuple[float, float],
    config: DetectConfig = DetectConfig(),
) -> OutsideMeasure | None:
    """The client's and the server's excess in the windows of `spike_s` (measured seconds);
    `transit`: query transit_windows' rows at 1-s windows. None: too few baseline windows or no
    request both sides saw in the spike."""
    client_col, server_col = _OUTSIDE_COLUMNS.get(metric, _STREAM_COLUMNS)
    if not any(r.get(server_col) is not None for r in transit):
        client_col, server_col = _STREAM_COLUMNS
    w = np.array([float(r["window"]) for r in transit])
    first, end = round(spike_s[0]), max(round(spike_s[1]), round(spike_s[0]) + 1)
    inside, before = (w >= first) & (w < end), w < first - GUARD_WINDOWS
    sides = []
    for col in (client_col, server_col):
        values = np.array([np.nan if r[col] is None else float(r[col]) for r in transit])
        base = baseline(values[before], metric, config)
        spike = values[inside][~np.isnan(values[inside])]
        if base is None or len(spike) == 0:
            return None
        sides.append((base, spike))
    (client_base, client_spike), (server_base, server_spike) = sides
    above = int(np.sum(client_spike > client_base.threshold_ms))
    return OutsideMeasure(
        _COMPARED.get(client_col, "the whole stream"),
        client_base.median_ms,
        float(np.mean(client_spike)) - client_base.median_ms,
        server_base.median_ms,
        float(np.mean(server_spike)) - server_base.median_ms,
        above,
        windows_spike(client_spike, client_base, config),
    )


def outside_verdict(measured: OutsideMeasure | None, cause: str) -> Verdict:
    """The verdict of a client or network cause from `measure_outside`."""
    if measured is None:
        return Verdict(
            "inconclusive",
            "too few windows where both the client and the server timed the same requests",
        )
    share = measured.share_outside
    if not measured.reproduced or share is None:
        return Verdict(
            "inconclusive",
            f"the client's {measured.compared} p99 is not above its threshold in the spike's "
            f"windows ({measured.windows_above} above)",
        )
    said = (
        f"the server saw {measured.server_excess_ms:.1f} ms of the client's "
        f"{measured.client_excess_ms:.1f} ms excess ({measured.compared} p99): "
        f"{share.point:.0%} of it happened outside the engine"
    )
    if share.point >= CONFIRM_SHARE:
        return Verdict("confirmed", f"measured, not re-run: {said}")
    return Verdict(
        "not confirmed",
        f"measured, not re-run: {said} (< {CONFIRM_SHARE:.0%}): the engine's own time rose, "
        f"so {cause} is suspect",
    )
