"""The Arrow types of typed tables as Delta Lake holds them: the one mapping, every run.

Delta has no unsigned integers, no time of day and no interval (deltalake refuses
``time64``; it writes ``uint64`` as a signed long, where an LSN past 2^63 would wrap), so:

- uint8 / uint16 / uint32 → int16 / int32 / int64: the next wider signed type, exact;
- uint64 → decimal(20, 0): exact for the whole range (as on Spark);
- time64[us] (``time``) → int64, µs since midnight (Debezium's MicroTime);
- month_day_nano interval → struct<months int32, days int32, microseconds int64>
  (as PostgreSQL holds it, and as Spark's table functions give it);
- decimal256 (numeric beyond 38 digits) → string, the exact text;
- dictionary (an enum) → its values (the labels, string): Delta has no dictionary type,
  and the labels' sort order is the archive catalog's;
- float16 (``halfvec``) → float32: Delta has no half float, a float32 holds each exactly;
- an extension type (``geoarrow.wkb``, PostGIS) → its storage (binary WKB): Delta keeps
  no Arrow extension type, so the CRS is not in the copy's schema;
- lists, structs (composites, ranges) and maps (hstore) of these, element by element.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import one_array, plain_lists
from ..typecatalog.interval import INTERVAL_STRUCT, interval_struct

__all__ = ["delta_type", "to_delta", "widened_halves"]

_WIDER = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0)}


#: delta_type's answers, by type: asked for each column of each table's batch. Types that
#: hold an extension type are not kept (pyarrow compares those by name alone).
_KNOWN: dict = {}
_KNOWN_MOST = 4096


#: the ids of the types Delta holds as they are (by id: a type's hash formats its name)
_AS_THEY_ARE = frozenset(t.id for t in (pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(),
                                        pa.float64(), pa.string(), pa.large_string(), pa.binary(), pa.large_binary(),
                                        pa.date32(), pa.timestamp("us"), pa.decimal128(1, 0)))


def delta_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type a value of type ``t`` is written to Delta as."""
    if t.id in _AS_THEY_ARE:
        return t
    want = _KNOWN.get(t) if not isinstance(t, pa.BaseExtensionType) else None
    if want is None:
        want = _delta_type(t)
        if len(_KNOWN) < _KNOWN_MOST and not _holds_extension(t):
            _KNOWN[t] = want
    return want


def _holds_extension(t: pa.DataType) -> bool:
    if isinstance(t, pa.BaseExtensionType):
        return True
    if pa.types.is_dictionary(t):
        return _holds_extension(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or \
            pa.types.is_large_list_view(t) or pa.types.is_fixed_size_list(t):
        return _holds_extension(t.value_type)
    if pa.types.is_struct(t):
        return any(_holds_extension(f.type) for f in t)
    if pa.types.is_map(t):
        return _holds_extension(t.key_type) or _holds_extension(t.item_type)
    return t.num_fields > 0     # (another type with children: not kept)


def _delta_type(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.BaseExtensionType):
        return delta_type(t.storage_type)
    if pa.types.is_dictionary(t):
        return delta_type(t.value_type)
    if pa.types.is_float16(t):
        return pa.float32()
    if t in _WIDER:
        return _WIDER[t]
    if pa.types.is_time64(t) or pa.types.is_time32(t):
        return pa.int64()
    if pa.types.is_interval(t):
        return INTERVAL_STRUCT
    if pa.types.is_decimal(t) and t.precision > 38:
        return pa.string()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(delta_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, delta_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(delta_type(t.key_type), delta_type(t.item_type))
    return t


def to_delta(arr) -> pa.Array:
    """``arr`` (any typed column) as :func:`delta_type` says (Arrow's kernels, level by
    level: no Python per value)."""
    arr = one_array(arr)
    t = arr.type
    want = delta_type(t)
    if want.equals(t):
        return arr
    if isinstance(t, pa.BaseExtensionType):
        return to_delta(arr.storage)
    if pa.types.is_dictionary(t):
        return to_delta(arr.cast(t.value_type))
    if pa.types.is_float16(t):
        return widened_halves(arr)
    if pa.types.is_time64(t):
        return arr.cast(pa.time64("us")).cast(pa.int64())
    if pa.types.is_interval(t):
        return interval_struct(arr)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        arr = plain_lists(arr)
        offsets, (values,) = _from_zero(arr, arr.values)
        return pa.ListArray.from_arrays(offsets, to_delta(values), type=want,
                                        mask=pc.invert(arr.is_valid()) if arr.null_count else None)
    if pa.types.is_map(t):
        offsets, (keys, items) = _from_zero(arr, arr.keys, arr.items)
        return pa.MapArray.from_arrays(offsets, to_delta(keys), to_delta(items), type=want,
                                       mask=pc.invert(arr.is_valid()) if arr.null_count else None)
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([to_delta(arr.field(i)) for i in range(t.num_fields)],
                                          fields=list(want), mask=pc.invert(arr.is_valid()) if arr.null_count else None)
    return arr.cast(want)


def _from_zero(arr: pa.Array, *children: pa.Array):
    """A list or map array's offsets from 0 and its ``children`` cut to them (Arrow takes
    no null mask with offsets that start past 0: a slice's)."""
    offsets = arr.offsets
    if len(offsets) and offsets[0].as_py():
        lo = offsets[0].as_py()
        return pc.subtract(offsets, lo), [c.slice(lo, offsets[-1].as_py() - lo) for c in children]
    return offsets, list(children)


def widened_halves(arr: pa.Array) -> pa.Array:
    """A float16 array as float32, each value exact (NumPy's conversion: Arrow casts
    from float16 only from pyarrow 15 on)."""
    halves = np.frombuffer(arr.buffers()[1], np.float16, count=arr.offset + len(arr))[arr.offset:] \
        if len(arr) else np.zeros(0, np.float16)
    return pa.array(halves.astype(np.float32), pa.float32(),
                    mask=np.asarray(arr.is_null()) if arr.null_count else None)
