"""Arrow columns as comparable Python values: temporal types as their storage integers
(so values outside Python's datetime range compare too) and floats as their bits (so a
NaN equals itself and -0.0 differs from 0.0)."""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc

_PHYS = {pa.date32(): pa.int32(), pa.time64("us"): pa.int64(), pa.timestamp("us"): pa.int64(),
         pa.timestamp("us", tz="UTC"): pa.int64()}


def phys_type(t):
    if pa.types.is_list(t):
        return pa.list_(phys_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(phys_type(f.type)) for f in t])
    return _PHYS.get(t, t)


def _undict(t):
    """``t`` with dictionaries as their value type (a dictionary has no view)."""
    if pa.types.is_dictionary(t):
        return t.value_type
    if pa.types.is_list(t):
        return pa.list_(_undict(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_undict(f.type)) for f in t])
    return t


def plain(arr):
    """Python values with temporal types as their storage ints (BC-safe) and floats as bits."""
    if _undict(arr.type) != arr.type:
        arr = arr.cast(_undict(arr.type))
    vals = arr.view(phys_type(arr.type)).to_pylist()

    def fix(v):
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, float):
            return ("f", struct.pack("<d", v))
        return v
    return [fix(v) for v in vals]


def values_equal(a, b) -> bool:
    """Arrays equal value by value, NaN equal to NaN (Arrow's equals says NaN != NaN),
    without Python objects (dates past 9999 have none)."""
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    b = b.combine_chunks() if isinstance(b, pa.ChunkedArray) else b
    if a.type != b.type or len(a) != len(b) or a.null_count != b.null_count:
        return False
    valid = a.is_valid()
    if pc.all(pc.equal(valid, b.is_valid())).as_py() not in (True, None):
        return False
    a, b = a.filter(valid), b.filter(valid)
    if pa.types.is_struct(a.type):
        return all(values_equal(a.field(i), b.field(i)) for i in range(a.type.num_fields))
    if pa.types.is_list(a.type):
        return pc.all(pc.equal(pc.list_value_length(a), pc.list_value_length(b))).as_py() in (True, None) \
            and values_equal(pc.list_flatten(a), pc.list_flatten(b))
    if not len(a):
        return True
    try:
        eq = pc.equal(a, b)
    except pa.ArrowNotImplementedError:     # e.g. intervals: no kernel, and no NaN either
        return a.equals(b)
    if pa.types.is_floating(a.type):
        eq = pc.or_(eq, pc.and_(pc.is_nan(a), pc.is_nan(b)))
    return pc.all(eq).as_py()
