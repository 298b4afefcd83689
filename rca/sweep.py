"""Penalty × temperature sweep cells: how repetitive, how diverse, how long and how slow outputs
are per (temperature, frequency_penalty) cell of a sweep run.

Repetition loops are the penalty cause's second face (docs/design.md): near-greedy sampling without
penalties makes outputs repeat until max_tokens, holding batch slots. The repeated 3-gram rate of
an output is 1 − distinct 3-grams / 3-grams; its entropy is the Shannon entropy (bits) of the
output's token distribution. Both come from the engine's output token ids.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np


def repeated_ngram_rate(ids: list[int], n: int = 3) -> float:
    """Share of an output's n-grams that repeat an earlier one (0 = none, → 1 = a loop)."""
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def repeated_ngram_rates(values: np.ndarray, offsets: np.ndarray, n: int = 3) -> np.ndarray:
    """`repeated_ngram_rate` of many outputs at once: output i is values[offsets[i]:offsets[i+1]]
    (an Arrow list column's flat values and offsets). The same figures, bit for bit: distinct
    n-grams are counted exactly per output by sorting (output, n-gram) keys, no hashing, and the
    rate is 1 − distinct / n-grams in float64 (ints below 2^53 divide as Python's ints do).
    Cost: one sort of the run's n-grams, instead of a Python set per output."""
    values = np.asarray(values, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    m = len(offsets) - 1
    grams = np.maximum(np.diff(offsets) - (n - 1), 0)
    rates = np.zeros(m, dtype=np.float64)
    total = int(grams.sum())
    if total == 0:
        return rates
    owner = np.repeat(np.arange(m, dtype=np.int64), grams)
    first = np.cumsum(grams) - grams  # index of each output's first n-gram among all n-grams
    start = np.arange(total, dtype=np.int64) + np.repeat(offsets[:-1] - first, grams)
    cols = [values[start + j] for j in range(n)]
    distinct = np.bincount(_distinct_owners(owner, cols), minlength=m)
    has = grams > 0
    rates[has] = 1.0 - distinct[has].astype(np.float64) / grams[has].astype(np.float64)
    return rates


def _distinct_owners(owner: np.ndarray, cols: list[np.ndarray]) -> np.ndarray:
    """The owner of each distinct (owner, n-gram), owner ascending: one sort of int64 keys when
    (owner, n-gram) packs into 63 bits (ids offset to 0), else a lexicographic sort."""
    lo = min(int(c.min()) for c in cols)
    bits = max(1, (max(int(c.max()) for c in cols) - lo).bit_length())
    owner_bits = max(1, int(owner[-1]).bit_length())
    if bits * len(cols) + owner_bits <= 63:
        key = owner.copy()
        for c in cols:
            key = (key << bits) | (c - lo)
        key.sort()
        fresh = np.concatenate(([True], key[1:] != key[:-1]))
        return key[fresh] >> (bits * len(cols))
    order = np.lexsort((*cols[::-1], owner))
    differs = np.zeros(len(order) - 1, dtype=bool)
    for c in (owner, *cols):
        sorted_c = c[order]
        differs |= sorted_c[1:] != sorted_c[:-1]
    return owner[order][np.concatenate(([True], differs))]


def token_entropy_bits(ids: list[int]) -> float:
    """Shannon entropy of the output's unigram distribution, in bits."""
    if not ids:
        return 0.0
    counts = np.array(list(Counter(ids).values()), dtype=np.float64)
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


@dataclass(frozen=True)
class SweepCell:
    temperature: float
    frequency_penalty: float
    requests: int
    repeated_3gram_rate: float  # mean over outputs
    entropy_bits: float  # mean over outputs
    output_tokens: float  # mean output length
    hit_max_tokens: float  # share of outputs that ran to max_tokens
    e2e_p50_ms: float
    e2e_p99_ms: float
    itl_p99_ms: float

    def to_dict(self) -> dict:
        return asdict(self)


def sweep_cells(db_path, run_id: str) -> list[SweepCell]:
    """One SweepCell per (temperature, frequency_penalty) seen in the run's measured requests."""
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        rows = query(conn, "sweep_requests", run_id=run_id)
    cells: dict[tuple[float, float], list[dict]] = {}
    for r in rows:
        cells.setdefault((round(r["temperature"], 4), round(r["frequency_penalty"], 4)), []).append(
            r
        )
    out = []
    for (t, f), rs in sorted(cells.items()):
        ids = [r["output_token_ids"] or [] for r in rs]
        e2e = np.array([r["e2e_ms"] for r in rs if r["e2e_ms"] is not None])
        itl = np.array([r["itl_p99_ms"] for r in rs if r["itl_p99_ms"] is not None])
        nan = math.nan
        out.append(
            SweepCell(
                temperature=t,
                frequency_penalty=f,
                requests=len(rs),
                repeated_3gram_rate=float(np.mean([repeated_ngram_rate(x) for x in ids])),
                entropy_bits=float(np.mean([token_entropy_bits(x) for x in ids])),
                output_tokens=float(np.mean([len(x) for x in ids])),
                hit_max_tokens=float(np.mean([r["finish_reason"] == "length" for r in rs])),
                e2e_p50_ms=float(np.quantile(e2e, 0.5)) if len(e2e) else nan,
                e2e_p99_ms=float(np.quantile(e2e, 0.99)) if len(e2e) else nan,
                itl_p99_ms=float(np.quantile(itl, 0.99)) if len(itl) else nan,
            )
        )
    return out
