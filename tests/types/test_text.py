"""Text-like types (typecatalog/text.py, _codecs/text.pxi)."""

from __future__ import annotations


import pyarrow as pa
import pytest


from pgoutput_codec.typecatalog import ConversionError, convert_column


@pytest.mark.parametrize("tail", [0, 1, 40])
def test_short_text_values_every_length_and_position(tail):
    """Text values of 0-20 bytes with a non-ASCII or an invalid byte at every position:
    the 16-byte fast path (two overlapping loads, fixed copy) agrees with strict UTF-8,
    also for values at the very end of the data buffer (``tail``: bytes after them)."""
    vals = []
    for n in range(21):
        vals.append(b"a" * n)
        for at in range(max(n - 1, 0)):
            vals.append(b"a" * at + "é".encode() + b"a" * (n - at - 2))
    vals.append(b"x" * tail)
    got = convert_column(pa.array(["t"] * len(vals)), pa.array(vals, pa.binary()), 25, -1).values.to_pylist()
    assert got == [v.decode() for v in vals]
    for n in range(1, 21):
        for at in range(n):
            bad = b"a" * at + b"\xff" + b"a" * (n - at - 1)
            for pair in ([b"ok", bad], [bad, b"ok" * 10]):   # last in the buffer, and not
                with pytest.raises(ConversionError, match="UTF-8"):
                    convert_column(pa.array(["t", "t"]), pa.array(pair, pa.binary()), 25, -1)
