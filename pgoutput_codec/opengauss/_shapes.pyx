# cython: language_level=3
"""Tuple shapes of openGauss records, read from the Arrow buffers.

Every openGauss record names its columns (name, type OID, type name), where pgoutput
names them once per Relation; ``rows.change_rows`` therefore numbers each record's tuple
by its *shape*, the (name, OID, type name) of its columns in order, and decides columns
and gathers values once per shape. The numpy twin (``rows._shapes``: the reference when
``PGOUTPUT_CODEC_NO_EXTENSIONS`` is set) dictionary-encodes every name and type name, a
million strings per 100 000 ten-column records, about a third of ``change_rows``. This
walks the name, OID and type-name buffers once: each tuple is hashed, looked up in an
open-addressing table, and a hit is compared with the shape's representative tuple byte
by byte, so a hash collision costs a probe and can never merge two shapes.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc

from pgoutput_codec._native.arrowbuf cimport bit as _bit, buffer_address as _addr

import numpy as np
import pyarrow as pa


cdef struct Strs:
    # a string child: offsets and data from the array's own offset; validity (NULL: all
    # valid) indexed from ``voff``; ``all_null``: every value null (type names of 'b')
    const int32_t* offs
    const uint8_t* data
    const uint8_t* valid
    Py_ssize_t voff
    bint all_null


cdef struct Oids:
    const uint32_t* vals
    const uint8_t* valid
    Py_ssize_t voff
    bint all_null


cdef int _strs(Strs* s, arr) except -1:
    bufs = arr.buffers()
    s.all_null = arr.null_count == len(arr)
    s.voff = arr.offset
    s.valid = _addr(bufs[0]) if arr.null_count else NULL
    s.offs = (<const int32_t*>_addr(bufs[1])) + <Py_ssize_t>arr.offset if bufs[1] is not None else NULL
    s.data = _addr(bufs[2])
    if s.offs == NULL and not s.all_null and len(arr):
        raise ValueError("a string column without offsets")
    return 0


cdef int _oids(Oids* o, arr) except -1:
    bufs = arr.buffers()
    o.all_null = arr.null_count == len(arr)
    o.voff = arr.offset
    o.valid = _addr(bufs[0]) if arr.null_count else NULL
    o.vals = (<const uint32_t*>_addr(bufs[1])) + <Py_ssize_t>arr.offset if bufs[1] is not None else NULL
    if o.vals == NULL and not o.all_null and len(arr):
        raise ValueError("an OID column without values")
    return 0


cdef inline bint _str_null(const Strs* s, Py_ssize_t e) noexcept nogil:
    return s.all_null or (s.valid != NULL and not _bit(s.valid, s.voff + e))


cdef inline bint _oid_null(const Oids* o, Py_ssize_t e) noexcept nogil:
    return o.all_null or (o.valid != NULL and not _bit(o.valid, o.voff + e))


# the multipliers of rows._K (splitmix64 / xxhash constants)
cdef uint64_t K0 = 0x9E3779B97F4A7C15ULL
cdef uint64_t K1 = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t K2 = 0x165667B19E3779F9ULL


cdef inline uint64_t _mix(uint64_t h, uint64_t v) noexcept nogil:
    h = (h ^ v) * K0
    return h ^ (h >> 29)


cdef inline uint64_t _hash_str(uint64_t h, const Strs* s, Py_ssize_t e) noexcept nogil:
    """``h`` mixed with value ``e`` of ``s``: its bytes eight at a time, then its length
    (a null is a length no string has)."""
    cdef int32_t a, n, i
    cdef uint64_t w
    if _str_null(s, e):
        return _mix(h, K2)
    a = s.offs[e]
    n = s.offs[e + 1] - a
    i = 0
    while i + 8 <= n:
        memcpy(&w, s.data + a + i, 8)
        h = _mix(h, w)
        i += 8
    if i < n:
        w = 0
        memcpy(&w, s.data + a + i, n - i)
        h = _mix(h, w)
    return _mix(h, <uint64_t>n * K1)


cdef inline bint _same_str(const Strs* s, Py_ssize_t e, Py_ssize_t f) noexcept nogil:
    cdef bint ne = _str_null(s, e), nf = _str_null(s, f)
    cdef int32_t n
    if ne or nf:
        return ne and nf
    n = s.offs[e + 1] - s.offs[e]
    return n == s.offs[f + 1] - s.offs[f] and memcmp(s.data + s.offs[e], s.data + s.offs[f], n) == 0


cdef inline bint _same_strs(const Strs* s, Py_ssize_t a, Py_ssize_t c, Py_ssize_t m) noexcept nogil:
    """Values a.. and c.. (``m`` each) of ``s`` equal, nulls apart; without nulls the
    lengths are compared, then the bytes in one block (the names of one tuple are
    contiguous)."""
    cdef Py_ssize_t j
    cdef int32_t d
    if s.all_null:
        return True
    if s.valid != NULL:
        for j in range(m):
            if not _same_str(s, a + j, c + j):
                return False
        return True
    d = s.offs[a + m] - s.offs[a]
    if d != s.offs[c + m] - s.offs[c]:
        return False
    for j in range(1, m):
        if s.offs[a + j] - s.offs[a] != s.offs[c + j] - s.offs[c]:
            return False
    return d == 0 or memcmp(s.data + s.offs[a], s.data + s.offs[c], d) == 0


cdef inline bint _same_oids(const Oids* o, Py_ssize_t a, Py_ssize_t c, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t j
    if o.all_null:
        return True
    if o.valid == NULL:
        return m == 0 or memcmp(o.vals + a, o.vals + c, 4 * m) == 0
    for j in range(m):
        if _oid_null(o, a + j) != _oid_null(o, c + j):
            return False
        if not _oid_null(o, a + j) and o.vals[a + j] != o.vals[c + j]:
            return False
    return True


cdef inline bint _same_tuple(const Strs* name, const Oids* oid, const Strs* tname, Py_ssize_t a, Py_ssize_t c,
                             Py_ssize_t m) noexcept nogil:
    """The ``m`` columns from a and from c have the same names, OIDs and type names."""
    return _same_strs(name, a, c, m) and _same_oids(oid, a, c, m) and _same_strs(tname, a, c, m)


# shapes remembered, most recent first: a transaction touches a few tables at a time
cdef enum:
    RECENT = 4


cdef inline Py_ssize_t _recent_hit(Py_ssize_t* recent, Py_ssize_t nrecent, const Strs* name, const Oids* oid,
                                   const Strs* tname, const int64_t* off, const int64_t* rep,
                                   Py_ssize_t a, Py_ssize_t m) noexcept nogil:
    """The shape among ``recent`` whose first tuple has the ``m`` columns from ``a`` (moved
    to the front), else -1."""
    cdef Py_ssize_t i, k, s, c
    for i in range(nrecent):
        s = recent[i]
        c = off[rep[s]]
        if off[rep[s] + 1] - c == m and _same_tuple(name, oid, tname, a, c, m):
            for k in range(i, 0, -1):
                recent[k] = recent[k - 1]
            recent[0] = s
            return s
    return -1


cdef inline Py_ssize_t _recent_put(Py_ssize_t* recent, Py_ssize_t nrecent, Py_ssize_t s) noexcept nogil:
    """``s`` first in ``recent`` (not in it: a hash hit or a new shape); the new count."""
    cdef Py_ssize_t k
    if nrecent < RECENT:
        nrecent += 1
    for k in range(nrecent - 1, 0, -1):
        recent[k] = recent[k - 1]
    recent[0] = s
    return nrecent


def tuple_shapes(offsets, lengths, valid, vals, int hash_bits=64):
    """Per record the id of its tuple's shape (-1: no tuple) and, per shape, its first
    record (the representative): ``offsets`` (int64, n + 1) into the struct array
    ``vals`` (``schema.TUPLE_COLUMN``), ``lengths`` their differences, ``valid`` per
    record. Shapes are numbered as first met. ``hash_bits`` below 64 keeps only that
    many bits of each hash, so that tests can make collisions happen."""
    cdef const int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef const uint8_t[::1] ok = np.ascontiguousarray(valid, dtype=np.bool_).view(np.uint8)
    cdef Py_ssize_t n = ok.shape[0], r, q, j, a, b, c, cap, slot, nshapes = 0, nrecent = 0
    cdef Py_ssize_t recent[RECENT]
    if off.shape[0] != n + 1:
        raise ValueError(f"{off.shape[0]} offsets for {n} records")
    if n and (off[0] < 0 or off[n] > len(vals)):
        raise ValueError(f"tuple offsets {off[0]}..{off[n]} outside {len(vals)} columns")
    for r in range(n):
        if off[r + 1] < off[r]:
            raise ValueError(f"record {r}: tuple offsets go back ({off[r]} then {off[r + 1]})")
    name_arr, oid_arr, tname_arr = vals.field("name"), vals.field("type_oid"), vals.field("type_name")
    if (not pa.types.is_string(name_arr.type) or not pa.types.is_string(tname_arr.type)
            or not pa.types.is_uint32(oid_arr.type)):
        raise TypeError(f"tuple columns of types {vals.type}: want string, uint32, string")
    cdef Strs name, tname
    cdef Oids oid
    _strs(&name, name_arr)
    _strs(&tname, tname_arr)
    _oids(&oid, oid_arr)

    shape_arr = np.full(n, -1, np.int64)
    rep_arr = np.empty(max(n, 1), np.int64)
    cdef int64_t[::1] shape = shape_arr
    cdef int64_t[::1] rep = rep_arr
    cdef uint64_t mask = ~<uint64_t>0 if hash_bits >= 64 else (<uint64_t>1 << max(hash_bits, 0)) - 1
    cdef uint64_t h
    cap = 64
    cdef uint64_t* keys = <uint64_t*>PyMem_Malloc(cap * sizeof(uint64_t))
    cdef int64_t* ids = <int64_t*>PyMem_Malloc(cap * sizeof(int64_t))
    cdef uint64_t* hashes = NULL            # per shape: its hash (to re-insert on growth)
    cdef Py_ssize_t hcap = 0
    try:
        if keys == NULL or ids == NULL:
            raise MemoryError()
        for slot in range(cap):
            ids[slot] = -1
        with nogil:
            for r in range(n):
                if not ok[r]:
                    continue
                a, b = off[r], off[r + 1]
                # one of the shapes met last (runs of one table, a few tables taking
                # turns): compared as blocks, no hashing
                q = _recent_hit(recent, nrecent, &name, &oid, &tname, &off[0], &rep[0], a, b - a)
                if q >= 0:
                    shape[r] = q
                    continue
                h = _mix(K1, <uint64_t>(b - a))
                for j in range(a, b):
                    h = _hash_str(h, &name, j)
                    h = _mix(h, (<uint64_t>oid.vals[j] + 1) if not _oid_null(&oid, j) else 0)
                    h = _hash_str(h, &tname, j)
                h &= mask
                slot = <Py_ssize_t>((h * K2) >> 7) & (cap - 1)
                while True:
                    q = ids[slot]
                    if q < 0:
                        break
                    if keys[slot] == h:
                        # a hit: the same shape only if equal to its representative
                        c = off[rep[q]]
                        if off[rep[q] + 1] - c == b - a and _same_tuple(&name, &oid, &tname, a, c, b - a):
                            break
                    slot = (slot + 1) & (cap - 1)
                if q >= 0:
                    shape[r] = q
                    nrecent = _recent_put(recent, nrecent, q)
                    continue
                # a new shape
                shape[r] = nshapes
                rep[nshapes] = r
                keys[slot] = h
                ids[slot] = nshapes
                if nshapes >= hcap:
                    hcap = hcap * 2 if hcap else 64
                    with gil:
                        hashes = <uint64_t*>_grow(hashes, hcap * sizeof(uint64_t))
                hashes[nshapes] = h
                nrecent = _recent_put(recent, nrecent, nshapes)
                nshapes += 1
                if 2 * nshapes > cap:          # at most half full: probes stay short
                    with gil:
                        PyMem_Free(keys)
                        PyMem_Free(ids)
                        cap *= 4
                        keys = <uint64_t*>PyMem_Malloc(cap * sizeof(uint64_t))
                        ids = <int64_t*>PyMem_Malloc(cap * sizeof(int64_t))
                        if keys == NULL or ids == NULL:
                            raise MemoryError()
                    for slot in range(cap):
                        ids[slot] = -1
                    for q in range(nshapes):
                        slot = <Py_ssize_t>((hashes[q] * K2) >> 7) & (cap - 1)
                        while ids[slot] >= 0:
                            slot = (slot + 1) & (cap - 1)
                        keys[slot] = hashes[q]
                        ids[slot] = q
    finally:
        PyMem_Free(keys)
        PyMem_Free(ids)
        PyMem_Free(hashes)
    return shape_arr, rep_arr[:nshapes].copy()


cdef void* _grow(void* p, size_t size) except NULL:
    cdef void* q = PyMem_Realloc(p, size)
    if q == NULL:
        raise MemoryError()
    return q
