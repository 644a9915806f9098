# cython: language_level=3
"""The hot path of ``decode_batch``: Arrow binary buffers in, Arrow buffers out.

One loop over the input's offsets/data buffers: each payload is parsed by the shared C
parser (_parse.pyx) and its fields written straight into column builders
(_native/builders.pxd). No Python object is made per row or per value; Python runs only for a
row in error (its message text) and for the rare Relation/Truncate list columns.

Insert (its own one-pass parse), Update, Delete, Begin and Commit have code of their own;
every other message is written from its class's field list (the facts table) by one
writer per field (``_FIELDS``), so a message made of known fields needs no code here.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t

from pgoutput_codec._native.builders cimport (
    FixedCol, TupleListCol, VarCol, bit_set, fixed_bool, fixed_finish, fixed_free, fixed_init,
    fixed_ts, fixed_u8, fixed_u32, fixed_u64, mem_reserve, tl_finish, tl_free, tl_grow_valid,
    null_array, tl_init, var_append, var_append_byte, var_finish, var_free, var_init,
)
from pgoutput_codec._native.arrowbuf cimport check_binary_offsets
from pgoutput_codec.pgoutput._errors cimport error_text
from pgoutput_codec.pgoutput._facts cimport (
    TAG_BEGIN, TAG_COMMIT, TAG_DELETE, TAG_INSERT, TAG_PRIMARY_KEEPALIVE, TAG_STREAM_START, TAG_STREAM_STOP,
    TAG_UPDATE, TAG_XLOG_DATA, is_streamable,
)
from pgoutput_codec.pgoutput._parse cimport (
    ENV_NONE, ENV_XLOGDATA, Parsed, STREAM_NO, Slice, STREAM_UNKNOWN, STREAM_YES, Scratch, TupleCol,
    parse_payload, relid_at, scratch_free, scratch_init,
)
from pgoutput_codec._native.reader cimport E_NULL_ROW, Reader, pgc_be16, pgc_be32, reader_fail, reader_init
from libc.string cimport memcpy

import numpy as np
import pyarrow as pa

from pgoutput_codec.pgoutput.facts import CONTROL_TAGS, MESSAGE_CLASSES, MESSAGES
from pgoutput_codec.schema import MESSAGE_FIELDS, RELATION_COLUMNS_TYPE

cdef object _TYPES = {f.name: f.type for f in MESSAGE_FIELDS}
cdef object _RELIDS_TYPE = _TYPES["relation_ids"]


cdef struct Cols:
    VarCol mtype
    VarCol error
    FixedCol wal_start
    FixedCol wal_end
    FixedCol send_time
    FixedCol reply_requested
    FixedCol xid
    FixedCol subxid
    FixedCol final_lsn
    FixedCol commit_lsn
    FixedCol end_lsn
    FixedCol commit_ts
    FixedCol flags
    FixedCol origin_lsn
    VarCol origin_name
    FixedCol relation_id
    VarCol namespace
    VarCol relation_name
    VarCol replica_identity
    FixedCol type_oid
    VarCol type_name
    VarCol old_kind
    TupleListCol old_tuple
    TupleListCol new_tuple
    FixedCol options
    FixedCol lsn
    VarCol prefix
    VarCol content
    FixedCol first_segment
    FixedCol abort_lsn
    FixedCol abort_ts
    FixedCol prepare_lsn
    FixedCol prepare_ts
    VarCol gid
    FixedCol prepare_end_lsn
    FixedCol rollback_end_lsn
    FixedCol rollback_ts


cdef int _tuple_append(TupleListCol* c, Py_ssize_t row, const uint8_t* buf, Scratch* s,
                       Py_ssize_t start, Py_ssize_t n, Py_ssize_t payload_len,
                       const uint8_t* src_end) noexcept nogil:
    """Append one TupleData (already validated by the parser) to a tuple list column.

    Counters and pointers live in locals: stores through uint8 pointers may alias
    anything, so fields read through ``c`` would be reloaded after every value.
    Values up to 16 bytes are copied with a fixed 16-byte memcpy (two vector moves)
    when 16 bytes are readable at the source; the destination keeps 16 bytes of slack.
    """
    cdef Py_ssize_t i, e = c.nelem, nvv = 0
    cdef int32_t vend, vlen
    cdef const TupleCol* col
    cdef uint8_t* kinds
    cdef int32_t* voffs
    cdef uint8_t* vvalid
    cdef uint8_t* vdata
    cdef const uint8_t* src
    cdef uint8_t kind
    if (mem_reserve(&c.kinds, n) < 0 or mem_reserve(&c.voffs, 4 * n) < 0
            or mem_reserve(&c.vdata, payload_len + 16) < 0
            or tl_grow_valid(c, ((e + n + 7) >> 3) + 1) < 0):
        return -1
    while c.filled < row:
        c.filled += 1
        c.offs[c.filled] = <int32_t>e
    kinds = c.kinds.p + e
    voffs = (<int32_t*>c.voffs.p) + 1 + e
    vvalid = c.vvalid.p
    vdata = c.vdata.p
    vend = <int32_t>c.vdata.len
    col = s.cols + start
    for i in range(n):
        kind = col.kind
        kinds[i] = kind
        if kind == 116 or kind == 98:  # 't' / 'b' carry bytes; 'n' / 'u' are null
            vlen = col.len
            src = buf + col.off
            if vlen <= 16 and src + 16 <= src_end:
                memcpy(vdata + vend, src, 16)
            else:
                memcpy(vdata + vend, src, vlen)
            vend += vlen
            vvalid[(e + i) >> 3] |= <uint8_t>(1 << ((e + i) & 7))
            nvv += 1
        voffs[i] = vend
        col += 1
    c.nvvalid += nvv
    c.vdata.len = vend
    c.nelem = e + n
    c.kinds.len += n
    c.voffs.len += 4 * n
    c.filled = row + 1
    c.offs[row + 1] = <int32_t>c.nelem
    bit_set(c.valid, row)
    c.nvalid += 1
    return 0


cdef extern from *:
    """
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define PGC_LITTLE_ENDIAN 0
    #else
    #define PGC_LITTLE_ENDIAN 1
    #endif

    /* The TupleData loop of the Insert fast path, in plain C so the compiler keeps
       everything in registers: per value one kind test, one bounds check (unsigned,
       so a negative length fails it too), a fixed 16-byte copy when allowed.
       Returns the position after the tuple, or -1 on any irregularity (the caller
       then hands the row to the general parser, which reports it). */
    static inline Py_ssize_t pgc_tuple_fast(const uint8_t* p, Py_ssize_t pos, Py_ssize_t n,
                                            Py_ssize_t ncols, uint8_t* kinds, int32_t* voffs,
                                            uint8_t* vdata, int32_t* vend_io, uint64_t* bits_io,
                                            Py_ssize_t* nulls_io, int short_copy) {
        int32_t vend = *vend_io;
        uint64_t bits = 0, mask = 1;
        Py_ssize_t nulls = 0;
        /* two copies of the loop, so "may over-read 16 bytes" is decided once per row */
        #define PGC_TUPLE_LOOP(COPY)                                                   \
        for (Py_ssize_t i = 0; i < ncols; i++, mask <<= 1) {                           \
            uint8_t kind;                                                              \
            if (pos >= n) return -1;                                                   \
            kind = p[pos];                                                             \
            kinds[i] = kind;                                                           \
            if (kind == 't' || kind == 'b') {                                          \
                uint32_t raw, len;                                                     \
                if (n - pos < 5) return -1;                                            \
                memcpy(&raw, p + pos + 1, 4);                                          \
                len = pgc_be32(raw);                                                   \
                /* unsigned: a negative length is huge and fails too */                 \
                if ((uint64_t)len > (uint64_t)(n - pos - 5)) return -1;                \
                COPY(vdata + vend, p + pos + 5, len);                                  \
                vend += (int32_t)len;                                                  \
                bits |= mask;                                                          \
                pos += 5 + (Py_ssize_t)len;                                            \
            } else if (kind == 'n' || kind == 'u') {                                   \
                pos += 1;                                                              \
                nulls++;                                                               \
            } else {                                                                   \
                return -1;                                                             \
            }                                                                          \
            voffs[i] = vend;                                                           \
        }
        #define PGC_COPY_SHORT(d, s, l) \
            do { if ((l) <= 16) memcpy((d), (s), 16); else memcpy((d), (s), (l)); } while (0)
        #define PGC_COPY_EXACT(d, s, l) memcpy((d), (s), (l))
        if (short_copy) { PGC_TUPLE_LOOP(PGC_COPY_SHORT) }
        else { PGC_TUPLE_LOOP(PGC_COPY_EXACT) }
        #undef PGC_TUPLE_LOOP
        #undef PGC_COPY_SHORT
        #undef PGC_COPY_EXACT
        *vend_io = vend;
        *bits_io = bits;
        *nulls_io = nulls;
        return pos;
    }
    """
    int PGC_LITTLE_ENDIAN
    Py_ssize_t pgc_tuple_fast(const uint8_t* p, Py_ssize_t pos, Py_ssize_t n, Py_ssize_t ncols,
                              uint8_t* kinds, int32_t* voffs, uint8_t* vdata, int32_t* vend_io,
                              uint64_t* bits_io, Py_ssize_t* nulls_io, int short_copy) nogil


cdef int _fast_insert(Cols* c, Py_ssize_t row, const uint8_t* p, Py_ssize_t n, int stream,
                      const uint8_t* src_end) noexcept nogil:
    """Insert rows — most of any archive — parsed and written in one pass.

    Returns 1 when the row was decoded, 0 when it must go through the general parser
    (any irregularity: the general path owns every error message and offset; nothing
    was written then), -1 when memory runs out. Tests compare this path with
    ``decode_message`` on every vector and on fuzzed input.

    Why it is shaped so (measured with callgrind, instructions per ten-column row):
    validity bits of up to 56 values gather in a register and are OR-ed into the bitmap
    with one unaligned 8-byte read-modify-write (Arrow bitmaps are LSB-first, which is a
    little-endian word); one bounds check per value (``rem``, unsigned); when 16 bytes
    past the payload are readable, values up to 16 bytes are copied with a fixed 16-byte
    move (two vector instructions) instead of a memcpy call.
    """
    cdef Py_ssize_t pos = 1, i, e, left, rem
    cdef uint32_t raw32, xid = 0, relid
    cdef uint16_t raw16
    cdef int16_t ncols
    cdef int32_t vlen, vend
    cdef uint8_t kind
    cdef uint8_t* kinds
    cdef int32_t* voffs
    cdef uint8_t* vvalid
    cdef uint8_t* vdata
    cdef uint64_t bits = 0, word
    cdef bint short_copy, break_ok = False
    cdef Py_ssize_t nvv = 0, nnull = 0
    cdef TupleListCol* t = &c.new_tuple
    if stream == STREAM_YES:
        if n < 5:
            return 0
        memcpy(&raw32, p + 1, 4)
        xid = pgc_be32(raw32)
        pos = 5
    if n - pos < 7 or p[pos + 4] != 78:  # relation_id, 'N', Int16 ncols
        return 0
    memcpy(&raw32, p + pos, 4)
    relid = pgc_be32(raw32)
    memcpy(&raw16, p + pos + 5, 2)
    ncols = <int16_t>pgc_be16(raw16)
    pos += 7
    left = n - pos
    if ncols < 0 or ncols > left:   # each column takes at least one byte
        return 0
    e = t.nelem
    if ((t.kinds.len + ncols > t.kinds.cap and mem_reserve(&t.kinds, ncols) < 0)
            or (t.voffs.len + 4 * ncols > t.voffs.cap and mem_reserve(&t.voffs, 4 * ncols) < 0)
            or (t.vdata.len + n + 16 > t.vdata.cap and mem_reserve(&t.vdata, n + 16) < 0)
            or (((e + ncols) >> 3) + 9 > t.vvalid.cap and tl_grow_valid(t, ((e + ncols) >> 3) + 9) < 0)):
        return -1
    kinds = t.kinds.p + e
    voffs = (<int32_t*>t.voffs.p) + 1 + e
    vvalid = t.vvalid.p
    vdata = t.vdata.p
    vend = <int32_t>t.vdata.len
    short_copy = p + n + 16 <= src_end
    if PGC_LITTLE_ENDIAN and ncols <= 56:
        pos = pgc_tuple_fast(p, pos, n, ncols, kinds, voffs, vdata, &vend, &bits, &nnull, short_copy)
        if pos != n:
            return 0      # irregular (or trailing bytes): nothing was committed
        if bits:
            memcpy(&word, vvalid + (e >> 3), 8)
            word |= bits << (e & 7)
            memcpy(vvalid + (e >> 3), &word, 8)
        nvv = ncols - nnull
    else:
        # wide rows and big-endian machines: the same loop, validity bit by bit
        for i in range(ncols):
            rem = n - pos
            if rem <= 0:
                break
            kind = p[pos]
            kinds[i] = kind
            if kind == 116 or kind == 98:
                if rem < 5:
                    break
                memcpy(&raw32, p + pos + 1, 4)
                vlen = <int32_t>pgc_be32(raw32)
                if <uint32_t>vlen > <uint64_t>(rem - 5):   # also rejects a negative length
                    break
                memcpy(vdata + vend, p + pos + 5, vlen)
                vend += vlen
                vvalid[(e + i) >> 3] |= <uint8_t>(1 << ((e + i) & 7))
                nvv += 1
                pos += 5 + vlen
            elif kind == 110 or kind == 117:
                pos += 1
            else:
                break
            voffs[i] = vend
        else:
            if pos == n:
                break_ok = True
        if not break_ok:
            for i in range(ncols):
                vvalid[(e + i) >> 3] &= <uint8_t>~(1 << ((e + i) & 7))
            return 0
    # commit the row
    t.nvvalid += nvv
    t.vdata.len = vend
    t.nelem = e + ncols
    t.kinds.len += ncols
    t.voffs.len += 4 * ncols
    while t.filled < row:
        t.filled += 1
        t.offs[t.filled] = <int32_t>e
    t.filled = row + 1
    t.offs[row + 1] = <int32_t>t.nelem
    bit_set(t.valid, row)
    t.nvalid += 1
    fixed_u32(&c.relation_id, row, relid)
    if stream == STREAM_YES:
        fixed_u32(&c.xid, row, xid)
    return 1 if var_append_byte(&c.mtype, row, TAG_INSERT) == 0 else -1


cdef int _emit(Cols* c, Py_ssize_t row, const uint8_t* buf, Py_ssize_t buflen,
               const uint8_t* src_end, Parsed* m, Scratch* s) noexcept nogil:
    """Write one parsed message into the columns; -1 only when memory runs out."""
    cdef uint8_t t = m.tag
    if m.env == TAG_PRIMARY_KEEPALIVE:
        if var_append_byte(&c.mtype, row, TAG_PRIMARY_KEEPALIVE) < 0:
            return -1
        fixed_u64(&c.wal_end, row, m.wal_end)
        fixed_ts(&c.send_time, row, m.send_time)
        fixed_bool(&c.reply_requested, row, m.reply_requested)
        return 0
    if m.env == TAG_XLOG_DATA:
        fixed_u64(&c.wal_start, row, m.wal_start)
        fixed_u64(&c.wal_end, row, m.wal_end)
        fixed_ts(&c.send_time, row, m.send_time)
    if var_append_byte(&c.mtype, row, t) < 0:
        return -1
    if m.has_xid:
        fixed_u32(&c.xid, row, m.xid)
    if t == TAG_INSERT:
        fixed_u32(&c.relation_id, row, m.relation_id)
        return _tuple_append(&c.new_tuple, row, buf, s, m.new_start, m.new_n, buflen, src_end)
    if t == TAG_UPDATE:
        fixed_u32(&c.relation_id, row, m.relation_id)
        if m.old_kind:
            if var_append_byte(&c.old_kind, row, m.old_kind) < 0:
                return -1
            if _tuple_append(&c.old_tuple, row, buf, s, m.old_start, m.old_n, buflen, src_end) < 0:
                return -1
        return _tuple_append(&c.new_tuple, row, buf, s, m.new_start, m.new_n, buflen, src_end)
    if t == TAG_DELETE:
        fixed_u32(&c.relation_id, row, m.relation_id)
        if var_append_byte(&c.old_kind, row, m.old_kind) < 0:
            return -1
        return _tuple_append(&c.old_tuple, row, buf, s, m.old_start, m.old_n, buflen, src_end)
    if t == TAG_BEGIN:
        fixed_u64(&c.final_lsn, row, m.final_lsn)
        fixed_ts(&c.commit_ts, row, m.commit_ts)
        return 0
    if t == TAG_COMMIT:
        fixed_u8(&c.flags, row, m.flags)
        fixed_u64(&c.commit_lsn, row, m.commit_lsn)
        fixed_u64(&c.end_lsn, row, m.end_lsn)
        fixed_ts(&c.commit_ts, row, m.commit_ts)
        return 0
    return _emit_fields(c, row, buf, buflen, src_end, m, s)


# How each message field goes from the Parsed struct to its column: one entry per FIELD
# (not per message). The messages of every change row (I U D) and of every transaction
# (B C) have their own code above; every other message is written from its class's field
# list by ``_emit_fields``, so a message made of known fields needs no code here.
cdef enum:
    W_SKIP = 0       # written elsewhere: xid (by _emit), columns / relation_ids (by the caller)
    W_U8
    W_U32
    W_U64
    W_TS
    W_BOOL
    W_BYTE           # uint8 as a 1-byte string
    W_OPT_BYTE       # uint8, null when 0
    W_VAR            # Slice
    W_ABORT_U64      # null unless has_abort
    W_ABORT_TS
    W_OLD_TUPLE      # null unless old_kind
    W_NEW_TUPLE

cdef Parsed _P
cdef Cols _C

cdef Py_ssize_t _pat(void* p):
    return <char*>p - <char*>&_P

cdef Py_ssize_t _cat(void* p):
    return <char*>p - <char*>&_C

# field name -> (how, offset in Parsed, offset of its column in Cols)
_FIELDS = {
    "xid": (W_SKIP, 0, 0),
    "columns": (W_SKIP, 0, 0),
    "relation_ids": (W_SKIP, 0, 0),
    "subxid": (W_U32, _pat(&_P.subxid), _cat(&_C.subxid)),
    "final_lsn": (W_U64, _pat(&_P.final_lsn), _cat(&_C.final_lsn)),
    "commit_lsn": (W_U64, _pat(&_P.commit_lsn), _cat(&_C.commit_lsn)),
    "end_lsn": (W_U64, _pat(&_P.end_lsn), _cat(&_C.end_lsn)),
    "commit_ts": (W_TS, _pat(&_P.commit_ts), _cat(&_C.commit_ts)),
    "flags": (W_U8, _pat(&_P.flags), _cat(&_C.flags)),
    "origin_lsn": (W_U64, _pat(&_P.origin_lsn), _cat(&_C.origin_lsn)),
    "origin_name": (W_VAR, _pat(&_P.origin_name), _cat(&_C.origin_name)),
    "relation_id": (W_U32, _pat(&_P.relation_id), _cat(&_C.relation_id)),
    "namespace": (W_VAR, _pat(&_P.namespace), _cat(&_C.namespace)),
    "relation_name": (W_VAR, _pat(&_P.relation_name), _cat(&_C.relation_name)),
    "replica_identity": (W_BYTE, _pat(&_P.replica_identity), _cat(&_C.replica_identity)),
    "type_oid": (W_U32, _pat(&_P.type_oid), _cat(&_C.type_oid)),
    "type_name": (W_VAR, _pat(&_P.type_name), _cat(&_C.type_name)),
    "old_kind": (W_OPT_BYTE, _pat(&_P.old_kind), _cat(&_C.old_kind)),
    "old_tuple": (W_OLD_TUPLE, 0, _cat(&_C.old_tuple)),
    "new_tuple": (W_NEW_TUPLE, 0, _cat(&_C.new_tuple)),
    "options": (W_U8, _pat(&_P.options), _cat(&_C.options)),
    "lsn": (W_U64, _pat(&_P.lsn), _cat(&_C.lsn)),
    "prefix": (W_VAR, _pat(&_P.prefix), _cat(&_C.prefix)),
    "content": (W_VAR, _pat(&_P.content), _cat(&_C.content)),
    "first_segment": (W_BOOL, _pat(&_P.first_segment), _cat(&_C.first_segment)),
    "abort_lsn": (W_ABORT_U64, _pat(&_P.abort_lsn), _cat(&_C.abort_lsn)),
    "abort_ts": (W_ABORT_TS, _pat(&_P.abort_ts), _cat(&_C.abort_ts)),
    "prepare_lsn": (W_U64, _pat(&_P.prepare_lsn), _cat(&_C.prepare_lsn)),
    "prepare_ts": (W_TS, _pat(&_P.prepare_ts), _cat(&_C.prepare_ts)),
    "gid": (W_VAR, _pat(&_P.gid), _cat(&_C.gid)),
    "prepare_end_lsn": (W_U64, _pat(&_P.prepare_end_lsn), _cat(&_C.prepare_end_lsn)),
    "rollback_end_lsn": (W_U64, _pat(&_P.rollback_end_lsn), _cat(&_C.rollback_end_lsn)),
    "rollback_ts": (W_TS, _pat(&_P.rollback_ts), _cat(&_C.rollback_ts)),
}

# tag byte -> its fields' (how, Parsed offset, Cols offset), from the facts table; and
# whether its row carries a Relation's column list or a Truncate's relation ids
cdef enum:
    MAX_FIELDS = 16
cdef int _NF[256]
cdef int _HOW[256][MAX_FIELDS]
cdef Py_ssize_t _POFF[256][MAX_FIELDS]
cdef Py_ssize_t _COFF[256][MAX_FIELDS]
cdef bint _HAS_COLUMNS[256]
cdef bint _HAS_RELIDS[256]
for _f in MESSAGES:
    _t = ord(_f.tag)
    if len(_f.fields) > MAX_FIELDS:
        raise ImportError(f"{_f.name} has more than {MAX_FIELDS} fields (_batch.pyx MAX_FIELDS)")
    _NF[_t] = 0
    for _name in _f.fields:
        if _name not in _FIELDS:
            raise ImportError(f"field {_name!r} of {_f.name} has no column writer (_batch.pyx _FIELDS)")
        if _FIELDS[_name][0] != W_SKIP:
            _HOW[_t][_NF[_t]], _POFF[_t][_NF[_t]], _COFF[_t][_NF[_t]] = _FIELDS[_name]
            _NF[_t] += 1
    _HAS_COLUMNS[_t] = "columns" in _f.fields
    _HAS_RELIDS[_t] = "relation_ids" in _f.fields


cdef int _emit_fields(Cols* c, Py_ssize_t row, const uint8_t* buf, Py_ssize_t buflen,
                      const uint8_t* src_end, Parsed* m, Scratch* s) noexcept nogil:
    """Write the fields of ``m`` by its class's field list; -1 only when memory runs out."""
    cdef uint8_t t = m.tag
    cdef int i, how
    cdef const char* p
    cdef char* col
    for i in range(_NF[t]):
        how = _HOW[t][i]
        p = <const char*>m + _POFF[t][i]
        col = <char*>c + _COFF[t][i]
        if how == W_U8:
            fixed_u8(<FixedCol*>col, row, (<const uint8_t*>p)[0])
        elif how == W_U32:
            fixed_u32(<FixedCol*>col, row, (<const uint32_t*>p)[0])
        elif how == W_U64:
            fixed_u64(<FixedCol*>col, row, (<const uint64_t*>p)[0])
        elif how == W_TS:
            fixed_ts(<FixedCol*>col, row, (<const int64_t*>p)[0])
        elif how == W_BOOL:
            fixed_bool(<FixedCol*>col, row, (<const uint8_t*>p)[0])
        elif how == W_BYTE:
            if var_append_byte(<VarCol*>col, row, (<const uint8_t*>p)[0]) < 0:
                return -1
        elif how == W_OPT_BYTE:
            if (<const uint8_t*>p)[0] and var_append_byte(<VarCol*>col, row, (<const uint8_t*>p)[0]) < 0:
                return -1
        elif how == W_VAR:
            if var_append(<VarCol*>col, row, buf + (<const Slice*>p).off, (<const Slice*>p).len) < 0:
                return -1
        elif how == W_ABORT_U64:
            if m.has_abort:
                fixed_u64(<FixedCol*>col, row, (<const uint64_t*>p)[0])
        elif how == W_ABORT_TS:
            if m.has_abort:
                fixed_ts(<FixedCol*>col, row, (<const int64_t*>p)[0])
        elif how == W_OLD_TUPLE:
            if m.old_kind and _tuple_append(<TupleListCol*>col, row, buf, s, m.old_start, m.old_n,
                                            buflen, src_end) < 0:
                return -1
        elif how == W_NEW_TUPLE:
            if _tuple_append(<TupleListCol*>col, row, buf, s, m.new_start, m.new_n, buflen, src_end) < 0:
                return -1
    return 0


