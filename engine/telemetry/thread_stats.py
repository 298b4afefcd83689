"""Cheap per-thread OS counters for the step trace (Linux ``getrusage(RUSAGE_THREAD)``, ~1 µs)."""

from __future__ import annotations

import resource

_RUSAGE = getattr(
    resource, "RUSAGE_THREAD", resource.RUSAGE_SELF
)  # whole process where unsupported


def page_faults() -> int:
    """Page faults (minor + major) of the calling thread so far."""
    ru = resource.getrusage(_RUSAGE)
    return ru.ru_minflt + ru.ru_majflt
