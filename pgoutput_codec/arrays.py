"""Arrow input in the shapes users hand it, made into what the decoders read.

Every public function accepts payloads and columns as a ``pa.Array``, a
``pa.ChunkedArray`` or a Python sequence; this module is the one place that turns them
into arrays, so each decoder states what it needs and not how to get it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# modules, not names: the import graph of tests/test_lint.py sees a compiled module only
# as its package
from ._native import builders, gather
from .pgvalues import LSN_PATTERN, parse_lsn

__all__ = ["one_array", "binary_chunks", "one_binary", "payload_chunks", "lsn_array", "typed_array", "order_keys",
           "validity", "list_lengths", "share_lists", "plain_lists", "plain_list_columns", "plain_list_schema",
           "payload_sizes", "kind_bytes", "largest", "MAX_CHUNK_BYTES"]

#: Output columns use 32-bit offsets (what Spark and most readers expect); a LargeBinary
#: input chunk holding more payload bytes than this is decoded in slices (the result is
#: then chunked), so no output column can pass 2 GiB.
MAX_CHUNK_BYTES = 1 << 30


def one_array(a):
    """One ``pa.Array`` from an array or a chunked one; a single chunk as it is
    (``combine_chunks`` copies even one chunk, which costs milliseconds per nested
    column of change rows)."""
    if isinstance(a, pa.ChunkedArray):
        return a.chunk(0) if a.num_chunks == 1 else a.combine_chunks()
    return a


def payload_chunks(values) -> list:
    """Payloads (array, chunked array or sequence) as a list of arrays, types as given."""
    if isinstance(values, pa.ChunkedArray):
        return list(values.chunks)
    if isinstance(values, pa.Array):
        return [values]
    return [pa.array(list(values), pa.binary())]


def _split_large(arr) -> list:
    n = len(arr)
    if n == 0:
        return [arr]
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=arr.offset + n + 1)[arr.offset:]
    if offs[-1] - offs[0] <= MAX_CHUNK_BYTES:
        return [arr]
    parts, start = [], 0
    while start < n:
        stop = int(np.searchsorted(offs, offs[start] + MAX_CHUNK_BYTES, side="right")) - 1
        stop = max(stop, start + 1)   # a single payload larger than the limit goes alone
        parts.append(arr.slice(start, stop - start))
        start = stop
    return parts


def binary_chunks(values) -> list:
    """Payloads as ``pa.binary()`` chunks of at most ``MAX_CHUNK_BYTES`` each (a larger
    LargeBinary chunk is sliced, one oversize payload alone); a list of only None is
    a null payload per item. Any other Arrow type is a TypeError."""
    if isinstance(values, (pa.ChunkedArray, pa.Array)):
        chunks, typ = payload_chunks(values), values.type
    else:
        arr = pa.array(list(values), type=pa.binary())
        chunks, typ = [arr], arr.type
    if pa.types.is_binary(typ):
        return chunks
    if pa.types.is_large_binary(typ):
        return [part for c in chunks for part in _split_large(c)]
    if pa.types.is_null(typ):  # a list of only None
        return [pa.array([None] * len(c), type=pa.binary()) for c in chunks]
    if pa.types.is_fixed_size_binary(typ) or pa.types.is_binary_view(typ):
        return [c.cast(pa.binary()) for c in chunks]
    raise TypeError(f"decode_batch expects binary payloads, got an Arrow column of type {typ}")


def one_binary(values) -> pa.Array:
    """Payloads (array, chunked array or sequence) as one binary array; an array as given."""
    return values if isinstance(values, pa.Array) else pa.concat_arrays(binary_chunks(values))


def payload_sizes(arr: pa.Array) -> np.ndarray:
    """Each row's bytes of a binary/large-binary array (0 for a null row), from its
    offsets alone (int64)."""
    if not len(arr):
        return np.zeros(0, np.int64)
    width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=width)[arr.offset:arr.offset + len(arr) + 1]
    return np.diff(offsets).astype(np.int64)


def lsn_array(lsn, n: int) -> pa.Array:
    """An archive's ``lsn`` column (``X/Y`` text or integers; None: no column, ``n`` nulls)
    as uint64."""
    if lsn is None:
        return builders.nulls(n, pa.uint64())
    lsn = one_array(lsn)
    if not isinstance(lsn, pa.Array):
        lsn = pa.array(lsn)
    if pa.types.is_string(lsn.type) or pa.types.is_large_string(lsn.type):
        return _lsn_text(lsn)
    return lsn.cast(pa.uint64())


# hex digit -> value, by byte
_HEX = np.zeros(256, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i


def _lsn_text(lsn: pa.Array) -> pa.Array:
    """``X/Y`` texts to uint64, without Python per row (a captured archive's ``lsn``
    column, where a loop of ``parse_lsn`` would cost a Python call per row). Each half
    is padded to eight hex digits, so the digits of all rows lie in one n × 8 block; pairs
    of digits make bytes, and four bytes a big-endian UInt32."""
    valid = lsn.is_valid()
    text = pc.fill_null(lsn, "0/0").cast(pa.string())
    ok = pc.match_substring_regex(text, f"^{LSN_PATTERN}$")
    if pc.all(ok).as_py() is False:
        i = pc.index(ok, False).as_py()
        try:
            parse_lsn(text[i].as_py())
        except ValueError as e:
            raise ValueError(f"lsn of row {i}: {e}") from None
    halves = pc.split_pattern(text, "/")
    out = np.zeros(len(text), np.uint64)
    for k in (0, 1):
        half = pc.utf8_lpad(pc.list_element(halves, k), 8, "0")
        offsets = np.frombuffer(half.buffers()[1], np.int32)[half.offset:half.offset + len(half) + 1]
        digits = np.frombuffer(half.buffers()[2], np.uint8)[offsets[0]:offsets[-1]].reshape(-1, 8) \
            if len(half) else np.zeros((0, 8), np.uint8)
        nib = _HEX[digits]
        word = np.ascontiguousarray((nib[:, 0::2] << 4) | nib[:, 1::2]).view(">u4").ravel()
        out |= word.astype(np.uint64) << np.uint64(32 * (1 - k))
    return pa.array(out, pa.uint64(), mask=pc.invert(valid).to_numpy(zero_copy_only=False) if lsn.null_count else None)


def typed_array(values, typ) -> pa.Array:
    """``values`` (an Arrow array, chunked or not, or a sequence) as one array of ``typ``."""
    return one_array(values).cast(typ) if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, typ)


def order_keys(order) -> np.ndarray:
    """An order-key column (array, chunked array or sequence) as int64; a null is refused."""
    if isinstance(order, pa.ChunkedArray):
        order = order.combine_chunks()
    if isinstance(order, pa.Array):
        if order.null_count:
            raise ValueError("the order key must not be null")
        order = order.to_numpy(zero_copy_only=False)
    return np.asarray(order, dtype=np.int64)


def validity(arr: pa.Array) -> np.ndarray:
    """An array's validity as numpy bools, unpacked from its bitmap (``is_valid()`` then
    ``to_numpy`` builds a boolean Arrow array first, which costs more)."""
    if arr.null_count == 0:
        return np.ones(len(arr), bool)
    bits = np.frombuffer(arr.buffers()[0], np.uint8)
    return np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].view(bool)


def list_lengths(arr: pa.ListArray) -> np.ndarray:
    """The length of every list of ``arr`` (int64), -1 where the list is null."""
    lens = np.diff(arr.offsets.to_numpy()).astype(np.int64)
    if arr.null_count:
        lens[~validity(arr)] = -1
    return lens


def share_lists(lists: pa.Array, idx: np.ndarray) -> pa.Array:
    """Rows ``idx`` of the list array ``lists`` as a ``list_view`` over its values: rows
    that repeat a list point at one copy of it (8 bytes a row), where a taken list array
    would copy the list into every row. Nulls, and rows of a negative index, are null."""
    lists = one_array(lists)
    idx = np.asarray(idx, dtype=np.int64)
    null = idx < 0
    offs = lists.offsets.to_numpy()
    starts, sizes = np.zeros(len(idx), np.int64), np.zeros(len(idx), np.int64)
    at = idx[~null]
    starts[~null], sizes[~null] = offs[at], offs[at + 1] - offs[at]
    if lists.null_count:
        null[~null] = ~validity(lists)[at]
    used = ~null
    lo = int(starts[used].min()) if used.any() else 0
    hi = int((starts + sizes)[used].max()) if used.any() else 0
    starts[null], sizes[null] = lo, 0
    # only the span the rows use: a batch of one relation holds that relation's list alone
    values = lists.values.slice(lo, hi - lo)
    return pa.ListViewArray.from_arrays(pa.array(starts - lo, pa.int32()), pa.array(sizes, pa.int32()), values,
                                        type=pa.list_view(lists.type.value_field),
                                        mask=pa.array(null) if null.any() else None)


def plain_list_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with each list view a plain list: what :func:`plain_list_columns` gives."""
    return pa.schema([pa.field(f.name, pa.list_(f.type.value_field), f.nullable, f.metadata)
                      if pa.types.is_list_view(f.type) else f for f in schema], metadata=schema.metadata)


