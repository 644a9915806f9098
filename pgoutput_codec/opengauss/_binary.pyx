# cython: language_level=3
"""Compiled 'b' (binary) style batch decoder: Arrow buffers in, Arrow buffers out.

The same record layout and error policy as the Python twin ``_binary_py.py`` (read it
first: it is the reference). Every read goes through ``pgoutput_codec._reader``; the
record body is read with the reader narrowed to the record's own length, so a body can
never read into the next record. Output columns are appended to growable C buffers and
handed to Arrow with ``Array.from_buffers``: no Python object per record or value.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy, memset

from pgoutput_codec._reader cimport (
    E_BAD_VALUE, E_EMPTY, E_NEGATIVE, E_NOT_ENVELOPE, E_NULL_ROW, E_OK, E_SHORT, E_TRAILING,
    E_UNKNOWN_TAG, E_UTF8, Reader, _need, read_bytes, read_u8, read_u16, read_u32, read_u64,
    pgc_be16, pgc_be32, pgc_be64, reader_fail, reader_init, utf8_valid,
)
from pgoutput_codec._builders cimport null_array, zero_buffer
from pgoutput_codec._memory cimport pool_free, pool_realloc

import pyarrow as pa

from pgoutput_codec.opengauss._errors import format_error
from pgoutput_codec.opengauss.schema import RECORD_SCHEMA, TUPLE_COLUMN

cdef uint32_t NULL_LEN = 0xFFFFFFFF


# ---- growable buffers ------------------------------------------------------------------

cdef struct Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int buf_grow(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap = b.cap * 2 if b.cap else 1024
    cdef void* p
    if cap < b.len + extra:
        cap = b.len + extra    # a reserve for the whole input: exact, pool blocks are large
    p = pool_realloc(b.data, <size_t>cap)
    if p == NULL:
        raise MemoryError()
    b.data = <char*>p
    b.cap = cap
    return 0


cdef inline int buf_put(Buf* b, const void* src, Py_ssize_t n) except -1:
    if n > b.cap - b.len:
        buf_grow(b, n)
    memcpy(b.data + b.len, src, <size_t>n)
    b.len += n
    return 0


cdef inline int put_i32(Buf* b, int32_t v) except -1:
    return buf_put(b, &v, 4)


cdef inline int put_u32(Buf* b, uint32_t v) except -1:
    return buf_put(b, &v, 4)


cdef struct Bits:
    Buf b
    Py_ssize_t n


cdef inline int bits_put(Bits* t, bint v) except -1:
    cdef uint8_t zero = 0
    if (t.n & 7) == 0:
        buf_put(&t.b, &zero, 1)
    if v:
        t.b.data[t.n >> 3] |= <char>(1 << (t.n & 7))
    t.n += 1
    return 0


cdef inline void bits_truncate(Bits* t, Py_ssize_t n) noexcept:
    t.n = n
    t.b.len = (n + 7) >> 3
    if n & 7:
        t.b.data[n >> 3] &= <char>((1 << (n & 7)) - 1)


cdef inline int32_t off32(Buf* data) except? -1:
    if data.len > 0x7FFFFFFF:
        raise OverflowError("decoded strings of one chunk exceed 2 GiB; split the input")
    return <int32_t>data.len


cdef class _Owned:
    """Hands a builder's malloc'd buffer to Arrow without a copy (freed with the array)."""
    cdef char* data
    cdef Py_ssize_t len
    cdef Py_ssize_t shape[1]

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = self.len
        view.buf = self.data
        view.len = self.len
        view.obj = self
        view.readonly = 1
        view.itemsize = 1
        view.format = NULL
        view.ndim = 1
        view.shape = self.shape
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass

    def __dealloc__(self):
        pool_free(self.data)


cdef object as_buffer(Buf* b):
    """Move ``b`` into an Arrow buffer (``b`` is left empty)."""
    cdef _Owned o = _Owned.__new__(_Owned)
    if b.data == NULL:
        return pa.py_buffer(b"")
    o.data = b.data
    o.len = b.len
    b.data = NULL
    b.len = b.cap = 0
    return pa.py_buffer(o)


cdef inline int buf_reserve(Buf* b, Py_ssize_t n) except -1:
    if n > b.cap - b.len:
        buf_grow(b, n)
    return 0


# Unchecked writers: the caller reserved the room (per row in _Builder._grow, per record
# in fast_insert).
cdef inline void nc_i32(Buf* b, int32_t v) noexcept:
    memcpy(b.data + b.len, &v, 4)
    b.len += 4


cdef inline void nc_u32(Buf* b, uint32_t v) noexcept:
    memcpy(b.data + b.len, &v, 4)
    b.len += 4


cdef inline void nc_u64(Buf* b, uint64_t v) noexcept:
    memcpy(b.data + b.len, &v, 8)
    b.len += 8


cdef inline void nc_bit(Bits* t, bint v) noexcept:
    # the first bit of a byte writes the whole byte: one store, no read-modify-write
    if (t.n & 7) == 0:
        t.b.data[t.n >> 3] = 1 if v else 0
        t.b.len += 1
    elif v:
        t.b.data[t.n >> 3] |= <char>(1 << (t.n & 7))
    t.n += 1


cdef inline void nc_zero_bits(Bits* t, Py_ssize_t k) noexcept:
    """``k`` null bits (bits past ``t.n`` in its last byte are already zero)."""
    cdef Py_ssize_t nb = (t.n + k + 7) >> 3
    if nb > t.b.len:
        memset(t.b.data + t.b.len, 0, <size_t>(nb - t.b.len))
        t.b.len = nb
    t.n += k


cdef inline void nc_repeat_offset(Buf* b, Py_ssize_t k) noexcept:
    """``k`` empty entries of an offsets buffer: its last offset repeated (the tuple
    children may have grown since, for the record being decoded)."""
    cdef int32_t* p = <int32_t*>(b.data + b.len)
    cdef int32_t v = (<int32_t*>(b.data + b.len - 4))[0]
    cdef Py_ssize_t i
    for i in range(k):
        p[i] = v
    b.len += 4 * k


cdef inline void nc_zeros(Buf* b, Py_ssize_t n) noexcept:
    memset(b.data + b.len, 0, <size_t>n)
    b.len += n


cdef inline int bits_reserve(Bits* t, Py_ssize_t nbits) except -1:
    return buf_reserve(&t.b, (nbits >> 3) + 2)


cdef inline void copy_small(char* dst, const uint8_t* src, Py_ssize_t n, const uint8_t* src_end) noexcept:
    """memcpy with fixed sizes for short strings (inlined, no libc call): reads up to 32
    bytes from ``src`` (never past ``src_end``) and writes up to 32 bytes to ``dst`` (the
    caller reserved 32 bytes of slack)."""
    if n <= 16 and src_end - src >= 16:
        memcpy(dst, src, 16)
    elif n <= 32 and src_end - src >= 32:
        memcpy(dst, src, 16)
        memcpy(dst + 16, src + 16, 16)
    else:
        memcpy(dst, src, <size_t>n)


cdef inline bint text_ok(const uint8_t* s, Py_ssize_t n, const uint8_t* src_end) noexcept:
    """Strict UTF-8; ASCII (every identifier in practice) is checked a word at a time,
    the last partial word with one load (reading no further than ``src_end``)."""
    cdef uint64_t w, acc = 0
    cdef Py_ssize_t i = 0
    cdef uint8_t tail = 0
    while n - i >= 8:
        memcpy(&w, s + i, 8)
        acc |= w
        i += 8
    if i < n:
        if src_end - (s + i) >= 8:
            memcpy(&w, s + i, 8)
            # big-endian value: the n - i bytes wanted are the high ones on every host
            acc |= pgc_be64(w) >> (64 - 8 * (n - i))
        else:
            while i < n:
                tail |= s[i]
                i += 1
    if (acc & <uint64_t>0x8080808080808080) == 0 and tail < 0x80:
        return True
    return utf8_valid(s, n)


# ---- column builders -------------------------------------------------------------------

cdef struct TupleB:
    Buf offs          # list offsets (int32)
    Bits valid        # list validity
    Buf name_offs
    Buf name_data
    Buf oid
    Buf val_offs
    Buf val_data
    Bits val_valid
    Py_ssize_t ncols


cdef struct Saved:
    Py_ssize_t name_offs, name_data, oid, val_offs, val_data, val_valid, ncols


cdef inline void tuple_save(TupleB* t, Saved* s) noexcept:
    s.name_offs = t.name_offs.len
    s.name_data = t.name_data.len
    s.oid = t.oid.len
    s.val_offs = t.val_offs.len
    s.val_data = t.val_data.len
    s.val_valid = t.val_valid.n
    s.ncols = t.ncols


cdef inline void tuple_restore(TupleB* t, Saved* s) noexcept:
    t.name_offs.len = s.name_offs
    t.name_data.len = s.name_data
    t.oid.len = s.oid
    t.val_offs.len = s.val_offs
    t.val_data.len = s.val_data
    bits_truncate(&t.val_valid, s.val_valid)
    t.ncols = s.ncols


cdef void tuple_free(TupleB* t) noexcept:
    pool_free(t.offs.data)
    pool_free(t.valid.b.data)
    pool_free(t.name_offs.data)
    pool_free(t.name_data.data)
    pool_free(t.oid.data)
    pool_free(t.val_offs.data)
    pool_free(t.val_data.data)
    pool_free(t.val_valid.b.data)


cdef int tuple_init(TupleB* t) except -1:
    memset(t, 0, sizeof(TupleB))
    put_i32(&t.offs, 0)
    put_i32(&t.name_offs, 0)
    put_i32(&t.val_offs, 0)
    return 0


cdef int read_tuple(Reader* r, TupleB* t) except -2:
    """Append one tuple's columns to the child buffers; -1 (reader error) on bad input."""
    cdef uint16_t natts, nlen
    cdef uint32_t oid, vlen
    cdef Py_ssize_t off, i
    if read_u16(r, &natts, b"attrnum") < 0:
        return -1
    for i in range(natts):
        r.err_col = <int>i
        if read_u16(r, &nlen, b"column name length") < 0:
            return -1
        if read_bytes(r, nlen, &off, b"column name") < 0:
            return -1
        if not utf8_valid(r.buf + off, nlen):
            return reader_fail(r, E_UTF8, off, b"column name", 0, 0)
        if read_u32(r, &oid, b"type_oid") < 0 or read_u32(r, &vlen, b"value length") < 0:
            return -1
        buf_put(&t.name_data, r.buf + off, nlen)
        put_i32(&t.name_offs, off32(&t.name_data))
        put_u32(&t.oid, oid)
        if vlen == NULL_LEN:
            bits_put(&t.val_valid, 0)
        else:
            if read_bytes(r, vlen, &off, b"value") < 0:
                return -1
            buf_put(&t.val_data, r.buf + off, vlen)
            bits_put(&t.val_valid, 1)
        put_i32(&t.val_offs, off32(&t.val_data))
        t.ncols += 1
    r.err_col = -1
    return 0


