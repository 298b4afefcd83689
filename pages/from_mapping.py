"""Build a typed page context from plain data (a test fixture, JSON).

One generic walk over the dataclass fields and their annotations: a missing required key, a
value of the wrong type or a constructor's own validation fails with a ContextError naming the
key path, e.g. `spikes[0]: missing key 'peak_ms'` or `windows[3].itl_p99_ms: expected a number,
got 'slow'`. Values are checked, not converted (an int stays an int), except that NaN and ±inf
become None and lists become tuples. Keys the dataclass does not have are ignored: plain data
may carry more than a page shows.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from pages.fields import ContextError, one_of

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def from_mapping(cls: type[T], data: Any, where: str = "context") -> T:
    """An instance of dataclass `cls` from the mapping `data` (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise ContextError(where, f"expected a dict, got {type(data).__name__}")
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required = [
                    g.name
                    for g in dataclasses.fields(cls)
                    if g.init
                    and g.default is dataclasses.MISSING
                    and g.default_factory is dataclasses.MISSING
                ]
                raise ContextError(
                    where, f"missing key {f.name!r} (required: {', '.join(required)})"
                )
            continue
        values[f.name] = _value(
            _hints(cls)[f.name], data[f.name], f"{where}.{f.name}" if where != "context" else f.name
        )
    try:
        return cls(**values)
    except ContextError as e:
        raise (e if where == "context" else e.under(where)) from None


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _value(hint: Any, value: Any, where: str) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        value = None
    elif hasattr(value, "item") and getattr(value, "shape", None) == ():
        value = value.item()  # a numpy scalar
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        for arm in arms[:-1]:
            try:
                return _value(arm, value, where)
            except ContextError:
                pass
        return _value(arms[-1], value, where)
    if value is None:
        raise ContextError(where, f"expected {_name(hint)}, got None")
    if origin is typing.Literal:
        one_of(value, args, where)
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ContextError(where, f"expected a list, got {type(value).__name__}")
        item = args[0]
        return tuple(_value(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict) or hint in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ContextError(where, f"expected a dict, got {type(value).__name__}")
        item = args[1] if len(args) == 2 else Any
        return {k: _value(item, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_mapping(hint, value, where)
    if hint in (float, int):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ContextError(where, f"expected a number, got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, (bool, int)):
            raise ContextError(where, f"expected a bool, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ContextError(where, f"expected a str, got {type(value).__name__}")
        return value
    raise TypeError(f"{where}: no rule for the annotation {hint!r}")


def _name(hint: Any) -> str:
    return {float: "a number", int: "a number", str: "a str", bool: "a bool"}.get(hint, "a value")
