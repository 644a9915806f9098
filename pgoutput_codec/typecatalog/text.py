"""Parsers of the text forms (the ``*_out`` functions' output under DateStyle ISO and
IntervalStyle postgres; IntervalStyle iso_8601 and bytea_output escape too), by converter
name (:data:`TEXT_PARSERS`). Each takes the bytes and the typmod and gives the value in
Arrow-ready form, a :class:`~.markers.Special`, or raises ValueError. These are the
readable reference the compiled converters are tested against."""

from __future__ import annotations

import decimal
import ipaddress
import math
import re
import struct

import pyarrow as pa

from .arrow import numeric_arrow
from .epochs import I32_MAX, I64_MAX, days_from_civil
from .markers import NUMERIC_SPECIAL, Special
from .typmods import decimal_to_typmod

__all__ = ["TEXT_PARSERS", "TIME_RE", "frac_us", "text_as_str"]


_INT_RE = re.compile(rb"[+-]?[0-9]+\Z")
# a year of 4 to 7 digits: date_out prints at least four, and 5874897 AD is the last date
_DATE_RE = re.compile(rb"([0-9]{4,7})-([0-9]{2})-([0-9]{2})( BC)?\Z")
_TS_RE = re.compile(rb"([0-9]{4,7})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
                    rb"(?:([+-])([0-9]{2})(?::([0-9]{2}))?(?::([0-9]{2}))?)?( BC)?\Z")
#: a clock ``hh:mm:ss[.ffffff]`` and an optional offset ``±hh[:mm[:ss]]`` (time, timetz)
TIME_RE = re.compile(rb"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
                     rb"(?:([+-])([0-9]{2})(?::([0-9]{2}))?(?::([0-9]{2}))?)?\Z")


def frac_us(g):
    """Microseconds of a fraction matched as ``.f`` to ``.ffffff`` (0 when absent)."""
    return int((g[1:] + b"000000")[:6]) if g else 0


def _t_int(lo, hi):
    def conv(s, tm):
        if not _INT_RE.match(s):
            raise ValueError("not an integer")
        v = int(s)
        if not lo <= v <= hi:
            raise ValueError("integer out of range")
        return v
    return conv


def _t_bool(s, tm):
    if s == b"t":
        return True
    if s == b"f":
        return False
    raise ValueError("bool text must be 't' or 'f'")


def _t_float(s, tm):
    # what float8out prints plus what strtod takes of those characters (_convert.pyx
    # _float_chars): 'E' and a leading '+' too; under 127 bytes, as there
    if len(s) >= 127 or not re.match(rb"([+-]?(Infinity|[0-9.]+([eE][+-]?[0-9]+)?)|NaN)\Z", s):
        raise ValueError("not a float")
    return _in_range(s, float(s), "double precision")


def _t_float4(s, tm):
    return _in_range(s, struct.unpack("f", struct.pack("f", _t_float(s, tm)))[0], "real")


def _in_range(s, v, name):
    """``v`` read from ``s``, unless a finite text overflowed to infinity or underflowed
    to zero (float4in/float8in refuse both; a denormal is a value)."""
    if (math.isinf(v) and b"Infinity" not in s) or (v == 0 and re.search(rb"[1-9]", re.split(rb"[eE]", s)[0])):
        raise ValueError(f"out of range for type {name}")
    return v


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


def _t_date(s, tm):
    if s in (b"infinity", b"-infinity"):
        return Special(s.decode())
    m = _DATE_RE.match(s)
    if not m:
        raise ValueError("not an ISO date")
    v = days_from_civil(_year(m[1], m[4]), int(m[2]), int(m[3]))
    if not -2**31 <= v <= I32_MAX:
        raise ValueError("date outside the date32 range")
    return v


def _time_us(h, mi, se, frac, clock=True):
    h, mi, se, f = int(h), int(mi), int(se), frac_us(frac)
    # datetime.c's bounds: minutes to 59, a leap second 60, and (a clock, not an interval)
    # 24:00:00 the last time
    if mi > 59 or se > 60 or (clock and (h > 24 or (h == 24 and (mi or se or f)))):
        raise ValueError("time field out of range")
    return ((h * 60 + mi) * 60 + se) * 1000000 + f