cdef object finish_tuple(TupleB* t, Py_ssize_t nrows):
    cdef Py_ssize_t n = t.ncols
    name = pa.Array.from_buffers(pa.string(), n, [None, as_buffer(&t.name_offs), as_buffer(&t.name_data)])
    oid = pa.Array.from_buffers(pa.uint32(), n, [None, as_buffer(&t.oid)])
    value = pa.Array.from_buffers(pa.binary(), n, [as_buffer(&t.val_valid.b), as_buffer(&t.val_offs),
                                                   as_buffer(&t.val_data)])
    # 'b' records carry no type names and no unchanged-TOAST marker: both children are
    # constant, so they point at the shared zero buffer instead of writing n values each
    type_name = null_array(n, pa.string())
    toast = pa.Array.from_buffers(pa.bool_(), n, [None, zero_buffer((n + 7) >> 3)])
    struct = pa.StructArray.from_arrays([name, oid, type_name, value, toast], fields=list(TUPLE_COLUMN))
    ltype = RECORD_SCHEMA.field("new_tuple").type
    return pa.Array.from_buffers(ltype, nrows, [as_buffer(&t.valid.b), as_buffer(&t.offs)], children=[struct])


cdef struct StrB:
    Buf offs
    Buf data
    Bits valid


cdef struct U64B:
    Buf vals
    Bits valid


cdef struct Rec:
    uint64_t lsn, csn, first_lsn, xid
    uint32_t origin_id
    uint8_t tag
    int has            # bit set of H_* below
    Py_ssize_t ct_off, ct_len, un_off, un_len, sc_off, sc_len, tb_off, tb_len


cdef enum:
    H_LSN = 1
    H_TAG = 2
    H_CSN = 4
    H_FIRST = 8
    H_XID = 16
    H_CT = 32
    H_ORIGIN = 64
    H_USER = 128
    H_SCHEMA = 256
    H_NEW = 512
    H_OLD = 1024


# the columns an Insert row leaves null (see _Builder.done), in RECORD_SCHEMA's order
cdef enum:
    R_CSN = 0
    R_FIRST = 1
    R_XID = 2
    R_CT = 3
    R_ORIGIN = 4
    R_USER = 5
    R_OLD = 6
    R_ERR = 7
    R_COUNT = 8


