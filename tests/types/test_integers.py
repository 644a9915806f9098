"""Integers (typecatalog/integers.py, _codecs/integers.pxi)."""

from __future__ import annotations


import pytest


from pgoutput_codec.typecatalog import ConversionError, convert_value


@pytest.mark.parametrize("text,ok", [
    (b"-9223372036854775808", True), (b"9223372036854775807", True),
    (b"9223372036854775808", False), (b"-9223372036854775809", False), (b"-922337203685477581", True),
])
def test_int8_text_bounds(text, ok):
    if ok:
        assert convert_value("t", text, 20) == int(text)
    else:
        with pytest.raises(ConversionError):
            convert_value("t", text, 20)
