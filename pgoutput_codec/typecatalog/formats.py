"""Values written as the server's output functions write them (DateStyle ISO):
``time_out``'s clock, the offsets of ``timetz_out``/``timestamptz_out``, dates,
timestamps, and ``float8out``/``float4out``."""

from __future__ import annotations

import decimal

import numpy as np

from .epochs import I64_MAX, UNIX_DAYS, civil_from_days

__all__ = ["fmt_time_us", "fmt_offset", "fmt_date", "fmt_timestamp", "fmt_float8"]


def fmt_time_us(us):
    s, f = divmod(us, 1000000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    out = f"{h:02d}:{m:02d}:{s:02d}"
    if f:
        out += (".%06d" % f).rstrip("0")
    return out


def fmt_offset(off):
    """An offset in seconds east of UTC as timestamptz_out/timetz_out print it."""
    sign = "-" if off < 0 else "+"
    off = abs(off)
    h, r = divmod(off, 3600)
    m, s = divmod(r, 60)
    out = f"{sign}{h:02d}"
    if m or s:
        out += f":{m:02d}"
    if s:
        out += f":{s:02d}"
    return out


def fmt_date(days):
    y, m, d = civil_from_days(days)
    bc = y <= 0
    return f"{(1 - y) if bc else y:04d}-{m:02d}-{d:02d}" + (" BC" if bc else ""), bc


def fmt_timestamp(us_since_2000, tz):
    """timestamp_out under DateStyle ISO; timestamptz rendered in UTC ('+00')."""
    if us_since_2000 in (I64_MAX, -I64_MAX - 1):
        return "infinity" if us_since_2000 > 0 else "-infinity"
    days, us = divmod(us_since_2000, 86400000000)
    ds, bc = fmt_date(days + UNIX_DAYS)
    if bc:
        ds = ds[:-3]
    return ds + " " + fmt_time_us(us) + ("+00" if tz else "") + (" BC" if bc else "")


def fmt_float8(x, float4=False):
    """float8out (shortest round-trip, Ryu): exponent form when the decimal exponent is
    < -4 or >= 15, as PostgreSQL 12+ prints with extra_float_digits >= 1; ``float4``:
    float4out, the shortest digits of the float4 and the exponent form from 6."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    d = decimal.Decimal(str(np.float32(x)) if float4 else repr(x))
    sign, digits, exp = d.normalize().as_tuple()
    digs = "".join(map(str, digits))
    e10 = exp + len(digs) - 1
    sg = "-" if sign else ""
    if e10 < -4 or e10 >= (6 if float4 else 15):
        mant = digs[0] + ("." + digs[1:] if len(digs) > 1 else "")
        return f"{sg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    return format(d.normalize(), "f")
