"""Ranges of built-in types: int4range, int8range, numrange, daterange, tsrange,
tstzrange, kept as ``range_out`` prints them (``[1,5)``, ``empty``), the send form's
bounds written as their subtype's output function writes them."""

from __future__ import annotations

import struct

from .datetime import I32_MAX, UNIX_DAYS, fmt_date, fmt_timestamp
from .numeric import numeric_text_of
from .typeinfo import Converter, TypeInfo

__all__ = ["CONVERTERS", "TYPES"]


def _bound_text(sub, b):
    if sub in (23, 20):
        return str(int.from_bytes(b, "big", signed=True))
    if sub == 1700:
        return numeric_text_of(b)
    if sub == 1082:
        (v,) = struct.unpack(">i", b)
        if v in (I32_MAX, -I32_MAX - 1):
            return "infinity" if v > 0 else "-infinity"
        return fmt_date(v + UNIX_DAYS)[0]
    (v,) = struct.unpack(">q", b)
    t = fmt_timestamp(v, sub == 1184)
    return f'"{t}"' if " " in t else t


def _b_range(sub):
    def conv(b, tm):
        if not b:
            raise ValueError("empty range send form")
        flags, pos, bounds = b[0], 1, []
        if flags & 0x01:
            return "empty"
        for has in (not flags & 0x08, not flags & 0x10):
            if has:
                if len(b) < pos + 4:
                    raise ValueError("range bound length missing")
                (n,) = struct.unpack_from(">i", b, pos)
                if n < 0 or len(b) < pos + 4 + n:
                    raise ValueError("bad range bound length")
                bounds.append(_bound_text(sub, b[pos + 4:pos + 4 + n]))
                pos += 4 + n
            else:
                bounds.append("")
        if pos != len(b):
            raise ValueError("trailing bytes in range send form")
        return ("[" if flags & 0x02 else "(") + bounds[0] + "," + bounds[1] + ("]" if flags & 0x04 else ")")
    return conv


#: (OID, name, array OID, subtype OID)
_RANGES = [(3904, "int4range", 3905, 23), (3906, "numrange", 3907, 1700), (3908, "tsrange", 3909, 1114),
           (3910, "tstzrange", 3911, 1184), (3912, "daterange", 3913, 1082), (3926, "int8range", 3927, 20)]

CONVERTERS = [Converter(f"range:{sub}", None, _b_range(sub)) for _, _, _, sub in _RANGES]

TYPES = [TypeInfo(oid, name, array_oid, f"range:{sub}") for oid, name, array_oid, sub in _RANGES]