def plain_list_columns(table: pa.Table) -> pa.Table:
    """``table`` with each list-view column as a plain list (:func:`plain_lists`)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_list_view(f.type):
            col = plain_lists(table.column(i))
            table = table.set_column(i, pa.field(f.name, col.type, f.nullable, f.metadata), col)
    return table


def plain_lists(arr) -> pa.Array:
    """A list view as a list array of the same values; any other array as it is.
    pyarrow's own cast from ``list_view`` to ``list`` reads the view's offsets as a
    list's and drops values where lists share them (apache/arrow GH-50994)."""
    arr = one_array(arr)
    if not pa.types.is_list_view(arr.type):
        return arr
    if pa.types.is_struct(arr.type.value_type) and not arr.values.null_count:
        return gather.take_lists(arr, np.arange(len(arr), dtype=np.int64))   # whole-row copies
    null = ~validity(arr) if arr.null_count else None
    sizes = arr.sizes.to_numpy(zero_copy_only=False).astype(np.int64)
    if null is not None:
        sizes[null] = 0
    offsets = np.zeros(len(arr) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError(f"{offsets[-1]:,} list elements: more than a list array's 32-bit offsets address")
    values = pc.list_flatten(arr)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=pa.list_(arr.type.value_field),
                                    mask=pa.array(null) if null is not None else None)


