"""Latency and throughput metrics of a run, defined as vLLM's `bench serve` defines them, with
GuideLLM's, genai-perf's and AIPerf's per-request views beside them.

What (pure functions over the pyarrow tables of requests.parquet and tokens.parquet; no I/O):
- `per_request(requests, tokens)`: one row per request with TTFT, E2E, TPOT (and the same from
  the *intended* send time), the stream's whole length, and the other tools' per-request ITL.
- `itl_gaps(tokens)`: every gap between consecutive content chunks of a request (vLLM's ITL).
- `summarize(requests, tokens, ...)`: counts, throughput, goodput and distribution statistics.
Why here: the warehouse's measurement macros (warehouse/macros.sql) and the report reuse the
definitions instead of re-deriving them (a test checks both agree), and docs/loadgen.md
documents them once.

Definitions (times in ms; only requests with status 'ok' enter latency statistics; a content
chunk is one whose text is non-empty, tokens.n_tokens > 0):
- TTFT  = first content chunk − sent_ns.
- E2E   = last content chunk − sent_ns: E2E ends at the last token, not at the end of the stream
  (the usage chunk and `data: [DONE]` that follow carry no token), so E2E − TTFT is exactly the
  sum of the request's ITL gaps.
- ITL   = every gap between consecutive content chunks, pooled over requests (not averaged).
- TPOT  = (E2E − TTFT) / (output_tokens − 1), requests with output_tokens > 1.
- *_intended_ms: the same from intended_send_ns (open loop: the scheduled time), so a client or
  server that falls behind shows as queueing instead of hiding it (coordinated omission).
- stream_ms = done_ns − sent_ns, the whole stream (GuideLLM's request latency).
- GuideLLM: TPOT = E2E / output_tokens (includes TTFT); ITL per request =
  (last chunk − first chunk) / (output_tokens − 1). genai-perf: the same ITL. AIPerf: ITL per
  request = (last chunk − first chunk) / (output_tokens − first chunk's tokens), falling back to
  output_tokens − 1 when the first chunk's count is unknown or not below output_tokens.
- Goodput = completed requests meeting every SLO given (ttft_ms, tpot_ms, e2e_ms) per second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from loadgen.errors import SpecError
from spikelens_common.config_keys import strict_keys

PERCENTILES = (50, 90, 95, 99)
CONVENTIONS = ("vllm", "guidellm", "genai-perf")


@dataclass(frozen=True)
class SLO:
    """Service-level objectives for goodput (None = no limit on that metric)."""

    ttft_ms: float | None = None  # time to first token, as vLLM's --goodput ttft:
    tpot_ms: float | None = None  # time per output token after the first (tpot:)
    e2e_ms: float | None = None  # whole request (e2el:)

    @classmethod
    def from_dict(cls, data: dict, where: str = "slo") -> SLO:
        strict_keys(data, (f.name for f in dataclasses.fields(cls)), where, error=SpecError)
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise SpecError(f"{where}.{key} must be a number > 0 (ms), got {value!r}")
        return cls(**data)

    def met(self, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None) -> bool:
        """True when every given objective holds (a request with one token has no TPOT: it
        meets a TPOT objective trivially, as in vLLM)."""
        return (
            (self.ttft_ms is None or (ttft_ms is not None and ttft_ms <= self.ttft_ms))
            and (self.tpot_ms is None or tpot_ms is None or tpot_ms <= self.tpot_ms)
            and (self.e2e_ms is None or (e2e_ms is not None and e2e_ms <= self.e2e_ms))
        )


def _ms(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    """(a − b) in ms as float64; null where either is null."""
    return pc.divide(pc.cast(pc.subtract(a, b), pa.float64()), 1e6)


def per_request(requests: pa.Table, tokens: pa.Table) -> pa.Table:
    """Per-request metrics (pure; module docstring). Columns: request_id, phase, status,
    output_tokens, token_count_source, ttft_ms, e2e_ms, tpot_ms, ttft_intended_ms,
    e2e_intended_ms, send_lag_ms (sent − intended), stream_ms, guidellm_tpot_ms, mean_itl_ms
    (GuideLLM / genai-perf per-request ITL), aiperf_itl_ms."""
    sent, intended = requests["sent_ns"], requests["intended_send_ns"]
    first = requests["first_token_ns"]
    last, first_tokens = _last_token_and_first_chunk(requests, tokens)
    out_tokens = pc.cast(requests["output_tokens"], pa.float64())
    ttft, e2e = _ms(first, sent), _ms(last, sent)
    # TPOT and the per-request ITL are undefined with fewer than two tokens: null, not inf
    tpot = pc.divide(pc.subtract(e2e, ttft), _null_unless(out_tokens, 1.0, subtract=1.0))
    return pa.table(
        {
            "request_id": requests["request_id"],
            "phase": requests["phase"],
            "status": requests["status"],
            "output_tokens": requests["output_tokens"],
            "token_count_source": requests["token_count_source"],
            "ttft_ms": ttft,
            "e2e_ms": e2e,
            "tpot_ms": tpot,
            "ttft_intended_ms": _ms(first, intended),
            "e2e_intended_ms": _ms(last, intended),
            "send_lag_ms": _ms(sent, intended),
            "stream_ms": _ms(requests["done_ns"], sent),
            "guidellm_tpot_ms": pc.divide(e2e, _null_unless(out_tokens, 0.0)),
            # (last − first chunk) / (n − 1): with E2E at the last token, vLLM's TPOT itself
            "mean_itl_ms": tpot,
            "aiperf_itl_ms": pc.divide(
                pc.subtract(e2e, ttft), _aiperf_divisor(out_tokens, first_tokens)
            ),
        }
    )


def _null_unless(values: pa.ChunkedArray, above: float, subtract: float = 0.0) -> pa.ChunkedArray:
    """values − subtract where values > above, else null (a divisor that must not be ≤ 0)."""
    return pc.if_else(
        pc.greater(values, above),
        pc.subtract(values, subtract),
        pa.scalar(None, pa.float64()),
    )


def _aiperf_divisor(out_tokens: pa.ChunkedArray, first_tokens: pa.ChunkedArray) -> pa.ChunkedArray:
    """output_tokens − the first content chunk's tokens (a server that bundles tokens into its
    first chunk must not shrink the ITL), output_tokens − 1 when that count is unknown, ≤ 0 or not
    below output_tokens; null with fewer than two tokens."""
    k = pc.cast(first_tokens, pa.float64())
    usable = pc.and_(pc.greater(k, 0.0), pc.less(k, out_tokens))
    divisor = pc.subtract(out_tokens, pc.if_else(pc.fill_null(usable, False), k, 1.0))
    return pc.if_else(pc.greater(out_tokens, 1.0), divisor, pa.scalar(None, pa.float64()))


def _last_token_and_first_chunk(
    requests: pa.Table, tokens: pa.Table
) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """Per request (in `requests` order): the arrival of its last content chunk (null: none came)
    and the tokens its first content chunk carried."""
    chunks = content_chunks(tokens).sort_by([("request_id", "ascending"), ("index", "ascending")])
    if "n_tokens" not in chunks.column_names:
        chunks = chunks.append_column("n_tokens", pa.array([1] * chunks.num_rows, pa.int32()))
    per = chunks.group_by("request_id", use_threads=False).aggregate(
        [("arrival_ns", "max"), ("n_tokens", "first")]
    )
    order = requests.select(["request_id"]).append_column(
        "_order", pa.array(range(requests.num_rows), pa.int64())
    )
    joined = order.join(per, "request_id", join_type="left outer").sort_by("_order")
    return joined["arrival_ns_max"], joined["n_tokens_first"]


def content_chunks(tokens: pa.Table) -> pa.Table:
    """The chunks that carried content (n_tokens > 0; a table without the column: all of them),
    pure. Role and usage chunks carry none: they are neither a first token nor an ITL gap."""
    if "n_tokens" not in tokens.column_names:
        return tokens
    return tokens.filter(pc.fill_null(pc.greater(tokens["n_tokens"], 0), True))


def itl_gaps(tokens: pa.Table) -> pa.Table:
    """Every gap between consecutive content chunks of the same request (pure): request_id,
    index (of the later chunk, ≥ 1), itl_ms. A chunk carrying n > 1 tokens still makes one gap,
    as in vLLM bench serve."""
    t = content_chunks(tokens).sort_by([("request_id", "ascending"), ("index", "ascending")])
    if t.num_rows < 2:
        return pa.table(
            {
                "request_id": pa.array([], pa.string()),
                "index": pa.array([], pa.int32()),
                "itl_ms": pa.array([], pa.float64()),
            }
        )
    ids, arrivals = t["request_id"], t["arrival_ns"]
    same = pc.equal(ids.slice(1), ids.slice(0, t.num_rows - 1))
    gaps = _ms(arrivals.slice(1), arrivals.slice(0, t.num_rows - 1))
    return pa.table(
        {"request_id": ids.slice(1), "index": t["index"].slice(1), "itl_ms": gaps}
    ).filter(same)


def stats(values) -> dict:
    """mean, std, min, max and PERCENTILES (linear interpolation, as numpy's default) of the
    non-null values; all None when there are none."""
    arr = pc.drop_null(
        pa.chunked_array([values]) if not isinstance(values, pa.ChunkedArray) else values
    )
    arr = pc.cast(arr, pa.float64())
    keys = ["count", "mean", "std", "min", "max", *[f"p{p}" for p in PERCENTILES]]
    if len(arr) == 0:
        return {k: (0 if k == "count" else None) for k in keys}
    quantiles = pc.quantile(
        arr, q=[p / 100 for p in PERCENTILES], interpolation="linear"
    ).to_pylist()
    return {
        "count": len(arr),
        "mean": pc.mean(arr).as_py(),
        "std": pc.stddev(arr).as_py(),
        "min": pc.min(arr).as_py(),
        "max": pc.max(arr).as_py(),
        **{f"p{p}": q for p, q in zip(PERCENTILES, quantiles)},
    }


def summarize(
    requests: pa.Table,
    tokens: pa.Table,
    *,
    phase: str | None = "measure",
    duration_s: float | None = None,
    slo: SLO | None = None,
) -> dict:
    """A run summary under vLLM's definitions, plus GuideLLM/genai-perf views (pure).

    phase: 'measure' (default), 'warmup', or None for all rows. duration_s: the measured
    duration for throughput; None derives it from the first send to the last end of the rows."""
    if phase is not None:
        requests = requests.filter(pc.equal(requests["phase"], phase))
    ids = requests["request_id"]
    tokens = tokens.filter(pc.is_in(tokens["request_id"], value_set=pc.unique(ids)))
    metrics = per_request(requests, tokens)
    ok = metrics.filter(pc.equal(metrics["status"], "ok"))
    ok_ids = ok["request_id"].combine_chunks()
    gaps = itl_gaps(tokens.filter(pc.is_in(tokens["request_id"], value_set=ok_ids)))
    if duration_s is None:
        duration_s = _rows_span_s(requests)
    status_counts = {s: 0 for s in ("ok", "error", "cancelled")}
    for row in requests.group_by("status").aggregate([("request_id", "count")]).to_pylist():
        status_counts[row["status"]] = row["request_id_count"]
    out_tokens = pc.sum(ok["output_tokens"]).as_py() or 0
    prompt_ok = requests.filter(pc.equal(requests["status"], "ok"))
    prompt_tokens = pc.sum(prompt_ok["prompt_tokens"]).as_py() or 0
    sources = {
        row["token_count_source"]: row["request_id_count"]
        for row in ok.group_by("token_count_source")
        .aggregate([("request_id", "count")])
        .to_pylist()
    }
    rate = (lambda n: n / duration_s) if duration_s > 0 else (lambda n: None)
    summary = {
        "phase": phase,
        "duration_s": duration_s,
        "requests": requests.num_rows,
        "completed": status_counts["ok"],
        "failed": status_counts["error"],
        "cancelled": status_counts["cancelled"],
        "prompt_tokens": prompt_tokens,
        "output_tokens": out_tokens,
        "token_count_source": sources,  # {'usage': n, 'chunks': m}: where output counts came from
        "request_throughput": rate(status_counts["ok"]),
        "output_throughput": rate(out_tokens),
        "total_token_throughput": rate(out_tokens + prompt_tokens),
        **_latency_views(ok, gaps, metrics),
    }
    if slo is not None:
        good = sum(
            slo.met(r["ttft_ms"], r["tpot_ms"], r["e2e_ms"])
            for r in ok.select(["ttft_ms", "tpot_ms", "e2e_ms"]).to_pylist()
        )
        summary["slo"] = dataclasses.asdict(slo)
        summary["good_requests"] = good
        summary["goodput"] = rate(good)
    return summary


def _rows_span_s(requests: pa.Table) -> float:
    """From the first intended send to the last end of the rows, seconds (0 without rows)."""
    start = pc.min(requests["intended_send_ns"]).as_py()
    end = pc.max(requests["done_ns"]).as_py()
    return (end - start) / 1e9 if start is not None and end is not None else 0.0


def _latency_views(ok: pa.Table, gaps: pa.Table, metrics: pa.Table) -> dict:
    """Latency statistics of the completed requests under vLLM's definitions, from the intended
    send times, and as GuideLLM, genai-perf and AIPerf define them."""
    return {
        "vllm": {
            "ttft_ms": stats(ok["ttft_ms"]),
            "tpot_ms": stats(ok["tpot_ms"]),
            "itl_ms": stats(gaps["itl_ms"]),
            "e2e_ms": stats(ok["e2e_ms"]),
        },
        "intended": {
            "ttft_ms": stats(ok["ttft_intended_ms"]),
            "e2e_ms": stats(ok["e2e_intended_ms"]),
            "send_lag_ms": stats(metrics["send_lag_ms"]),
        },
        "guidellm": {
            "ttft_ms": stats(ok["ttft_ms"]),
            "itl_ms": stats(ok["mean_itl_ms"]),
            "tpot_ms": stats(ok["guidellm_tpot_ms"]),
            "e2e_ms": stats(ok["stream_ms"]),  # GuideLLM's request latency: the whole stream
        },
        "genai_perf": {
            "ttft_ms": stats(ok["ttft_ms"]),
            "itl_ms": stats(ok["mean_itl_ms"]),
            "e2e_ms": stats(ok["e2e_ms"]),
        },
        "aiperf": {
            "ttft_ms": stats(ok["ttft_ms"]),
            "itl_ms": stats(ok["aiperf_itl_ms"]),
        },
    }
