"""The Arrow type of each column type."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .facts import MAXDIM
from .registry import TypeRegistry, resolve
from .typmods import numeric_typmod

__all__ = ["arrow_type", "arrow_of", "numeric_arrow", "INTERVAL_STRUCT", "interval_struct"]


def numeric_arrow(tm):
    """A numeric's Arrow type: the decimal of its typmod, string when unconstrained or
    wider than decimal256."""
    ps = numeric_typmod(tm)
    if ps is None:
        return pa.string()
    p, s = ps
    if 1 <= p <= 38:
        return pa.decimal128(p, s)
    if p <= 76:
        return pa.decimal256(p, s)
    return pa.string()


_ARROW = {
    "bool": lambda tm: pa.bool_(),
    "int2": lambda tm: pa.int16(),
    "int4": lambda tm: pa.int32(),
    "int8": lambda tm: pa.int64(),
    "oid": lambda tm: pa.uint32(),
    "float4": lambda tm: pa.float32(),
    "float8": lambda tm: pa.float64(),
    "numeric": numeric_arrow,
    "date": lambda tm: pa.date32(),
    "time": lambda tm: pa.time64("us"),
    "timestamp": lambda tm: pa.timestamp("us"),
    "timestamptz": lambda tm: pa.timestamp("us", tz="UTC"),
    "interval": lambda tm: pa.month_day_nano_interval(),
    "bytea": lambda tm: pa.binary(),
    "unknown_binary": lambda tm: pa.binary(),
}


def arrow_of(r, binary, ndim=1):
    """The Arrow type of a :class:`~.registry.Resolved` type (see :func:`arrow_type`)."""
    if r.conv == "array":
        if ndim > MAXDIM:
            raise ValueError(f"ndim={ndim}: PostgreSQL arrays have at most {MAXDIM} dimensions")
        t = arrow_of(r.elem, binary)
        for _ in range(max(ndim, 1)):
            t = pa.list_(t)
        return t
    if r.conv == "unknown":
        return pa.binary() if binary else pa.string()
    f = _ARROW.get(r.conv)
    return f(r.typmod) if f else pa.string()


def arrow_type(type_oid: int, type_modifier: int = -1, registry: TypeRegistry | None = None, *,
               binary: bool = False, ndim: int = 1) -> pa.DataType:
    """The Arrow type of a column. ``binary`` matters only for unknown types (string of
    the text form, or binary of the send form); ``ndim`` only for arrays (lists nested
    ``ndim`` deep, at most 6; PostgreSQL does not record a column's dimensionality)."""
    return arrow_of(resolve(type_oid, type_modifier, registry), binary, ndim)


#: an interval where no interval type is at hand (Spark, Delta Lake): as PostgreSQL holds it
INTERVAL_STRUCT = pa.struct([("months", pa.int32()), ("days", pa.int32()), ("microseconds", pa.int64())])
#: Arrow's month_day_nano interval, one value: int32 months, int32 days, int64 nanoseconds
_MDN = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanoseconds", "<i8")])


def interval_struct(arr: pa.Array) -> pa.Array:
    """Intervals (the catalog's month_day_nano) as :data:`INTERVAL_STRUCT`, read from the
    value buffer (no Python object per value); microseconds floored, as PostgreSQL's
    interval holds them (the catalog's nanoseconds are microseconds × 1000)."""
    if not len(arr):
        return pa.array([], INTERVAL_STRUCT)
    rec = np.frombuffer(arr.buffers()[1], _MDN, count=arr.offset + len(arr))[arr.offset:]
    return pa.StructArray.from_arrays(
        [pa.array(rec["months"]), pa.array(rec["days"]), pa.array(rec["nanoseconds"] // 1000)],
        fields=list(INTERVAL_STRUCT), mask=pc.invert(arr.is_valid()) if arr.null_count else None)
