"""Scrape a Prometheus /metrics endpoint at an interval (default 4 Hz) into metrics.parquet.

What: `MetricsScraper(url, out_path, interval_s)` runs a thread in the runner's process
(plain httpx; no Locust) that GETs the exposition text every `interval_s` on an absolute
schedule and keeps one row per sample: ts_ns (just before the GET), name, labels (JSON object,
keys sorted), value. Histogram/summary families arrive as their _bucket/_sum/_count samples.
Why: the same pipeline can observe an engine it did not start (vLLM, SGLang, TGI) through
whatever that engine exposes; our engine serves vLLM-named metrics too.
A failed scrape is counted (and its last error kept), never fatal: the load test goes on.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from prometheus_client.parser import text_string_to_metric_families

METRICS_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),
        ("name", pa.string()),
        ("labels", pa.string()),  # JSON object, keys sorted
        ("value", pa.float64()),
    ]
)


def parse_exposition(text: str, ts_ns: int) -> dict[str, list]:
    """Columns of METRICS_SCHEMA for one scrape's text (pure)."""
    cols: dict[str, list] = {name: [] for name in METRICS_SCHEMA.names}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            cols["ts_ns"].append(ts_ns)
            cols["name"].append(sample.name)
            cols["labels"].append(json.dumps(dict(sample.labels), sort_keys=True))
            cols["value"].append(float(sample.value))
    return cols


class MetricsScraper:
    def __init__(
        self,
        url: str,
        out_path: str | Path,
        interval_s: float = 0.25,
        api_key: str | None = None,
        timeout_s: float = 5.0,
    ):
        if interval_s <= 0:
            raise ValueError(f"metrics interval_s must be > 0, got {interval_s!r}")
        self.url = url
        self.out_path = Path(out_path)
        self.interval_s = interval_s
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s
        self.cols: dict[str, list] = {name: [] for name in METRICS_SCHEMA.names}
        self.scrapes = 0
        self.errors = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsScraper:
        self._thread = threading.Thread(target=self._run, name="metrics-scraper", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout_s, headers=self.headers) as client:
            next_t = time.monotonic()
            while not self._stop.is_set():
                self.scrape_once(client)
                next_t += self.interval_s
                self._stop.wait(max(0.0, next_t - time.monotonic()))

    def scrape_once(self, client: httpx.Client) -> None:
        ts_ns = time.time_ns()
        try:
            response = client.get(self.url)
            response.raise_for_status()
            cols = parse_exposition(response.text, ts_ns)
        except (httpx.HTTPError, ValueError) as exc:
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return
        self.scrapes += 1
        for name, values in cols.items():
            self.cols[name].extend(values)

    def stop(self) -> int:
        """Stop the thread and write metrics.parquet; returns the number of rows."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 5)
        table = pa.Table.from_pydict(self.cols, schema=METRICS_SCHEMA)
        pq.write_table(table, self.out_path)
        return table.num_rows
