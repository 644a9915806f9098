# cython: language_level=3
"""Arrow column builders over plain C memory.

The batch decoders write values straight into buffers from ``_memory`` laid out as Arrow
expects (validity bitmaps, offsets, data); ``_builders.pyx`` hands the memory to
pyarrow without copying (``pa.foreign_buffer`` with an owner that frees it). Row
counts are known up front (one output row per input row), so fixed-width columns
never grow; variable-width data grows by doubling.

Null slots of fixed-width columns are left unwritten: Arrow leaves their content
undefined, and not touching them is what keeps columns a row does not use free.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from pgoutput_codec._memory cimport pool_realloc


cdef struct Mem:
    uint8_t* p
    Py_ssize_t len
    Py_ssize_t cap


cdef inline int mem_grow(Mem* b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap = b.cap * 2
    cdef uint8_t* p
    if cap < b.len + extra:
        cap = b.len + extra
    if cap < 256:
        cap = 256
    p = <uint8_t*>pool_realloc(b.p, cap)
    if p == NULL:
        return -1
    b.p = p
    b.cap = cap
    return 0


cdef inline int mem_reserve(Mem* b, Py_ssize_t extra) noexcept nogil:
    if b.len + extra <= b.cap:
        return 0
    return mem_grow(b, extra)


cdef inline void bit_set(uint8_t* bits, Py_ssize_t i) noexcept nogil:
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))


# A fixed-width column of ``n`` rows (1, 4 or 8 bytes; bool columns use BoolCol).
cdef struct FixedCol:
    uint8_t* data
    uint8_t* valid
    Py_ssize_t nvalid
    int width


cdef inline void fixed_u8(FixedCol* c, Py_ssize_t row, uint8_t v) noexcept nogil:
    c.data[row] = v
    bit_set(c.valid, row)
    c.nvalid += 1


cdef inline void fixed_u32(FixedCol* c, Py_ssize_t row, uint32_t v) noexcept nogil:
    (<uint32_t*>c.data)[row] = v
    bit_set(c.valid, row)
    c.nvalid += 1


cdef inline void fixed_u64(FixedCol* c, Py_ssize_t row, uint64_t v) noexcept nogil:
    (<uint64_t*>c.data)[row] = v
    bit_set(c.valid, row)
    c.nvalid += 1


# PostgreSQL's epoch (2000-01-01) in Unix microseconds; added modulo 2^64 so every
# wire value maps to a distinct Arrow timestamp and back.
cdef enum:
    PG_EPOCH_UNIX_US = 946684800000000


cdef inline void fixed_ts(FixedCol* c, Py_ssize_t row, int64_t pg_us) noexcept nogil:
    (<uint64_t*>c.data)[row] = <uint64_t>pg_us + <uint64_t>PG_EPOCH_UNIX_US
    bit_set(c.valid, row)
    c.nvalid += 1


# Arrow booleans are bit-packed: data and validity are both bitmaps.
cdef inline void fixed_bool(FixedCol* c, Py_ssize_t row, bint v) noexcept nogil:
    if v:
        bit_set(c.data, row)
    bit_set(c.valid, row)
    c.nvalid += 1


# A string/binary column of ``n`` rows; offsets of rows skipped (null) are filled lazily.
cdef struct VarCol:
    int32_t* offs
    Mem data
    uint8_t* valid
    Py_ssize_t filled     # offs[0..filled] are written
    Py_ssize_t nvalid


cdef inline void var_fill(VarCol* c, Py_ssize_t upto) noexcept nogil:
    cdef int32_t end = <int32_t>c.data.len
    while c.filled < upto:
        c.filled += 1
        c.offs[c.filled] = end


cdef inline int var_append(VarCol* c, Py_ssize_t row, const uint8_t* src, Py_ssize_t n) noexcept nogil:
    if mem_reserve(&c.data, n) < 0:
        return -1
    var_fill(c, row)
    memcpy(c.data.p + c.data.len, src, n)
    c.data.len += n
    c.filled = row + 1
    c.offs[row + 1] = <int32_t>c.data.len
    bit_set(c.valid, row)
    c.nvalid += 1
    return 0


cdef inline int var_append_byte(VarCol* c, Py_ssize_t row, uint8_t b) noexcept nogil:
    """One-character strings (message type, kinds): no memcpy call."""
    if mem_reserve(&c.data, 1) < 0:
        return -1
    var_fill(c, row)
    c.data.p[c.data.len] = b
    c.data.len += 1
    c.filled = row + 1
    c.offs[row + 1] = <int32_t>c.data.len
    bit_set(c.valid, row)
    c.nvalid += 1
    return 0


# list<struct<kind: string, data: binary>> — the TupleData columns.
cdef struct TupleListCol:
    int32_t* offs         # list offsets, n + 1, lazily filled
    uint8_t* valid        # list validity, n bits
    Py_ssize_t filled
    Py_ssize_t nvalid
    Mem kinds             # one byte per element
    Mem voffs             # int32 per element (+1 leading 0) for the data child
    Mem vdata
    Mem vvalid            # data child validity, one bit per element
    Py_ssize_t nelem
    Py_ssize_t nvvalid


# list<primitive> / list<struct> columns filled rarely (Relation columns, Truncate ids)
# are built in Python from per-row objects: they are control messages, not the hot path.


cdef int fixed_init(FixedCol* c, Py_ssize_t n, int width) except -1
cdef void fixed_free(FixedCol* c) noexcept
cdef object fixed_finish(FixedCol* c, Py_ssize_t n, object typ)
cdef int var_init(VarCol* c, Py_ssize_t n, Py_ssize_t reserve) except -1
cdef void var_free(VarCol* c) noexcept
cdef object var_finish(VarCol* c, Py_ssize_t n, object typ)
cdef int tl_init(TupleListCol* c, Py_ssize_t n) except -1
cdef int tl_grow_valid(TupleListCol* c, Py_ssize_t nbytes) noexcept nogil
cdef void tl_free(TupleListCol* c) noexcept
cdef object tl_finish(TupleListCol* c, Py_ssize_t n, object typ)
cdef object null_array(Py_ssize_t n, object typ)
cdef object zero_buffer(Py_ssize_t size)
cdef object pool_buffer(Py_ssize_t size, bint zeroed, uint8_t** out)
cdef bint is_arange_offsets(object buf)
cdef object hand_off(void* p, Py_ssize_t size)
