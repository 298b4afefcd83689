"""The opt-in marker of the end-to-end tests too slow for CI's 45-minute budget on 2 cores.

`make test-slow` (or SPIKELENS_E2E_SLOW=1) runs them; each was run and passed when it landed
(the figures are in the closing notes and docs/benchmarks.md)."""

import os

import pytest

SLOW = os.environ.get("SPIKELENS_E2E_SLOW") == "1"

slow_e2e = pytest.mark.skipif(
    not SLOW, reason="over CI's time budget (minutes of runs): set SPIKELENS_E2E_SLOW=1"
)
