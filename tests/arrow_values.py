"""Arrow columns as comparable Python values: temporal types as their storage integers
(so values outside Python's datetime range compare too) and floats as their bits (so a
NaN equals itself and -0.0 differs from 0.0)."""

from __future__ import annotations

import struct

import pyarrow as pa

_PHYS = {pa.date32(): pa.int32(), pa.time64("us"): pa.int64(), pa.timestamp("us"): pa.int64(),
         pa.timestamp("us", tz="UTC"): pa.int64()}


def phys_type(t):
    if pa.types.is_list(t):
        return pa.list_(phys_type(t.value_type))
    return _PHYS.get(t, t)


def plain(arr):
    """Python values with temporal types as their storage ints (BC-safe) and floats as bits."""
    vals = arr.view(phys_type(arr.type)).to_pylist()

    def fix(v):
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, float):
            return ("f", struct.pack("<d", v))
        return v
    return [fix(v) for v in vals]
