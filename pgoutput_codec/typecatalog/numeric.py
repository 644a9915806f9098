"""Exact decimals: numeric (Arrow's decimal128/decimal256 of its typmod's precision and
scale, the exact text when unconstrained or wider; NaN and ±Infinity are specials) and
money (kept as ``cash_out`` prints it), with what a numeric typmod says. The compiled
twin is ``_codecs/numeric.pxi`` (numeric up to 38 digits)."""

from __future__ import annotations

import decimal
import re
import struct

import pyarrow as pa

from .errors import Special
from .typeinfo import Converter, TypeInfo, fast_code, need

__all__ = ["CONVERTERS", "TYPES", "NUMERIC_SPECIAL", "numeric_typmod", "decimal_to_typmod", "numeric_arrow",
           "numeric_parts", "numeric_text_of"]

#: numeric's special text forms -> the marker each is held as
NUMERIC_SPECIAL = {b"NaN": "NaN", b"Infinity": "infinity", b"-Infinity": "-infinity"}
_SIGN_NAMES = {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}


def numeric_typmod(type_modifier: int) -> tuple[int, int] | None:
    """(precision, scale) of a numeric typmod, None when unconstrained. The scale is an
    11-bit signed field since PostgreSQL 15 (``numeric.c``: NUMERIC_TYPMOD_SCALE), so
    ``numeric(5,-2)`` decodes to (5, -2); older servers only produce scales >= 0."""
    if type_modifier is None or type_modifier < 4:
        return None
    t = type_modifier - 4
    return (t >> 16) & 0xFFFF, ((t & 0x7FF) ^ 1024) - 1024


def decimal_to_typmod(d: decimal.Decimal, tm):
    """``d`` at the scale of numeric typmod ``tm``; ValueError when that loses digits or
    exceeds its precision (a value the column cannot have held)."""
    ps = numeric_typmod(tm)
    p, s = ps
    with decimal.localcontext() as ctx:
        ctx.prec = 2000
        q = d.quantize(decimal.Decimal(1).scaleb(-s))
        if q != d:
            raise ValueError(f"more fraction digits than the column's scale {s}")
        if abs(q.scaleb(s)) >= 10 ** p:
            raise ValueError(f"exceeds the column's precision {p}")
    return q


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


def _fast_args(tm):
    """The compiled converter holds decimal128 only: numeric(p, s) with p <= 38."""
    ps = numeric_typmod(tm)
    if ps is None or not 1 <= ps[0] <= 38:
        return None
    return ps


def _t_numeric(s, tm):
    if s in NUMERIC_SPECIAL:
        if numeric_arrow(tm) == pa.string():
            return s.decode()
        return Special(NUMERIC_SPECIAL[s])
    if not re.match(rb"-?[0-9]+(\.[0-9]+)?\Z", s):
        raise ValueError("not a decimal number")
    if numeric_arrow(tm) == pa.string():
        return s.decode()
    return decimal_to_typmod(decimal.Decimal(s.decode()), tm)


def numeric_parts(b):
    """(sign, value, dscale) of numeric_send's bytes; value None for NaN and ±Infinity."""
    if len(b) < 8:
        raise ValueError("numeric send form shorter than its header")
    nd, weight, sign, dscale = struct.unpack_from(">hhHh", b)
    if sign in (0xC000, 0xD000, 0xF000):
        return sign, None, None
    if sign not in (0, 0x4000) or nd < 0:
        raise ValueError("bad numeric sign or digit count")
    if not 0 <= dscale <= 0x3FFF:
        raise ValueError("bad numeric display scale")
    need(b, 8 + 2 * nd)
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


def numeric_text_of(b):
    """numeric_out's text of numeric_send's bytes."""
    sign, v, _ = numeric_parts(b)
    return _SIGN_NAMES[sign] if v is None else format(v, "f")


def _b_numeric(b, tm):
    sign, v, dscale = numeric_parts(b)
    if v is None:
        name = _SIGN_NAMES[sign]
        if numeric_arrow(tm) == pa.string():
            return name
        return Special(NUMERIC_SPECIAL[name.encode()])
    if numeric_arrow(tm) == pa.string():
        return format(v, "f")
    return decimal_to_typmod(v, tm)


def _b_money(b, tm):
    # cash_out under lc_monetary C/en_US: '$', ',' thousands, '.' and 2 fraction digits
    need(b, 8)
    (v,) = struct.unpack(">q", b)
    units, cents = divmod(abs(v), 100)
    return ("-" if v < 0 else "") + f"${units:,}.{cents:02d}"


CONVERTERS = [
    Converter("numeric", _t_numeric, _b_numeric, numeric_arrow, _fast_args),
    Converter("money", None, _b_money),
]

TYPES = [
    TypeInfo(790, "money", 791, "money"),
    TypeInfo(1700, "numeric", 1231, "numeric", fast_code("NUMERIC"),
             lambda mods: ((mods[0] << 16) | (mods[1] if len(mods) > 1 else 0)) + 4),
]
