"""Day and microsecond counts: the epochs (Arrow's 1970-01-01, PostgreSQL's 2000-01-01),
the ranges Arrow's date32 and timestamp[us] hold, and proleptic Gregorian dates of any
astronomical year."""

from __future__ import annotations

import datetime as _dt

__all__ = ["UNIX_DAYS", "UNIX_US", "I32_MAX", "I64_MAX", "days_from_civil", "civil_from_days"]

#: days and microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01
UNIX_DAYS = 10957
UNIX_US = 946684800000000
#: the largest int32 and int64 (the infinities of the send forms, Arrow's bounds)
I32_MAX, I64_MAX = 2**31 - 1, 2**63 - 1
_GREG_CYCLE = 146097   # days in 400 Gregorian years


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