# their types, each one object: null_array caches by the type's identity
cdef tuple R_NAMES = ("csn", "first_lsn", "xid", "commit_time", "origin_id", "user_name", "old_tuple",
                      "error")
cdef list R_TYPES = [RECORD_SCHEMA.field(f).type for f in R_NAMES]


cdef inline int str_put(StrB* s, const char* p, Py_ssize_t n, bint valid) except -1:
    """One row of a string column whose offsets and validity have room (``_grow``)."""
    if valid:
        buf_put(&s.data, p, n)
    nc_i32(&s.offs, off32(&s.data))
    nc_bit(&s.valid, valid)
    return 0


cdef class _Builder:
    cdef Buf row
    cdef U64B lsn, csn, first_lsn, xid
    cdef Buf origin
    cdef Bits origin_valid
    cdef StrB type_, commit_time, user_name, schema, table, error
    cdef TupleB newt, oldt
    cdef Py_ssize_t nrows, rowcap
    # Rows written so far in each column an Insert row leaves null (R_* below): those
    # columns are written only when a row sets them (catching up the nulls before it
    # then, ``_rare``), so Inserts never touch them, null slots of the fixed-width ones
    # are never written, and a column no row of the chunk sets costs nothing at all
    # (``finish`` hands out the shared all-null array).
    cdef Py_ssize_t done[R_COUNT]

    def __cinit__(self):
        memset(&self.row, 0, sizeof(Buf))
        memset(&self.lsn, 0, sizeof(U64B))
        memset(&self.csn, 0, sizeof(U64B))
        memset(&self.first_lsn, 0, sizeof(U64B))
        memset(&self.xid, 0, sizeof(U64B))
        memset(&self.origin, 0, sizeof(Buf))
        memset(&self.origin_valid, 0, sizeof(Bits))
        self._init_str(&self.type_)
        self._init_str(&self.commit_time)
        self._init_str(&self.user_name)
        self._init_str(&self.schema)
        self._init_str(&self.table)
        self._init_str(&self.error)
        tuple_init(&self.newt)
        tuple_init(&self.oldt)
        self.nrows = 0
        self.rowcap = 0
        memset(self.done, 0, sizeof(self.done))

    cdef int _init_str(self, StrB* s) except -1:
        memset(s, 0, sizeof(StrB))
        put_i32(&s.offs, 0)
        return 0

    def __dealloc__(self):
        pool_free(self.row.data)
        pool_free(self.lsn.vals.data)
        pool_free(self.lsn.valid.b.data)
        pool_free(self.csn.vals.data)
        pool_free(self.csn.valid.b.data)
        pool_free(self.first_lsn.vals.data)
        pool_free(self.first_lsn.valid.b.data)
        pool_free(self.xid.vals.data)
        pool_free(self.xid.valid.b.data)
        pool_free(self.origin.data)
        pool_free(self.origin_valid.b.data)
        self._free_str(&self.type_)
        self._free_str(&self.commit_time)
        self._free_str(&self.user_name)
        self._free_str(&self.schema)
        self._free_str(&self.table)
        self._free_str(&self.error)
        tuple_free(&self.newt)
        tuple_free(&self.oldt)

    cdef void _free_str(self, StrB* s) noexcept:
        pool_free(s.offs.data)
        pool_free(s.data.data)
        pool_free(s.valid.b.data)

    cdef int _grow(self, Py_ssize_t k) except -1:
        """Room for the fixed-width parts of ``k`` more rows than written (``k`` at least
        ``rowcap - nrows``) in every column written for every row, so that writing one
        row checks capacity once (the R_* columns reserve in ``_rare``)."""
        cdef Buf* b8[2]
        cdef Buf* b4[4]
        cdef Bits* bits[5]
        cdef int i
        b8[:] = [&self.row, &self.lsn.vals]
        b4[:] = [&self.type_.offs, &self.schema.offs, &self.table.offs, &self.newt.offs]
        bits[:] = [&self.lsn.valid, &self.type_.valid, &self.schema.valid, &self.table.valid,
                   &self.newt.valid]
        self.rowcap = self.nrows + k
        for i in range(2):
            buf_reserve(b8[i], 8 * k)
        for i in range(4):
            buf_reserve(b4[i], 4 * k)
        for i in range(5):
            bits_reserve(bits[i], k)
        buf_reserve(&self.type_.data, k)
        return 0

    cdef int reserve_scaled(self, double f) except -1:
        """Reserve for ``f`` times what is written so far (the input left after the first
        frame, in proportion): no doubling copies, and the reserve comes from the pool."""
        cdef Buf* v[16]
        cdef int i
        v[:] = [&self.newt.name_offs, &self.newt.name_data, &self.newt.oid, &self.newt.val_offs,
                &self.newt.val_data, &self.newt.val_valid.b, &self.oldt.name_offs, &self.oldt.name_data,
                &self.oldt.oid, &self.oldt.val_offs, &self.oldt.val_data, &self.oldt.val_valid.b,
                &self.schema.data, &self.table.data, &self.commit_time.data, &self.user_name.data]
        for i in range(16):
            if v[i].len:
                # headroom: the fast path reserves 32 bytes past each record's strings
                buf_reserve(v[i], <Py_ssize_t>(v[i].len * f * 1.05) + 4096)
        if self.nrows * f + 64 > self.rowcap - self.nrows:
            self._grow(<Py_ssize_t>(self.nrows * f) + 64)
        return 0

    cdef int reserve_frame(self, Py_ssize_t n) except -1:
        """Room for every row a frame of ``n`` bytes can give, so that the Insert fast
        path (``fast_insert``, ``add_insert``) writes without checking capacity: a record
        takes 14 bytes at least (length, LSN, tag, separator), a column 10; names, values,
        schema and table are bytes of the frame; the fixed-size moves write up to 32 bytes
        past a string, the validity word 8 bytes past the last bit. The general path
        checks its own capacity, and what it writes stays within the same bounds."""
        cdef TupleB* t = &self.newt
        cdef Py_ssize_t cols = n // 10 + 1, rows = n // 14 + 2
        buf_reserve(&t.name_offs, 4 * cols)
        buf_reserve(&t.oid, 4 * cols)
        buf_reserve(&t.val_offs, 4 * cols)
        bits_reserve(&t.val_valid, cols + 128)
        buf_reserve(&t.name_data, n + 32)
        buf_reserve(&t.val_data, n + 32)
        buf_reserve(&self.schema.data, n + 32)
        buf_reserve(&self.table.data, n + 32)
        if self.rowcap - self.nrows < rows:
            self._grow(rows)
        return 0

    cdef int _rare(self, int c, Py_ssize_t upto) except -1:
        """Null rows in R_* column ``c`` up to row ``upto`` (exclusive), with room for one
        more row after them. Null slots of a fixed-width column are skipped, not written
        (Arrow leaves their content undefined; only the validity bit counts); offsets
        repeat the last one."""
        cdef Py_ssize_t k = upto - self.done[c]
        cdef Buf* vals = NULL
        cdef Buf* offs = NULL
        cdef Bits* valid
        cdef int width = 8
        if c == R_CSN:
            vals, valid = &self.csn.vals, &self.csn.valid
        elif c == R_FIRST:
            vals, valid = &self.first_lsn.vals, &self.first_lsn.valid
        elif c == R_XID:
            vals, valid = &self.xid.vals, &self.xid.valid
        elif c == R_ORIGIN:
            vals, valid, width = &self.origin, &self.origin_valid, 4
        elif c == R_CT:
            offs, valid = &self.commit_time.offs, &self.commit_time.valid
        elif c == R_USER:
            offs, valid = &self.user_name.offs, &self.user_name.valid
        elif c == R_OLD:
            offs, valid = &self.oldt.offs, &self.oldt.valid
        else:
            offs, valid = &self.error.offs, &self.error.valid
        bits_reserve(valid, k + 1)
        nc_zero_bits(valid, k)
        if vals != NULL:
            buf_reserve(vals, width * (k + 1))
            vals.len += width * k
        else:
            buf_reserve(offs, 4 * (k + 1))
            nc_repeat_offset(offs, k)
        self.done[c] = upto
        return 0

    cdef int _rare_u64(self, int c, U64B* col, Py_ssize_t at, uint64_t v) except -1:
        """Row ``at`` of the uint64 column ``c`` (``col``), set (``_rare`` catches up the
        nulls before it)."""
        self._rare(c, at)
        nc_u64(&col.vals, v)
        nc_bit(&col.valid, 1)
        self.done[c] += 1
        return 0

    cdef int _rare_str(self, int c, StrB* col, Py_ssize_t at, const char* p, Py_ssize_t n) except -1:
        """Row ``at`` of the string column ``c`` (``col``), set."""
        self._rare(c, at)
        str_put(col, p, n, 1)
        self.done[c] += 1
        return 0

    cdef int add(self, int64_t row, Rec* rec, const uint8_t* buf, const char* err,
                 Py_ssize_t errlen) except -1:
        """One output row: ``rec`` fields per ``rec.has``; tuples were appended already
        when H_NEW/H_OLD are set."""
        cdef int h = rec.has
        cdef Py_ssize_t at = self.nrows
        if self.nrows == self.rowcap:
            self._grow(self.rowcap if self.rowcap else 1024)
        nc_u64(&self.row, <uint64_t>row)
        nc_u64(&self.lsn.vals, rec.lsn if h & H_LSN else 0)
        nc_bit(&self.lsn.valid, h & H_LSN)
        if h & H_TAG:
            self.type_.data.data[self.type_.data.len] = <char>rec.tag
            self.type_.data.len += 1
        nc_i32(&self.type_.offs, <int32_t>self.type_.data.len)
        nc_bit(&self.type_.valid, h & H_TAG)
        if h & H_CSN:
            self._rare_u64(R_CSN, &self.csn, at, rec.csn)
        if h & H_FIRST:
            self._rare_u64(R_FIRST, &self.first_lsn, at, rec.first_lsn)
        if h & H_XID:
            self._rare_u64(R_XID, &self.xid, at, rec.xid)
        if h & H_CT:
            self._rare_str(R_CT, &self.commit_time, at, <const char*>buf + rec.ct_off, rec.ct_len)
        if h & H_ORIGIN:
            self._rare(R_ORIGIN, at)
            nc_u32(&self.origin, rec.origin_id)
            nc_bit(&self.origin_valid, 1)
            self.done[R_ORIGIN] += 1
        if h & H_USER:
            self._rare_str(R_USER, &self.user_name, at, <const char*>buf + rec.un_off, rec.un_len)
        str_put(&self.schema, <const char*>buf + rec.sc_off, rec.sc_len, h & H_SCHEMA)
        str_put(&self.table, <const char*>buf + rec.tb_off, rec.tb_len, h & H_SCHEMA)
        nc_i32(&self.newt.offs, <int32_t>self.newt.ncols)
        nc_bit(&self.newt.valid, h & H_NEW)
        if h & H_OLD:
            self._rare(R_OLD, at)
            nc_i32(&self.oldt.offs, <int32_t>self.oldt.ncols)
            nc_bit(&self.oldt.valid, 1)
            self.done[R_OLD] += 1
        if err != NULL:
            self._rare_str(R_ERR, &self.error, at, err, errlen)
        self.nrows += 1
        return 0

    cdef object _str(self, StrB* s):
        return pa.Array.from_buffers(pa.string(), self.nrows, [as_buffer(&s.valid.b), as_buffer(&s.offs),
                                                               as_buffer(&s.data)])

    cdef object _u64(self, U64B* c):
        return pa.Array.from_buffers(pa.uint64(), self.nrows, [as_buffer(&c.valid.b), as_buffer(&c.vals)])

    cdef object finish(self):
        cdef Py_ssize_t n = self.nrows
        cdef int c
        rare = []
        for c in range(R_COUNT):
            if self.done[c] == 0:
                # no row set it: nothing was written
                rare.append(null_array(n, R_TYPES[c]))
                continue
            self._rare(c, n)
            if c <= R_XID:
                rare.append(self._u64(&self.csn if c == R_CSN else &self.first_lsn if c == R_FIRST
                                      else &self.xid))
            elif c == R_ORIGIN:
                rare.append(pa.Array.from_buffers(pa.uint32(), n, [as_buffer(&self.origin_valid.b),
                                                                   as_buffer(&self.origin)]))
            elif c == R_OLD:
                rare.append(finish_tuple(&self.oldt, n))
            else:
                rare.append(self._str(&self.commit_time if c == R_CT else &self.user_name if c == R_USER
                                      else &self.error))
        cols = [
            pa.Array.from_buffers(pa.int64(), n, [None, as_buffer(&self.row)]),
            self._u64(&self.lsn),
            self._str(&self.type_),
            rare[R_CSN],
            rare[R_FIRST],
            rare[R_XID],
            rare[R_CT],
            rare[R_ORIGIN],
            rare[R_USER],
            self._str(&self.schema),
            self._str(&self.table),
            finish_tuple(&self.newt, n),
            rare[R_OLD],
            rare[R_ERR],
        ]
        return pa.RecordBatch.from_arrays(cols, schema=RECORD_SCHEMA)