cdef struct _Rows:
    # A Binary/LargeBinary array's buffers, read in place at its slice offset.
    const uint8_t* valid      # NULL: no nulls
    const int32_t* o32        # offsets: one of the two, NULL for an empty array
    const int64_t* o64
    const uint8_t* data       # b"" when the array holds no bytes
    Py_ssize_t data_size
    Py_ssize_t off


cdef _Rows _rows_of(arr) except *:
    cdef _Rows v
    check_binary_offsets(arr)
    bufs = arr.buffers()
    v.off = arr.offset
    v.valid = NULL if bufs[0] is None else <const uint8_t*><uintptr_t>bufs[0].address
    v.o32 = NULL
    v.o64 = NULL
    if len(arr) and bufs[1] is not None:
        if pa.types.is_large_binary(arr.type):
            v.o64 = <const int64_t*><uintptr_t>bufs[1].address
        else:
            v.o32 = <const int32_t*><uintptr_t>bufs[1].address
    v.data_size = bufs[2].size if bufs[2] is not None else 0
    v.data = <const uint8_t*><uintptr_t>bufs[2].address if v.data_size else <const uint8_t*>b""
    return v


cdef inline bint _row_span(const _Rows* v, Py_ssize_t i, Py_ssize_t* start, Py_ssize_t* end) noexcept nogil:
    """Row ``i``'s bytes, ``v.data[start:end]``; False for a null row."""
    cdef Py_ssize_t j = v.off + i
    if v.valid != NULL and not (v.valid[j >> 3] >> (j & 7)) & 1:
        return False
    if v.o64 != NULL:
        start[0] = v.o64[j]
        end[0] = v.o64[j + 1]
    else:
        start[0] = v.o32[j]
        end[0] = v.o32[j + 1]
    return True


