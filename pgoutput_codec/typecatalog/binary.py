"""Parsers of the binary send forms (the ``*_send`` functions), by converter name
(:data:`BINARY_PARSERS`). Each takes the bytes and the typmod and gives the value in
Arrow-ready form, a :class:`~.markers.Special`, or raises ValueError; the types kept as
text are rendered as the server prints them (:mod:`.formats`)."""

from __future__ import annotations

import decimal
import struct

import pyarrow as pa

from .arrow import numeric_arrow
from .epochs import I32_MAX, I64_MAX, UNIX_DAYS, UNIX_US
from .facts import TYPES
from .formats import fmt_date, fmt_float8, fmt_offset, fmt_time_us, fmt_timestamp
from .markers import NUMERIC_SPECIAL, Special
from .typmods import decimal_to_typmod

__all__ = ["BINARY_PARSERS", "binary_as_bytes"]


def _need(b, n):
    if len(b) != n:
        raise ValueError(f"send form must be {n} bytes, got {len(b)}")


def _b_struct(fmt):
    st = struct.Struct(fmt)

    def conv(b, tm):
        _need(b, st.size)
        return st.unpack(b)[0]
    return conv


def _b_bool(b, tm):
    _need(b, 1)
    if b[0] > 1:
        raise ValueError("bool send form must be 0 or 1")
    return b[0] == 1


def _numeric_parts(b):
    if len(b) < 8:
        raise ValueError("numeric send form shorter than its header")
    nd, weight, sign, dscale = struct.unpack_from(">hhHh", b)
    if sign in (0xC000, 0xD000, 0xF000):
        return sign, None, None
    if sign not in (0, 0x4000) or nd < 0:
        raise ValueError("bad numeric sign or digit count")
    if not 0 <= dscale <= 0x3FFF:
        raise ValueError("bad numeric display scale")
    _need(b, 8 + 2 * nd)
    digits = struct.unpack_from(f">{nd}h", b, 8)
    if any(not 0 <= d <= 9999 for d in digits):
        raise ValueError("numeric digit out of range")
    with decimal.localcontext() as ctx:
        ctx.prec = 200000
        v = decimal.Decimal((1 if sign == 0x4000 else 0, tuple(int(c) for d in digits for c in f"{d:04d}") or (0,),
                             4 * (weight - nd + 1) if nd else 0))
        # numeric_recv truncates (toward zero) the digits its dscale hides
        v = v.quantize(decimal.Decimal(1).scaleb(-dscale), rounding=decimal.ROUND_DOWN)
    return sign, v, dscale


def _numeric_text_of(v: decimal.Decimal):
    return format(v, "f")


def _b_numeric(b, tm):
    sign, v, dscale = _numeric_parts(b)
    if v is None:
        name = {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}[sign]
        if numeric_arrow(tm) == pa.string():
            return name
        return Special(NUMERIC_SPECIAL[name.encode()])
    if numeric_arrow(tm) == pa.string():
        return _numeric_text_of(v)
    return decimal_to_typmod(v, tm)


def _b_date(b, tm):
    _need(b, 4)
    (v,) = struct.unpack(">i", b)
    if v in (I32_MAX, -I32_MAX - 1):
        return Special("infinity" if v > 0 else "-infinity")
    v += UNIX_DAYS
    if not -I32_MAX - 1 <= v <= I32_MAX:
        raise ValueError("date outside the date32 range")
    return v


def _b_time(b, tm):
    _need(b, 8)
    (v,) = struct.unpack(">q", b)
    if not 0 <= v <= 86400000000:
        raise ValueError("time of day out of range")
    return v


def _b_timestamp(b, tm):
    _need(b, 8)
    (v,) = struct.unpack(">q", b)
    if v in (I64_MAX, -I64_MAX - 1):
        return Special("infinity" if v > 0 else "-infinity")
    if v + UNIX_US > I64_MAX:
        raise ValueError("timestamp beyond the Arrow timestamp[us] range (after 294246 AD)")
    return v + UNIX_US


def _b_interval(b, tm):
    _need(b, 16)
    us, days, months = struct.unpack(">qii", b)
    if (us, days, months) == (I64_MAX, I32_MAX, I32_MAX):
        return Special("infinity")
    if (us, days, months) == (-I64_MAX - 1, -I32_MAX - 1, -I32_MAX - 1):
        return Special("-infinity")
    if abs(us * 1000) > I64_MAX:
        raise ValueError("interval time part overflows int64 nanoseconds")
    return pa.MonthDayNano([months, days, us * 1000])


def _b_text(b, tm):
    return b.decode("utf-8")


def _b_jsonb(b, tm):
    if not b or b[0] != 1:
        raise ValueError("jsonb send form must start with version byte 1")
    return b[1:].decode("utf-8")


def _b_uuid(b, tm):
    _need(b, 16)
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# --- types kept as their canonical text: the binary form rendered as the server prints it

