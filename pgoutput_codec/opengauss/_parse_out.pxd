# cython: language_level=3
"""The output of the 'b' decoder (``_parse.pyx``): one row per record, in the columns of
``schema.RECORD_SCHEMA``, built with the append-order builders of ``_native.builders``.

What a record gave (``Rec``) is turned into a row by ``RecordBuilder.add``; Insert records
of the fast path go through ``add_insert`` (inline here, so that the C compiler inlines it
into the record loop). The tuples of a record are appended by the parser straight into
``TupleB`` and taken back (``tuple_save``/``tuple_restore``) when the record fails.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from pgoutput_codec._native.builders cimport (
    GrowFixed, GrowList, GrowVar, Mem, bitmap_put_nc, bitmap_truncate, mem_i32_nc, mem_u64_nc,
)
from pgoutput_codec.opengauss._parse_read cimport copy_small


# What a record gave: the fields named by ``has``; strings as offsets into the input.
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


# the columns an Insert row leaves null (see RecordBuilder.done), in RECORD_SCHEMA's order
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


# A tuple column (schema.TUPLE_COLUMN): per row a list of columns; per column its name,
# type OID and value ('b' records have no type names and no TOAST marker: finish_tuple
# makes those children constant).
cdef struct TupleB:
    GrowList rows
    Mem name_offs
    Mem name_data
    Mem oid
    GrowVar value
    Py_ssize_t ncols


# the lengths of a TupleB's column buffers, to take back a failed record's columns
cdef struct Saved:
    Py_ssize_t name_offs, name_data, oid, val_offs, val_data, val_valid, ncols


cdef inline void tuple_save(TupleB* t, Saved* s) noexcept nogil:
    s.name_offs = t.name_offs.len
    s.name_data = t.name_data.len
    s.oid = t.oid.len
    s.val_offs = t.value.offs.len
    s.val_data = t.value.data.len
    s.val_valid = t.value.valid.n
    s.ncols = t.ncols


cdef inline void tuple_restore(TupleB* t, Saved* s) noexcept nogil:
    t.name_offs.len = s.name_offs
    t.name_data.len = s.name_data
    t.oid.len = s.oid
    t.value.offs.len = s.val_offs
    t.value.data.len = s.val_data
    bitmap_truncate(&t.value.valid, s.val_valid)
    t.ncols = s.ncols


cdef class RecordBuilder:
    cdef Mem row
    cdef GrowFixed lsn, csn, first_lsn, xid, origin
    cdef GrowVar type_, commit_time, user_name, schema, table, error
    cdef TupleB newt, oldt
    cdef Py_ssize_t nrows, rowcap
    # Rows written so far in each column an Insert row leaves null (R_*): those columns
    # are written only when a row sets them (catching up the nulls before it then,
    # ``_rare``), so Inserts never touch them, null slots of the fixed-width ones are never
    # written, and a column no row of the chunk sets costs nothing at all (``finish``
    # hands out the shared all-null array).
    cdef Py_ssize_t done[R_COUNT]

    cdef int _grow(self, Py_ssize_t k) except -1 nogil
    cdef int reserve_scaled(self, double f) except -1 nogil
    cdef int reserve_frame(self, Py_ssize_t n) except -1 nogil
    cdef int _rare(self, int c, Py_ssize_t upto) except -1 nogil
    cdef int _rare_u64(self, int c, GrowFixed* col, Py_ssize_t at, uint64_t v) except -1 nogil
    cdef int _rare_str(self, int c, GrowVar* col, Py_ssize_t at, const char* p, Py_ssize_t n) except -1 nogil
    cdef int add(self, int64_t row, Rec* rec, const uint8_t* buf, const char* err,
                 Py_ssize_t errlen) except -1 nogil
    cdef object finish(self)


cdef inline void add_insert(RecordBuilder out, int64_t row, uint64_t lsn, const uint8_t* sc,
                            Py_ssize_t sc_len, const uint8_t* tb, Py_ssize_t tb_len,
                            const uint8_t* src_end) noexcept nogil:
    """``RecordBuilder.add`` for an Insert row of the fast path: the same values; the
    columns an Insert leaves null are not written (``_rare``). No capacity checks
    (``reserve_frame``); the 2 GiB offset limit of schema and table was checked by
    ``fast_insert``. A function, not a method, so that the C compiler inlines it."""
    mem_u64_nc(&out.row, <uint64_t>row)
    mem_u64_nc(&out.lsn.vals, lsn)
    bitmap_put_nc(&out.lsn.valid, 1)
    out.type_.data.p[out.type_.data.len] = 0x49
    out.type_.data.len += 1
    mem_i32_nc(&out.type_.offs, <int32_t>out.type_.data.len)
    bitmap_put_nc(&out.type_.valid, 1)
    copy_small(<char*>out.schema.data.p + out.schema.data.len, sc, sc_len, src_end)
    out.schema.data.len += sc_len
    mem_i32_nc(&out.schema.offs, <int32_t>out.schema.data.len)
    bitmap_put_nc(&out.schema.valid, 1)
    copy_small(<char*>out.table.data.p + out.table.data.len, tb, tb_len, src_end)
    out.table.data.len += tb_len
    mem_i32_nc(&out.table.offs, <int32_t>out.table.data.len)
    bitmap_put_nc(&out.table.valid, 1)
    mem_i32_nc(&out.newt.rows.offs, <int32_t>out.newt.ncols)
    bitmap_put_nc(&out.newt.rows.valid, 1)
    out.nrows += 1