cdef inline uint8_t _tag_at(const uint8_t* p, Py_ssize_t n, int envelope) noexcept nogil:
    if n == 0:
        return 0
    if envelope != ENV_NONE and p[0] == 119:  # look inside XLogData
        return p[25] if n > 25 else 0
    return p[0]


cdef object _scatter_lists(Py_ssize_t n, list rows, list lists, object list_type):
    """A list column of ``n`` rows, null except at ``rows`` (few: control messages)."""
    if not rows:
        return null_array(n, list_type)
    if len({id(lst) for lst in lists}) == len(lists):
        values = pa.array([v for lst in lists for v in lst], type=list_type.value_type)
    else:     # a list given several times (a Relation resent unchanged) is converted once
        converted = {}
        for lst in lists:
            if id(lst) not in converted:
                converted[id(lst)] = pa.array(lst, type=list_type.value_type)
        values = pa.concat_arrays([converted[id(lst)] for lst in lists])
    counts = np.zeros(n, dtype=np.int32)
    counts[rows] = [len(lst) for lst in lists]
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = np.ones(n, dtype=bool)
    mask[rows] = False
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=list_type, mask=pa.array(mask))


cdef class _Columns:
    """Owns the builders of one output batch (freed here unless handed to Arrow)."""
    cdef Cols c
    cdef Py_ssize_t n
    cdef list rel_rows, rel_cols, trunc_rows, trunc_ids
    cdef dict rel_seen
    cdef bint ready

    def __cinit__(self, Py_ssize_t n, Py_ssize_t data_bytes):
        self.n = n
        self.ready = False
        self.rel_rows, self.rel_cols, self.trunc_rows, self.trunc_ids = [], [], [], []
        self.rel_seen = {}
        c = &self.c
        var_init(&c.mtype, n, n)
        var_init(&c.error, n, 0)
        var_init(&c.origin_name, n, 0)
        var_init(&c.namespace, n, 0)
        var_init(&c.relation_name, n, 0)
        var_init(&c.replica_identity, n, 0)
        var_init(&c.type_name, n, 0)
        var_init(&c.old_kind, n, 0)
        var_init(&c.prefix, n, 0)
        var_init(&c.content, n, 0)
        var_init(&c.gid, n, 0)
        fixed_init(&c.wal_start, n, 8)
        fixed_init(&c.wal_end, n, 8)
        fixed_init(&c.send_time, n, 8)
        fixed_init(&c.reply_requested, n, 0)
        fixed_init(&c.xid, n, 4)
        fixed_init(&c.subxid, n, 4)
        fixed_init(&c.final_lsn, n, 8)
        fixed_init(&c.commit_lsn, n, 8)
        fixed_init(&c.end_lsn, n, 8)
        fixed_init(&c.commit_ts, n, 8)
        fixed_init(&c.flags, n, 1)
        fixed_init(&c.origin_lsn, n, 8)
        fixed_init(&c.relation_id, n, 4)
        fixed_init(&c.type_oid, n, 4)
        fixed_init(&c.options, n, 1)
        fixed_init(&c.lsn, n, 8)
        fixed_init(&c.first_segment, n, 0)
        fixed_init(&c.abort_lsn, n, 8)
        fixed_init(&c.abort_ts, n, 8)
        fixed_init(&c.prepare_lsn, n, 8)
        fixed_init(&c.prepare_ts, n, 8)
        fixed_init(&c.prepare_end_lsn, n, 8)
        fixed_init(&c.rollback_end_lsn, n, 8)
        fixed_init(&c.rollback_ts, n, 8)
        tl_init(&c.old_tuple, n)
        tl_init(&c.new_tuple, n)
        # a 't'/'b' value takes at least 5 payload bytes: reserve for that many up front,
        # so the kind and offset buffers rarely grow (each growth copies them)
        if (mem_reserve(&c.new_tuple.vdata, data_bytes) < 0
                or mem_reserve(&c.new_tuple.kinds, data_bytes // 5 + 16) < 0
                or mem_reserve(&c.new_tuple.voffs, 4 * (data_bytes // 5 + 16)) < 0):
            raise MemoryError()
        self.ready = True

    def __dealloc__(self):
        c = &self.c
        var_free(&c.mtype)
        var_free(&c.error)
        var_free(&c.origin_name)
        var_free(&c.namespace)
        var_free(&c.relation_name)
        var_free(&c.replica_identity)
        var_free(&c.type_name)
        var_free(&c.old_kind)
        var_free(&c.prefix)
        var_free(&c.content)
        var_free(&c.gid)
        fixed_free(&c.wal_start)
        fixed_free(&c.wal_end)
        fixed_free(&c.send_time)
        fixed_free(&c.reply_requested)
        fixed_free(&c.xid)
        fixed_free(&c.subxid)
        fixed_free(&c.final_lsn)
        fixed_free(&c.commit_lsn)
        fixed_free(&c.end_lsn)
        fixed_free(&c.commit_ts)
        fixed_free(&c.flags)
        fixed_free(&c.origin_lsn)
        fixed_free(&c.relation_id)
        fixed_free(&c.type_oid)
        fixed_free(&c.options)
        fixed_free(&c.lsn)
        fixed_free(&c.first_segment)
        fixed_free(&c.abort_lsn)
        fixed_free(&c.abort_ts)
        fixed_free(&c.prepare_lsn)
        fixed_free(&c.prepare_ts)
        fixed_free(&c.prepare_end_lsn)
        fixed_free(&c.rollback_end_lsn)
        fixed_free(&c.rollback_ts)
        tl_free(&c.old_tuple)
        tl_free(&c.new_tuple)

    cdef object finish(self):
        cdef Py_ssize_t n = self.n
        c = &self.c
        T = _TYPES
        arrays = {
            "type": var_finish(&c.mtype, n, T["type"]),
            "error": var_finish(&c.error, n, T["error"]),
            "wal_start": fixed_finish(&c.wal_start, n, T["wal_start"]),
            "wal_end": fixed_finish(&c.wal_end, n, T["wal_end"]),
            "send_time": fixed_finish(&c.send_time, n, T["send_time"]),
            "reply_requested": fixed_finish(&c.reply_requested, n, T["reply_requested"]),
            "xid": fixed_finish(&c.xid, n, T["xid"]),
            "subxid": fixed_finish(&c.subxid, n, T["subxid"]),
            "final_lsn": fixed_finish(&c.final_lsn, n, T["final_lsn"]),
            "commit_lsn": fixed_finish(&c.commit_lsn, n, T["commit_lsn"]),
            "end_lsn": fixed_finish(&c.end_lsn, n, T["end_lsn"]),
            "commit_ts": fixed_finish(&c.commit_ts, n, T["commit_ts"]),
            "flags": fixed_finish(&c.flags, n, T["flags"]),
            "origin_lsn": fixed_finish(&c.origin_lsn, n, T["origin_lsn"]),
            "origin_name": var_finish(&c.origin_name, n, T["origin_name"]),
            "relation_id": fixed_finish(&c.relation_id, n, T["relation_id"]),
            "namespace": var_finish(&c.namespace, n, T["namespace"]),
            "relation_name": var_finish(&c.relation_name, n, T["relation_name"]),
            "replica_identity": var_finish(&c.replica_identity, n, T["replica_identity"]),
            "columns": _scatter_lists(n, self.rel_rows, self.rel_cols, RELATION_COLUMNS_TYPE),
            "type_oid": fixed_finish(&c.type_oid, n, T["type_oid"]),
            "type_name": var_finish(&c.type_name, n, T["type_name"]),
            "old_kind": var_finish(&c.old_kind, n, T["old_kind"]),
            "old_tuple": tl_finish(&c.old_tuple, n, T["old_tuple"]),
            "new_tuple": tl_finish(&c.new_tuple, n, T["new_tuple"]),
            "options": fixed_finish(&c.options, n, T["options"]),
            "relation_ids": _scatter_lists(n, self.trunc_rows, self.trunc_ids, _RELIDS_TYPE),
            "lsn": fixed_finish(&c.lsn, n, T["lsn"]),
            "prefix": var_finish(&c.prefix, n, T["prefix"]),
            "content": var_finish(&c.content, n, T["content"]),
            "first_segment": fixed_finish(&c.first_segment, n, T["first_segment"]),
            "abort_lsn": fixed_finish(&c.abort_lsn, n, T["abort_lsn"]),
            "abort_ts": fixed_finish(&c.abort_ts, n, T["abort_ts"]),
            "prepare_lsn": fixed_finish(&c.prepare_lsn, n, T["prepare_lsn"]),
            "prepare_ts": fixed_finish(&c.prepare_ts, n, T["prepare_ts"]),
            "gid": var_finish(&c.gid, n, T["gid"]),
            "prepare_end_lsn": fixed_finish(&c.prepare_end_lsn, n, T["prepare_end_lsn"]),
            "rollback_end_lsn": fixed_finish(&c.rollback_end_lsn, n, T["rollback_end_lsn"]),
            "rollback_ts": fixed_finish(&c.rollback_ts, n, T["rollback_ts"]),
        }
        return pa.StructArray.from_arrays([arrays[f.name] for f in MESSAGE_FIELDS], fields=MESSAGE_FIELDS)


# facts.CONTROL_TAGS by tag byte
cdef bint _IS_CONTROL[256]
for _t in CONTROL_TAGS.encode():
    _IS_CONTROL[_t] = True


def initial_stream_state(arr, int envelope, bint control):
    """Whether ``arr`` begins inside a Stream Start/Stop block, from its first row that
    decides it, among the control rows (``control``: those ``ControlPlan`` sees) or
    among the others. A Stream Stop says inside; a Stream Start, or any message that is
    never sent inside a stream block (Begin, Commit, Origin, the two-phase and stream
    ends), outside; a R/Y/I/U/D/T/M row that parses exactly with the streaming xid or
    exactly without it, not both, says which. None if no row decides.

    The caller asks the control rows first: then the sequential decoder and the plan,
    which sees only them, agree even on an archive whose markers are damaged.

    Why not the first S/E alone: a stream block can hold more rows than a batch or a
    partition (its size is ``logical_decoding_work_mem``), so a batch cut inside one has
    no S/E at all. Its Inserts, Updates and Deletes decide it: their tuple marker sits 4
    bytes later with the xid. Relations and Types with a namespace of 4+ characters
    parse both ways and decide nothing. Rows are parsed only until one decides."""
    cdef _Rows v = _rows_of(arr)
    cdef Py_ssize_t i, start, end
    cdef uint8_t tag
    cdef Reader r
    cdef Parsed m
    cdef Scratch s
    scratch_init(&s)
    try:
        for i in range(len(arr)):
            if not _row_span(&v, i, &start, &end):
                continue
            tag = _tag_at(v.data + start, end - start, envelope)
            if control != _IS_CONTROL[tag]:
                continue
            if tag == TAG_STREAM_STOP:
                return True
            if control and not is_streamable(tag):   # S B C O b P K r c A p: outside
                return False
            if not is_streamable(tag):
                continue
            reader_init(&r, v.data + start, end - start)
            s.ncols = 0
            # STREAM_UNKNOWN: 0 only when exactly one reading consumes the row; it is
            # then the reading with the xid or without
            if parse_payload(&r, &m, &s, STREAM_UNKNOWN, envelope) == 0:
                return bool(m.has_xid)
        return None
    finally:
        scratch_free(&s)


def tags_of(arr, int envelope):
    """The message tag byte of every row (inside XLogData frames too); 0 for a null or
    empty row. Reads one byte per row: the cheap first pass of parallel decoding."""
    cdef _Rows v = _rows_of(arr)
    cdef Py_ssize_t i, start, end
    out = np.zeros(len(arr), dtype=np.uint8)
    cdef uint8_t[::1] o = out
    cdef Py_ssize_t n = len(arr)
    with nogil:
        for i in range(n):
            if _row_span(&v, i, &start, &end):
                o[i] = _tag_at(v.data + start, end - start, envelope)
    return out


#: The largest payload decoded: the output's binary columns have 32-bit offsets, and one
#: payload's values (or its Message content) may all land in one of them. A larger
#: payload is an error row; binary_chunks keeps every other chunk under 1 GiB.
cdef Py_ssize_t _MAX_PAYLOAD = 2147483647 - 64
MAX_PAYLOAD_BYTES = _MAX_PAYLOAD


cdef str _oversize_error(int tag, Py_ssize_t size):
    cls = MESSAGE_CLASSES.get(chr(tag))
    name = f"{cls.__name__} ({chr(tag)!r})" if cls is not None else f"payload of type byte 0x{tag:02x}"
    return (f"{name} at byte 0: the payload is {size:,} bytes, more than the {MAX_PAYLOAD_BYTES:,} "
            "an output column can hold")


def decode_chunk(arr, int envelope, int stream, stream_rows=None):
    """Decode one ``pa.BinaryArray``/``pa.LargeBinaryArray`` (any slice offset).

    ``envelope``: ENV_AUTO/NONE/XLOGDATA (0/1/2); ``stream``: whether the first row is
    inside a Stream Start/Stop block, 0 or 1 (``batch.decode_batch_with_state`` infers
    it over all of its chunks). ``stream_rows``: optional uint8
    array, the stream state of every row given by the caller (rows that are not
    contiguous in arrival order, as in parallel decoding); S/E rows then do not change it.
    Returns ``(StructArray, stream state after the last row)``.
    """
    cdef const uint8_t[::1] per_row
    cdef bint explicit = stream_rows is not None
    if stream != STREAM_NO and stream != STREAM_YES:
        raise ValueError(f"stream must be 0 or 1, not {stream}")
    if explicit:
        per_row = np.ascontiguousarray(stream_rows, dtype=np.uint8)
        if per_row.shape[0] != len(arr):
            raise ValueError("stream_rows must have one entry per row")
    cdef Py_ssize_t n = len(arr)
    cdef _Rows v = _rows_of(arr)
    cdef const uint8_t* dp = v.data
    cdef Py_ssize_t i, start, end, total
    cdef Reader r
    cdef Parsed m
    cdef Scratch s
    cdef _Columns cols
    cdef Py_ssize_t k
    cdef int rc
    cdef const uint8_t* src_end
    cdef Cols* cp
    cdef bint oom = False
    if n == 0:
        return _Columns(0, 0).finish(), (stream == STREAM_YES)
    total = (v.o64[v.off + n] - v.o64[v.off]) if v.o64 != NULL else (v.o32[v.off + n] - v.o32[v.off])
    if total > MAX_PAYLOAD_BYTES and n > 1:
        raise ValueError(f"decode_chunk takes at most {MAX_PAYLOAD_BYTES:,} payload bytes at once, not "
                         f"{total:,}: split the input (arrays.binary_chunks)")
    cols = _Columns(n, total if total <= MAX_PAYLOAD_BYTES else 0)
    # The end of readable input memory (over-reads for short copies stop here).
    src_end = dp + v.data_size

    scratch_init(&s)
    cp = &cols.c
    # The loop runs without the GIL (other threads decode other pieces meanwhile); it
    # takes it back only for what makes Python objects: an error row's text, a Relation's
    # column list, a Truncate's relation ids. Running out of memory ends the loop.
    try:
        with nogil:
            for i in range(n):
                if not _row_span(&v, i, &start, &end):
                    with gil:
                        reader_init(&r, dp, 0)
                        reader_fail(&r, E_NULL_ROW, 0, b"payload", 0, 0)
                        err = error_text(&r, 0).encode()
                        oom = var_append(&cp.error, i, err, len(err)) < 0
                    if oom:
                        break
                    continue
                if end - start > _MAX_PAYLOAD:
                    with gil:
                        err = _oversize_error(dp[start], end - start).encode()
                        oom = var_append(&cp.error, i, err, len(err)) < 0
                    if oom:
                        break
                    continue
                if explicit:
                    stream = STREAM_YES if per_row[i] else STREAM_NO
                if (envelope != ENV_XLOGDATA and end > start and dp[start] == TAG_INSERT
                        and stream != STREAM_UNKNOWN):
                    rc = _fast_insert(cp, i, dp + start, end - start, stream, src_end)
                    if rc == 1:
                        continue
                    if rc < 0:
                        oom = True
                        break
                reader_init(&r, dp + start, end - start)
                s.ncols = 0
                if parse_payload(&r, &m, &s, stream, envelope) < 0:
                    with gil:
                        err = error_text(&r, m.tag).encode()
                        oom = var_append(&cp.error, i, err, len(err)) < 0
                    if oom:
                        break
                    continue
                if _emit(cp, i, dp + start, end - start, src_end, &m, &s) < 0:
                    oom = True
                    break
                if m.env != 107:
                    if _HAS_COLUMNS[m.tag]:
                        with gil:
                            cols.rel_rows.append(i)
                            # a Relation resent unchanged (its column list's bytes, from
                            # the first column's flags to the end, seen before) shares one
                            # list: 1,600 columns resent 20,000 times are not 32 M dicts
                            key = (<const char*>(dp + start + s.rcols[0].name.off - 1))[
                                :end - start - s.rcols[0].name.off + 1] if s.nrcols else b""
                            lst = cols.rel_seen.get(key)
                            if lst is None:
                                lst = cols.rel_seen[key] = [
                                    {"flags": s.rcols[k].flags,
                                     "name": (<const char*>(dp + start + s.rcols[k].name.off))[
                                         :s.rcols[k].name.len].decode(),
                                     "type_oid": s.rcols[k].type_oid,
                                     "type_modifier": s.rcols[k].type_modifier}
                                    for k in range(s.nrcols)]
                            cols.rel_cols.append(lst)
                    elif _HAS_RELIDS[m.tag]:
                        with gil:
                            cols.trunc_rows.append(i)
                            cols.trunc_ids.append([relid_at(dp + start, m.relids_off, k)
                                                   for k in range(m.nrels)])
                    elif m.tag == TAG_STREAM_START:
                        stream = STREAM_YES
                    elif m.tag == TAG_STREAM_STOP:
                        stream = STREAM_NO
    finally:
        scratch_free(&s)
    if oom:
        raise MemoryError()
    return cols.finish(), (stream == STREAM_YES)
