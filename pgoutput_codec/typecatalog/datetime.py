"""Dates and times: date, time, timetz, timestamp, timestamptz (Arrow's date32,
time64[us], the text for timetz, timestamp[us] and timestamp[us, UTC]; ±infinity are
specials), from the text of the ``*_out`` functions under DateStyle ISO or the send
forms, which count from PostgreSQL's epoch 2000-01-01 where Arrow counts from
1970-01-01; and the values written back as the server writes them (:func:`fmt_date`,
:func:`fmt_timestamp`, :func:`fmt_time_us`, :func:`fmt_offset`). The compiled twin is
``_codecs/datetime.pxi``."""

from __future__ import annotations

import datetime as _dt
import re
import struct

import pyarrow as pa

from .errors import Special
from .typeinfo import Converter, TypeInfo, fast_code, need

__all__ = ["CONVERTERS", "TYPES", "UNIX_DAYS", "UNIX_US", "I32_MAX", "I64_MAX", "TIME_RE", "days_from_civil",
           "civil_from_days", "frac_us", "time_us", "fmt_time_us", "fmt_offset", "fmt_date", "fmt_timestamp"]

#: days and microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01
UNIX_DAYS = 10957
UNIX_US = 946684800000000
#: the largest int32 and int64 (the infinities of the send forms, Arrow's bounds)
I32_MAX, I64_MAX = 2**31 - 1, 2**63 - 1
_GREG_CYCLE = 146097   # days in 400 Gregorian years

# a year of 4 to 7 digits: date_out prints at least four, and 5874897 AD is the last date
_DATE_RE = re.compile(rb"([0-9]{4,7})-([0-9]{2})-([0-9]{2})( BC)?\Z")
_TS_RE = re.compile(rb"([0-9]{4,7})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
                    rb"(?:([+-])([0-9]{2})(?::([0-9]{2}))?(?::([0-9]{2}))?)?( BC)?\Z")
#: a clock ``hh:mm:ss[.ffffff]`` and an optional offset ``±hh[:mm[:ss]]`` (time, timetz)
TIME_RE = re.compile(rb"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
                     rb"(?:([+-])([0-9]{2})(?::([0-9]{2}))?(?::([0-9]{2}))?)?\Z")


def days_from_civil(y, m, d):
    """Days since 1970-01-01, proleptic Gregorian, astronomical year (shifted by whole
    400-year cycles, which repeat the calendar, into the range Python's date handles: one
    division, whatever the year)."""
    k, y = divmod(y - 1, 400)
    return _dt.date(y + 1, m, d).toordinal() - 719163 + k * _GREG_CYCLE


def civil_from_days(days):
    """Inverse of :func:`days_from_civil`: (astronomical year, month, day)."""
    k, r = divmod(days + 719163 - 1, _GREG_CYCLE)
    d = _dt.date.fromordinal(r + 1)
    return d.year + 400 * k, d.month, d.day


# ---------------------------------------------------------------- written as the server writes them

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


# ---------------------------------------------------------------- text forms

def frac_us(g):
    """Microseconds of a fraction matched as ``.f`` to ``.ffffff`` (0 when absent)."""
    return int((g[1:] + b"000000")[:6]) if g else 0


def time_us(h, mi, se, frac, clock=True):
    """Microseconds of hh, mm, ss and a fraction as matched; ``clock``: a time of day
    (at most 24:00:00), not an interval's time part."""
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


def _t_time(s, tm):
    m = TIME_RE.match(s)
    if not m or m[5]:
        raise ValueError("not a time of day")
    v = time_us(m[1], m[2], m[3], m[4])
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
        us = days_from_civil(_year(m[1], m[12]), int(m[2]), int(m[3])) * 86400000000 + time_us(m[4], m[5], m[6], m[7])
        if tz:
            off = (int(m[9]) * 60 + int(m[10] or 0)) * 60 + int(m[11] or 0)
            us -= (off if m[8] == b"+" else -off) * 1000000
        if not -2**63 <= us <= I64_MAX:
            raise ValueError("timestamp beyond the Arrow timestamp[us] range")
        return us
    return conv


def _t_timetz(s, tm):
    m = TIME_RE.match(s)
    if not m or not m[5]:
        raise ValueError("not a time with time zone")
    return s.decode()


# ---------------------------------------------------------------- send forms

def _b_date(b, tm):
    need(b, 4)
    (v,) = struct.unpack(">i", b)
    if v in (I32_MAX, -I32_MAX - 1):
        return Special("infinity" if v > 0 else "-infinity")
    v += UNIX_DAYS
    if not -I32_MAX - 1 <= v <= I32_MAX:
        raise ValueError("date outside the date32 range")
    return v


def _b_time(b, tm):
    need(b, 8)
    (v,) = struct.unpack(">q", b)
    if not 0 <= v <= 86400000000:
        raise ValueError("time of day out of range")
    return v


def _b_timestamp(b, tm):
    need(b, 8)
    (v,) = struct.unpack(">q", b)
    if v in (I64_MAX, -I64_MAX - 1):
        return Special("infinity" if v > 0 else "-infinity")
    if v + UNIX_US > I64_MAX:
        raise ValueError("timestamp beyond the Arrow timestamp[us] range (after 294246 AD)")
    return v + UNIX_US


def _b_timetz(b, tm):
    need(b, 12)
    us, zone_west = struct.unpack(">qi", b)
    return fmt_time_us(us) + fmt_offset(-zone_west)


def _precision(mods):
    """time(p), timestamp(p)…: the typmod is the fraction digits p."""
    return mods[0]


CONVERTERS = [
    Converter("date", _t_date, _b_date, lambda tm: pa.date32()),
    Converter("time", _t_time, _b_time, lambda tm: pa.time64("us")),
    Converter("timetz", _t_timetz, _b_timetz),
    Converter("timestamp", _t_timestamp_(False), _b_timestamp, lambda tm: pa.timestamp("us")),
    Converter("timestamptz", _t_timestamp_(True), _b_timestamp, lambda tm: pa.timestamp("us", tz="UTC")),
]

TYPES = [
    TypeInfo(1082, "date", 1182, "date", fast_code("DATE")),
    TypeInfo(1083, "time", 1183, "time", fast_code("TIME"), _precision),
    TypeInfo(1114, "timestamp", 1115, "timestamp", fast_code("TIMESTAMP"), _precision),
    TypeInfo(1184, "timestamptz", 1185, "timestamptz", fast_code("TIMESTAMPTZ"), _precision),
    TypeInfo(1266, "timetz", 1270, "timetz", 0, _precision),
]
