"""The one exception hierarchy of pgoutput_codec.

Every malformed payload surfaces as a :class:`PgoutputDecodeError` (a ``ValueError``)
carrying the byte offset where decoding stopped and the message type being decoded,
so a user can find the bad byte in an archive without a debugger.
"""

from __future__ import annotations

__all__ = ["PgoutputCodecError", "PgoutputDecodeError", "AmbiguousMessageError", "PgoutputEncodeError"]


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


class PgoutputEncodeError(PgoutputCodecError, ValueError):
    """A message object cannot be encoded (a field is out of range or missing)."""
