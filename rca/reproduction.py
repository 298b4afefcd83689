"""Did a replay reproduce an incident's spikes? When, how large, which verdict, side by side.

What: `reproduction(production, replayed, tolerance_s)` pairs each reported spike of the
production run (an incident imported from Prometheus) with at most one reported spike of its
replay, the pair that overlaps most once each is widened by `tolerance_s` on both sides
(rca.evaluate.match_events: one-to-one, most total overlap), and says for each production spike
how far the replay's started from it, how large each was (peak / baseline of its own series) and
what each was named. A production spike without a partner was not reproduced.
Why: a replay from an incident's counters is the hand-off to `spikelens confirm`; it is worth
that only where the spike came back at the same time and size, and the comparison says so.
Both runs' times are seconds from their own start, which the replay keeps aligned (its trace
starts at the incident window's start). Pure: spike rows (query `spikes`) in, rows out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rca.evaluate import match_events

# A reproduced spike may start this far from the production one: Prometheus' step, the counters'
# lag (a request is counted when it finishes) and the replay's send times round to seconds.
TOLERANCE_S = 5.0


@dataclass(frozen=True)
class SpikeSide:
    spike_id: int
    start_s: float
    end_s: float
    metric: str
    size: float  # peak / baseline of its own series
    top_cause: str


@dataclass(frozen=True)
class Reproduced:
    production: SpikeSide
    replay: SpikeSide | None  # None: not reproduced

    @property
    def shift_s(self) -> float | None:
        return None if self.replay is None else self.replay.start_s - self.production.start_s

    def to_dict(self) -> dict:
        return {**asdict(self), "shift_s": self.shift_s}

    def line(self) -> str:
        """One sentence for the CLI and the replay's record."""
        p = self.production
        head = f"spike {p.spike_id} ({p.metric} {p.start_s:g}-{p.end_s:g} s, {p.size:.1f}x, {p.top_cause})"
        if self.replay is None:
            return f"{head}: not reproduced"
        r = self.replay
        return (
            f"{head}: reproduced at {r.start_s:g}-{r.end_s:g} s ({self.shift_s:+g} s),"
            f" {r.metric} {r.size:.1f}x, named {r.top_cause}"
        )


def _side(row: dict) -> SpikeSide:
    baseline = float(row["baseline_ms"] or 0.0)
    size = float(row["peak_ms"]) / baseline if baseline > 0 else float("inf")
    return SpikeSide(
        int(row["spike_id"]),
        float(row["start_s"]),
        float(row["end_s"]),
        str(row["metric"]),
        size,
        str(row["top_cause"]),
    )


def reproduction(
    production: list[dict], replayed: list[dict], tolerance_s: float = TOLERANCE_S
) -> list[Reproduced]:
    """Each reported production spike with its reproduction, if any (module docstring)."""
    prod = [_side(r) for r in production if not r.get("suppressed")]
    rep = [_side(r) for r in replayed if not r.get("suppressed")]
    pairs = dict(
        match_events(
            [asdict(s) for s in prod],
            [asdict(s) for s in rep],
            window_s=tolerance_s,
            tolerance_windows=1,
        )
    )
    return [Reproduced(p, rep[pairs[i]] if i in pairs else None) for i, p in enumerate(prod)]