def kind_bytes(kinds: pa.Array) -> np.ndarray:
    """A string array of one-character values as a uint8 array of those characters
    (a null, or a value of another length: ``'n'``): the kinds ('n' 'u' 't' 'b') of a
    flat tuple child, the ops of change rows."""
    if not len(kinds):
        return np.zeros(0, np.uint8)
    offs = np.frombuffer(kinds.buffers()[1], np.int32, count=kinds.offset + len(kinds) + 1)[kinds.offset:]
    data = np.frombuffer(kinds.buffers()[2], np.uint8)
    out = np.full(len(kinds), ord("n"), np.uint8)
    ok = (offs[1:] - offs[:-1]) == 1
    if kinds.null_count:
        ok &= kinds.is_valid().to_numpy(zero_copy_only=False)
    out[ok] = data[offs[:-1][ok]]
    return out


#: looked up once: ``pc.max``'s own lookup and options cost more than its kernel on the
#: few rows of a table's batch
_MAX = pc.get_function("max")


def largest(col):
    """The largest value of an integer or timestamp column (an array or a chunked one) as
    an int (a timestamp's in its unit since the epoch; None: it holds none), or Arrow's
    of another type (a decimal): NumPy's over one chunk of no null, whose call costs less
    than Arrow's, Arrow's otherwise."""
    arr = col.chunk(0) if isinstance(col, pa.ChunkedArray) and col.num_chunks == 1 else col
    if isinstance(arr, pa.Array) and not arr.null_count and len(arr) and \
            (pa.types.is_integer(arr.type) or pa.types.is_timestamp(arr.type)):
        a = arr.to_numpy()
        return int((a.view(np.int64) if a.dtype.kind == "M" else a).max())
    m = _MAX.call([col])
    return m.value if pa.types.is_timestamp(col.type) else m.as_py()
