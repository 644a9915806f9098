# cython: language_level=3
"""The output columns of the 'b' decoder (see _parse_out.pxd)."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from pgoutput_codec._native.builders cimport (
    Bitmap, GrowFixed, GrowVar, Mem, bitmap_need, bitmap_put_nc, gfixed_finish, gfixed_free, glist_finish,
    glist_free, gvar_finish, gvar_free, gvar_put_nc, mem_buffer, mem_i32_nc, mem_need, mem_u32_nc,
    mem_u64_nc, null_array, offsets_init, pad_nulls_fixed, pad_nulls_offsets, zero_buffer,
)
from pgoutput_codec._native.memory cimport pool_free

import pyarrow as pa

from pgoutput_codec.opengauss.schema import RECORD_SCHEMA, TUPLE_COLUMN


# the types of the R_* columns, each one object: null_array caches by the type's identity
cdef tuple R_NAMES = ("csn", "first_lsn", "xid", "commit_time", "origin_id", "user_name", "old_tuple",
                      "error")
cdef list R_TYPES = [RECORD_SCHEMA.field(f).type for f in R_NAMES]
cdef object TUPLE_LIST = RECORD_SCHEMA.field("new_tuple").type


cdef int tuple_init(TupleB* t) except -1:
    offsets_init(&t.rows.offs)
    offsets_init(&t.name_offs)
    offsets_init(&t.value.offs)
    return 0


cdef void tuple_free(TupleB* t) noexcept:
    glist_free(&t.rows)
    pool_free(t.name_offs.p)
    pool_free(t.name_data.p)
    pool_free(t.oid.p)
    gvar_free(&t.value)
    t.name_offs.p = t.name_data.p = t.oid.p = NULL


cdef object finish_tuple(TupleB* t, Py_ssize_t nrows):
    cdef Py_ssize_t n = t.ncols
    name = pa.Array.from_buffers(pa.string(), n, [None, mem_buffer(&t.name_offs), mem_buffer(&t.name_data)])
    oid = pa.Array.from_buffers(pa.uint32(), n, [None, mem_buffer(&t.oid)])
    value = gvar_finish(&t.value, n, pa.binary())
    # 'b' records carry no type names and no unchanged-TOAST marker: both children are
    # constant, so they point at the shared zero buffer instead of writing n values each
    type_name = null_array(n, pa.string())
    toast = pa.Array.from_buffers(pa.bool_(), n, [None, zero_buffer((n + 7) >> 3)])
    struct = pa.StructArray.from_arrays([name, oid, type_name, value, toast], fields=list(TUPLE_COLUMN))
    return glist_finish(&t.rows, nrows, TUPLE_LIST, struct)


cdef class RecordBuilder:
    """The columns of one chunk's records (every field zeroed by the type's allocator)."""

    def __cinit__(self):
        cdef GrowVar* s[6]
        cdef int i
        s[:] = [&self.type_, &self.commit_time, &self.user_name, &self.schema, &self.table, &self.error]
        for i in range(6):
            offsets_init(&s[i].offs)
        tuple_init(&self.newt)
        tuple_init(&self.oldt)

    def __dealloc__(self):
        cdef GrowFixed* f[5]
        cdef GrowVar* s[6]
        cdef int i
        f[:] = [&self.lsn, &self.csn, &self.first_lsn, &self.xid, &self.origin]
        s[:] = [&self.type_, &self.commit_time, &self.user_name, &self.schema, &self.table, &self.error]
        pool_free(self.row.p)
        for i in range(5):
            gfixed_free(f[i])
        for i in range(6):
            gvar_free(s[i])
        tuple_free(&self.newt)
        tuple_free(&self.oldt)

    cdef int _grow(self, Py_ssize_t k) except -1 nogil:
        """Room for the fixed-width parts of ``k`` more rows than written (``k`` at least
        ``rowcap - nrows``) in every column written for every row, so that writing one
        row checks capacity once (the R_* columns reserve in ``_rare``)."""
        cdef Mem* b8[2]
        cdef Mem* b4[4]
        cdef Bitmap* bits[5]
        cdef int i
        b8[:] = [&self.row, &self.lsn.vals]
        b4[:] = [&self.type_.offs, &self.schema.offs, &self.table.offs, &self.newt.rows.offs]
        bits[:] = [&self.lsn.valid, &self.type_.valid, &self.schema.valid, &self.table.valid,
                   &self.newt.rows.valid]
        self.rowcap = self.nrows + k
        for i in range(2):
            mem_need(b8[i], 8 * k)
        for i in range(4):
            mem_need(b4[i], 4 * k)
        for i in range(5):
            bitmap_need(bits[i], k)
        mem_need(&self.type_.data, k)
        return 0

    cdef int reserve_scaled(self, double f) except -1 nogil:
        """Reserve for ``f`` times what is written so far (the input left after the first
        frame, in proportion): no doubling copies, and the reserve comes from the pool."""
        cdef Mem* v[16]
        cdef int i
        v[:] = [&self.newt.name_offs, &self.newt.name_data, &self.newt.oid, &self.newt.value.offs,
                &self.newt.value.data, &self.newt.value.valid.b, &self.oldt.name_offs, &self.oldt.name_data,
                &self.oldt.oid, &self.oldt.value.offs, &self.oldt.value.data, &self.oldt.value.valid.b,
                &self.schema.data, &self.table.data, &self.commit_time.data, &self.user_name.data]
        for i in range(16):
            if v[i].len:
                # headroom: the fast path reserves 32 bytes past each record's strings
                mem_need(v[i], <Py_ssize_t>(v[i].len * f * 1.05) + 4096)
        if self.nrows * f + 64 > self.rowcap - self.nrows:
            self._grow(<Py_ssize_t>(self.nrows * f) + 64)
        return 0

    cdef int reserve_frame(self, Py_ssize_t n) except -1 nogil:
        """Room for every row a frame of ``n`` bytes can give, so that the Insert fast
        path (``fast_insert``, ``add_insert``) writes without checking capacity: a record
        takes 14 bytes at least (length, LSN, tag, separator), a column 10; names, values,
        schema and table are bytes of the frame; the fixed-size moves write up to 32 bytes
        past a string, the validity word 8 bytes past the last bit. The general path
        checks its own capacity, and what it writes stays within the same bounds."""
        cdef TupleB* t = &self.newt
        cdef Py_ssize_t cols = n // 10 + 1, rows = n // 14 + 2
        mem_need(&t.name_offs, 4 * cols)
        mem_need(&t.oid, 4 * cols)
        mem_need(&t.value.offs, 4 * cols)
        bitmap_need(&t.value.valid, cols + 128)
        mem_need(&t.name_data, n + 32)
        mem_need(&t.value.data, n + 32)
        mem_need(&self.schema.data, n + 32)
        mem_need(&self.table.data, n + 32)
        if self.rowcap - self.nrows < rows:
            self._grow(rows)
        return 0

    cdef int _rare(self, int c, Py_ssize_t upto) except -1 nogil:
        """Null rows in R_* column ``c`` up to row ``upto`` (exclusive), with room for one
        more row after them."""
        cdef Py_ssize_t k = upto - self.done[c]
        if c == R_CSN:
            pad_nulls_fixed(&self.csn.vals, &self.csn.valid, k, 8)
        elif c == R_FIRST:
            pad_nulls_fixed(&self.first_lsn.vals, &self.first_lsn.valid, k, 8)
        elif c == R_XID:
            pad_nulls_fixed(&self.xid.vals, &self.xid.valid, k, 8)
        elif c == R_ORIGIN:
            pad_nulls_fixed(&self.origin.vals, &self.origin.valid, k, 4)
        elif c == R_CT:
            pad_nulls_offsets(&self.commit_time.offs, &self.commit_time.valid, k)
        elif c == R_USER:
            pad_nulls_offsets(&self.user_name.offs, &self.user_name.valid, k)
        elif c == R_OLD:
            pad_nulls_offsets(&self.oldt.rows.offs, &self.oldt.rows.valid, k)
        else:
            pad_nulls_offsets(&self.error.offs, &self.error.valid, k)
        self.done[c] = upto
        return 0

    cdef int _rare_u64(self, int c, GrowFixed* col, Py_ssize_t at, uint64_t v) except -1 nogil:
        """Row ``at`` of the uint64 column ``c`` (``col``), set (``_rare`` catches up the
        nulls before it)."""
        self._rare(c, at)
        mem_u64_nc(&col.vals, v)
        bitmap_put_nc(&col.valid, 1)
        self.done[c] += 1
        return 0

    cdef int _rare_str(self, int c, GrowVar* col, Py_ssize_t at, const char* p, Py_ssize_t n) except -1 nogil:
        """Row ``at`` of the string column ``c`` (``col``), set."""
        self._rare(c, at)
        gvar_put_nc(col, p, n, 1)
        self.done[c] += 1
        return 0

    cdef int add(self, int64_t row, Rec* rec, const uint8_t* buf, const char* err,
                 Py_ssize_t errlen) except -1 nogil:
        """One output row: ``rec`` fields per ``rec.has``; tuples were appended already
        when H_NEW/H_OLD are set."""
        cdef int h = rec.has
        cdef Py_ssize_t at = self.nrows
        if self.nrows == self.rowcap:
            self._grow(self.rowcap if self.rowcap else 1024)
        mem_u64_nc(&self.row, <uint64_t>row)
        mem_u64_nc(&self.lsn.vals, rec.lsn if h & H_LSN else 0)
        bitmap_put_nc(&self.lsn.valid, h & H_LSN)
        if h & H_TAG:
            self.type_.data.p[self.type_.data.len] = rec.tag
            self.type_.data.len += 1
        mem_i32_nc(&self.type_.offs, <int32_t>self.type_.data.len)
        bitmap_put_nc(&self.type_.valid, h & H_TAG)
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
            mem_u32_nc(&self.origin.vals, rec.origin_id)
            bitmap_put_nc(&self.origin.valid, 1)
            self.done[R_ORIGIN] += 1
        if h & H_USER:
            self._rare_str(R_USER, &self.user_name, at, <const char*>buf + rec.un_off, rec.un_len)
        gvar_put_nc(&self.schema, <const char*>buf + rec.sc_off, rec.sc_len, h & H_SCHEMA)
        gvar_put_nc(&self.table, <const char*>buf + rec.tb_off, rec.tb_len, h & H_SCHEMA)
        mem_i32_nc(&self.newt.rows.offs, <int32_t>self.newt.ncols)
        bitmap_put_nc(&self.newt.rows.valid, h & H_NEW)
        if h & H_OLD:
            self._rare(R_OLD, at)
            mem_i32_nc(&self.oldt.rows.offs, <int32_t>self.oldt.ncols)
            bitmap_put_nc(&self.oldt.rows.valid, 1)
            self.done[R_OLD] += 1
        if err != NULL:
            self._rare_str(R_ERR, &self.error, at, err, errlen)
        self.nrows += 1
        return 0

    cdef object finish(self):
        """The record batch of every row added (the builder is left empty)."""
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
                rare.append(gfixed_finish(&self.csn if c == R_CSN else &self.first_lsn if c == R_FIRST
                                          else &self.xid, n, pa.uint64()))
            elif c == R_ORIGIN:
                rare.append(gfixed_finish(&self.origin, n, pa.uint32()))
            elif c == R_OLD:
                rare.append(finish_tuple(&self.oldt, n))
            else:
                rare.append(gvar_finish(&self.commit_time if c == R_CT else &self.user_name if c == R_USER
                                        else &self.error, n, pa.string()))
        cols = [
            pa.Array.from_buffers(pa.int64(), n, [None, mem_buffer(&self.row)]),
            gfixed_finish(&self.lsn, n, pa.uint64()),
            gvar_finish(&self.type_, n, pa.string()),
            rare[R_CSN],
            rare[R_FIRST],
            rare[R_XID],
            rare[R_CT],
            rare[R_ORIGIN],
            rare[R_USER],
            gvar_finish(&self.schema, n, pa.string()),
            gvar_finish(&self.table, n, pa.string()),
            finish_tuple(&self.newt, n),
            rare[R_OLD],
            rare[R_ERR],
        ]
        return pa.RecordBatch.from_arrays(cols, schema=RECORD_SCHEMA)
