# cython: language_level=3
"""Error records (``Reader.err*``) to text and exceptions: cold path, one place.

Text: ``"<Name> ('<tag>') at byte <offset>: <what went wrong>"``; the same text fills the
``error`` column of ``decode_batch``.
"""

from libc.stdint cimport uint8_t

from pgoutput_codec._native.reader cimport (
    E_AMBIGUOUS, E_BAD_VALUE, E_EMPTY, E_NEGATIVE, E_NO_TERMINATOR, E_NOT_ENVELOPE,
    E_NULL_ROW, E_SHORT, E_TOO_LONG, E_TRAILING, E_UNKNOWN_TAG, E_UTF8, Reader,
)

from pgoutput_codec.errors import UTF8_HINT, AmbiguousMessageError, PgoutputDecodeError
from pgoutput_codec.pgoutput.facts import MESSAGE_CLASSES

cdef dict _NAMES = {ord(t): cls.__name__ for t, cls in MESSAGE_CLASSES.items()}


cdef str _byte(long v):
    if 32 <= v < 127:
        return f"0x{v:02x} ({chr(v)!r})"
    return f"0x{v:02x}"


cdef str _detail(Reader* r):
    cdef str what = r.err_what.decode("ascii")
    cdef long code = r.err
    cdef str text
    if code == E_SHORT:
        if r.err_want == 0:
            text = what
        else:
            text = (f"{what} needs {r.err_want} byte{'s' if r.err_want != 1 else ''}, "
                    f"{r.len - r.err_pos} left")
    elif code == E_NEGATIVE:
        text = f"{what} is negative ({r.err_value})"
    elif code == E_BAD_VALUE:
        text = f"{what}: unexpected byte {_byte(r.err_value)}"
    elif code == E_TRAILING:
        text = f"{r.err_value} unexpected trailing byte{'s' if r.err_value != 1 else ''} after the {what}"
    elif code == E_UNKNOWN_TAG:
        text = f"unknown message type byte {_byte(r.err_value)}"
    elif code == E_NO_TERMINATOR:
        text = f"{what}: String has no NUL terminator before the end of the payload"
    elif code == E_UTF8:
        text = f"{what} is not valid UTF-8 ({UTF8_HINT})"
    elif code == E_EMPTY:
        text = f"empty payload: no {what} byte"
    elif code == E_AMBIGUOUS:
        text = ("the payload decodes both with and without the streaming xid; "
                "pass in_stream=True or in_stream=False")
    elif code == E_NOT_ENVELOPE:
        text = f"envelope='xlogdata' expects a 'w' or 'k' frame, got {_byte(r.err_value)}"
    elif code == E_NULL_ROW:
        text = "null payload"
    elif code == E_TOO_LONG:
        text = f"{what} of {r.err_value} bytes: a server's names are at most {r.err_want} bytes"
    else:
        text = f"{what}: error code {code}"
    if r.err_col >= 0:
        text += f" (column {r.err_col})"
    return text


cdef inline bint _no_message(Reader* r, uint8_t tag):
    """True when there was no message type byte at all (empty or null payload)."""
    return tag == 0 and r.err_pos == 0 and (r.err == E_EMPTY or r.err == E_NULL_ROW)


cdef str error_text(Reader* r, uint8_t tag):
    if _no_message(r, tag):
        return f"{_detail(r)} at byte 0"
    name = _NAMES.get(tag, "unknown message")
    return f"{name} ({chr(tag)!r}) at byte {r.err_pos}: {_detail(r)}"


cdef object make_error(Reader* r, uint8_t tag):
    cls = AmbiguousMessageError if r.err == E_AMBIGUOUS else PgoutputDecodeError
    return cls(error_text(r, tag), r.err_pos, None if _no_message(r, tag) else chr(tag))
