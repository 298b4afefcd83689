"""Moved to `collectors.metrics_scraper` (the scraper serves every engine spikelens observes)."""

from collectors.metrics_scraper import METRICS_SCHEMA, MetricsScraper, parse_exposition

__all__ = ["METRICS_SCHEMA", "MetricsScraper", "parse_exposition"]
