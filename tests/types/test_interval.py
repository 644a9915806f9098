"""Intervals (typecatalog/interval.py, _codecs/interval.pxi)."""

from __future__ import annotations


import pytest


from pgoutput_codec.typecatalog import ConversionError, convert_column


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("text", [b"04:05:06.8\n", b"1 years +04:05:06.8\n", b"1 years\n", b"2 days\t"])
def test_an_interval_ending_in_a_newline_is_refused_by_both_twins(fast, text):
    """Fields of an interval are separated by spaces: any other trailing whitespace makes
    the value malformed, alike in the compiled and the Python parser."""
    with pytest.raises(ConversionError, match="value 0"):
        convert_column(["t"], [text], 1186, -1, fast=fast)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("text,ok", [
    (b"1220615931261785:00:00", False),                # hours * 3.6e9 would wrap int64
    (b"768614336404564650 years 768614336404564650 years", False),   # years * 12 would wrap
    (b"2147483647 years", False), (b"2147483648 days", False), (b"-2147483649 mons", False),
    (b"1073741824 mons 1073741824 mons", False),      # each field fits, the sum does not
    (b"2562048:00:00", False),                         # beyond int64 nanoseconds
    (b"2147483647 mons", True), (b"-2147483648 days", True), (b"178956970 years 7 mons", True),
    (b"-2562047:47:16.854775", True),                  # the last time part Arrow holds
])
def test_an_interval_beyond_arrow_is_an_error_not_a_wrapped_value(fast, text, ok):
    """Interval fields are checked before they are scaled or summed: a value Arrow's
    month_day_nano cannot hold is an error naming the value, never a wrapped number."""
    if ok:
        v = convert_column(["t"], [text], 1186, -1, fast=fast).values
        assert v.to_pylist() == convert_column(["t"], [text], 1186, -1, fast=not fast).values.to_pylist()
    else:
        with pytest.raises(ConversionError, match="value 0.*(out of int32|overflows int64)"):
            convert_column(["t"], [text], 1186, -1, fast=fast)