def _year(digits, bc):
    """Astronomical year of 'YYYY[ BC]'; there is no year 0 in AD/BC notation."""
    y = int(digits)
    if y == 0:
        raise ValueError("year 0 does not exist")
    return 1 - y if bc else y


def _t_time(s, tm):
    m = TIME_RE.match(s)
    if not m or m[5]:
        raise ValueError("not a time of day")
    v = _time_us(m[1], m[2], m[3], m[4])
    if v > 86400000000:
        raise ValueError("time of day out of range")
    return v


def _t_timestamp_(tz):
    def conv(s, tm):
        if s in (b"infinity", b"-infinity"):
            return Special(s.decode())
        m = _TS_RE.match(s)
        if not m or bool(m[8]) != tz:
            raise ValueError("not an ISO timestamp" + (" with offset" if tz else ""))
        us = days_from_civil(_year(m[1], m[12]), int(m[2]), int(m[3])) * 86400000000 + _time_us(m[4], m[5], m[6], m[7])
        if tz:
            off = (int(m[9]) * 60 + int(m[10] or 0)) * 60 + int(m[11] or 0)
            us -= (off if m[8] == b"+" else -off) * 1000000
        if not -2**63 <= us <= I64_MAX:
            raise ValueError("timestamp beyond the Arrow timestamp[us] range")
        return us
    return conv


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
                v = _time_us(t[4], t[5], t[6], t[7], clock=False)
                us = -v if t[3] == b"-" else v
                clock = True
            pos = t.end()
    if not (-2**31 <= months < 2**31 and -2**31 <= days < 2**31):
        raise ValueError("interval months/days out of int32 range")
    if abs(us * 1000) > I64_MAX:
        raise ValueError("interval time part overflows int64 nanoseconds")
    return pa.MonthDayNano([months, days, us * 1000])


def _t_text(s, tm):
    return s.decode("utf-8")


def _t_bytea(s, tm):
    if s.startswith(b"\\x"):
        if len(s) % 2 or not re.match(rb"[0-9a-fA-F]*\Z", s[2:]):
            raise ValueError("bad bytea hex")
        return bytes.fromhex(s[2:].decode())
    out, i = bytearray(), 0                     # bytea_output = 'escape'
    while i < len(s):
        c = s[i]
        if c != 0x5C:
            out.append(c)
            i += 1
        elif s[i + 1:i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        elif re.match(rb"[0-3][0-7]{2}", s[i + 1:i + 4]):
            out.append(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            raise ValueError("bad bytea escape")
    return bytes(out)


def _t_uuid(s, tm):
    if not re.match(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z", s):
        raise ValueError("not a canonical uuid")
    return s.decode().lower()


def _t_timetz(s, tm):
    m = TIME_RE.match(s)
    if not m or not m[5]:
        raise ValueError("not a time with time zone")
    return s.decode()


def _t_inet(s, tm):
    t = s.decode("ascii")
    ipaddress.ip_interface(t) if "/" in t else ipaddress.ip_address(t)
    return t


def text_as_str(s, tm):
    """The text form as it is (types the catalog keeps as text, unknown types)."""
    return s.decode("utf-8")


TEXT_PARSERS = {
    "bool": _t_bool, "int2": _t_int(-2**15, 2**15 - 1), "int4": _t_int(-2**31, 2**31 - 1),
    "int8": _t_int(-2**63, 2**63 - 1), "oid": _t_int(0, 2**32 - 1), "float4": _t_float4, "float8": _t_float,
    "numeric": _t_numeric, "date": _t_date, "time": _t_time, "timestamp": _t_timestamp_(False),
    "timestamptz": _t_timestamp_(True), "interval": _t_interval, "text": _t_text, "bytea": _t_bytea,
    "uuid": _t_uuid, "jsonb": _t_text, "char": text_as_str, "timetz": _t_timetz, "inet": _t_inet,
    "unknown": text_as_str,
}
