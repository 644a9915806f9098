"""Dates and times (typecatalog/datetime.py, _codecs/datetime.pxi)."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest


from pgoutput_codec.typecatalog import ConversionError, convert_column


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("oid,text,ok", [
    (1083, b"24:00:00", True), (1083, b"12:34:60", True), (1083, b"12:34:61", False),
    (1083, b"12:60:00", False), (1083, b"25:00:00", False),
    (1114, b"2020-01-01 24:00:00", True), (1114, b"2020-01-01 24:00:00.5", False),
    (1114, b"2020-01-01 25:00:00", False), (1114, b"2020-01-01 12:60:00", False),
    (1114, b"2020-01-01 12:00:61", False), (1184, b"2020-01-01 12:00:61+00", False),
    (1082, b"0001-01-01 BC", True), (1082, b"0000-01-01", False), (1082, b"0000-01-01 BC", False),
    (1186, b"1 day 30:00:00", True), (1186, b"30:61:00", False),
])
def test_clock_fields_are_bounded_as_the_server_bounds_them(fast, oid, text, ok):
    """datetime.c: minutes to 59, a leap second 60, a clock to 24:00:00 (an interval's hours
    are not bounded), and no year 0 in AD/BC notation. Both twins refuse the same values."""
    if ok:
        assert convert_column(["t"], [text], oid, -1, fast=fast).values.null_count == 0
    else:
        with pytest.raises(ConversionError, match="value 0"):
            convert_column(["t"], [text], oid, -1, fast=fast)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("days,ok", [
    (2**31 - 2, False), (2**31 - 10957, False), (2**31 - 1 - 10957, True),
    (-2**31 + 1, True), (0, True),
])
def test_a_binary_date_beyond_date32_is_an_error_naming_the_value(fast, days, ok):
    """A binary date counts days from 2000-01-01; shifted to 1970 it can leave int32. Both
    twins refuse it as the value's error, never as a column-wide Arrow failure."""
    raw = struct.pack(">i", days)
    if ok:
        v = convert_column(["b"], [raw], 1082, -1, fast=fast).values
        assert v.cast(pa.int32()).to_pylist() == [days + 10957]
    else:
        with pytest.raises(ConversionError, match="value 0.*date32 range") as ei:
            convert_column(["b"], [raw], 1082, -1, fast=fast)
        assert ei.value.index == 0
