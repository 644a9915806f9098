"""PostgreSQL's LSNs and timestamps as values: the text form of an LSN (``X/Y``, as
``pg_lsn_out`` writes it) and the wire form of a timestamp (microseconds since
2000-01-01 UTC). Both wire formats (pgoutput and openGauss), the archives and the command
read and write them; :mod:`pgoutput_codec` exports them with the message classes.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Union

__all__ = ["PG_EPOCH", "pg_timestamp_to_datetime", "datetime_to_pg_timestamp", "format_lsn", "parse_lsn",
           "LSN_PATTERN"]

#: PostgreSQL's timestamp epoch; wire timestamps count microseconds from it.
PG_EPOCH = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)


def pg_timestamp_to_datetime(us: int) -> _dt.datetime:
    """Wire timestamp (µs since 2000-01-01 UTC) to an aware ``datetime``."""
    return PG_EPOCH + _dt.timedelta(microseconds=us)


def datetime_to_pg_timestamp(ts: _dt.datetime) -> int:
    """Aware ``datetime`` to a wire timestamp (µs since 2000-01-01 UTC)."""
    delta = ts - PG_EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_lsn(lsn: int) -> str:
    """64-bit LSN to PostgreSQL's ``X/Y`` text form."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


#: LSN text as pg_lsn_out writes it (upper or lower case)
LSN_PATTERN = "[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}"

_LSN_TEXT = re.compile(LSN_PATTERN)


def parse_lsn(text: Union[str, int]) -> int:
    """PostgreSQL's ``X/Y`` LSN text (or an int) to a 64-bit int."""
    if isinstance(text, int):
        return text
    if not _LSN_TEXT.fullmatch(text):   # (int() alone takes signs, spaces, '_' and '0x')
        raise ValueError(f"not an LSN (X/Y, each 1 to 8 hex digits): {text!r}")
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)
