"""Pull a window of a Prometheus server's series into metrics.parquet, as if spikelens had scraped them.

What: `check_range(RangeRequest)` validates the window before any work (times, step, point
count; the server reachable; data present), then `pull_range` runs one `query_range` per
selector through Prometheus' HTTP API and writes one row per (series, step) with the scraper's
schema (spikelens_common.metrics_scraper.METRICS_SCHEMA): ts_ns, name, labels (JSON, keys sorted,
`__name__` left out), value. Histograms arrive as their `_bucket` (with `le`), `_sum` and `_count`
series, as a scrape gives them, so the warehouse's histogram queries read both alike.
Why: the monitoring a production engine already has is Prometheus scraping its /metrics; the
incident's window, read back at the query step, is the run spikelens explains (`spikelens incident
--prometheus`).

The default selectors take every series with a known serving-engine prefix, the process and
Python GC series of the jobs that export those, node_exporter's CPU and pressure series, and
spikelens' own agent series. Prometheus answers raw series selectors with the last sample at or
before each step (within its lookback), so a counter reads as the scraper would have read it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from spikelens_common.metrics_scraper import METRICS_SCHEMA

# Serving engines' metric prefixes (vLLM, SGLang, llama.cpp's server, TGI) and spikelens' own.
ENGINE_SERIES = r"vllm:.+|sglang:.+|llamacpp:.+|tgi_.+|spikelens:.+|spikelens_agent_.+"
# Exported beside an engine's series by the same job (prometheus_client's default collectors).
JOB_SERIES = r"python_gc_.+|process_.+"
# node_exporter: the machine's CPU time and pressure stall information.
NODE_SERIES = r"node_cpu_seconds_total|node_pressure_.+|node_load1"
# Prometheus refuses a query_range of more points than this per series.
MAX_POINTS = 11_000
# Fewest steps in the window: spike detection needs 8 baseline windows, and a spike 2 windows
# with 2 of guard on each side (rca.config), so 16 steps is the least that can show one.
MIN_POINTS = 16


class PrometheusError(ValueError):
    """A bad window, an unreachable server or an empty answer, said in one line."""


@dataclass(frozen=True)
class RangeRequest:
    url: str  # the server's base URL, e.g. http://127.0.0.1:9090
    start_s: float  # Unix seconds
    end_s: float
    step_s: float = 1.0  # the query step, which becomes the analysis window
    match: str | None = None  # a series selector; None: the default selectors (module doc)
    timeout_s: float = 30.0

    @property
    def points(self) -> int:
        return math.floor((self.end_s - self.start_s) / self.step_s) + 1


@dataclass
class PulledRange:
    rows: int
    series: int
    names: list[str] = field(default_factory=list)  # metric names pulled, sorted
    selectors: list[str] = field(default_factory=list)


def parse_time(text: str, name: str) -> float:
    """Unix seconds from RFC 3339 (2026-12-03T06:00:00Z) or Unix seconds, as Prometheus takes them."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise PrometheusError(
            f"{name}: {text!r} is neither RFC 3339 (e.g. 2026-12-03T06:00:00Z) nor Unix seconds"
        ) from None
    if moment.tzinfo is None:
        raise PrometheusError(f"{name}: {text!r} has no time zone; add Z or an offset (+02:00)")
    return moment.timestamp()


def validate_window(req: RangeRequest) -> None:
    """The window's own checks, before any request: ordered times, a step that fits."""
    if not req.url.startswith(("http://", "https://")):
        raise PrometheusError(f"--prometheus: {req.url!r} is not an http(s) URL")
    if not req.end_s > req.start_s:
        raise PrometheusError(
            f"--to must be after --from (got {req.start_s:.0f} .. {req.end_s:.0f} Unix seconds)"
        )
    if not req.step_s > 0:
        raise PrometheusError(f"--step must be > 0 seconds, got {req.step_s}")
    if req.points < MIN_POINTS:
        most = (req.end_s - req.start_s) / (MIN_POINTS - 1)
        raise PrometheusError(
            f"--step {req.step_s:g} s is too coarse for a {req.end_s - req.start_s:.0f}-s window:"
            f" {req.points} points, at least {MIN_POINTS} needed (a step of at most {most:.3g} s)"
        )
    if req.points > MAX_POINTS:
        least = (req.end_s - req.start_s) / (MAX_POINTS - 1)
        raise PrometheusError(
            f"--step {req.step_s:g} s is too fine for the window: {req.points} points, Prometheus"
            f" answers at most {MAX_POINTS} (a step of at least {least:.3g} s)"
        )
    if req.match is not None and not req.match.strip():
        raise PrometheusError("--match: an empty selector; give one, e.g. '{job=\"vllm\"}'")


