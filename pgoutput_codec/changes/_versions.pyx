# cython: language_level=3
"""Per-row bookkeeping of the change decoder that must not cost a Python object per row.

``relation_versions`` walks the message tags once and gives every Insert/Update/Delete
row the version of its relation current at that point (a Relation message replaces the
definition for later rows: the newest wins). The relid → version map is a small
open-addressing hash table in C.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free

import numpy as np


cdef inline Py_ssize_t _slot(const uint32_t* keys, const uint8_t* used, Py_ssize_t mask,
                             uint32_t key) noexcept nogil:
    cdef Py_ssize_t h = <Py_ssize_t>((<uint64_t>key * 2654435761u) & <uint64_t>mask)
    while used[h] and keys[h] != key:
        h = (h + 1) & mask
    return h


def relation_versions(const uint8_t[::1] tags, const uint32_t[::1] relids,
                      const int64_t[::1] r_versions, dict current):
    """Version of each I/U/D row's relation (-1: no Relation message seen for it).

    ``r_versions[k]`` is the version the k-th 'R' row defines; ``current`` maps relid →
    version before the first row and is updated in place to the map after the last.
    """
    cdef Py_ssize_t n = tags.shape[0], i, h, k = 0, cap = 16
    cdef Py_ssize_t need = 2 * (len(current) + r_versions.shape[0]) + 16
    while cap < need:
        cap <<= 1
    cdef uint32_t* keys = <uint32_t*>calloc(cap, sizeof(uint32_t))
    cdef int64_t* vals = <int64_t*>calloc(cap, sizeof(int64_t))
    cdef uint8_t* used = <uint8_t*>calloc(cap, 1)
    out = np.full(n, -1, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef uint8_t t
    if keys == NULL or vals == NULL or used == NULL:
        free(keys)
        free(vals)
        free(used)
        raise MemoryError()
    try:
        for rid, ver in current.items():
            h = _slot(keys, used, cap - 1, rid)
            keys[h] = rid
            vals[h] = ver
            used[h] = 1
        for i in range(n):
            t = tags[i]
            if t == 82:  # 'R'
                h = _slot(keys, used, cap - 1, relids[i])
                keys[h] = relids[i]
                vals[h] = r_versions[k]
                used[h] = 1
                k += 1
            elif t == 73 or t == 85 or t == 68:  # 'I' 'U' 'D'
                h = _slot(keys, used, cap - 1, relids[i])
                if used[h]:
                    o[i] = vals[h]
        current.clear()
        for h in range(cap):
            if used[h]:
                current[keys[h]] = vals[h]
    finally:
        free(keys)
        free(vals)
        free(used)
    return out
