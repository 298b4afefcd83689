"""pages.display_windows: a long run's windows as display buckets that keep every spike."""

from pages.display_windows import MAX_DISPLAY_WINDOWS, display_windows
from pages.incident import Window


def _hour() -> tuple[Window, ...]:
    return tuple(
        Window(
            t_s=float(t),
            itl_p99_ms=900.0 if t == 1801 else 40.0,
            ttft_p99_ms=None if t % 3 else 100.0 + t % 2,
            requests=10 + t % 3,
            tokens=None,
            running=30.0 if t == 2000 else 8.0,
        )
        for t in range(3600)
    )


def test_short_runs_pass_unchanged():
    windows = _hour()[:60]
    assert display_windows(windows) is windows


def test_an_hour_becomes_buckets_with_peaks_kept_and_counts_averaged():
    shown = display_windows(_hour())
    assert len(shown) == MAX_DISPLAY_WINDOWS
    assert [w.t_s for w in shown[:3]] == [0.0, 3.0, 6.0]  # each bucket at its first window
    assert max(w.itl_p99_ms for w in shown) == 900.0  # a one-window spike keeps its height
    assert sum(w.itl_p99_ms == 900.0 for w in shown) == 1
    assert max(w.running for w in shown) == 30.0
    assert {w.requests for w in shown} == {11}  # mean of 10, 11, 12 per bucket
    assert all(w.tokens is None for w in shown)  # nothing to show stays nothing
    assert all(w.ttft_p99_ms in (100.0, 101.0) for w in shown)  # None left out of the max
