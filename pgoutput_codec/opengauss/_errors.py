"""Error texts of the openGauss decoders: one function, used by the compiled decoder
(on its rare error path) and by the Python twin, so both say exactly the same thing.

Text: ``"<Name> ('<tag>') at byte <offset>: <what>"`` (DESIGN.md "Error text"); the
offset counts from the start of the input row, an XLogData header included.
"""

from __future__ import annotations

from ..errors import PgoutputDecodeError
from .schema import RECORD_TYPES

# Same numbers as pgoutput_codec._native.reader.ErrCode.
E_SHORT = 1
E_NEGATIVE = 2      # here: a record length below 9 (UInt64 lsn + tag)
E_BAD_VALUE = 3
E_TRAILING = 4
E_UNKNOWN_TAG = 5
E_UTF8 = 7
E_EMPTY = 8
E_NOT_ENVELOPE = 10
E_NULL_ROW = 11

FATAL_SUFFIX = "; the rest of the frame was not decoded"


def _byte(v: int) -> str:
    return repr(chr(v)) if 0x20 < v < 0x7F else f"0x{v:02x}"


def format_error(code: int, pos: int, tag, what: str, want: int, left: int, value: int,
                 col: int, fatal: bool) -> str:
    """The error text; ``tag`` is the record's tag byte (int) or None."""
    if col >= 0:
        what = f"{what} of column {col}"
    if code == E_SHORT:
        body = f"{what}: needs {want} bytes, {left} left"
    elif code == E_NEGATIVE:
        body = f"{what} {value} is less than 9 (UInt64 lsn + tag)"
    elif code == E_BAD_VALUE:
        body = f"{what}: unexpected byte {_byte(value)}"
    elif code == E_TRAILING:
        body = f"{value} bytes left after {what}"
    elif code == E_UNKNOWN_TAG:
        body = f"unknown record type {_byte(value)}"
    elif code == E_UTF8:
        body = f"{what} is not valid UTF-8"
    elif code == E_EMPTY:
        body = "empty frame"
    elif code == E_NOT_ENVELOPE:
        body = "not an XLogData ('w') frame"
    elif code == E_NULL_ROW:
        body = "null input row"
    else:  # pragma: no cover - a code nobody raises
        body = f"error {code} in {what}"
    if fatal and code not in (E_EMPTY, E_NOT_ENVELOPE, E_NULL_ROW):
        body += FATAL_SUFFIX
    if tag is None:
        return f"Frame at byte {pos}: {body}"
    t = chr(tag)
    name = "XLogData" if t == "w" else RECORD_TYPES.get(t, "Record")
    return f"{name} ({t!r}) at byte {pos}: {body}"


def make_error(text: str, pos: int, tag) -> PgoutputDecodeError:
    return PgoutputDecodeError(text, pos, None if tag is None else chr(tag))
