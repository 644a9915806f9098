"""Floating point: float4, float8 (Arrow's float32/float64) and point (two float8s, kept
as ``point_out`` prints it), with :func:`fmt_float8`, the digits ``float8out`` and
``float4out`` print. The compiled twin is ``_codecs/floats.pxi``."""

from __future__ import annotations

import decimal
import math
import re
import struct

import numpy as np
import pyarrow as pa

from .typeinfo import Converter, TypeInfo, fast_code, need, unpacker

__all__ = ["CONVERTERS", "TYPES", "fmt_float8"]


def fmt_float8(x, float4=False):
    """float8out (shortest round-trip, Ryu): exponent form when the decimal exponent is
    < -4 or >= 15, as PostgreSQL 12+ prints with extra_float_digits >= 1; ``float4``:
    float4out, the shortest digits of the float4 and the exponent form from 6."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    d = decimal.Decimal(str(np.float32(x)) if float4 else repr(x))
    sign, digits, exp = d.normalize().as_tuple()
    digs = "".join(map(str, digits))
    e10 = exp + len(digs) - 1
    sg = "-" if sign else ""
    if e10 < -4 or e10 >= (6 if float4 else 15):
        mant = digs[0] + ("." + digs[1:] if len(digs) > 1 else "")
        return f"{sg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    return format(d.normalize(), "f")


def _t_float(s, tm):
    # what float8out prints plus what strtod takes of those characters (_codecs/floats.pxi
    # _float_chars): 'E' and a leading '+' too; under 127 bytes, as there
    if len(s) >= 127 or not re.match(rb"([+-]?(Infinity|[0-9.]+([eE][+-]?[0-9]+)?)|NaN)\Z", s):
        raise ValueError("not a float")
    return _in_range(s, float(s), "double precision")


def _t_float4(s, tm):
    return _in_range(s, struct.unpack("f", struct.pack("f", _t_float(s, tm)))[0], "real")


def _in_range(s, v, name):
    """``v`` read from ``s``, unless a finite text overflowed to infinity or underflowed
    to zero (float4in/float8in refuse both; a denormal is a value)."""
    if (math.isinf(v) and b"Infinity" not in s) or (v == 0 and re.search(rb"[1-9]", re.split(rb"[eE]", s)[0])):
        raise ValueError(f"out of range for type {name}")
    return v


def _b_point(b, tm):
    need(b, 16)
    x, y = struct.unpack(">dd", b)
    return f"({fmt_float8(x)},{fmt_float8(y)})"


CONVERTERS = [
    Converter("float4", _t_float4, unpacker(">f"), lambda tm: pa.float32()),
    Converter("float8", _t_float, unpacker(">d"), lambda tm: pa.float64()),
    Converter("point", None, _b_point),
]

TYPES = [
    TypeInfo(600, "point", 1017, "point"),
    TypeInfo(700, "float4", 1021, "float4", fast_code("FLOAT4")),
    TypeInfo(701, "float8", 1022, "float8", fast_code("FLOAT8")),
]
