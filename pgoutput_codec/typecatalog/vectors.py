"""pgvector's vector, halfvec and sparsevec: ``list<float32>``, ``list<float16>`` and
``struct<dim: int32, indices: list<int32>, values: list<float32>>``.

- vector: text ``[1,2.5,-3e-10]`` (each element as float4out prints it); send form
  int16 dim, int16 unused (0), dim big-endian float4;
- halfvec: the same text (each half printed as the float4 it widens to); send form int16
  dim, int16 unused (0), dim big-endian IEEE half floats;
- sparsevec: text ``{1:1.5,3:2}/5`` (indices **1-based**, as pgvector prints them); send
  form int32 dim, int32 nnz, int32 unused (0), nnz int32 indices (**0-based**), nnz
  float4. The Arrow struct holds the indices 0-based, as the send form and pgvector's
  own clients do; they rise strictly and are below ``dim``.

A vector's typmod is its dimension count (``vector(3)``). Known by ``("vector",
"vector" | "halfvec" | "sparsevec")``. The compiled twin is ``_codecs/vectors.pxi``;
the send forms are read with numpy here (the bits of NaNs kept)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa

from . import floats
from .typeinfo import Converter, ExtensionType, fast_code

__all__ = ["CONVERTERS", "TYPES", "EXTENSION_TYPES", "SPARSE"]

_FLOAT4 = next(c for c in floats.CONVERTERS if c.name == "float4").text

#: the Arrow type of a sparsevec
SPARSE = pa.struct([("dim", pa.int32()), ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float32()))])


def _items(s, open_, close):
    if len(s) < 2 or s[:1] != open_ or s[-1:] != close:
        raise ValueError(f"vector text must be enclosed in {open_.decode()}{close.decode()}")
    inner = s[1:-1]
    return inner.split(b",") if inner else []


def _t_vector(s, tm):
    return np.array([_FLOAT4(x, tm) for x in _items(s, b"[", b"]")], np.float32)


def _t_halfvec(s, tm):
    out = []
    for x in _items(s, b"[", b"]"):
        v = np.float32(_FLOAT4(x, tm))
        with np.errstate(over="ignore"):
            h = np.float16(v)
        if math.isinf(h) and not math.isinf(v):
            raise ValueError("out of range for type halfvec")
        out.append(h)
    return np.array(out, np.float16)


def _dense(b, width, fmt):
    if len(b) < 4:
        raise ValueError("vector send form shorter than its header")
    dim, unused = struct.unpack_from(">hh", b)
    if dim < 0:
        raise ValueError("vector send form with a negative dimension count")
    if unused != 0:
        raise ValueError("vector send form: unused header field is not 0")
    if len(b) != 4 + width * dim:
        raise ValueError("vector send form length does not match its dimension count")
    return np.frombuffer(b, fmt, dim, 4).astype(fmt.replace(">", "<"))


def _b_vector(b, tm):
    return _dense(b, 4, ">f4")


def _b_halfvec(b, tm):
    return _dense(b, 2, ">f2")


def _sparse(dim, idx, vals):
    if dim < 0:
        raise ValueError("sparsevec with a negative dimension count")
    if len(idx) and (idx[0] < 0 or idx[-1] >= dim or (len(idx) > 1 and not np.all(idx[1:] > idx[:-1]))):
        raise ValueError("sparsevec indices must rise strictly and be below its dimension count")
    return {"dim": dim, "indices": idx, "values": vals}


def _t_sparsevec(s, tm):
    head, sep, tail = s.rpartition(b"/")
    if not sep or not tail.isdigit() or len(tail) > 10:
        raise ValueError("sparsevec text must end in /dimensions")
    dim = int(tail)
    if dim > 0x7FFFFFFF:
        raise ValueError("sparsevec dimension count out of range")
    idx, vals = [], []
    for item in _items(head, b"{", b"}"):
        i, colon, v = item.partition(b":")
        if not colon or not i.isdigit() or len(i) > 10:
            raise ValueError("sparsevec element must be index:value")
        if not 1 <= int(i) <= 0x7FFFFFFF:
            raise ValueError("sparsevec index out of range")
        idx.append(int(i) - 1)
        vals.append(_FLOAT4(v, tm))
    return _sparse(dim, np.array(idx, np.int32), np.array(vals, np.float32))


def _b_sparsevec(b, tm):
    if len(b) < 12:
        raise ValueError("sparsevec send form shorter than its header")
    dim, nnz, unused = struct.unpack_from(">iii", b)
    if nnz < 0:
        raise ValueError("sparsevec send form with a negative element count")
    if unused != 0:
        raise ValueError("sparsevec send form: unused header field is not 0")
    if len(b) != 12 + 8 * nnz:
        raise ValueError("sparsevec send form length does not match its element count")
    idx = np.frombuffer(b, ">i4", nnz, 12).astype(np.int32)
    vals = np.frombuffer(b, ">f4", nnz, 12 + 4 * nnz).astype(np.float32)
    return _sparse(dim, idx, vals)


CONVERTERS = [
    Converter("vector", _t_vector, _b_vector, lambda tm: pa.list_(pa.float32())),
    Converter("halfvec", _t_halfvec, _b_halfvec, lambda tm: pa.list_(pa.float16())),
    Converter("sparsevec", _t_sparsevec, _b_sparsevec, lambda tm: SPARSE),
]

TYPES: list = []

EXTENSION_TYPES = [
    ExtensionType("vector", "vector", "vector", fast_code("VECTOR")),
    ExtensionType("vector", "halfvec", "halfvec", fast_code("HALFVEC")),
    ExtensionType("vector", "sparsevec", "sparsevec", fast_code("SPARSEVEC")),
]
