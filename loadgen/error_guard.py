"""Stop a run that is mostly errors, early, and say why.

A target that refuses every request (wrong model id, an endpoint it does not serve, a chat
request to a checkpoint without a chat template) answers fast, so a closed loop then sends
thousands of failing requests a second for the whole run and the report has nothing to show.
`ErrorGuard` watches the finished requests of one Locust process (cancelled ones do not count:
the run's own end cancels them) and trips once at least `min_requests` have finished and more
than `max_error_share` of them failed. Its verdict names the share, the count and the most common
error, e.g. "98% of the first 200 requests failed: HTTP 404: The model `spikelens` does not
exist." The locustfile then ends the load and prints STOP_MARKER with the verdict, which the
runner passes on to run.json, the report and the CLI.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

# The line a Locust process prints when the guard stops the load: STOP_MARKER <verdict JSON>.
STOP_MARKER = "SPIKELENS_LOADGEN_STOPPED"


@dataclass(frozen=True)
class ErrorGuardConfig:
    """When a run counts as mostly errors."""

    # Finished requests before the guard judges: enough that a few failures at start-up (a
    # target still warming its first batch) cannot stop a run, few enough that a target that
    # refuses everything is stopped within a second or two of load instead of a whole run.
    min_requests: int = 200
    # Failed share above which the run stops: a healthy run under a fault fails a few percent;
    # a run whose every request is refused fails ~100 %.
    max_error_share: float = 0.9

    def __post_init__(self) -> None:
        if (
            isinstance(self.min_requests, bool)
            or not isinstance(self.min_requests, int)
            or self.min_requests < 1
        ):
            raise ValueError(f"min_requests must be an integer >= 1, got {self.min_requests!r}")
        if not 0.0 < self.max_error_share <= 1.0:
            raise ValueError(f"max_error_share must be in (0, 1], got {self.max_error_share!r}")


def short_error(error: str) -> str:
    """An error as one short line: an OpenAI-style JSON body's `message`, else the text."""
    match = re.match(r"(HTTP \d+): (.*)", error or "", re.S)
    if match:
        head, body = match.groups()
        try:
            data = json.loads(body)
            message = data.get("error", data) if isinstance(data, dict) else data
            message = message.get("message", message) if isinstance(message, dict) else message
            if isinstance(
                message, str
            ):  # FastAPI's {"detail": ...} and vLLM's {"error": {"message"}}
                return f"{head}: {message}"[:300]
            if isinstance(data, dict) and "detail" in data:
                return f"{head}: {data['detail']}"[:300]
        except (ValueError, AttributeError):
            pass
        return f"{head}: {body.strip()}"[:300]
    return (error or "unknown error").strip()[:300]


@dataclass
class ErrorGuard:
    config: ErrorGuardConfig = field(default_factory=ErrorGuardConfig)
    finished: int = 0
    failed: int = 0
    errors: Counter = field(default_factory=Counter)
    verdict: dict | None = None  # set once, when the guard trips

    def observe(self, failed: bool, error: str | None = None) -> dict | None:
        """Count one finished request; returns the verdict the first time the guard trips."""
        if self.verdict is not None:
            return None
        self.finished += 1
        if failed:
            self.failed += 1
            self.errors[short_error(error or "")] += 1
        share = self.failed / self.finished
        if self.finished >= self.config.min_requests and share > self.config.max_error_share:
            top, _ = self.errors.most_common(1)[0]
            self.verdict = {
                "requests": self.finished,
                "failed": self.failed,
                "error_share": round(share, 4),
                "top_error": top,
                "reason": f"{share * 100:.0f}% of the first {self.finished} requests failed: {top}",
            }
            return self.verdict
        return None
