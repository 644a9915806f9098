"""Extension types read as Arrow strings: citext (its text and send forms are the same
UTF-8 bytes), ltree's ltree, lquery and ltxtquery (the send form is a version byte 1 and
the text) and the isn types (isbn, isbn13, ismn, ismn13, issn, issn13, ean13, upc: they
have no send function, so pgoutput sends them as text even in binary mode; a send form
is refused). Known by extension and type name (their OIDs are the database's own). The
compiled twin is ``_codecs/extensiontext.pxi`` (citext uses text's)."""

from __future__ import annotations

from .typeinfo import Converter, ExtensionType, fast_code

__all__ = ["CONVERTERS", "TYPES", "EXTENSION_TYPES"]


def _t_text(s, tm):
    return s.decode("utf-8")


def _b_versioned(b, tm):
    if not b or b[0] != 1:
        raise ValueError("send form must start with version byte 1")
    return b[1:].decode("utf-8")


def _b_isn(b, tm):
    raise ValueError("the isn types have no send form (pgoutput sends them as text)")


CONVERTERS = [
    Converter("ltree", _t_text, _b_versioned),
    Converter("isn", _t_text, _b_isn),
]

TYPES: list = []

_LTREE = fast_code("LTREE")
_ISN = fast_code("ISN")

EXTENSION_TYPES = [
    ExtensionType("citext", "citext", "text", fast_code("TEXT")),
    ExtensionType("ltree", "ltree", "ltree", _LTREE),
    ExtensionType("ltree", "lquery", "ltree", _LTREE),
    ExtensionType("ltree", "ltxtquery", "ltree", _LTREE),
    *(ExtensionType("isn", name, "isn", _ISN)
      for name in ("isbn", "isbn13", "ismn", "ismn13", "issn", "issn13", "ean13", "upc")),
]
