"""The value rules every page context shares, written once: finite numbers, UTC ISO times,
relative links, a closed set of words, and the error that names the field it is about.

Why here: each page module builds frozen dataclasses whose constructors validate their own
fields with these helpers, so a context that reaches a template is already right; nothing
re-checks it at render time.
"""

from __future__ import annotations

import math
import numbers
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit


class ContextError(ValueError):
    """A page context field is missing or out of range; `.field` is its path (`spikes[0].end_s`).

    The message reads `<field>: <reason>`; a constructor raises it with the field's own name and
    pages.from_mapping prefixes the path of the enclosing objects.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason

    def under(self, parent: str) -> ContextError:
        """The same error one level down: `parent.field` (or `parent[i]` for an index)."""
        sep = "" if self.field.startswith("[") else "."
        return ContextError(f"{parent}{sep}{self.field}", self.reason)


def finite(value: Any) -> float | None:
    """A JSON-safe float: None, NaN and ±inf → None (rca uses NaN for "no sample"; the page
    shows None as "—", and NaN would make the embedded chart JSON invalid)."""
    if value is None:
        return None
    f = float(value)
    return None if math.isnan(f) or math.isinf(f) else f


def real(value: Any, field: str) -> float:
    """A required finite float: None, NaN or ±inf is a ContextError naming `field`."""
    f = finite(value)
    if f is None:
        raise ContextError(field, f"expected a finite number, got {value!r}")
    return f


def count(value: Any) -> int | None:
    """An integer count or None."""
    return None if value is None else int(value)


def iso_utc(ns: int | None) -> str | None:
    """Wall-clock nanoseconds as an ISO-8601 UTC string to the second; None or 0 → None."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat(timespec="seconds") if ns else None


def one_of(value: Any, allowed: tuple[str, ...], field: str) -> None:
    """Raise ContextError unless `value` is one of the `allowed` words."""
    if value not in allowed:
        raise ContextError(field, f"must be one of {', '.join(allowed)}; got {value!r}")


def need_share(value: Any, field: str) -> None:
    """Raise ContextError unless `value` is a number in [0, 1]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0.0 <= float(value) <= 1.0
    ):
        raise ContextError(field, f"share must be in [0, 1], got {value!r}")


def relative_href(value: Any, field: str) -> str:
    """A link to another report: relative, without a scheme or host, never absolute.

    A `javascript:` URL would run even when escaped, so anything with a scheme is refused. The path
    is percent-encoded, so a run id with spaces, '#' or quotes still names its folder.
    """
    if not isinstance(value, str):
        raise ContextError(field, f"expected a str, got {type(value).__name__}")
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or value.startswith(("/", "\\")) or "\\" in value:
        raise ContextError(
            field, f"must be a relative link such as 'run_id/index.html', got {value!r}"
        )
    return quote(parts.path, safe="/") + (f"#{quote(parts.fragment)}" if parts.fragment else "")
