"""numeric (typecatalog/numeric.py, _codecs/numeric.pxi)."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest


from pgoutput_codec import typecatalog as tc
from pgoutput_codec.typecatalog import ConversionError, arrow_type, convert_column


def test_numeric_typmod_types():
    assert arrow_type(1700, ((10 << 16) | 2) + 4) == pa.decimal128(10, 2)
    assert arrow_type(1700, ((50 << 16) | 10) + 4) == pa.decimal256(50, 10)
    assert arrow_type(1700, ((100 << 16) | 10) + 4) == pa.string()
    assert arrow_type(1700, -1) == pa.string()
    assert tc.numeric_typmod(((5 << 16) | (-2 & 0x7FF)) + 4) == (5, -2)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("dscale,want,text", [
    (3, None, "-12345.678"),                # more fraction digits than numeric(10,2) holds
    (2, decimal.Decimal("-12345.67"), "-12345.67"),
    (1, decimal.Decimal("-12345.60"), "-12345.6"),
    (0, decimal.Decimal("-12345.00"), "-12345"),
])
def test_a_binary_numeric_drops_the_digits_its_dscale_hides(fast, dscale, want, text):
    """numeric_recv truncates (toward zero, never rounds) the digits a send form carries
    beyond its dscale, then fits the column's typmod; a server never sends such a form, but
    a mutated or hand-made payload must read as the server would read it, in both twins."""
    raw = bytes.fromhex("00030001" "4000") + dscale.to_bytes(2, "big") + bytes.fromhex("000109291a7c")
    mod = ((10 << 16) | 2) + 4
    if want is None:
        with pytest.raises(ConversionError, match="value 0"):
            convert_column(["b"], [raw], 1700, mod, fast=fast)
    else:
        assert convert_column(["b"], [raw], 1700, mod, fast=fast).values.to_pylist() == [want]
    assert convert_column(["b"], [raw], 1700, -1, fast=fast).values.to_pylist() == [text]
    for bad in (-1, 0x4000):
        with pytest.raises(ConversionError, match="value 0"):
            convert_column(["b"], [raw[:6] + bad.to_bytes(2, "big", signed=True) + raw[8:]], 1700, mod, fast=fast)