# ---- record and frame parsing ----------------------------------------------------------

cdef int read_text32(Reader* r, Py_ssize_t* off, Py_ssize_t* n, const char* what_len,
                     const char* what) noexcept:
    cdef uint32_t len32
    if read_u32(r, &len32, what_len) < 0:
        return -1
    if read_bytes(r, len32, off, what) < 0:
        return -1
    n[0] = len32
    if not utf8_valid(r.buf + off[0], len32):
        return reader_fail(r, E_UTF8, off[0], what, 0, 0)
    return 0


cdef int read_text16(Reader* r, Py_ssize_t* off, Py_ssize_t* n, const char* what_len,
                     const char* what) noexcept:
    cdef uint16_t len16
    if read_u16(r, &len16, what_len) < 0:
        return -1
    if read_bytes(r, len16, off, what) < 0:
        return -1
    n[0] = len16
    if not utf8_valid(r.buf + off[0], len16):
        return reader_fail(r, E_UTF8, off[0], what, 0, 0)
    return 0


cdef int read_options(Reader* r, Rec* rec, bint begin) noexcept:
    """Tagged optional fields of B (X, T, O, N) / C (X, T), any order, each at most once."""
    cdef uint8_t opt
    cdef Py_ssize_t at
    cdef int bit
    cdef const char* what = b"Begin option" if begin else b"Commit option"
    while r.pos < r.len:
        at = r.pos
        if read_u8(r, &opt, what) < 0:
            return -1
        if opt == 0x58:
            bit = H_XID
        elif opt == 0x54:
            bit = H_CT
        elif opt == 0x4F and begin:
            bit = H_ORIGIN
        elif opt == 0x4E and begin:
            bit = H_USER
        else:
            return reader_fail(r, E_BAD_VALUE, at, what, 0, opt)
        if rec.has & bit:
            return reader_fail(r, E_BAD_VALUE, at, b"repeated option", 0, opt)
        rec.has |= bit
        if bit == H_XID:
            if read_u64(r, &rec.xid, b"xid") < 0:
                return -1
        elif bit == H_CT:
            if read_text32(r, &rec.ct_off, &rec.ct_len, b"commit_time length", b"commit_time") < 0:
                return -1
        elif bit == H_ORIGIN:
            if read_u32(r, &rec.origin_id, b"origin_id") < 0:
                return -1
        else:
            if read_text32(r, &rec.un_off, &rec.un_len, b"user_name length", b"user_name") < 0:
                return -1
    return 0


