"""rca.arrow_columns: the values pyarrow would give, read from the buffers, sliced and chunked."""

import numpy as np
import pyarrow as pa

from rca.arrow_columns import float_column, int_column, list_column


def test_numbers_with_nulls_as_float64_with_nan_across_slices_and_chunks():
    column = pa.chunked_array(
        [pa.array([1, None, 3, 4, None], pa.int32()).slice(1), pa.array([7, None], pa.int32())]
    )
    got = float_column(column)
    assert got.dtype == np.float64
    expected = [np.nan if v is None else float(v) for v in column.to_pylist()]
    assert np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(float_column(pa.array([1.5, None])), [1.5, np.nan], equal_nan=True)
    assert np.isnan(float_column(pa.nulls(2))).all()
    assert int_column(pa.chunked_array([pa.array([2**40, 5], pa.int64())])).tolist() == [2**40, 5]


def test_lists_as_flat_values_offsets_and_validity():
    lists = pa.array([[1, 2, 3], None, [], [4, 5], [6]], pa.list_(pa.int32()))
    column = pa.chunked_array([lists.slice(1), lists])
    values, offsets, valid = list_column(column)
    for i, expected in enumerate(column.to_pylist()):
        assert bool(valid[i]) == (expected is not None)
        assert values[offsets[i] : offsets[i + 1]].tolist() == (expected or [])
    assert list_column(pa.chunked_array([pa.nulls(3)]))[2].tolist() == [False] * 3
