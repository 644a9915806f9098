# cython: language_level=3
"""Allocation and hand-off of the C column builders (see _builders.pxd) to pyarrow."""

from libc.stdint cimport int32_t, uint8_t, uintptr_t
from libc.string cimport memset

from pgoutput_codec._memory cimport pool_calloc, pool_free, pool_malloc

import numpy as np
import pyarrow as pa


cdef class _Owned:
    """Owns one block from ``_memory``; pyarrow buffers made from it keep it alive."""
    cdef void* p

    def __dealloc__(self):
        pool_free(self.p)


cdef object _hand_off(void* p, Py_ssize_t size):
    """Wrap a ``_memory`` block as a pyarrow Buffer that frees it when the last user goes."""
    cdef _Owned owner = _Owned.__new__(_Owned)
    owner.p = p
    return pa.foreign_buffer(<uintptr_t>p, size, base=owner)


cdef int fixed_init(FixedCol* c, Py_ssize_t n, int width) except -1:
    # width 0 = bool (bit-packed data)
    cdef Py_ssize_t nbytes = (n + 7) >> 3 if width == 0 else n * width
    c.width = width
    c.nvalid = 0
    c.data = <uint8_t*>(pool_calloc(nbytes + 1) if width == 0 else pool_malloc(nbytes + 1))
    c.valid = <uint8_t*>pool_calloc(((n + 7) >> 3) + 1)
    if c.data == NULL or c.valid == NULL:
        raise MemoryError()
    return 0


cdef void fixed_free(FixedCol* c) noexcept:
    pool_free(c.data)
    pool_free(c.valid)
    c.data = NULL
    c.valid = NULL


cdef object fixed_finish(FixedCol* c, Py_ssize_t n, object typ):
    cdef Py_ssize_t nbytes = (n + 7) >> 3 if c.width == 0 else n * c.width
    if c.nvalid == 0:
        fixed_free(c)
        return pa.nulls(n, typ)
    valid = None if c.nvalid == n else _hand_off(c.valid, (n + 7) >> 3)
    if valid is None:
        pool_free(c.valid)
    data = _hand_off(c.data, nbytes)
    c.data = NULL
    c.valid = NULL
    return pa.Array.from_buffers(typ, n, [valid, data], null_count=n - c.nvalid)


cdef int var_init(VarCol* c, Py_ssize_t n, Py_ssize_t reserve) except -1:
    c.offs = <int32_t*>pool_malloc((n + 1) * sizeof(int32_t))
    c.valid = <uint8_t*>pool_calloc(((n + 7) >> 3) + 1)
    c.data.p = NULL
    c.data.len = 0
    c.data.cap = 0
    c.filled = 0
    c.nvalid = 0
    if c.offs == NULL or c.valid == NULL or (reserve and mem_reserve(&c.data, reserve) < 0):
        raise MemoryError()
    c.offs[0] = 0
    return 0


cdef void var_free(VarCol* c) noexcept:
    pool_free(c.offs)
    pool_free(c.valid)
    pool_free(c.data.p)
    c.offs = NULL
    c.valid = NULL
    c.data.p = NULL


cdef object var_finish(VarCol* c, Py_ssize_t n, object typ):
    if c.nvalid == 0:
        var_free(c)
        return pa.nulls(n, typ)
    var_fill(c, n)
    valid = None if c.nvalid == n else _hand_off(c.valid, (n + 7) >> 3)
    if valid is None:
        pool_free(c.valid)
    offs = _hand_off(c.offs, (n + 1) * sizeof(int32_t))
    data = _hand_off(c.data.p, c.data.len) if c.data.len else pa.py_buffer(b"")
    if not c.data.len:
        pool_free(c.data.p)
    c.offs = NULL
    c.valid = NULL
    c.data.p = NULL
    return pa.Array.from_buffers(typ, n, [valid, offs, data], null_count=n - c.nvalid)


cdef int tl_init(TupleListCol* c, Py_ssize_t n) except -1:
    c.offs = <int32_t*>pool_malloc((n + 1) * sizeof(int32_t))
    c.valid = <uint8_t*>pool_calloc(((n + 7) >> 3) + 1)
    c.filled = 0
    c.nvalid = 0
    c.nelem = 0
    c.nvvalid = 0
    c.kinds = Mem(NULL, 0, 0)
    c.voffs = Mem(NULL, 0, 0)
    c.vdata = Mem(NULL, 0, 0)
    c.vvalid = Mem(NULL, 0, 0)
    if c.offs == NULL or c.valid == NULL or mem_reserve(&c.voffs, 4) < 0:
        raise MemoryError()
    c.offs[0] = 0
    (<int32_t*>c.voffs.p)[0] = 0
    c.voffs.len = 4
    return 0


cdef int tl_grow_valid(TupleListCol* c, Py_ssize_t nbytes) noexcept nogil:
    """Make the element validity bitmap at least ``nbytes`` long, new bytes zeroed."""
    cdef Py_ssize_t old = c.vvalid.cap
    if nbytes <= old:
        return 0
    if mem_grow(&c.vvalid, nbytes - c.vvalid.len) < 0:
        return -1
    memset(c.vvalid.p + old, 0, c.vvalid.cap - old)
    return 0


cdef void tl_free(TupleListCol* c) noexcept:
    pool_free(c.offs)
    pool_free(c.valid)
    pool_free(c.kinds.p)
    pool_free(c.voffs.p)
    pool_free(c.vdata.p)
    pool_free(c.vvalid.p)
    c.offs = NULL
    c.valid = NULL
    c.kinds.p = NULL
    c.voffs.p = NULL
    c.vdata.p = NULL
    c.vvalid.p = NULL


cdef object tl_finish(TupleListCol* c, Py_ssize_t n, object typ):
    cdef Py_ssize_t ne = c.nelem
    if c.nvalid == 0:
        tl_free(c)
        return pa.nulls(n, typ)
    while c.filled < n:
        c.filled += 1
        c.offs[c.filled] = <int32_t>ne
    elem_type = typ.value_type
    kinds = pa.Array.from_buffers(
        pa.string(), ne,
        [None, pa.py_buffer(np.arange(ne + 1, dtype=np.int32)),
         _hand_off(c.kinds.p, ne) if ne else pa.py_buffer(b"")])
    if not ne:
        pool_free(c.kinds.p)
    vvalid = None
    if c.nvvalid != ne:
        vvalid = _hand_off(c.vvalid.p, (ne + 7) >> 3)
    else:
        pool_free(c.vvalid.p)
    vdata = _hand_off(c.vdata.p, c.vdata.len) if c.vdata.len else pa.py_buffer(b"")
    if not c.vdata.len:
        pool_free(c.vdata.p)
    data = pa.Array.from_buffers(pa.binary(), ne, [vvalid, _hand_off(c.voffs.p, (ne + 1) * 4), vdata],
                                 null_count=ne - c.nvvalid)
    struct = pa.StructArray.from_arrays([kinds, data], fields=list(elem_type))
    valid = None if c.nvalid == n else _hand_off(c.valid, (n + 7) >> 3)
    if valid is None:
        pool_free(c.valid)
    offs = _hand_off(c.offs, (n + 1) * 4)
    c.offs = NULL
    c.valid = NULL
    c.kinds.p = NULL
    c.voffs.p = NULL
    c.vdata.p = NULL
    c.vvalid.p = NULL
    return pa.Array.from_buffers(typ, n, [valid, offs], null_count=n - c.nvalid, children=[struct])
