"""rca.window_columns: per-window rows as [n_windows] columns, gaps and nulls as NaN."""

import numpy as np

from rca.window_columns import by_window, nvml_series, window_series


def test_window_series_reads_rows_in_order_with_nulls_as_nan():
    rows = [{"x": 1}, {"x": None}, {}]
    assert np.array_equal(window_series(rows, "x"), [1.0, np.nan, np.nan], equal_nan=True)
    assert np.isnan(window_series([], "x", 3)).all() and len(window_series([], "x", 3)) == 3


def test_by_window_places_rows_by_their_window_and_drops_those_outside():
    rows = [{"window": 2, "x": 5.0}, {"window": 0, "x": 1.0}, {"window": 9, "x": 7.0}]
    assert np.array_equal(by_window(rows, "x", 4), [1.0, np.nan, 5.0, np.nan], equal_nan=True)


def test_nvml_series_averages_the_gpus_of_a_window():
    rows = [
        {"window": 0, "gpu": 0, "u": 10.0},
        {"window": 0, "gpu": 1, "u": 30.0},
        {"window": 1, "gpu": 0, "u": None},
    ]
    assert np.array_equal(nvml_series(rows, "u", 2), [20.0, np.nan], equal_nan=True)
