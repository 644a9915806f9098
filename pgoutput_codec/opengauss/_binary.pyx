# cython: language_level=3
"""Compiled 'b' (binary) style batch decoder: Arrow buffers in, Arrow buffers out.

The same record layout and error policy as the Python twin ``_binary_py.py`` (read it
first: it is the reference). Every read goes through ``pgoutput_codec._reader``; the
record body is read with the reader narrowed to the record's own length, so a body can
never read into the next record. Output columns are appended to growable C buffers and
handed to Arrow with ``Array.from_buffers``: no Python object per record or value.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset

from pgoutput_codec._reader cimport (
    E_BAD_VALUE, E_EMPTY, E_NEGATIVE, E_NOT_ENVELOPE, E_NULL_ROW, E_OK, E_SHORT, E_TRAILING,
    E_UNKNOWN_TAG, E_UTF8, Reader, _need, read_bytes, read_u8, read_u16, read_u32, read_u64,
    reader_fail, reader_init, utf8_valid,
)

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
    while cap < b.len + extra:
        cap *= 2
    p = realloc(b.data, <size_t>cap)
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


cdef inline int put_u64(Buf* b, uint64_t v) except -1:
    return buf_put(b, &v, 8)


cdef inline int put_i64(Buf* b, int64_t v) except -1:
    return buf_put(b, &v, 8)


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
        free(self.data)


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


cdef int buf_reserve(Buf* b, Py_ssize_t n) except -1:
    if n > b.cap - b.len:
        buf_grow(b, n)
    return 0


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
    free(t.offs.data)
    free(t.valid.b.data)
    free(t.name_offs.data)
    free(t.name_data.data)
    free(t.oid.data)
    free(t.val_offs.data)
    free(t.val_data.data)
    free(t.val_valid.b.data)


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
    type_name = pa.nulls(n, pa.string())
    toast = pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bytes((n + 7) >> 3))])
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


cdef inline int str_put(StrB* s, const char* p, Py_ssize_t n, bint valid) except -1:
    if valid:
        buf_put(&s.data, p, n)
    put_i32(&s.offs, off32(&s.data))
    bits_put(&s.valid, valid)
    return 0


cdef inline int u64_put(U64B* c, uint64_t v, bint valid) except -1:
    put_u64(&c.vals, v if valid else 0)
    bits_put(&c.valid, valid)
    return 0


cdef class _Builder:
    cdef Buf row
    cdef U64B lsn, csn, first_lsn, xid
    cdef Buf origin
    cdef Bits origin_valid
    cdef StrB type_, commit_time, user_name, schema, table, error
    cdef TupleB newt, oldt
    cdef Py_ssize_t nrows

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

    cdef int _init_str(self, StrB* s) except -1:
        memset(s, 0, sizeof(StrB))
        put_i32(&s.offs, 0)
        return 0

    def __dealloc__(self):
        free(self.row.data)
        free(self.lsn.vals.data)
        free(self.lsn.valid.b.data)
        free(self.csn.vals.data)
        free(self.csn.valid.b.data)
        free(self.first_lsn.vals.data)
        free(self.first_lsn.valid.b.data)
        free(self.xid.vals.data)
        free(self.xid.valid.b.data)
        free(self.origin.data)
        free(self.origin_valid.b.data)
        self._free_str(&self.type_)
        self._free_str(&self.commit_time)
        self._free_str(&self.user_name)
        self._free_str(&self.schema)
        self._free_str(&self.table)
        self._free_str(&self.error)
        tuple_free(&self.newt)
        tuple_free(&self.oldt)

    cdef void _free_str(self, StrB* s) noexcept:
        free(s.offs.data)
        free(s.data.data)
        free(s.valid.b.data)

    cdef int add(self, int64_t row, Rec* rec, const uint8_t* buf, const char* err,
                 Py_ssize_t errlen) except -1:
        """One output row: ``rec`` fields per ``rec.has``; tuples were appended already
        when H_NEW/H_OLD are set."""
        cdef int h = rec.has
        cdef char tagc = <char>rec.tag
        put_i64(&self.row, row)
        u64_put(&self.lsn, rec.lsn, h & H_LSN)
        str_put(&self.type_, &tagc, 1, h & H_TAG)
        u64_put(&self.csn, rec.csn, h & H_CSN)
        u64_put(&self.first_lsn, rec.first_lsn, h & H_FIRST)
        u64_put(&self.xid, rec.xid, h & H_XID)
        str_put(&self.commit_time, <const char*>buf + rec.ct_off, rec.ct_len, h & H_CT)
        put_u32(&self.origin, rec.origin_id if h & H_ORIGIN else 0)
        bits_put(&self.origin_valid, h & H_ORIGIN)
        str_put(&self.user_name, <const char*>buf + rec.un_off, rec.un_len, h & H_USER)
        str_put(&self.schema, <const char*>buf + rec.sc_off, rec.sc_len, h & H_SCHEMA)
        str_put(&self.table, <const char*>buf + rec.tb_off, rec.tb_len, h & H_SCHEMA)
        put_i32(&self.newt.offs, <int32_t>self.newt.ncols)
        bits_put(&self.newt.valid, h & H_NEW)
        put_i32(&self.oldt.offs, <int32_t>self.oldt.ncols)
        bits_put(&self.oldt.valid, h & H_OLD)
        str_put(&self.error, err, errlen, err != NULL)
        self.nrows += 1
        return 0

    cdef object _str(self, StrB* s):
        return pa.Array.from_buffers(pa.string(), self.nrows, [as_buffer(&s.valid.b), as_buffer(&s.offs),
                                                               as_buffer(&s.data)])

    cdef object _u64(self, U64B* c):
        return pa.Array.from_buffers(pa.uint64(), self.nrows, [as_buffer(&c.valid.b), as_buffer(&c.vals)])

    cdef object finish(self):
        n = self.nrows
        cols = [
            pa.Array.from_buffers(pa.int64(), n, [None, as_buffer(&self.row)]),
            self._u64(&self.lsn),
            self._str(&self.type_),
            self._u64(&self.csn),
            self._u64(&self.first_lsn),
            self._u64(&self.xid),
            self._str(&self.commit_time),
            pa.Array.from_buffers(pa.uint32(), n, [as_buffer(&self.origin_valid.b), as_buffer(&self.origin)]),
            self._str(&self.user_name),
            self._str(&self.schema),
            self._str(&self.table),
            finish_tuple(&self.newt, n),
            finish_tuple(&self.oldt, n),
            self._str(&self.error),
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


cdef int decode_row(_Builder out, int64_t row, const uint8_t* buf, Py_ssize_t n, int envelope,
                    int64_t* heartbeats) except -1:
    """One input row; envelope 0 auto, 1 none, 2 xlogdata."""
    cdef Reader r
    cdef Rec rec
    cdef uint32_t length
    cdef Py_ssize_t start, body_end, full
    cdef uint8_t sep
    cdef bint sep_ok
    cdef int rc
    cdef Saved sn, so
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
    while True:
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
    cdef int64_t start, end, hb = 0
    cdef _Builder out = _Builder()
    cdef Reader nr
    cdef Rec rec
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
    if data != NULL:
        # decoded names and values are never longer than the input
        buf_reserve(&out.newt.name_data, bufs[2].size)
        buf_reserve(&out.newt.val_data, bufs[2].size)
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
                   env, &hb)
    return out.finish(), hb
