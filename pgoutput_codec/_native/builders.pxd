# cython: language_level=3
"""Arrow column builders over plain C memory.

The batch decoders write values straight into buffers from ``memory`` laid out as Arrow
expects (validity bitmaps, offsets, data); ``builders.pyx`` hands the memory to
pyarrow without copying (``pa.foreign_buffer`` with an owner that frees it). The
pgoutput batch knows its row count up front (one output row per input row), so its
fixed-width columns never grow; variable-width data grows by doubling. The append-order
builders at the end (``GrowVar``, ``GrowFixed``, ``GrowList``, ``Bitmap``) grow every
buffer, for decoders that learn the row count as they go.

Null slots of fixed-width columns are left unwritten: Arrow leaves their content
undefined, and not touching them is what keeps columns a row does not use free.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from pgoutput_codec._native.memory cimport pool_realloc


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
    if n:   # an empty value may come with no buffer at all: memcpy from NULL is undefined
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


# ---- append-order builders ---------------------------------------------------------------
# For decoders that learn their row count only as they go (an openGauss frame holds any
# number of records): every buffer grows, rows are appended in order, and rows appended
# for a record that then fails are taken back (``bitmap_truncate``, ``Mem.len``). Writers
# named ``*_nc`` check no capacity: the caller reserved the room (``mem_need``,
# ``bitmap_need``) for a row or a whole frame at a time.

cdef inline int mem_need(Mem* b, Py_ssize_t extra) except -1 nogil:
    """Room for ``extra`` more bytes, or MemoryError."""
    if extra > b.cap - b.len and mem_grow(b, extra) < 0:
        raise MemoryError()
    return 0


cdef inline int mem_put(Mem* b, const void* src, Py_ssize_t n) except -1 nogil:
    if n > b.cap - b.len:
        mem_need(b, n)
    if n:
        memcpy(b.p + b.len, src, <size_t>n)
    b.len += n
    return 0


cdef inline int mem_put_i32(Mem* b, int32_t v) except -1 nogil:
    return mem_put(b, &v, 4)


cdef inline int mem_put_u32(Mem* b, uint32_t v) except -1 nogil:
    return mem_put(b, &v, 4)


cdef inline void mem_i32_nc(Mem* b, int32_t v) noexcept nogil:
    memcpy(b.p + b.len, &v, 4)
    b.len += 4


cdef inline void mem_u32_nc(Mem* b, uint32_t v) noexcept nogil:
    memcpy(b.p + b.len, &v, 4)
    b.len += 4


cdef inline void mem_u64_nc(Mem* b, uint64_t v) noexcept nogil:
    memcpy(b.p + b.len, &v, 8)
    b.len += 8


cdef inline void mem_repeat_i32_nc(Mem* b, Py_ssize_t k) noexcept nogil:
    """``k`` empty entries of an offsets buffer: its last offset repeated."""
    cdef int32_t* p = <int32_t*>(b.p + b.len)
    cdef int32_t v = (<int32_t*>(b.p + b.len - 4))[0]
    cdef Py_ssize_t i
    for i in range(k):
        p[i] = v
    b.len += 4 * k


cdef inline int32_t mem_off32(Mem* data) except? -1 nogil:
    """The length of ``data`` as the next int32 offset into it; OverflowError past 2 GiB."""
    if data.len > 0x7FFFFFFF:
        raise OverflowError("decoded strings of one chunk exceed 2 GiB; split the input")
    return <int32_t>data.len


# A validity bitmap of ``n`` bits appended in order; bits past ``n`` in its last byte are
# zero (``bitmap_zeros_nc`` relies on it).
cdef struct Bitmap:
    Mem b
    Py_ssize_t n


cdef inline int bitmap_need(Bitmap* t, Py_ssize_t nbits) except -1 nogil:
    """Room for ``nbits`` more bits, and a byte of slack."""
    return mem_need(&t.b, (nbits >> 3) + 2)


cdef inline int bitmap_put(Bitmap* t, bint v) except -1 nogil:
    cdef uint8_t zero = 0
    if (t.n & 7) == 0:
        mem_put(&t.b, &zero, 1)
    if v:
        t.b.p[t.n >> 3] |= <uint8_t>(1 << (t.n & 7))
    t.n += 1
    return 0


cdef inline void bitmap_put_nc(Bitmap* t, bint v) noexcept nogil:
    # the first bit of a byte writes the whole byte: one store, no read-modify-write
    if (t.n & 7) == 0:
        t.b.p[t.n >> 3] = 1 if v else 0
        t.b.len += 1
    elif v:
        t.b.p[t.n >> 3] |= <uint8_t>(1 << (t.n & 7))
    t.n += 1


cdef inline void bitmap_zeros_nc(Bitmap* t, Py_ssize_t k) noexcept nogil:
    """``k`` null bits."""
    cdef Py_ssize_t nb = (t.n + k + 7) >> 3
    if nb > t.b.len:
        memset(t.b.p + t.b.len, 0, <size_t>(nb - t.b.len))
        t.b.len = nb
    t.n += k


cdef inline void bitmap_truncate(Bitmap* t, Py_ssize_t n) noexcept nogil:
    """Back to the first ``n`` bits (``n`` at most ``t.n``)."""
    t.n = n
    t.b.len = (n + 7) >> 3
    if n & 7:
        t.b.p[n >> 3] &= <uint8_t>((1 << (n & 7)) - 1)


# A string/binary column: int32 offsets (one more than rows, the first 0), data, validity.
cdef struct GrowVar:
    Mem offs
    Mem data
    Bitmap valid


# A fixed-width column (the width is the caller's: values are appended by ``mem_*_nc``).
cdef struct GrowFixed:
    Mem vals
    Bitmap valid


# A list column: int32 offsets into its child (one more than rows, the first 0), validity.
cdef struct GrowList:
    Mem offs
    Bitmap valid


cdef inline int gvar_put_nc(GrowVar* s, const void* p, Py_ssize_t n, bint valid) except -1 nogil:
    """One row; the data grows as needed, offsets and validity have room."""
    if valid:
        mem_put(&s.data, p, n)
    mem_i32_nc(&s.offs, mem_off32(&s.data))
    bitmap_put_nc(&s.valid, valid)
    return 0


cdef inline int pad_nulls_offsets(Mem* offs, Bitmap* valid, Py_ssize_t k) except -1 nogil:
    """``k`` null rows of an offsets column (string, binary, list), with room for one
    more row after them."""
    bitmap_need(valid, k + 1)
    bitmap_zeros_nc(valid, k)
    mem_need(offs, 4 * (k + 1))
    mem_repeat_i32_nc(offs, k)
    return 0


cdef inline int pad_nulls_fixed(Mem* vals, Bitmap* valid, Py_ssize_t k, int width) except -1 nogil:
    """``k`` null rows of a fixed-width column, with room for one more row after them.
    Null slots are skipped, not written: Arrow leaves their content undefined."""
    bitmap_need(valid, k + 1)
    bitmap_zeros_nc(valid, k)
    mem_need(vals, width * (k + 1))
    vals.len += width * k
    return 0


cdef int offsets_init(Mem* offs) except -1
cdef void gvar_free(GrowVar* s) noexcept
cdef void gfixed_free(GrowFixed* c) noexcept
cdef void glist_free(GrowList* c) noexcept
cdef object mem_buffer(Mem* b)
cdef object gvar_finish(GrowVar* s, Py_ssize_t n, object typ)
cdef object gfixed_finish(GrowFixed* c, Py_ssize_t n, object typ)
cdef object glist_finish(GrowList* c, Py_ssize_t n, object typ, object child)