def _b_char(b, tm):
    # charout: a high-bit byte prints as a backslash and three octal digits
    if len(b) > 1:
        raise ValueError('"char" send form is at most one byte')
    if not b or b == b"\0":
        return ""
    return b.decode("ascii") if b[0] < 0x80 else "\\%03o" % b[0]


def _b_timetz(b, tm):
    _need(b, 12)
    us, zone_west = struct.unpack(">qi", b)
    return fmt_time_us(us) + fmt_offset(-zone_west)


def _b_inet(b, tm):
    if len(b) < 4:
        raise ValueError("inet send form shorter than its header")
    family, bits, is_cidr, n = b[0], b[1], b[2], b[3]
    addr = b[4:]
    if (family, n) not in ((2, 4), (3, 16)) or len(addr) != n or bits > 8 * n or is_cidr > 1:
        raise ValueError("bad inet send form")
    if family == 2:
        text = ".".join(str(x) for x in addr)
    else:
        words = struct.unpack(">8H", addr)
        # pg_inet_net_ntop (inet_net_ntop.c): longest run of >= 2 zero words (first wins),
        # dotted IPv4 tail for ::a.b.c.d and ::ffff:a.b.c.d
        best, cur = (-1, 0), (-1, 0)
        for i, w in enumerate(words):
            if w == 0:
                cur = (i if cur[0] < 0 else cur[0], cur[1] + 1)
                if cur[1] > best[1]:
                    best = cur
            else:
                cur = (-1, 0)
        if best[1] < 2:
            best = (-1, 0)
        parts, i = [], 0
        while i < 8:
            if i == best[0]:
                parts.append("" if i else ":")
                i += best[1]
                if i == 8:
                    parts.append("")
                continue
            if i == 6 and best[0] == 0 and (best[1] == 6 or (best[1] == 5 and words[5] == 0xFFFF)):
                parts.append(".".join(str(x) for x in addr[12:]))
                break
            parts.append(f"{words[i]:x}")
            i += 1
        text = ":".join(parts)
    if is_cidr or bits != 8 * n:
        text += f"/{bits}"
    return text


def _b_macaddr(b, tm):
    if len(b) not in (6, 8):
        raise ValueError("macaddr send form must be 6 or 8 bytes")
    return ":".join(f"{x:02x}" for x in b)


def _b_money(b, tm):
    # cash_out under lc_monetary C/en_US: '$', ',' thousands, '.' and 2 fraction digits
    _need(b, 8)
    (v,) = struct.unpack(">q", b)
    units, cents = divmod(abs(v), 100)
    return ("-" if v < 0 else "") + f"${units:,}.{cents:02d}"


def _b_bit(b, tm):
    if len(b) < 4:
        raise ValueError("bit send form shorter than its length")
    (nbits,) = struct.unpack_from(">i", b)
    if nbits < 0 or len(b) != 4 + (nbits + 7) // 8:
        raise ValueError("bit send form length does not match its bit count")
    return "".join(f"{x:08b}" for x in b[4:])[:nbits]


def _b_pg_lsn(b, tm):
    _need(b, 8)
    (v,) = struct.unpack(">Q", b)
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


def _b_point(b, tm):
    _need(b, 16)
    x, y = struct.unpack(">dd", b)
    return f"({fmt_float8(x)},{fmt_float8(y)})"


def _range_bound_text(sub, b):
    if sub in (23, 20):
        return str(int.from_bytes(b, "big", signed=True))
    if sub == 1700:
        sign, v, _ = _numeric_parts(b)
        return {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}[sign] if v is None else _numeric_text_of(v)
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
                bounds.append(_range_bound_text(sub, b[pos + 4:pos + 4 + n]))
                pos += 4 + n
            else:
                bounds.append("")
        if pos != len(b):
            raise ValueError("trailing bytes in range send form")
        return ("[" if flags & 0x02 else "(") + bounds[0] + "," + bounds[1] + ("]" if flags & 0x04 else ")")
    return conv


def binary_as_bytes(b, tm):
    """The send form as it is (unknown types)."""
    return bytes(b)


BINARY_PARSERS = {
    "bool": _b_bool, "int2": _b_struct(">h"), "int4": _b_struct(">i"), "int8": _b_struct(">q"),
    "oid": _b_struct(">I"), "float4": _b_struct(">f"), "float8": _b_struct(">d"), "numeric": _b_numeric,
    "date": _b_date, "time": _b_time, "timestamp": _b_timestamp, "timestamptz": _b_timestamp,
    "interval": _b_interval, "text": _b_text, "bytea": lambda b, tm: bytes(b), "uuid": _b_uuid,
    "jsonb": _b_jsonb, "char": _b_char, "timetz": _b_timetz, "inet": _b_inet, "macaddr": _b_macaddr,
    "money": _b_money, "bit": _b_bit, "pg_lsn": _b_pg_lsn, "point": _b_point, "unknown": binary_as_bytes,
}
for _t in TYPES:
    if _t.conv.startswith("range:"):
        BINARY_PARSERS[_t.conv] = _b_range(int(_t.conv[6:]))
