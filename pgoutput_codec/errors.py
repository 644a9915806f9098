"""The one exception hierarchy of pgoutput_codec.

Every malformed payload surfaces as a :class:`PgoutputDecodeError` (a ``ValueError``)
carrying the byte offset where decoding stopped and the message type being decoded,
so a user can find the bad byte in an archive without a debugger.
"""

from __future__ import annotations

__all__ = ["first_line", "UTF8_HINT", "PgoutputCodecError", "PgoutputDecodeError", "AmbiguousMessageError", "ArchiveOrderError",
           "PgoutputEncodeError", "CopyStreamError"]


#: appended where a name or text is not UTF-8: the usual cause is an archive captured by a
#: session that kept a non-UTF-8 database's client_encoding (pgoutput_codec/transcode.py)
UTF8_HINT = "captured under another client_encoding? see transcode"


class PgoutputCodecError(Exception):
    """Base class of every error this package raises on purpose."""


class PgoutputDecodeError(PgoutputCodecError, ValueError):
    """A payload could not be decoded.

    ``offset`` is the byte offset (from the start of the payload given) where the
    problem was found; ``message_type`` is the tag character of the message being
    decoded (``None`` for an empty payload).
    """

    def __init__(self, message: str, offset: int | None = None, message_type: str | None = None):
        super().__init__(message)
        self.offset = offset
        self.message_type = message_type

    def __reduce__(self):  # keep offset/message_type across pickling (Spark workers)
        return (type(self), (self.args[0], self.offset, self.message_type))


class AmbiguousMessageError(PgoutputDecodeError):
    """Both readings of a streamable message (with and without the streaming xid)
    consume the payload exactly; pass ``in_stream=True`` or ``False`` to choose.

    ``readings`` holds both decodings, (without xid, with xid), when known."""

    readings: tuple = ()


class ArchiveOrderError(PgoutputDecodeError):
    """A commit's LSN is below that of a commit before it in arrival order, and no
    commit before it had that LSN: the archive's rows are not in the order the server
    sent them (PostgreSQL sends transactions in commit order, so commit LSNs rise).
    ``seq``: the commit row's order key; ``commit_lsn``, ``previous_lsn``: its LSN and
    the highest before it."""

    def __init__(self, message: str, offset: int | None = None, message_type: str | None = None, *,
                 seq: int | None = None, commit_lsn: int | None = None, previous_lsn: int | None = None):
        super().__init__(message, offset, message_type)
        self.seq, self.commit_lsn, self.previous_lsn = seq, commit_lsn, previous_lsn

    def __reduce__(self):
        return (_order_error, (self.args[0], self.message_type, self.seq, self.commit_lsn, self.previous_lsn))


def _order_error(message, message_type, seq, commit_lsn, previous_lsn):
    return ArchiveOrderError(message, None, message_type, seq=seq, commit_lsn=commit_lsn, previous_lsn=previous_lsn)


class PgoutputEncodeError(PgoutputCodecError, ValueError):
    """A message object cannot be encoded (a field is out of range or missing)."""


class CopyStreamError(PgoutputCodecError, ValueError):
    """A ``COPY ... TO STDOUT`` stream (text or binary format) is malformed or ends inside
    a row. ``offset``: the byte offset from the start of the stream where reading stopped."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset

    def __reduce__(self):
        return (type(self), (self.args[0], self.offset))


def first_line(e) -> str:
    """The first line of an exception's text (its type's name when it has none): what a
    one-line report of it says."""
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__
