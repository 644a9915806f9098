"""Intervals: Arrow's month_day_nano interval from ``interval_out``'s text
(IntervalStyle postgres, or iso_8601) or ``interval_send``'s microseconds, days and
months (±infinity are specials); and :data:`INTERVAL_STRUCT`, the interval where no
interval type is at hand (Spark, Delta Lake). The compiled twin is
``_codecs/interval.pxi``."""

from __future__ import annotations

import re
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .datetime import I32_MAX, I64_MAX, frac_us, time_us
from .errors import Special
from .typeinfo import Converter, TypeInfo, fast_code, need

__all__ = ["CONVERTERS", "TYPES", "INTERVAL_STRUCT", "interval_struct"]

_IV_UNIT = {b"year": 12, b"years": 12, b"mon": 1, b"mons": 1}
_IV_TOKEN = re.compile(rb"\s*(?:([+-]?[0-9]+) (years?|mons?|days?)|([+-])?([0-9]{2,}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?)")
_ISO_IV = re.compile(rb"P(?:(-?[0-9]+)Y)?(?:(-?[0-9]+)M)?(?:(-?[0-9]+)D)?"
                     rb"(?:T(?:(-?[0-9]+)H)?(?:(-?[0-9]+)M)?(?:(-?[0-9]+)(?:\.([0-9]{1,6}))?S)?)?\Z")


def _t_interval(s, tm):
    if s in (b"infinity", b"-infinity"):
        return Special(s.decode())
    months = days = us = 0
    m = _ISO_IV.match(s)
    if m and s != b"P":                              # IntervalStyle iso_8601
        y, mo, d, h, mi, se = (int(x) if x else 0 for x in m.groups()[:6])
        frac = frac_us(b"." + m[7]) if m[7] else 0
        if m[6] and m[6].startswith(b"-"):
            frac = -frac
        months, days, us = y * 12 + mo, d, ((h * 60 + mi) * 60 + se) * 1000000 + frac
    else:                                            # IntervalStyle postgres
        pos = 0
        s2 = s.rstrip(b" ")     # (spaces only, as the compiled twin: a newline is no separator)
        if not s2:
            raise ValueError("empty interval")
        clock = False
        while pos < len(s2):
            t = _IV_TOKEN.match(s2, pos)
            # each field ends at a space or the end, and there is one time part at most
            if not t or t.end() == pos or s2[t.end():t.end() + 1] not in (b"", b" ") or (clock and not t[1]):
                raise ValueError("not an interval (IntervalStyle postgres or iso_8601)")
            if t[1]:
                v = int(t[1])
                if t[2].startswith(b"day"):
                    days += v
                else:
                    months += v * _IV_UNIT[t[2]]
            else:
                v = time_us(t[4], t[5], t[6], t[7], clock=False)
                us = -v if t[3] == b"-" else v
                clock = True
            pos = t.end()
    if not (-2**31 <= months < 2**31 and -2**31 <= days < 2**31):
        raise ValueError("interval months/days out of int32 range")
    if abs(us * 1000) > I64_MAX:
        raise ValueError("interval time part overflows int64 nanoseconds")
    return pa.MonthDayNano([months, days, us * 1000])


def _b_interval(b, tm):
    need(b, 16)
    us, days, months = struct.unpack(">qii", b)
    if (us, days, months) == (I64_MAX, I32_MAX, I32_MAX):
        return Special("infinity")
    if (us, days, months) == (-I64_MAX - 1, -I32_MAX - 1, -I32_MAX - 1):
        return Special("-infinity")
    if abs(us * 1000) > I64_MAX:
        raise ValueError("interval time part overflows int64 nanoseconds")
    return pa.MonthDayNano([months, days, us * 1000])


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


CONVERTERS = [
    Converter("interval", _t_interval, _b_interval, lambda tm: pa.month_day_nano_interval()),
]

TYPES = [
    TypeInfo(1186, "interval", 1187, "interval", fast_code("INTERVAL"), lambda mods: mods[0]),
]
