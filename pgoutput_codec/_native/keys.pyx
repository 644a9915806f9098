# cython: language_level=3
"""Rows grouped by the bytes of their key: codes for the values of a binary column at
given places, equal bytes equal codes, by one pass over a hash table.

A table's net changes group its rows by key. Arrow's way (a ``take`` of the key
values, ``dictionary_encode``, a copy out) is three calls a table whose fixed cost is
most of a small table's, and a mirror of many small tables pays it once per table.
This reads the values in place, in one call.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp

from pgoutput_codec._native.arrowbuf cimport bit as _bit, buffer_address as _addr

import numpy as np
import pyarrow as pa

# FNV-1a, 64 bits: a few operations a byte, good enough spread for a table of keys
# whose collisions are compared byte by byte anyway
cdef uint64_t _FNV_OFFSET = 14695981039346656037ULL
cdef uint64_t _FNV_PRIME = 1099511628211ULL
# a null's hash: equal to no other null-free value only by chance, and compared apart
cdef uint64_t _NULL_HASH = 0x9E3779B97F4A7C15ULL


cdef inline uint64_t _hash(const uint8_t* p, int64_t n) noexcept nogil:
    cdef uint64_t h = _FNV_OFFSET
    cdef int64_t k
    for k in range(n):
        h = (h ^ p[k]) * _FNV_PRIME
    return h


def key_codes(data, at):
    """Per place in ``at`` (int64 indexes into ``data``, a binary or string array
    with 32-bit offsets) the code of the value there: equal bytes get equal codes, a
    null is a value of its own (equal to other nulls), codes numbered from 0 in the
    order values first appear. Every place is checked to lie inside ``data``, and its
    offsets inside the data buffer (ValueError naming the place otherwise)."""
    if isinstance(data, pa.ChunkedArray):
        data = data.chunk(0) if data.num_chunks == 1 else data.combine_chunks()
    if not (pa.types.is_binary(data.type) or pa.types.is_string(data.type)):
        raise TypeError(f"key_codes reads binary or string arrays, not {data.type}")
    cdef const int64_t[::1] idx = np.ascontiguousarray(at, dtype=np.int64)
    cdef Py_ssize_t n = idx.shape[0], length = len(data), off = data.offset
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    bufs = data.buffers()
    if bufs[1] is None or bufs[1].size < (off + length + 1) * 4:
        raise ValueError(f"the {data.type} array's offsets buffer is shorter than its {length} rows need")
    if bufs[0] is not None and bufs[0].size < (off + length + 7) // 8:
        raise ValueError(f"the {data.type} array's validity bitmap is shorter than its {length} rows need")
    cdef const uint8_t* valid = _addr(bufs[0])
    cdef const int32_t* offs = <const int32_t*>_addr(bufs[1]) + off
    cdef const uint8_t* values = _addr(bufs[2])
    cdef int64_t size = bufs[2].size if bufs[2] is not None else 0
    cdef Py_ssize_t cap = 16
    while cap < 2 * n:
        cap <<= 1
    slots_arr = np.full(cap, -1, np.int64)
    hashes_arr = np.empty(n, np.uint64)
    cdef int64_t[::1] code = out
    cdef int64_t[::1] slots = slots_arr
    cdef uint64_t[::1] hashes = hashes_arr
    cdef Py_ssize_t i, p, r, bad = -1
    cdef int64_t j, a, b, ra, rb, next_code = 0
    cdef bint null, rnull
    cdef uint64_t h
    with nogil:
        for i in range(n):
            j = idx[i]
            if j < 0 or j >= length:
                bad = i
                break
            null = valid != NULL and not _bit(valid, off + j)
            a, b = offs[j], offs[j + 1]
            if not null and (a < 0 or b < a or b > size):
                bad = i
                break
            h = _NULL_HASH if null else _hash(values + a, b - a)
            hashes[i] = h
            p = <Py_ssize_t>(h & <uint64_t>(cap - 1))
            while True:
                r = slots[p]
                if r < 0:
                    slots[p] = i
                    code[i] = next_code
                    next_code += 1
                    break
                if hashes[r] == h:
                    rnull = valid != NULL and not _bit(valid, off + idx[r])
                    if null and rnull:
                        code[i] = code[r]
                        break
                    if not null and not rnull:
                        ra, rb = offs[idx[r]], offs[idx[r] + 1]
                        if rb - ra == b - a and (b == a or memcmp(values + ra, values + a, b - a) == 0):
                            code[i] = code[r]
                            break
                p = (p + 1) & (cap - 1)
    if bad >= 0:
        raise ValueError(f"key place {bad} (value {idx[bad]}) lies outside the {length}-row {data.type} "
                         "array or its offsets outside its data")
    return out
