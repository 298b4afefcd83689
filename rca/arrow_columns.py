"""Arrow columns (warehouse.queries.query_table) as numpy arrays, read from their buffers.

Why not pyarrow's own `to_numpy`: with nulls, or whenever it may copy, it goes through pyarrow's
pandas layer and imports pandas — seconds of the first analysis in a process on this machine.
These read the buffers directly (primitive types and lists of them, which is what the analysis
fetches), with the same values: integers and floats as float64, nulls as NaN.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_NUMPY_OF = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def _chunks(column: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    return list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]


def valid_mask(array: pa.Array) -> np.ndarray:
    """True where the value is not null [len(array)]."""
    n, offset = len(array), array.offset
    if array.null_count == 0:
        return np.ones(n, dtype=bool)
    if pa.types.is_null(array.type):
        return np.zeros(n, dtype=bool)
    bits = np.frombuffer(array.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little")[offset : offset + n].astype(bool)


def _primitive(array: pa.Array, dtype: type) -> np.ndarray:
    """The values of a primitive array as `dtype` (whatever is stored under nulls)."""
    n, offset = len(array), array.offset
    if pa.types.is_null(array.type):
        return np.zeros(n, dtype=dtype)
    if array.type not in _NUMPY_OF:
        raise TypeError(f"cannot read an Arrow column of type {array.type} as numbers")
    stored = np.frombuffer(array.buffers()[1], dtype=_NUMPY_OF[array.type], count=offset + n)
    return stored[offset:].astype(dtype)


def float_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numeric column as float64, nulls as NaN (as float(value) per row would give)."""
    parts = []
    for chunk in _chunks(column):
        values = _primitive(chunk, np.float64)
        values[~valid_mask(chunk)] = np.nan
        parts.append(values)
    return np.concatenate(parts) if parts else np.empty(0)


def int_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer column without nulls as int64."""
    parts = [_primitive(chunk, np.int64) for chunk in _chunks(column)]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def list_column(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat values int64, offsets int64 [n + 1], valid [n]) of a list-of-integers column: list
    i is values[offsets[i]:offsets[i + 1]] (empty where null)."""
    values, offsets, valid, base = [], [np.zeros(1, dtype=np.int64)], [], 0
    for chunk in _chunks(column):
        if pa.types.is_null(chunk.type):
            offsets.append(np.full(len(chunk), base, dtype=np.int64))
            valid.append(np.zeros(len(chunk), dtype=bool))
            continue
        ok = valid_mask(chunk)
        off = _primitive(chunk.offsets, np.int64)
        lengths = np.where(ok, np.diff(off), 0)
        child = _primitive(chunk.values, np.int64)
        starts = off[:-1][ok]
        take = np.repeat(starts - (np.cumsum(lengths[ok]) - lengths[ok]), lengths[ok])
        take += np.arange(len(take), dtype=np.int64)
        values.append(child[take])
        offsets.append(base + np.cumsum(lengths))
        valid.append(ok)
        base += int(lengths.sum())
    return (
        np.concatenate(values) if values else np.empty(0, dtype=np.int64),
        np.concatenate(offsets),
        np.concatenate(valid) if valid else np.empty(0, dtype=bool),
    )