def _get(client: httpx.Client, req: RangeRequest, path: str, params: dict) -> object:
    """One API call's `data`; Prometheus' own error message when it refuses."""
    try:
        r = client.post(f"{req.url.rstrip('/')}/api/v1/{path}", data=params)
    except httpx.HTTPError as e:
        raise PrometheusError(
            f"cannot reach Prometheus at {req.url} ({type(e).__name__}: {e});"
            " check --prometheus (the server's base URL, e.g. http://127.0.0.1:9090)"
        ) from None
    try:
        body = r.json()
    except ValueError:
        raise PrometheusError(
            f"{req.url} answered {path} with HTTP {r.status_code} and no Prometheus JSON:"
            " is --prometheus the Prometheus server's base URL?"
        ) from None
    if body.get("status") != "success":
        raise PrometheusError(
            f"Prometheus refused {path}: {body.get('errorType', 'error')}: {body.get('error', '')}"
        )
    return body.get("data")


def selectors(client: httpx.Client, req: RangeRequest) -> list[str]:
    """The series selectors to pull: the user's, or the defaults (module doc)."""
    if req.match is not None:
        return [req.match]
    engine = f'{{__name__=~"{ENGINE_SERIES}"}}'
    found = _get(
        client,
        req,
        "series",
        {"match[]": engine, "start": req.start_s, "end": req.end_s},
    )
    listed = found if isinstance(found, list) else []
    jobs = sorted({s["job"] for s in listed if isinstance(s, dict) and s.get("job")})
    out = [engine, f'{{__name__=~"{NODE_SERIES}"}}']
    if jobs:
        escaped = "|".join(j.replace("\\", "\\\\").replace('"', '\\"') for j in jobs)
        out.append(f'{{__name__=~"{JOB_SERIES}", job=~"{escaped}"}}')
    return out


def check_range(req: RangeRequest) -> list[str]:
    """Every check before the pull; the selectors to pull. A server that is not there, a
    selector that matches nothing in the window: one line naming what to change."""
    validate_window(req)
    with httpx.Client(timeout=req.timeout_s) as client:
        _get(client, req, "query", {"query": "1", "time": req.end_s})  # reachable, speaks the API
        chosen = selectors(client, req)
        found = _get(
            client,
            req,
            "series",
            {"match[]": chosen, "start": req.start_s, "end": req.end_s},
        )
    if not found:
        what = f"--match {req.match}" if req.match else "no serving-engine series (vllm:, sglang:…)"
        raise PrometheusError(
            f"{what}: nothing in Prometheus between {_iso(req.start_s)} and {_iso(req.end_s)};"
            " check the window (--from/--to) and the selector"
        )
    return chosen


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def matrix_rows(result: list[dict]) -> dict[str, list]:
    """METRICS_SCHEMA columns from a query_range matrix result (pure)."""
    cols: dict[str, list] = {name: [] for name in METRICS_SCHEMA.names}
    for series in result:
        labels = dict(series.get("metric", {}))
        name = labels.pop("__name__", None)
        if name is None:
            continue  # an expression's result, not a raw series
        text = json.dumps(labels, sort_keys=True)
        for t, v in series.get("values", []):
            value = float(v)  # "NaN", "+Inf" parse too
            cols["ts_ns"].append(round(float(t) * 1e9))
            cols["name"].append(name)
            cols["labels"].append(text)
            cols["value"].append(value)
    return cols


def pull_range(req: RangeRequest, chosen: list[str], out_path: str | Path) -> PulledRange:
    """query_range each selector over the window; the rows written to `out_path` (Parquet)."""
    cols: dict[str, list] = {name: [] for name in METRICS_SCHEMA.names}
    series = 0
    with httpx.Client(timeout=req.timeout_s) as client:
        for selector in chosen:
            data = _get(
                client,
                req,
                "query_range",
                {"query": selector, "start": req.start_s, "end": req.end_s, "step": req.step_s},
            )
            result = data.get("result", []) if isinstance(data, dict) else []
            series += len(result)
            for k, v in matrix_rows(result).items():
                cols[k].extend(v)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols, schema=METRICS_SCHEMA), out_path)
    return PulledRange(len(cols["ts_ns"]), series, sorted(set(cols["name"])), list(chosen))
