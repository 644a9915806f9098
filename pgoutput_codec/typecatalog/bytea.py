"""Byte and bit strings: bytea (Arrow's binary, from ``byteaout``'s hex or escape text or
the raw send form) and bit, varbit (kept as ``bit_out`` prints them, '0' and '1' per
bit). The compiled twin is ``_codecs/bytea.pxi`` (bytea)."""

from __future__ import annotations

import re
import struct

import pyarrow as pa

from .typeinfo import Converter, TypeInfo, fast_code

__all__ = ["CONVERTERS", "TYPES"]


def _t_bytea(s, tm):
    if s.startswith(b"\\x"):
        if len(s) % 2 or not re.match(rb"[0-9a-fA-F]*\Z", s[2:]):
            raise ValueError("bad bytea hex")
        return bytes.fromhex(s[2:].decode())
    out, i = bytearray(), 0                     # bytea_output = 'escape'
    while i < len(s):
        c = s[i]
        if c != 0x5C:
            out.append(c)
            i += 1
        elif s[i + 1:i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        elif re.match(rb"[0-3][0-7]{2}", s[i + 1:i + 4]):
            out.append(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            raise ValueError("bad bytea escape")
    return bytes(out)


def _b_bit(b, tm):
    if len(b) < 4:
        raise ValueError("bit send form shorter than its length")
    (nbits,) = struct.unpack_from(">i", b)
    if nbits < 0 or len(b) != 4 + (nbits + 7) // 8:
        raise ValueError("bit send form length does not match its bit count")
    return "".join(f"{x:08b}" for x in b[4:])[:nbits]


def _bit_length(mods):
    """bit(n)/varbit(n): the typmod is n."""
    return mods[0]


CONVERTERS = [
    Converter("bytea", _t_bytea, lambda b, tm: bytes(b), lambda tm: pa.binary()),
    Converter("bit", None, _b_bit),
]

TYPES = [
    TypeInfo(17, "bytea", 1001, "bytea", fast_code("BYTEA")),
    TypeInfo(1560, "bit", 1561, "bit", 0, _bit_length),
    TypeInfo(1562, "varbit", 1563, "bit", 0, _bit_length),
]
