"""Integers: bool (a bit), int2, int4, int8, oid (Arrow's int16/int32/int64/uint32), and
pg_lsn (a 64-bit WAL position kept as ``pg_lsn_out`` prints it, ``16/B374D848``). The
compiled twin is ``_codecs/integers.pxi``."""

from __future__ import annotations

import re
import pyarrow as pa

from .typeinfo import Converter, TypeInfo, fast_code, need, unpacker

__all__ = ["CONVERTERS", "TYPES"]

_INT_RE = re.compile(rb"[+-]?[0-9]+\Z")


def _t_int(lo, hi):
    def conv(s, tm):
        if not _INT_RE.match(s):
            raise ValueError("not an integer")
        v = int(s)
        if not lo <= v <= hi:
            raise ValueError("integer out of range")
        return v
    return conv


def _t_bool(s, tm):
    if s == b"t":
        return True
    if s == b"f":
        return False
    raise ValueError("bool text must be 't' or 'f'")


def _b_bool(b, tm):
    need(b, 1)
    if b[0] > 1:
        raise ValueError("bool send form must be 0 or 1")
    return b[0] == 1


_u64 = unpacker(">Q")


def _b_pg_lsn(b, tm):
    v = _u64(b, tm)
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


CONVERTERS = [
    Converter("bool", _t_bool, _b_bool, lambda tm: pa.bool_()),
    Converter("int2", _t_int(-2**15, 2**15 - 1), unpacker(">h"), lambda tm: pa.int16()),
    Converter("int4", _t_int(-2**31, 2**31 - 1), unpacker(">i"), lambda tm: pa.int32()),
    Converter("int8", _t_int(-2**63, 2**63 - 1), unpacker(">q"), lambda tm: pa.int64()),
    Converter("oid", _t_int(0, 2**32 - 1), unpacker(">I"), lambda tm: pa.uint32()),
    Converter("pg_lsn", None, _b_pg_lsn),
]

TYPES = [
    TypeInfo(16, "bool", 1000, "bool", fast_code("BOOL")),
    TypeInfo(20, "int8", 1016, "int8", fast_code("INT8")),
    TypeInfo(21, "int2", 1005, "int2", fast_code("INT2")),
    TypeInfo(23, "int4", 1007, "int4", fast_code("INT4")),
    TypeInfo(26, "oid", 1028, "oid", fast_code("OID")),
    TypeInfo(3220, "pg_lsn", 3221, "pg_lsn"),
]
