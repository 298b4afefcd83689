"""Shape checks shared by the page contexts: each error names the key path and what was expected.

Why: the contexts come from other folders (rca, flows); a gap should fail at the door with
`spikes[0]: missing key 'peak_ms'`, not deep inside a template.
"""
from __future__ import annotations

import copy
import math
import numbers
from typing import Any
from urllib.parse import quote, urlsplit


class ContextError(ValueError):
    """The context does not have the shape docs/INTERFACES.md fixes; the message names the key."""


def need_mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ContextError(f"{where}: expected a dict, got {type(value).__name__}")
    return value


def need_list(value: Any, where: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise ContextError(f"{where}: expected a list, got {type(value).__name__}")
    return list(value)


def complete(item: Any, where: str, required: tuple[str, ...], optional: dict) -> dict:
    item = need_mapping(item, where)
    missing = [k for k in required if k not in item]
    if missing:
        raise ContextError(f"{where}: missing key {missing[0]!r} (required: {', '.join(required)})")
    for key, default in optional.items():
        item.setdefault(key, copy.copy(default))
    return item


def need_number(value: Any, where: str, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ContextError(f"{where}: expected a number, got {value!r}")


def need_share(value: Any, where: str) -> None:
    need_number(value, where, allow_none=False)
    if not 0.0 <= float(value) <= 1.0:
        raise ContextError(f"{where}: share must be in [0, 1], got {value!r}")


def need_str(value: Any, where: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str):
        raise ContextError(f"{where}: expected a str, got {type(value).__name__}")


def relative_href(value: Any, where: str) -> str:
    """A link to another report: relative, without a scheme or host, never '..' above its folder's root.

    A `javascript:` URL would run even when escaped, so anything with a scheme is refused. The path
    is percent-encoded, so a run id with spaces, '#' or quotes still names its folder.
    """
    need_str(value, where)
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or value.startswith(("/", "\\")) or "\\" in value:
        raise ContextError(f"{where}: must be a relative link such as 'run_id/index.html', got {value!r}")
    return quote(parts.path, safe="/") + (f"#{quote(parts.fragment)}" if parts.fragment else "")


def clean_floats(value: Any) -> Any:
    """A copy of `value` with NaN and ±inf replaced by None, through dicts, lists and tuples.

    Producers use NaN for "no sample" (numpy); pages show None as "—", and a NaN would make the
    embedded chart JSON invalid (JSON has no NaN).
    """
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: clean_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_floats(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        return clean_floats(value.item())  # numpy scalar → Python scalar
    return value
