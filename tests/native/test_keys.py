"""Key codes read in place equal Arrow's dictionary codes of the same values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgoutput_codec._native.keys import key_codes


def _arrow_codes(data: pa.Array, at: np.ndarray) -> np.ndarray:
    """Dense codes in order of first appearance, a null a value of its own."""
    enc = pc.dictionary_encode(data.take(pa.array(at, pa.int64())), null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


values = st.lists(st.one_of(st.none(), st.binary(max_size=12), st.sampled_from([b"", b"a", b"ab", b"\x00"])),
                  max_size=60)


@settings(max_examples=300, deadline=None)
@given(values, st.data(), st.sampled_from([pa.binary(), pa.string()]))
def test_codes_equal_arrow_dictionary_codes(rows, data, typ):
    if typ == pa.string():
        rows = [None if r is None else r.hex() for r in rows]
    arr = pa.array(rows, typ)
    start = data.draw(st.integers(0, len(rows)))
    arr = arr.slice(start)                         # offsets and bitmap of a sliced parent
    at = np.array(data.draw(st.lists(st.integers(0, max(len(arr) - 1, 0)), max_size=80)) if len(arr) else [],
                  np.int64)
    assert key_codes(arr, at).tolist() == _arrow_codes(arr, at).tolist()


def test_many_values_past_the_first_table_size_and_colliding_slots():
    rng = np.random.default_rng(7)
    arr = pa.array([str(v) for v in rng.integers(0, 5000, 20000)])
    at = rng.integers(0, len(arr), 50000)
    assert key_codes(arr, at).tolist() == _arrow_codes(arr, at).tolist()


def test_a_place_outside_the_array_is_refused():
    arr = pa.array([b"a", b"b"])
    for bad in ([2], [-1], [0, 5]):
        with pytest.raises(ValueError, match="outside the 2-row binary array"):
            key_codes(arr, np.array(bad, np.int64))


def test_offsets_past_the_data_are_refused():
    """pyarrow checks only the last offset of an array made from buffers: one past the
    data in the middle, or going back, is refused before any byte is read."""
    data = pa.py_buffer(b"abcdefghij")
    for offs in ([0, 50, 10], [0, 8, 2, 10]):
        arr = pa.Array.from_buffers(pa.binary(), len(offs) - 1, [None, pa.py_buffer(np.array(offs, np.int32)), data])
        with pytest.raises(ValueError, match="offsets outside its data"):
            key_codes(arr, np.array([0, 1], np.int64))
    sound = pa.Array.from_buffers(pa.binary(), 3, [None, pa.py_buffer(np.array([0, 8, 2, 10], np.int32)), data])
    assert key_codes(sound, np.array([0, 2, 0], np.int64)).tolist() == [0, 1, 0]    # only the places read count


def test_other_types_are_refused():
    with pytest.raises(TypeError, match="binary or string"):
        key_codes(pa.array([1, 2]), np.array([0], np.int64))
