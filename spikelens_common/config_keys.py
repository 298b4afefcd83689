"""One check for the "unknown key" rule of every config mapping (scenario blocks, CONFIG.json,
fault params, nightly configs): the error names the first unknown key and carries its path.

Why one helper: the rule was written out by hand at each place that reads a mapping, and a caller
that wanted the culprit (flows.scenario, to point at the YAML line) had to parse it back out of
the message. Now the raised error has `.field` (`engine.max_num_seqz`, `faults[0].params.x`) and
`.unknown` (every unknown key), whatever exception class the caller's API raises.

Each caller keeps its own message (its users and tests read it): `message` is a format string
over {where}, {key} (the first unknown key), {keys} (all of them, quoted) and {valid} (the valid
keys, sorted, comma-separated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The two wordings in use: every unknown key, or the first one.
ALL_UNKNOWN = "{where}: unknown key(s) {keys}; valid keys: {valid}"
FIRST_UNKNOWN = "{where}: unknown key '{key}' (valid keys: {valid})"


class UnknownKeyError(ValueError):
    """A mapping holds a key its schema does not know (the default error of strict_keys)."""

    field: str  # set by strict_keys: the path of the first unknown key
    unknown: tuple[str, ...]  # every unknown key


def field_path(where: str, key: str) -> str:
    """The path of `key` inside the mapping at `where` ('faults[0].params' + 'x')."""
    return f"{where}.{key}" if where else key


def strict_keys(
    data: Mapping[str, Any],
    known: Iterable[str],
    where: str,
    *,
    message: str = FIRST_UNKNOWN,
    error: type[Exception] = UnknownKeyError,
    sort_unknown: bool = False,
    valid: Iterable[str] | None = None,
) -> None:
    """Raise `error(message)` when `data` has a key outside `known`; the error gets `.field` (the
    path of the first unknown key, in the mapping's order or sorted with `sort_unknown`) and
    `.unknown`. `valid` overrides the list of valid keys the message shows."""
    known = set(known)
    unknown = [k for k in data if k not in known]
    if not unknown:
        return
    if sort_unknown:
        unknown = sorted(unknown)
    shown = sorted(known) if valid is None else list(valid)
    err: Any = error(  # any exception class: it gets the two attributes below
        message.format(
            where=where,
            key=unknown[0],
            keys=", ".join(map(repr, unknown)),
            valid=", ".join(map(str, shown)),
        )
    )
    err.field = field_path(where, str(unknown[0]))
    err.unknown = tuple(unknown)
    raise err
