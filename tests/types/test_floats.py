"""Floats (typecatalog/floats.py, _codecs/floats.pxi)."""

from __future__ import annotations

import math

import pytest


from pgoutput_codec.typecatalog import ConversionError, convert_column


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("oid,text,want", [
    (700, b"1e39", None), (700, b"-1e39", None), (700, b"1e-50", None), (701, b"1e400", None),
    (701, b"-1e-400", None), (700, b"1e-40", 9.99994610111476e-41), (700, b"0e-400", 0.0),
    (700, b"3.4028235e38", 3.4028234663852886e+38), (701, b"Infinity", math.inf),
])
def test_a_float_text_out_of_range_is_an_error_not_infinity_or_zero(fast, oid, text, want):
    """float4in/float8in refuse a finite text that overflows to infinity or underflows to
    zero (a denormal is a value): so do the converters, instead of a silently different
    number (they gave inf and 0.0)."""
    if want is None:
        with pytest.raises(ConversionError, match="out of range for type"):
            convert_column(["t"], [text], oid, fast=fast)
    else:
        assert convert_column(["t"], [text], oid, fast=fast).values.to_pylist() == [want]
