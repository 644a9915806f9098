"""The whole-row gather for nested change-row columns equals Arrow's take."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgoutput_codec._native.gather import split_at, take_lists, take_table
from pgoutput_codec.schema import RELATION_COLUMNS_TYPE, TUPLE_TYPE

column = st.one_of(
    st.builds(lambda k: {"kind": k, "data": None}, st.sampled_from("nu")),
    st.builds(lambda k, d: {"kind": k, "data": d}, st.sampled_from("tb"), st.binary(max_size=40)),
)
tuples = st.lists(st.one_of(st.none(), st.lists(column, max_size=6)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(tuples, st.data())
def test_take_lists_equals_arrow_take(rows, data):
    arr = pa.array(rows, TUPLE_TYPE)
    start = data.draw(st.integers(0, len(rows)))
    arr = arr.slice(start)                        # offsets into a sliced parent too
    idx = np.array(data.draw(st.lists(st.integers(0, max(len(arr) - 1, 0)), max_size=60)) if len(arr) else [],
                   dtype=np.int64)
    got = take_lists(arr, idx)
    got.validate(full=True)
    assert got.equals(arr.take(pa.array(idx, pa.int64())))


def test_relation_columns_and_tables():
    cols = pa.array([[{"flags": 1, "name": "id", "type_oid": 23, "type_modifier": -1},
                      {"flags": 0, "name": "ünï", "type_oid": 25, "type_modifier": 7}], None, []],
                    RELATION_COLUMNS_TYPE)
    idx = np.array([2, 0, 1, 0])
    assert take_lists(cols, idx).equals(cols.take(pa.array(idx)))
    t = pa.table({"c": cols, "n": pa.array([1, 2, 3])})
    assert take_table(t, idx).equals(t.take(pa.array(idx)))
    with pytest.raises(IndexError):
        take_lists(cols, np.array([3]))


def test_a_take_past_32_bit_offsets_is_refused_before_it_allocates():
    """A 1 MiB column name taken for 2,100 rows is 2.2 GB of text: more than 32-bit
    offsets address. The gather says so at once, instead of wrapping the offsets."""
    big = pa.array([[{"flags": 1, "name": "x" * (1 << 20), "type_oid": 23, "type_modifier": -1}]],
                   RELATION_COLUMNS_TYPE)
    with pytest.raises(OverflowError, match="2,202,009,600 bytes of 'name'.*32-bit offsets"):
        take_lists(big, np.zeros(2100, np.int64))
    assert take_lists(big, np.zeros(3, np.int64)).equals(big.take(pa.array([0, 0, 0])))


def test_list_views_become_plain_lists_row_by_row():
    """Rows of a list view share values, overlap, skip some and may be null: each comes
    out as its own plain list, the same values in order; a slice of the view too."""
    from pgoutput_codec.arrays import plain_lists
    values = pa.array([{"kind": "t", "value": bytes([i]) * i} for i in range(10)], TUPLE_TYPE.value_type)
    offsets, sizes = [0, 3, 0, 2, 9, 5, 0], [3, 4, 3, 0, 1, 5, 0]
    mask = np.array([False, False, True, False, False, False, True])
    view = pa.ListViewArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(sizes, pa.int32()), values,
                                        mask=pa.array(mask))
    want = [None if m else values.slice(o, s).to_pylist() for o, s, m in zip(offsets, sizes, mask, strict=True)]
    got = plain_lists(view)
    got.validate(full=True)
    assert pa.types.is_list(got.type) and got.to_pylist() == want
    part = plain_lists(view.slice(2, 4))
    assert part.to_pylist() == want[2:6]


@settings(max_examples=100, deadline=None)
@given(st.lists(tuples, min_size=1, max_size=4), st.data())
def test_take_table_of_several_chunks_equals_arrow_take(chunks, data):
    """Columns of several chunks (nulls, list<struct>, list views sharing values, text),
    taken at rising indices (chunk by chunk) and at any (each column joined once, taken
    as one chunk), are Arrow's take."""
    parts = []
    for rows in chunks:
        t = pa.array(rows, TUPLE_TYPE)
        view = pa.ListViewArray.from_arrays(pa.array([0] * len(rows), pa.int32()),
                                            pa.array([1] * len(rows), pa.int32()),
                                            pa.array([{"kind": "t", "data": b"x"}], TUPLE_TYPE.value_type))
        parts.append(pa.table({"t": t, "v": view, "s": pa.array([None if r is None else str(len(r)) for r in rows], pa.string())}))
    table = pa.concat_tables(parts)
    n = len(table)
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=60)) if n else [], dtype=np.int64)
    for at in (np.sort(idx), idx):
        got = take_table(table, at)
        want = table.combine_chunks().take(pa.array(at, pa.int64()))
        for c in table.column_names:
            g = got.column(c)
            g.validate(full=True)
            assert g.type == table.schema.field(c).type
            if len(at) > 1 and np.any(np.diff(at) < 0):
                assert g.num_chunks == 1, c
            assert g.to_pylist() == want.column(c).to_pylist(), c


def test_rows_of_a_column_of_one_chunk_are_taken_in_place():
    """A few rows of a long column held as one chunk (a table's column) cost the rows, not
    a copy of the column: many tables' groups each take a few rows of the same column."""
    rows = [[{"kind": "t", "data": b"%d" % i}] * 5 for i in range(200_000)]
    col = pa.chunked_array([pa.array(rows, TUPLE_TYPE)])
    idx = np.array([5, 70_000, 199_999], np.int64)
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    was = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        got = take_lists(col, idx)
        by_table = take_table(pa.table({"t": col}), idx)
    finally:
        pa.set_memory_pool(was)
    assert got.to_pylist() == by_table.column("t").to_pylist() == col.take(pa.array(idx)).to_pylist()
    assert pool.max_memory() < 64 * 1024, f"{pool.max_memory():,} bytes from Arrow's pool for 3 rows"


@settings(max_examples=100, deadline=None)
@given(st.lists(tuples, min_size=1, max_size=3), st.data())
def test_split_at_gives_slices_whose_lists_hold_their_own_values(chunks, data):
    """Each part is the table's rows between two bounds (empty parts too), and each of
    its list columns holds the values of its own rows alone, from offset 0: code reading
    a list column's values by its offsets reads the part's rows, not every row's."""
    table = pa.concat_tables([pa.table({"t": pa.array(rows, TUPLE_TYPE),
                                        "s": pa.array([None if r is None else str(len(r)) for r in rows], pa.string())})
                              for rows in chunks])
    n = len(table)
    bounds = [0, *sorted(data.draw(st.lists(st.integers(0, n), max_size=5))), n]
    parts = split_at(table, bounds)
    assert len(parts) == len(bounds) - 1
    for part, lo, hi in zip(parts, bounds[:-1], bounds[1:], strict=True):
        part.validate(full=True)
        assert part.schema.equals(table.schema)
        assert part.to_pylist() == table.slice(lo, hi - lo).to_pylist()
        lists = part.column("t").chunk(0)
        offsets = lists.offsets.to_numpy()
        assert offsets[0] == 0 and len(lists.values) == offsets[-1]
