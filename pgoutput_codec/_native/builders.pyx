# cython: language_level=3
"""Allocation and hand-off of the C column builders (see builders.pxd) to pyarrow."""

from libc.stdint cimport int32_t, uint8_t, uintptr_t
from libc.string cimport memset

from pgoutput_codec._native.memory cimport pool_calloc, pool_free, pool_malloc

import numpy as np
import pyarrow as pa


cdef class _Owned:
    """Owns one block from ``memory``; pyarrow buffers made from it keep it alive."""
    cdef void* p

    def __dealloc__(self):
        pool_free(self.p)


# One grow-only buffer of zeros shared by every all-null column (Arrow buffers are
# immutable, so many arrays may point at it): most message fields are null in most rows,
# and a freshly zeroed buffer per column per batch cost more than decoding the batch.
cdef object _ZEROS = pa.py_buffer(b"")
cdef object _ARANGE = np.arange(1, dtype=np.int32)


cdef object _zeros(Py_ssize_t size):
    global _ZEROS
    if _ZEROS.size < size:
        _ZEROS = pa.py_buffer(bytes(max(size, 2 * _ZEROS.size)))   # calloc'd: pages zero lazily
    return _ZEROS.slice(0, size)


cdef object zero_buffer(Py_ssize_t size):
    """``size`` zero bytes from the shared buffer (read-only; never write through it)."""
    return _zeros(size)


cdef object _offsets_arange(Py_ssize_t n):
    """0, 1, …, n as int32 offsets (the one-character ``kind`` strings)."""
    global _ARANGE
    if len(_ARANGE) < n + 1:
        _ARANGE = np.arange(max(n + 1, 2 * len(_ARANGE)), dtype=np.int32)
    return pa.py_buffer(_ARANGE[:n + 1])


cdef bint is_arange_offsets(object buf):
    """Whether ``buf`` is the shared 0, 1, 2, … offsets buffer (the one-character kind
    strings of decoded tuples): then element i's string is byte i, no offsets to read."""
    return buf is not None and buf.address == <uintptr_t>_ARANGE.ctypes.data


cdef dict _NULL_ARRAYS = {}


cdef object null_array(Py_ssize_t n, object typ):
    """An all-null column of ``n`` rows over the shared zero buffer (cached: Spark hands
    batches of the same size again and again, and arrays are immutable)."""
    # keyed by identity: hashing a DataType costs microseconds; the entry keeps the type
    # alive, so its id cannot be reused while cached
    key = (n, id(typ))
    hit = _NULL_ARRAYS.get(key)
    if hit is not None and hit[0] is typ:
        return hit[1]
    if len(_NULL_ARRAYS) > 512:
        _NULL_ARRAYS.clear()
    arr = _null_array(n, typ)
    _NULL_ARRAYS[key] = (typ, arr)
    return arr


def nulls(Py_ssize_t n, typ):
    """``pa.nulls(n, typ)`` over the shared zero buffer: pa.nulls allocates and zeroes
    fresh memory on every call, and its page faults cost more than building the array."""
    return null_array(n, typ)


