"""pages.fields: finite numbers, ISO times and the links a context may carry."""

from __future__ import annotations

import math

import pytest

from pages.fields import ContextError, finite, iso_utc, real, relative_href


def test_finite_replaces_nan_and_inf_and_unwraps_numpy():
    np = pytest.importorskip("numpy")
    assert [
        finite(v)
        for v in (math.nan, math.inf, -math.inf, None, 2, np.float64("nan"), np.float32(1.5))
    ] == [None, None, None, None, 2.0, None, 1.5]


def test_iso_utc_is_seconds_in_utc():
    assert iso_utc(1_800_000_000_123_456_789) == "2027-01-15T08:00:00+00:00"
    assert iso_utc(None) is None and iso_utc(0) is None


@pytest.mark.parametrize(
    "href, expected",
    [
        ("run1/index.html", "run1/index.html"),
        ("../index.html", "../index.html"),
        ("a b/index.html#spike-1", "a%20b/index.html#spike-1"),
    ],
)
def test_relative_links_are_kept_and_encoded(href, expected):
    assert relative_href(href, "x") == expected


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        "data:text/html,x",
        "http://a/b",
        "//host/x",
        "/abs/index.html",
        "\\\\host\\share",
        "a\\b",
    ],
)
def test_links_with_a_scheme_host_or_absolute_path_are_refused(href):
    with pytest.raises(ContextError, match="x: must be a relative link") as caught:
        relative_href(href, "x")
    assert caught.value.field == "x"


@pytest.mark.parametrize("value", [None, math.nan, math.inf])
def test_real_requires_a_finite_number_and_names_the_field(value):
    assert real(2, "steps.t_s") == 2.0
    with pytest.raises(ContextError, match=r"steps\.t_s: expected a finite number"):
        real(value, "steps.t_s")
