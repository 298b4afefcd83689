"""Latency and throughput metrics of a run, defined as vLLM's `bench serve` defines them, with
GuideLLM's and genai-perf's per-request averages beside them.

What (pure functions over the pyarrow tables of requests.parquet and tokens.parquet; no I/O):
- `per_request(requests)`: one row per request with TTFT, E2E, TPOT (and the same from the
  *intended* send time), GuideLLM's TPOT and the per-request mean ITL.
- `itl_gaps(tokens)`: every gap between consecutive content chunks of a request (vLLM's ITL).
- `summarize(requests, tokens, ...)`: counts, throughput, goodput and distribution statistics.
Why here: the warehouse and the report reuse the definitions instead of re-deriving them, and
docs/loadgen.md documents them once.

Definitions (times in ms; only requests with status 'ok' enter latency statistics):
- TTFT  = first_token_ns − sent_ns (first chunk with non-empty content).
- E2E   = done_ns − sent_ns (end of the stream).
- ITL   = every gap between consecutive content chunks, pooled over requests (not averaged).
- TPOT  = (E2E − TTFT) / (output_tokens − 1), requests with output_tokens > 1.
- *_intended_ms: the same from intended_send_ns (open loop: the scheduled time), so a client or
  server that falls behind shows as queueing instead of hiding it (coordinated omission).
- GuideLLM: TPOT = (last chunk − sent) / output_tokens (includes TTFT); ITL per request =
  (last chunk − first chunk) / (output_tokens − 1). genai-perf: ITL per request =
  (last chunk − first chunk) / (output_tokens − 1) (the same formula), E2E to the last response.
- Goodput = completed requests meeting every SLO given (ttft_ms, tpot_ms, e2e_ms) per second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine.config_keys import strict_keys
from loadgen.errors import SpecError

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


def per_request(requests: pa.Table, tokens: pa.Table | None = None) -> pa.Table:
    """Per-request metrics (pure). Columns: request_id, phase, status, output_tokens,
    token_count_source, ttft_ms, e2e_ms, tpot_ms, ttft_intended_ms, e2e_intended_ms,
    send_lag_ms (sent − intended), last_chunk_ms (last content chunk − sent; from `tokens`,
    else E2E), guidellm_tpot_ms, mean_itl_ms (GuideLLM / genai-perf per-request ITL)."""
    sent, intended = requests["sent_ns"], requests["intended_send_ns"]
    first, done = requests["first_token_ns"], requests["done_ns"]
    out_tokens = pc.cast(requests["output_tokens"], pa.float64())
    ttft, e2e = _ms(first, sent), _ms(done, sent)
    # TPOT and the per-request ITL are undefined with fewer than two tokens: null, not inf
    many = pc.greater(out_tokens, 1.0)
    denom = pc.if_else(many, pc.subtract(out_tokens, 1.0), pa.scalar(None, pa.float64()))
    tpot = pc.divide(pc.subtract(e2e, ttft), denom)
    last_chunk = _last_chunk_ms(requests, tokens) if tokens is not None else e2e
    decode_ms = pc.subtract(last_chunk, ttft)
    positive = pc.greater(out_tokens, 0.0)
    guidellm_tpot = pc.divide(
        last_chunk, pc.if_else(positive, out_tokens, pa.scalar(None, pa.float64()))
    )
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
            "e2e_intended_ms": _ms(done, intended),
            "send_lag_ms": _ms(sent, intended),
            "last_chunk_ms": last_chunk,
            "guidellm_tpot_ms": guidellm_tpot,
            "mean_itl_ms": pc.divide(decode_ms, denom),
        }
    )


def _last_chunk_ms(requests: pa.Table, tokens: pa.Table) -> pa.ChunkedArray:
    """Per request (in `requests` order): last content chunk arrival − sent_ns, in ms."""
    last = content_chunks(tokens).group_by("request_id").aggregate([("arrival_ns", "max")])
    joined = requests.select(["request_id", "sent_ns"]).append_column(
        "_order", pa.array(range(requests.num_rows), pa.int64())
    )
    joined = joined.join(last, "request_id", join_type="left outer").sort_by("_order")
    return _ms(joined["arrival_ns_max"], joined["sent_ns"])


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
    send times, and as GuideLLM and genai-perf define them."""
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
            "e2e_ms": stats(ok["e2e_ms"]),
        },
        "genai_perf": {
            "ttft_ms": stats(ok["ttft_ms"]),
            "itl_ms": stats(ok["mean_itl_ms"]),
            "e2e_ms": stats(ok["last_chunk_ms"]),
        },
    }
