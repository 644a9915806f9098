"""Text-like types, Arrow strings: text, varchar, bpchar, name, xml and json (the text
and send forms are the same UTF-8 bytes), jsonb (its send form starts with a version
byte 1), "char" (one byte, ``charout``'s octal escape above 0x7F) and uuid (the
canonical 36-character lower-case text, from ``uuid_out``'s or ``uuid_send``'s 16
bytes). Enums read as text too (:mod:`.registry`). The compiled twin is
``_codecs/text.pxi``."""

from __future__ import annotations

import re

from .typeinfo import Converter, TypeInfo, fast_code, need, text_as_str

__all__ = ["CONVERTERS", "TYPES"]

_UUID_RE = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")


def _t_text(s, tm):
    return s.decode("utf-8")


def _b_jsonb(b, tm):
    if not b or b[0] != 1:
        raise ValueError("jsonb send form must start with version byte 1")
    return b[1:].decode("utf-8")


def _b_char(b, tm):
    # charout: a high-bit byte prints as a backslash and three octal digits
    if len(b) > 1:
        raise ValueError('"char" send form is at most one byte')
    if not b or b == b"\0":
        return ""
    return b.decode("ascii") if b[0] < 0x80 else "\\%03o" % b[0]


def _t_uuid(s, tm):
    if not _UUID_RE.match(s):
        raise ValueError("not a canonical uuid")
    return s.decode().lower()


def _b_uuid(b, tm):
    need(b, 16)
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _char_length(mods):
    """bpchar(n)/varchar(n): the typmod is n plus the 4 bytes of a varlena header."""
    return mods[0] + 4


CONVERTERS = [
    Converter("text", _t_text, _t_text),
    Converter("jsonb", _t_text, _b_jsonb),
    Converter("char", text_as_str, _b_char),
    Converter("uuid", _t_uuid, _b_uuid),
]

_TEXT = fast_code("TEXT")

TYPES = [
    TypeInfo(18, "char", 1002, "char"),
    TypeInfo(19, "name", 1003, "text", _TEXT),
    TypeInfo(25, "text", 1009, "text", _TEXT),
    TypeInfo(114, "json", 199, "text", _TEXT),
    TypeInfo(142, "xml", 143, "text", _TEXT),
    TypeInfo(1042, "bpchar", 1014, "text", _TEXT, _char_length),
    TypeInfo(1043, "varchar", 1015, "text", _TEXT, _char_length),
    TypeInfo(2950, "uuid", 2951, "uuid", fast_code("UUID")),
    TypeInfo(3802, "jsonb", 3807, "jsonb", fast_code("JSONB")),
]
