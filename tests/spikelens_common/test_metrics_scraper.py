"""Prometheus scraping into metrics.parquet (against the no-op server's /metrics)."""

import json
import time

import pyarrow.parquet as pq

from spikelens_common.metrics_scraper import MetricsScraper, parse_exposition
from tests.support.sse_server import SSEServer


def test_parse_exposition_keeps_every_sample_with_sorted_labels():
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m",engine="0"} 3\n'
        "# TYPE lat histogram\n"
        'lat_bucket{le="0.1"} 1\nlat_bucket{le="+Inf"} 2\nlat_sum 0.3\nlat_count 2\n'
    )
    cols = parse_exposition(text, 7)
    assert cols["name"] == [
        "vllm:num_requests_running",
        "lat_bucket",
        "lat_bucket",
        "lat_sum",
        "lat_count",
    ]
    assert json.loads(cols["labels"][0]) == {"engine": "0", "model_name": "m"}
    assert cols["labels"][0] == '{"engine": "0", "model_name": "m"}'
    assert cols["value"] == [3.0, 1.0, 2.0, 0.3, 2.0] and set(cols["ts_ns"]) == {7}


def test_scraper_writes_rows_and_counts_failures(tmp_path):
    with SSEServer() as server:
        scraper = MetricsScraper(
            server.url + "/metrics", tmp_path / "metrics.parquet", interval_s=0.05
        ).start()
        while scraper.scrapes < 3:
            time.sleep(0.02)
        rows = scraper.stop()
    table = pq.read_table(tmp_path / "metrics.parquet")
    assert rows == table.num_rows >= 6 and rows % 2 == 0  # two series per scrape
    assert set(table["name"].to_pylist()) == {
        "vllm:request_success_total",
        "vllm:num_requests_running",
    }

    with SSEServer() as server:
        broken = MetricsScraper(
            server.url + "/nope", tmp_path / "m2.parquet", interval_s=0.05
        ).start()
        while broken.errors < 2:
            time.sleep(0.02)
        assert broken.stop() == 0 and "404" in broken.last_error