cdef int read_body(Reader* r, Rec* rec, TupleB* newt, TupleB* oldt) except -2:
    """The body after lsn and tag (r narrowed to the record). 1 for a heartbeat."""
    cdef uint8_t tag = rec.tag, m = 0
    cdef Py_ssize_t at
    cdef int stage = 0     # 0: N or O may follow, 1: only O, 2: nothing
    if tag == 0x42:
        if read_u64(r, &rec.csn, b"csn") < 0 or read_u64(r, &rec.first_lsn, b"first_lsn") < 0:
            return -1
        rec.has |= H_CSN | H_FIRST
        return read_options(r, rec, True)
    if tag == 0x43:
        return read_options(r, rec, False)
    if tag == 0x49 or tag == 0x55 or tag == 0x44:
        if read_text16(r, &rec.sc_off, &rec.sc_len, b"schema length", b"schema") < 0:
            return -1
        if read_text16(r, &rec.tb_off, &rec.tb_len, b"table length", b"table") < 0:
            return -1
        rec.has |= H_SCHEMA
        if tag == 0x49:
            stage = 0
        elif tag == 0x44:
            stage = 1
        while r.pos < r.len:
            at = r.pos
            read_u8(r, &m, b"tuple marker")
            if m == 0x4E and stage == 0 and tag != 0x44:
                if read_tuple(r, newt) < 0:
                    return -1
                rec.has |= H_NEW
                stage = 2 if tag == 0x49 else 1
            elif m == 0x4F and stage <= 1 and tag != 0x49:
                if read_tuple(r, oldt) < 0:
                    return -1
                rec.has |= H_OLD
                stage = 2
            else:
                return reader_fail(r, E_BAD_VALUE, at, b"tuple marker", 0, m)
        return 0
    if tag == 0x48:
        r.pos = r.len
        return 1
    return reader_fail(r, E_UNKNOWN_TAG, r.pos - 1, b"", 0, tag)


cdef inline bint known_tag(uint8_t t) noexcept:
    return t == 0x42 or t == 0x43 or t == 0x49 or t == 0x55 or t == 0x44 or t == 0x48


cdef int add_error(_Builder out, int64_t row, Reader* r, Rec* rec, bint fatal) except -1:
    tag = rec.tag if rec.has & H_TAG else None
    text = format_error(r.err, r.err_pos, tag, (<bytes>r.err_what).decode(), r.err_want,
                        r.len - r.err_pos if r.err == E_SHORT else 0, r.err_value, r.err_col,
                        fatal).encode()
    if not known_tag(rec.tag):
        rec.has &= ~H_TAG
    rec.has &= H_LSN | H_TAG
    out.add(row, rec, NULL, text, len(text))
    return 0


cdef inline uint16_t be16_at(const uint8_t* p) noexcept:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return pgc_be16(v)


cdef inline uint32_t be32_at(const uint8_t* p) noexcept:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return pgc_be32(v)


