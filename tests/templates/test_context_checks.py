"""Shared context checks: NaN cleaning and the links a context may carry."""
from __future__ import annotations

import math

import pytest

from templates.context_checks import ContextError, clean_floats, relative_href


def test_clean_floats_replaces_nan_and_inf_everywhere():
    value = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": (2, "x"), "e": None}
    assert clean_floats(value) == {"a": None, "b": [1.0, None, {"c": None}], "d": [2, "x"], "e": None}


def test_clean_floats_unwraps_numpy_scalars():
    np = pytest.importorskip("numpy")
    assert clean_floats({"x": np.float64("nan"), "y": np.int64(3)}) == {"x": None, "y": 3}


@pytest.mark.parametrize("href, expected", [
    ("run1/index.html", "run1/index.html"),
    ("../index.html", "../index.html"),
    ("a b/index.html#spike-1", "a%20b/index.html#spike-1"),
])
def test_relative_links_are_kept_and_encoded(href, expected):
    assert relative_href(href, "x") == expected


@pytest.mark.parametrize("href", ["javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "http://a/b",
                                  "//host/x", "/abs/index.html", "\\\\host\\share", "a\\b"])
def test_links_with_a_scheme_host_or_absolute_path_are_refused(href):
    with pytest.raises(ContextError, match="x: must be a relative link"):
        relative_href(href, "x")
