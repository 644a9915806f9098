"""hstore, Arrow's ``map<string, string>`` (keys never null, values nullable), in the
order the server keeps the pairs (by key length, then bytes: what ``hstore_out`` and
``hstore_send`` give).

- text form (``hstore_out``): ``"a"=>"1", "b"=>NULL``: every key and value quoted, ``"``
  and ``\\`` escaped with a backslash, a null value an unquoted ``NULL``, ``, `` between
  pairs; the empty hstore is the empty string;
- send form (``hstore_send``): int32 count, then per pair int32 key length and key,
  int32 value length (-1: null) and value.

The parsers give a tuple of ``(key, value)`` pairs (an array of hstores is the list of
them). Known by ``("hstore", "hstore")``. The compiled twin is ``_codecs/hstore.pxi``."""

from __future__ import annotations

import struct

import pyarrow as pa

from .typeinfo import Converter, ExtensionType, fast_code

__all__ = ["CONVERTERS", "TYPES", "EXTENSION_TYPES", "ARROW"]

#: the Arrow type of an hstore
ARROW = pa.map_(pa.string(), pa.string())


def _quoted(s, i):
    """The string quoted at s[i] (a '"'), and the position after its closing quote."""
    if s[i:i + 1] != b'"':
        raise ValueError(f"hstore: expected '\"' at byte {i}")
    out = bytearray()
    i += 1
    while True:
        if i >= len(s):
            raise ValueError("hstore: unterminated quoted string")
        c = s[i]
        if c == 0x22:
            return bytes(out).decode("utf-8"), i + 1
        if c == 0x5C:
            if i + 1 >= len(s):
                raise ValueError("hstore: unterminated quoted string")
            i += 1
            c = s[i]
        out.append(c)
        i += 1


def _t_hstore(s, tm):
    pairs, i = [], 0
    while i < len(s):
        if pairs:
            if s[i:i + 2] != b", ":
                raise ValueError(f"hstore: expected ', ' at byte {i}")
            i += 2
        k, i = _quoted(s, i)
        if s[i:i + 2] != b"=>":
            raise ValueError(f"hstore: expected '=>' at byte {i}")
        i += 2
        if s[i:i + 4] == b"NULL":
            v, i = None, i + 4
        else:
            v, i = _quoted(s, i)
        pairs.append((k, v))
    return tuple(pairs)


def _b_hstore(b, tm):
    def length(p):
        if p + 4 > len(b):
            raise ValueError("hstore send form shorter than its lengths")
        return struct.unpack_from(">i", b, p)[0], p + 4

    def string(p, n):
        if n > len(b) - p:
            raise ValueError("hstore send form shorter than its strings")
        return bytes(b[p:p + n]).decode("utf-8"), p + n

    count, p = length(0)
    if count < 0:
        raise ValueError("hstore send form with a negative pair count")
    pairs = []
    for _ in range(count):
        n, p = length(p)
        if n < 0:
            raise ValueError("hstore send form with a null key")
        k, p = string(p, n)
        n, p = length(p)
        if n < -1:
            raise ValueError("hstore send form with a negative value length")
        v = None
        if n >= 0:
            v, p = string(p, n)
        pairs.append((k, v))
    if p != len(b):
        raise ValueError("hstore send form longer than its pairs")
    return tuple(pairs)


CONVERTERS = [Converter("hstore", _t_hstore, _b_hstore, lambda tm: ARROW)]

TYPES: list = []

EXTENSION_TYPES = [ExtensionType("hstore", "hstore", "hstore", fast_code("HSTORE"))]
