# cython: language_level=3
"""``take`` for the nested list columns of change rows, by whole-row memcpy.

Arrow's generic ``take`` on ``list<struct<…>>`` walks element by element and measured
about twice the time of decoding the messages in the first place; change rows pick
whole rows (a message's tuple, a relation's column list), so each row is one range of
contiguous elements per child: a memcpy of values and a rebase of offsets.
Handles list<struct<…>> whose children are fixed-width primitives or string/binary
with 32-bit offsets (``schema.TUPLE_TYPE``, ``schema.RELATION_COLUMNS_TYPE``); any
other type falls back to Arrow's ``take``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from pgoutput_codec._native.arrowbuf cimport bit as _bit, buffer_address as _addr
from pgoutput_codec._native.builders cimport pool_buffer

import numpy as np
import pyarrow as pa


cdef inline void _set(uint8_t* bits, Py_ssize_t i) noexcept nogil:
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))


def _supported(typ) -> bool:
    if not (pa.types.is_list(typ) or pa.types.is_list_view(typ)) or not pa.types.is_struct(typ.value_type):
        return False
    for f in typ.value_type:
        t = f.type
        if not (pa.types.is_string(t) or pa.types.is_binary(t) or
                (pa.types.is_primitive(t) and not pa.types.is_boolean(t) and t.bit_width % 8 == 0)):
            return False
    return True


cdef Py_ssize_t INT32_MAX = 2147483647


cdef _too_big(Py_ssize_t rows, Py_ssize_t size, str what, typ):
    """Refused before any allocation: the 32-bit offsets of the output cannot hold it
    (Arrow's own take would allocate the whole result first, then fail the same way)."""
    raise OverflowError(f"the {rows:,} rows taken hold {size:,} {what}, more than a {typ} "
                        "array's 32-bit offsets can address: take fewer rows at a time")


def take_lists(arr, indices):
    """Rows ``indices`` (int64 numpy array, no nulls) of a list<struct> array, or of a
    list_view<struct> array as a plain list (the rows' values copied apart, where the
    view's rows share them)."""
    if isinstance(arr, pa.ChunkedArray):   # one chunk as it is: joining copies even one
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    typ = arr.type
    view = pa.types.is_list_view(typ)
    if not _supported(typ) or arr.values.null_count:   # null structs: Arrow's take
        if view:
            raise TypeError(f"take_lists copies list views of structs without nulls, not {typ}")
        return arr.take(pa.array(indices, pa.int64()))
    if view:
        typ = pa.list_(typ.value_field)
    cdef const int64_t[::1] ix = np.ascontiguousarray(indices, dtype=np.int64)
    cdef Py_ssize_t m = ix.shape[0], n = len(arr), r, i, a, b, k, total = 0, w, pos
    cdef const uint8_t* valid
    cdef int32_t* out_offs
    cdef uint8_t* out_valid
    cdef Py_ssize_t out_nulls = 0
    for r in range(m):
        if ix[r] < 0 or ix[r] >= n:
            raise IndexError(f"index {ix[r]} out of bounds for {n} rows")
    bufs = arr.buffers()
    # each row's range of values, [start, end): list offsets, or a view's offset and size
    if m:
        o = np.frombuffer(bufs[1], np.int32)[arr.offset:arr.offset + n + 1]
        begin = o[ix].astype(np.int64)
        finish = (begin + np.frombuffer(bufs[2], np.int32)[arr.offset:arr.offset + n][ix]) if view else \
            o[np.asarray(ix) + 1].astype(np.int64)
    else:
        begin = finish = np.zeros(0, np.int64)
    if m and arr.null_count:       # a null row has no values to copy: an empty range
        # (the taken rows' validity bits alone: a few rows of a long array cost a few)
        at = np.asarray(ix) + arr.offset
        null = ((np.frombuffer(bufs[0], np.uint8)[at >> 3] >> (at & 7)) & 1) == 0
        finish = np.where(null, begin, finish)
    cdef const int64_t[::1] st = np.ascontiguousarray(begin, dtype=np.int64)
    cdef const int64_t[::1] en = np.ascontiguousarray(finish, dtype=np.int64)
    valid = _addr(bufs[0])
    cdef Py_ssize_t voff = arr.offset
    # list offsets and validity of the result
    cdef uint8_t* p
    out_offs_buf = pool_buffer(4 * (m + 1), False, &p)
    out_offs = <int32_t*>p
    out_valid_buf = None
    out_valid = NULL
    if arr.null_count:
        out_valid_buf = pool_buffer((m + 7) >> 3, True, &out_valid)
    out_offs[0] = 0
    with nogil:
        for r in range(m):
            i = ix[r]
            if valid != NULL and not _bit(valid, voff + i):
                out_nulls += 1
            else:
                if out_valid != NULL:
                    _set(out_valid, r)
                total += en[r] - st[r]
            out_offs[r + 1] = <int32_t>total
    if total > INT32_MAX:
        _too_big(m, total, "elements", typ)
    # children: whole-row ranges
    values = arr.values.flatten()          # struct children, parent offset applied
    children = []
    cdef const uint8_t* src
    cdef uint8_t* dst
    cdef const int32_t* coffs
    cdef int32_t* doffs
    cdef const uint8_t* cvalid
    cdef uint8_t* dvalid
    cdef Py_ssize_t coff, dpos, base, cn
    for field, child in zip(typ.value_type, values, strict=True):
        cbufs = child.buffers()
        coff = child.offset
        cvalid = _addr(cbufs[0]) if child.null_count else NULL
        dvalid_buf = None
        dvalid = NULL
        if cvalid != NULL:
            dvalid_buf = pool_buffer((total + 7) >> 3, True, &dvalid)
        cn = 0
        if pa.types.is_string(field.type) or pa.types.is_binary(field.type):
            coffs = (<const int32_t*>_addr(cbufs[1])) + coff
            src = _addr(cbufs[2])
            # bytes needed
            dpos = 0
            with nogil:
                for r in range(m):
                    dpos += coffs[en[r]] - coffs[st[r]]
            if dpos > INT32_MAX:
                _too_big(m, dpos, f"bytes of {field.name!r}", field.type)
            doffs_buf = pool_buffer(4 * (total + 1), False, &p)
            doffs = <int32_t*>p
            data_buf = pool_buffer(max(dpos, 1), False, &dst)
            doffs[0] = 0
            dpos = 0
            pos = 0
            with nogil:
                for r in range(m):
                    a = st[r]
                    b = en[r]
                    base = coffs[a]
                    if src != NULL and coffs[b] > base:
                        memcpy(dst + dpos, src + base, coffs[b] - base)
                    for k in range(a, b):
                        doffs[pos + 1] = <int32_t>(dpos + coffs[k + 1] - base)
                        if dvalid != NULL and _bit(cvalid, coff + k):
                            _set(dvalid, pos)
                        elif dvalid != NULL:
                            cn += 1
                        pos += 1
                    dpos += coffs[b] - base
            children.append(pa.Array.from_buffers(field.type, total, [dvalid_buf, doffs_buf, data_buf],
                                                  null_count=cn))
        else:
            w = field.type.bit_width // 8
            src = _addr(cbufs[1])
            data_buf = pool_buffer(max(total * w, 1), False, &dst)
            pos = 0
            with nogil:
                for r in range(m):
                    a = st[r]
                    b = en[r]
                    if b > a:
                        memcpy(dst + pos * w, src + (coff + a) * w, (b - a) * w)
                    if dvalid != NULL:
                        for k in range(a, b):
                            if _bit(cvalid, coff + k):
                                _set(dvalid, pos + k - a)
                            else:
                                cn += 1
                    pos += b - a
            children.append(pa.Array.from_buffers(field.type, total, [dvalid_buf, data_buf], null_count=cn))
    struct = pa.StructArray.from_arrays(children, fields=list(typ.value_type))
    return pa.Array.from_buffers(typ, m, [out_valid_buf, out_offs_buf], null_count=out_nulls,
                                 children=[struct])


def take_chunks(col, idx, take=None):
    """``col.take(idx)`` of a column of several chunks, taken chunk by chunk: one output
    chunk per run of indices into one input chunk. Arrow's take of a chunked column joins
    its chunks first, copying the whole column (and a list view's values) on every call:
    many tables' rows split into one group each would copy every row once per table.
    ``take``: the function taking rows of one chunk (None: Arrow's take)."""
    chunks = col.chunks
    bounds = np.cumsum([0] + [len(c) for c in chunks])
    which = np.searchsorted(bounds, idx, "right") - 1
    runs = np.concatenate([[0], np.flatnonzero(np.diff(which)) + 1, [len(idx)]]).astype(np.int64)
    pieces = [chunks[which[a]].take(pa.array(idx[a:b] - bounds[which[a]], pa.int64())) if take is None
              else take(chunks[which[a]], idx[a:b] - bounds[which[a]])
              for a, b in zip(runs[:-1], runs[1:]) if b > a]
    return pa.chunked_array(pieces, col.type)


def take_table(table, indices):
    """``Table.take`` with the list<struct> columns gathered by :func:`take_lists`, and
    columns of several chunks by :func:`take_chunks` where the indices rise (as a split
    by table's do, one output chunk per input chunk they touch); where they do not
    (rows put in another order), a column of several chunks is joined once and taken
    as one chunk: a piece per run of indices in one chunk would be thousands."""
    idx = np.asarray(indices, dtype=np.int64)
    arrow_idx = pa.array(idx, pa.int64())
    rising = len(idx) < 2 or bool(np.all(idx[1:] >= idx[:-1]))
    cols = []
    for col in table.columns:
        if col.num_chunks > 1 and not rising:
            col = pa.chunked_array([col.combine_chunks()], col.type)
        cols.append((take_chunks(col, idx, take_lists) if col.num_chunks > 1 else take_lists(col, idx))
                    if pa.types.is_list(col.type) and _supported(col.type)
                    else take_chunks(col, idx) if col.num_chunks > 1 else col.take(arrow_idx))
    return pa.Table.from_arrays(cols, schema=table.schema)


class _Cut:
    """Rows [lo, hi) of a list array as a list array of their own values: its offsets
    from 0, its values a zero-copy slice of the array's."""

    def __init__(self, arr):
        self.type = arr.type
        self.values = arr.values
        self.offsets = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + len(arr) + 1]
        self.valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
        self.nulls = np.concatenate([[0], np.cumsum(~self.valid)]) if arr.null_count else None

    def __call__(self, lo, hi):
        o = self.offsets[lo:hi + 1]
        nulls = int(self.nulls[hi] - self.nulls[lo]) if self.nulls is not None else 0
        bits = pa.py_buffer(np.packbits(self.valid[lo:hi], bitorder="little")) if nulls else None
        return pa.Array.from_buffers(self.type, hi - lo, [bits, pa.py_buffer(o - o[0])], null_count=nulls,
                                     children=[self.values.slice(o[0], o[-1] - o[0])])


def split_at(table, bounds):
    """The tables of rows [``bounds[k]``, ``bounds[k + 1]``) of ``table``, without a copy
    of a row: slices, whose list columns each hold their own rows' values alone (cut
    from the table's), so that code reading a list column's values in place, by its
    offsets, reads a slice's rows and not every row's."""
    b = np.asarray(bounds, dtype=np.int64)
    cols = [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in table.columns]
    whole = pa.Table.from_arrays(cols, schema=table.schema)
    cuts = [(j, table.schema.field(j), _Cut(c)) for j, c in enumerate(cols) if pa.types.is_list(c.type)]
    out = []
    for lo, hi in zip(b[:-1].tolist(), b[1:].tolist()):
        part = whole.slice(lo, hi - lo)
        for j, field, cut in cuts:
            part = part.set_column(j, field, cut(lo, hi))
        out.append(part)
    return out