cdef extern from *:
    """
    /* The column loop of the Insert fast path (docs/protocol.md, 'b' style: UInt16 len + name, UInt32
       type_oid, UInt32 len + value, 0xFFFFFFFF = NULL), in plain C so that every cursor
       stays in a register. "fixed": 32 bytes past the record are readable. *hi gets the
       OR of the record's name bytes: a high bit there means a non-ASCII name, which the
       caller validates as UTF-8. Returns the position after the tuple or -1 on any
       irregularity (the general path then reports it). */
    static inline uint64_t pgc_or_bytes(const uint8_t* s, Py_ssize_t n) {
        uint64_t acc = 0, w;
        Py_ssize_t i = 0;
        for (; n - i >= 8; i += 8) { memcpy(&w, s + i, 8); acc |= w; }
        for (; i < n; i++) acc |= s[i];
        return acc;
    }
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define PGC_LE64(x) pgc_bswap64(x)
    #else
    #define PGC_LE64(x) (x)
    #endif
    /* n bytes, in 16-byte moves (up to 15 more bytes read and written: the fast loop's
       slack). No call in that loop: a call would clobber the caller-saved registers, and
       GCC would then keep the loop's cursors on the stack. */
    static inline void pgc_copy_long(char* d, const uint8_t* s, Py_ssize_t n) {
        Py_ssize_t k;
        for (k = 0; k < n; k += 16) memcpy(d + k, s + k, 16);
    }
    /* The loop of the common case: 32 bytes past the record are readable (names up to
       16 and values up to 32 bytes are copied with fixed-size moves, the name length is
       read before its bound is checked) and at most 56 columns (the validity bits are a
       word: set from the nulls, which are rare, after the loop). Cursors are pointers and
       every length is checked once: few enough live values that all stay in registers. */
    static inline const uint8_t* pgc_og_fast(const uint8_t* p, const uint8_t* pend, Py_ssize_t natts,
            char* nd, Py_ssize_t* nl_io, int32_t* no, uint32_t* oo, char* vd, Py_ssize_t* vl_io,
            int32_t* vo, uint64_t* bits_io) {
        Py_ssize_t nl = *nl_io, vl = *vl_io, i;
        uint64_t nulls = 0;
        for (i = 0; i < natts; i++) {
            uint16_t r16;
            uint32_t r32, vlen;
            Py_ssize_t nlen;
            memcpy(&r16, p, 2);
            nlen = pgc_be16(r16);
            /* name length, name, type_oid and value length inside the record */
            if (nlen + 10 > pend - p) return NULL;
            if (nlen <= 16) memcpy(nd + nl, p + 2, 16);
            else pgc_copy_long(nd + nl, p + 2, nlen);
            nl += nlen;
            no[i] = (int32_t)nl;
            p += nlen + 2;
            memcpy(&r32, p, 4);
            oo[i] = pgc_be32(r32);
            memcpy(&r32, p + 4, 4);
            vlen = pgc_be32(r32);
            p += 8;
            if (vlen != 0xFFFFFFFFu) {
                if ((uint64_t)vlen > (uint64_t)(pend - p)) return NULL;
                if (vlen <= 32) memcpy(vd + vl, p, 32);
                else pgc_copy_long(vd + vl, p, vlen);
                vl += vlen;
                p += vlen;
            } else {
                nulls |= (uint64_t)1 << i;
            }
            vo[i] = (int32_t)vl;
        }
        *nl_io = nl;
        *vl_io = vl;
        *bits_io = ~nulls & (((uint64_t)1 << natts) - 1);
        return p;
    }
    /* Not inlined into decode_row on purpose: alone, every cursor of the loop gets a
       register; inlined, GCC spills seven of them to the stack (callgrind: 72
       instructions per column inlined, 43 not). */
    #if defined(__GNUC__) || defined(__clang__)
    __attribute__((noinline))
    #endif
    static Py_ssize_t pgc_og_columns(const uint8_t* buf, Py_ssize_t b, Py_ssize_t end,
            Py_ssize_t natts, int fixed, char* nd, Py_ssize_t* nl_io, int32_t* no, uint32_t* oo,
            char* vd, Py_ssize_t* vl_io, int32_t* vo, uint8_t* vv, Py_ssize_t* vn_io, uint64_t* hi_io) {
        Py_ssize_t nl0 = *nl_io, nl = nl0, vl = *vl_io, vn = *vn_io, i;
        uint64_t bits = 0;
        if (fixed && natts <= 56) {
            const uint8_t* q = pgc_og_fast(buf + b, buf + end, natts, nd, &nl, no, oo, vd, &vl, vo, &bits);
            if (q == NULL) return -1;
            b = q - buf;
            if (natts) {
                /* Arrow bitmaps are LSB-first: a little-endian word from the bitmap's last
                   byte (bits past vn there are zero; the caller reserved 8 bytes past it) */
                Py_ssize_t at = vn >> 3;
                uint64_t word = ((vn & 7) ? (uint64_t)vv[at] : 0) | (bits << (vn & 7));
                word = PGC_LE64(word);
                memcpy(vv + at, &word, 8);
            }
        } else {
            /* a record near the end of the input buffer, or a wide one: exact copies,
               validity bit by bit */
            for (i = 0; i < natts; i++) {
                uint16_t r16;
                uint32_t r32, vlen;
                Py_ssize_t nlen, k = vn + i;
                /* a column is 10 bytes at least: name length, type_oid, value length */
                if (end - b < 10) return -1;
                memcpy(&r16, buf + b, 2);
                nlen = pgc_be16(r16);
                b += 2;
                if (nlen > end - b - 8) return -1;
                memcpy(nd + nl, buf + b, (size_t)nlen);
                nl += nlen;
                no[i] = (int32_t)nl;
                b += nlen;
                memcpy(&r32, buf + b, 4);
                oo[i] = pgc_be32(r32);
                memcpy(&r32, buf + b + 4, 4);
                vlen = pgc_be32(r32);
                b += 8;
                if ((k & 7) == 0) vv[k >> 3] = 0;
                if (vlen != 0xFFFFFFFFu) {
                    if ((uint64_t)vlen > (uint64_t)(end - b)) return -1;
                    memcpy(vd + vl, buf + b, vlen);
                    vl += vlen;
                    b += vlen;
                    vv[k >> 3] |= (uint8_t)(1u << (k & 7));
                }
                vo[i] = (int32_t)vl;
            }
        }
        /* the record's names lie side by side in nd: one pass over them for a high bit */
        *hi_io = pgc_or_bytes((const uint8_t*)nd + nl0, nl - nl0);
        *nl_io = nl;
        *vl_io = vl;
        *vn_io = vn + natts;
        return b;
    }
    """
    Py_ssize_t pgc_og_columns(const uint8_t* buf, Py_ssize_t b, Py_ssize_t end, Py_ssize_t natts,
                              int fixed, char* nd, Py_ssize_t* nl_io, int32_t* no, uint32_t* oo,
                              char* vd, Py_ssize_t* vl_io, int32_t* vo, uint8_t* vv, Py_ssize_t* vn_io,
                              uint64_t* hi_io) noexcept


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define pgc_prefetch(p) __builtin_prefetch((p), 0, 3)
    #else
    #define pgc_prefetch(p) ((void)(p))
    #endif
    """
    void pgc_prefetch(const void* p) noexcept


cdef inline void add_insert(_Builder out, int64_t row, uint64_t lsn, const uint8_t* sc, Py_ssize_t sc_len,
                            const uint8_t* tb, Py_ssize_t tb_len, const uint8_t* src_end) noexcept:
    """``_Builder.add`` for an Insert row of the fast path: the same values; the columns an
    Insert leaves null are not written (``_rare``). No capacity checks (``reserve_frame``);
    the 2 GiB offset limit of schema and table was checked by ``fast_insert``. A function,
    not a method, so that the C compiler inlines it."""
    nc_u64(&out.row, <uint64_t>row)
    nc_u64(&out.lsn.vals, lsn)
    nc_bit(&out.lsn.valid, 1)
    out.type_.data.data[out.type_.data.len] = 0x49
    out.type_.data.len += 1
    nc_i32(&out.type_.offs, <int32_t>out.type_.data.len)
    nc_bit(&out.type_.valid, 1)
    copy_small(out.schema.data.data + out.schema.data.len, sc, sc_len, src_end)
    out.schema.data.len += sc_len
    nc_i32(&out.schema.offs, <int32_t>out.schema.data.len)
    nc_bit(&out.schema.valid, 1)
    copy_small(out.table.data.data + out.table.data.len, tb, tb_len, src_end)
    out.table.data.len += tb_len
    nc_i32(&out.table.offs, <int32_t>out.table.data.len)
    nc_bit(&out.table.valid, 1)
    nc_i32(&out.newt.offs, <int32_t>out.newt.ncols)
    nc_bit(&out.newt.valid, 1)
    out.nrows += 1


# bytes ahead of the record being decoded that fast_insert prefetches (512..2048 measured
# alike; a few records of a typical row)
cdef enum:
    PF_AHEAD = 1024


cdef int fast_insert(_Builder out, int64_t row, const uint8_t* buf, Py_ssize_t pos, Py_ssize_t n,
                     const uint8_t* src_end, Py_ssize_t* next_pos) except -1:
    """An Insert record — most of any archive — parsed and written in one pass.

    ``pos`` is where the record's UInt32 length starts. Returns 1 (followed by 'P') or 2
    (by 'F', the end of the frame) when the record was decoded and ``next_pos`` is set; 0
    when it must go through ``read_body`` (any irregularity: the general path owns every
    error message and offset, and nothing is left written then). Accepts exactly the
    records ``read_body`` decodes without error.
    """
    cdef uint32_t length
    cdef uint16_t natts
    cdef char* nd
    cdef char* vd
    cdef Py_ssize_t nl, vl, vn
    cdef int32_t* no
    cdef uint32_t* oo
    cdef int32_t* vo
    cdef uint8_t* vv
    cdef uint64_t hi = 0
    cdef Py_ssize_t prev
    cdef uint64_t lsn
    cdef Py_ssize_t end, b, sc_off, sc_len, tb_off, tb_len, i
    cdef TupleB* t = &out.newt
    cdef Saved sv
    cdef uint8_t sep
    cdef bint ok = True
    if n - pos < 14:
        return 0
    length = be32_at(buf + pos)
    if length < 9 or length > n - pos - 5 or buf[pos + 12] != 0x49:
        return 0
    end = pos + 4 + length
    # the input streams through once and is not in cache: ask for it a few records ahead
    # (the hardware prefetcher alone left the record's first loads waiting on memory;
    # 15.3 -> 12.6 ms for the benchmark's 200,000 records)
    for i in range(pos + PF_AHEAD, min(end + PF_AHEAD, src_end - buf), 64):
        pgc_prefetch(buf + i)
    sep = buf[end]
    if not (sep == 0x50 or (sep == 0x46 and end + 1 == n)):
        return 0
    memcpy(&lsn, buf + pos + 4, 8)
    lsn = pgc_be64(lsn)
    b = pos + 13
    if end - b < 2:
        return 0
    sc_len = be16_at(buf + b)
    sc_off = b + 2
    if sc_len > end - sc_off or not text_ok(buf + sc_off, sc_len, src_end):
        return 0
    b = sc_off + sc_len
    if end - b < 2:
        return 0
    tb_len = be16_at(buf + b)
    tb_off = b + 2
    if tb_len > end - tb_off or not text_ok(buf + tb_off, tb_len, src_end):
        return 0
    b = tb_off + tb_len
    if end - b < 3 or buf[b] != 0x4E:
        return 0
    natts = be16_at(buf + b + 1)
    b += 3
    # every column takes 10 bytes at least; offsets stay within int32 (else off32 raises
    # in the general path)
    if (natts > (end - b) // 10 or t.name_data.len + length > 0x7FFFFFFF
            or t.val_data.len + length > 0x7FFFFFFF or out.schema.data.len + length > 0x7FFFFFFF
            or out.table.data.len + length > 0x7FFFFFFF):
        return 0
    # no capacity checks here: decode_row reserved for the whole frame (reserve_frame)
    tuple_save(t, &sv)
    # locals, not t's fields: every char store may alias them, the compiler would reload
    nd = t.name_data.data
    nl = t.name_data.len
    vd = t.val_data.data
    vl = t.val_data.len
    no = <int32_t*>(t.name_offs.data + t.name_offs.len)
    oo = <uint32_t*>(t.oid.data + t.oid.len)
    vo = <int32_t*>(t.val_offs.data + t.val_offs.len)
    vv = <uint8_t*>t.val_valid.b.data
    vn = t.val_valid.n
    b = pgc_og_columns(buf, b, end, natts, src_end - (buf + end) >= 32, nd, &nl, no, oo, vd, &vl, vo,
                       vv, &vn, &hi)
    if b >= 0 and (hi & <uint64_t>0x8080808080808080):
        # a non-ASCII name: strict UTF-8 over this record's names (as read_tuple)
        prev = t.name_data.len
        for i in range(natts):
            if not utf8_valid(<const uint8_t*>nd + prev, no[i] - prev):
                ok = False
                break
            prev = no[i]
    if not ok or b != end:
        tuple_restore(t, &sv)
        return 0
    t.name_data.len = nl
    t.val_data.len = vl
    t.name_offs.len += 4 * natts
    t.oid.len += 4 * natts
    t.val_offs.len += 4 * natts
    t.val_valid.n = vn
    t.val_valid.b.len = (vn + 7) >> 3
    t.ncols += natts
    add_insert(out, row, lsn, buf + sc_off, sc_len, buf + tb_off, tb_len, src_end)
    next_pos[0] = end + 1
    return 1 if sep == 0x50 else 2


cdef int decode_row(_Builder out, int64_t row, const uint8_t* buf, Py_ssize_t n, int envelope,
                    int64_t* heartbeats, const uint8_t* src_end) except -1:
    """One input row; envelope 0 auto, 1 none, 2 xlogdata."""
    cdef Reader r
    cdef Rec rec
    cdef uint32_t length
    cdef Py_ssize_t start, body_end, full
    cdef uint8_t sep
    cdef bint sep_ok
    cdef int rc
    cdef Saved sn, so
    cdef Py_ssize_t nxt
    reader_init(&r, buf, n)
    memset(&rec, 0, sizeof(Rec))
    if n == 0:
        reader_fail(&r, E_EMPTY, 0, b"", 0, 0)
        return add_error(out, row, &r, &rec, True)
    if envelope == 2 and buf[0] != 0x77:
        reader_fail(&r, E_NOT_ENVELOPE, 0, b"", 0, 0)
        return add_error(out, row, &r, &rec, True)
    if envelope != 1 and buf[0] == 0x77:
        r.pos = 1
        if _need(&r, 24, b"XLogData header") < 0:
            rec.tag = 0x77
            rec.has = H_TAG
            return _fatal_w(out, row, &r, &rec)
        r.pos = 25
    out.reserve_frame(n)
    while True:
        rc = fast_insert(out, row, buf, r.pos, n, src_end, &nxt)
        if rc == 1:
            r.pos = nxt
            continue
        if rc == 2:
            return 0
        memset(&rec, 0, sizeof(Rec))
        start = r.pos
        if read_u32(&r, &length, b"record length") < 0:
            return add_error(out, row, &r, &rec, True)
        if length == 0:
            if r.pos != n:
                reader_fail(&r, E_TRAILING, r.pos, b"the UInt32 0 that ends the batch", 0, n - r.pos)
                return add_error(out, row, &r, &rec, True)
            return 0
        if length < 9:
            reader_fail(&r, E_NEGATIVE, start, b"record length", 0, length)
            return add_error(out, row, &r, &rec, True)
        if n - r.pos >= 9:
            read_u64(&r, &rec.lsn, b"lsn")
            rec.tag = r.buf[r.pos]
            rec.has = H_LSN | H_TAG
            r.pos -= 8
        if length > n - r.pos:
            reader_fail(&r, E_SHORT, r.pos, b"record", length, 0)
            return add_error(out, row, &r, &rec, True)
        body_end = r.pos + length
        full = r.len
        r.len = body_end
        r.pos += 9
        tuple_save(&out.newt, &sn)
        tuple_save(&out.oldt, &so)
        rc = read_body(&r, &rec, &out.newt, &out.oldt)
        r.len = full
        sep_ok = body_end < n and (buf[body_end] == 0x50 or buf[body_end] == 0x46)
        if rc < 0:
            tuple_restore(&out.newt, &sn)
            tuple_restore(&out.oldt, &so)
            # the reader's "left" for a short read is relative to the record's end
            r.len = body_end
            add_error(out, row, &r, &rec, not sep_ok)
            r.len = full
            if not sep_ok:
                return 0
            r.err = E_OK
            r.err_col = -1
        elif not sep_ok:
            tuple_restore(&out.newt, &sn)
            tuple_restore(&out.oldt, &so)
            if body_end >= n:
                reader_fail(&r, E_SHORT, body_end, b"separator", 1, 0)
            else:
                reader_fail(&r, E_BAD_VALUE, body_end, b"separator", 0, buf[body_end])
            return add_error(out, row, &r, &rec, True)
        elif rc == 1:
            heartbeats[0] += 1
        else:
            out.add(row, &rec, buf, NULL, 0)
        sep = buf[body_end]
        r.pos = body_end + 1
        if sep == 0x46:
            if r.pos != n:
                memset(&rec, 0, sizeof(Rec))
                reader_fail(&r, E_TRAILING, r.pos, b"the batch end 'F'", 0, n - r.pos)
                return add_error(out, row, &r, &rec, True)
            return 0


cdef int _fatal_w(_Builder out, int64_t row, Reader* r, Rec* rec) except -1:
    tag = 0x77
    text = format_error(r.err, r.err_pos, tag, (<bytes>r.err_what).decode(), r.err_want,
                        r.len - r.err_pos, r.err_value, -1, True).encode()
    rec.has = 0
    out.add(row, rec, NULL, text, len(text))
    return 0


def decode_binary_chunk(arr, int64_t row_base, str envelope="auto"):
    """Decode one ``pa.BinaryArray``/``pa.LargeBinaryArray`` chunk of 'b' frames.

    Returns ``(RecordBatch, heartbeats)``; ``row`` values start at ``row_base``.
    """
    cdef int env = 0 if envelope == "auto" else 1 if envelope == "none" else 2
    cdef bint large = pa.types.is_large_binary(arr.type)
    cdef Py_ssize_t n = len(arr), i, off = arr.offset
    cdef const uint8_t* validity = NULL
    cdef const int32_t* offs32 = NULL
    cdef const int64_t* offs64 = NULL
    cdef const uint8_t* data = NULL
    cdef const uint8_t* src_end = NULL
    cdef Py_ssize_t dsize = 0
    cdef int64_t start, end, hb = 0
    cdef _Builder out = _Builder()
    cdef Reader nr
    cdef Rec rec
    cdef bint scaled = False
    cdef int64_t first, last
    if not (large or pa.types.is_binary(arr.type)):
        raise TypeError(f"expected a binary or large_binary array, got {arr.type}")
    bufs = arr.buffers()
    if bufs[0] is not None and arr.null_count:
        validity = <const uint8_t*><uintptr_t>bufs[0].address
    if large:
        offs64 = <const int64_t*><uintptr_t>bufs[1].address
    else:
        offs32 = <const int32_t*><uintptr_t>bufs[1].address
    if bufs[2] is not None and bufs[2].size:
        data = <const uint8_t*><uintptr_t>bufs[2].address
        dsize = bufs[2].size
        src_end = data + dsize
    first = (offs64[off] if large else offs32[off]) if n else 0
    last = (offs64[off + n] if large else offs32[off + n]) if n else 0
    for i in range(n):
        if validity != NULL and not (validity[(i + off) >> 3] >> ((i + off) & 7)) & 1:
            reader_init(&nr, NULL, 0)
            memset(&rec, 0, sizeof(Rec))
            reader_fail(&nr, E_NULL_ROW, 0, b"", 0, 0)
            add_error(out, row_base + i, &nr, &rec, True)
            continue
        if large:
            start = offs64[i + off]
            end = offs64[i + off + 1]
        else:
            start = offs32[i + off]
            end = offs32[i + off + 1]
        decode_row(out, row_base + i, data + start if data != NULL else <const uint8_t*>b"", end - start,
                   env, &hb, src_end)
        if not scaled and end > first:
            scaled = True
            if end < last:
                out.reserve_scaled(<double>(last - end) / <double>(end - first))
    return out.finish(), hb
