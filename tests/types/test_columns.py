"""Whole columns: values read in place through an index, several columns converted together."""

from __future__ import annotations


import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest


from pgoutput_codec import typecatalog as tc
from pgoutput_codec.typecatalog import ConversionError, convert_column


@pytest.mark.parametrize("oid,kind,vals", [
    (23, "t", [b"1", b"-7", b"2147483647", None]),
    (25, "t", [b"abc", b"", "é".encode(), None]),
    (1700, "t", [b"1.50", b"NaN", b"-2", None]),
    (1184, "t", [b"2024-01-02 03:04:05+05:30", b"infinity", b"1999-12-31 23:59:59.5+00", None]),
    (17, "t", [b"\\x00ff", b"\\x", b"\\xdead", None]),
    (16, "b", [b"\x01", b"\x00", b"\x01", None]),
    (1007, "t", [b"{1,2}", b"{NULL}", b"{}", None]),           # int4[]: the Python converters
])
def test_convert_at_index_equals_take_then_convert(oid, kind, vals):
    """``index=`` reads values in place (change rows' tuple children); it must give what
    gathering the values first and converting them gives, with -1 as null."""
    kinds = pa.array(["n" if v is None else kind for v in vals], pa.string())
    data = pa.array(vals, pa.binary())
    index = np.array([2, -1, 0, 3, 1, 1, -1, 2], dtype=np.int64)
    take = pa.array(index, pa.int64(), mask=index < 0)
    want = convert_column(pc.fill_null(kinds.take(take), "n"), data.take(take), oid, -1)
    got = convert_column(kinds, data, oid, -1, index=index)
    assert got.values.equals(want.values)
    assert (got.special is None) == (want.special is None)
    if got.special is not None:
        assert got.special.equals(want.special)


def test_convert_at_index_failure_names_the_value():
    kinds = pa.array(["t", "t", "t"], pa.string())
    data = pa.array([b"1", b"x", b"3"], pa.binary())
    with pytest.raises(ConversionError, match="x"):
        convert_column(kinds, data, 23, -1, index=np.array([0, 2, 1], dtype=np.int64))
    with pytest.raises(IndexError):
        convert_column(kinds, data, 23, -1, index=np.array([3], dtype=np.int64))


def test_convert_columns_keeps_good_columns_when_one_fails():
    """Columns converted together: a bad value fails its own column only."""
    kinds = pa.array(["t"] * 6, pa.string())
    data = pa.array([b"1", b"2024-01-01", b"2", b"not a date", b"3", b"2024-02-29"], pa.binary())
    ints, dates = np.array([0, 2, 4]), np.array([1, 3, 5])
    out = tc.convert_columns(kinds, data, [(23, -1), (1082, -1)], indexes=[ints, dates])
    assert out[0].values.to_pylist() == [1, 2, 3]
    assert isinstance(out[1], ConversionError) and out[1].index == 1


def test_convert_columns_with_shared_row_offsets():
    """``(offsets, k)`` indexes (columns sharing one row layout) equal full index arrays."""
    kinds = pa.array(["t", "t", "n", "t", "t", "t"], pa.string())
    data = pa.array([b"1", b"a", None, b"b", b"3", b"c"], pa.binary())
    offsets = np.array([0, -1, 2, 4], dtype=np.int64)
    shared = tc.convert_columns(kinds, data, [(23, -1), (25, -1)], indexes=[(offsets, 0), (offsets, 1)])
    full = tc.convert_columns(kinds, data, [(23, -1), (25, -1)],
                              indexes=[np.array([0, -1, 2, 4]), np.array([1, -1, 3, 5])])
    assert shared[0].values.to_pylist() == full[0].values.to_pylist() == [1, None, None, 3]
    assert shared[1].values.to_pylist() == full[1].values.to_pylist() == ["a", None, "b", "c"]
    with pytest.raises(IndexError):
        tc.convert_columns(kinds, data, [(23, -1)], indexes=[(offsets, 2)])


def test_indexed_text_output_grows_past_its_estimate():
    """Indexed variable-width columns start from the child's average value size and grow:
    a long-valued column next to a short-valued one, and uuids (36 text bytes from 16)."""
    n = 3000
    short, long_ = [b"s"] * n, [("ü" * 400 + str(i)).encode() for i in range(n)]
    uu = [bytes(range(16))] * n
    data = [v for row in zip(short, long_, uu, strict=True) for v in row]
    kinds = pa.array(["t", "t", "b"] * n)
    base = np.arange(0, 3 * n, 3, dtype=np.int64)
    out = tc.convert_columns(kinds, pa.array(data, pa.binary()), [(25, -1), (25, -1), (2950, -1)],
                             indexes=[(base, 0), (base, 1), (base, 2)])
    assert out[0].values.to_pylist() == ["s"] * n
    assert out[1].values.to_pylist() == [v.decode() for v in long_]
    assert out[2].values.to_pylist() == ["00010203-0405-0607-0809-0a0b0c0d0e0f"] * n