cdef object _null_array(Py_ssize_t n, object typ):
    cdef Py_ssize_t bitmap = (n + 7) >> 3
    if pa.types.is_boolean(typ):
        return pa.Array.from_buffers(typ, n, [_zeros(bitmap), _zeros(bitmap)], null_count=n)
    if pa.types.is_list(typ):
        child = pa.array([], typ.value_type)
        return pa.Array.from_buffers(typ, n, [_zeros(bitmap), _zeros(4 * (n + 1))], null_count=n,
                                     children=[child])
    if pa.types.is_string(typ) or pa.types.is_binary(typ):
        return pa.Array.from_buffers(typ, n, [_zeros(bitmap), _zeros(4 * (n + 1)), _zeros(0)], null_count=n)
    if pa.types.is_struct(typ) or pa.types.is_null(typ):
        return pa.nulls(n, typ)     # (calling null_array here recursed without end)
    return pa.Array.from_buffers(typ, n, [_zeros(bitmap), _zeros(n * typ.bit_width // 8)], null_count=n)


cdef object _hand_off(void* p, Py_ssize_t size):
    """Wrap a ``memory`` block as a pyarrow Buffer that frees it when the last user goes."""
    cdef _Owned owner = _Owned.__new__(_Owned)
    owner.p = p
    return pa.foreign_buffer(<uintptr_t>p, size, base=owner)


cdef object hand_off(void* p, Py_ssize_t size):
    """A ``memory`` block (grown with ``pool_realloc``) as a pyarrow Buffer that frees it."""
    return _hand_off(p, size)


cdef object pool_buffer(Py_ssize_t size, bint zeroed, uint8_t** out):
    """A writable pyarrow Buffer of ``size`` bytes from ``memory`` (``*out``: its address;
    write before sharing it). For outputs of other modules (gathers, converters): pyarrow's
    own pool hands back fresh pages, and their first-touch faults cost more than the work."""
    cdef void* p = pool_calloc(size + 1) if zeroed else pool_malloc(size + 1)
    if p == NULL:
        raise MemoryError()
    out[0] = <uint8_t*>p
    return _hand_off(p, size)


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
        return null_array(n, typ)
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
        return null_array(n, typ)
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
        return null_array(n, typ)
    while c.filled < n:
        c.filled += 1
        c.offs[c.filled] = <int32_t>ne
    elem_type = typ.value_type
    kinds = pa.Array.from_buffers(
        pa.string(), ne,
        [None, _offsets_arange(ne),
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


# ---- append-order builders (see builders.pxd) --------------------------------------------

cdef int offsets_init(Mem* offs) except -1:
    """An empty offsets buffer: the leading 0."""
    offs.p = NULL
    offs.len = offs.cap = 0
    return mem_put_i32(offs, 0)


cdef void gvar_free(GrowVar* s) noexcept:
    pool_free(s.offs.p)
    pool_free(s.data.p)
    pool_free(s.valid.b.p)
    s.offs.p = s.data.p = s.valid.b.p = NULL


cdef void gfixed_free(GrowFixed* c) noexcept:
    pool_free(c.vals.p)
    pool_free(c.valid.b.p)
    c.vals.p = c.valid.b.p = NULL


cdef void glist_free(GrowList* c) noexcept:
    pool_free(c.offs.p)
    pool_free(c.valid.b.p)
    c.offs.p = c.valid.b.p = NULL


cdef object mem_buffer(Mem* b):
    """Move ``b`` into a pyarrow Buffer of its length (``b`` is left empty)."""
    cdef void* p = b.p
    cdef Py_ssize_t n = b.len
    if p == NULL:
        return pa.py_buffer(b"")
    b.p = NULL
    b.len = b.cap = 0
    return _hand_off(p, n)


cdef object gvar_finish(GrowVar* s, Py_ssize_t n, object typ):
    """The ``n`` rows of ``s`` as an array of ``typ`` (string or binary); ``s`` is left empty."""
    return pa.Array.from_buffers(typ, n, [mem_buffer(&s.valid.b), mem_buffer(&s.offs), mem_buffer(&s.data)])


cdef object gfixed_finish(GrowFixed* c, Py_ssize_t n, object typ):
    """The ``n`` rows of ``c`` as an array of the fixed-width ``typ``; ``c`` is left empty."""
    return pa.Array.from_buffers(typ, n, [mem_buffer(&c.valid.b), mem_buffer(&c.vals)])


cdef object glist_finish(GrowList* c, Py_ssize_t n, object typ, object child):
    """The ``n`` rows of ``c`` over ``child`` as an array of the list type ``typ``; ``c`` is
    left empty."""
    return pa.Array.from_buffers(typ, n, [mem_buffer(&c.valid.b), mem_buffer(&c.offs)], children=[child])
