# cython: language_level=3
"""Parse one pgoutput payload into a ``Parsed`` struct (see _parse.pxd).

Layouts follow PostgreSQL's ``src/backend/replication/logical/proto.c``
(``logicalrep_write_*``) and ``walsender.c`` (XLogData / keepalive headers).
Dispatch is by position, never by searching for a letter: 'K', 'O', 'b' mean different
things at the top level and inside a message.
"""

from libc.stdint cimport int16_t, int32_t, uint8_t, uint32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from pgoutput_codec.pgoutput._facts cimport (
    TAG_BEGIN, TAG_BEGIN_PREPARE, TAG_COMMIT, TAG_COMMIT_PREPARED, TAG_DELETE, TAG_INSERT,
    TAG_LOGICAL_MESSAGE, TAG_ORIGIN, TAG_PREPARE, TAG_PRIMARY_KEEPALIVE, TAG_RELATION, TAG_ROLLBACK_PREPARED,
    TAG_STREAM_ABORT, TAG_STREAM_COMMIT, TAG_STREAM_PREPARE, TAG_STREAM_START, TAG_STREAM_STOP, TAG_TRUNCATE,
    TAG_TYPE, TAG_UPDATE, TAG_XLOG_DATA, is_streamable,
)
from pgoutput_codec._native.reader cimport (
    E_AMBIGUOUS, E_BAD_VALUE, E_EMPTY, E_NEGATIVE, E_NOT_ENVELOPE, E_SHORT,
    E_TOO_LONG, E_UNKNOWN_TAG, E_UTF8, Reader, _need, expect_end, pgc_be32, read_cstring, read_i16,
    read_i32, read_i64, read_u8, read_u32, read_u64, reader_fail, utf8_valid,
)

from pgoutput_codec.pgoutput.messages import MAX_IDENTIFIER_BYTES

cdef Py_ssize_t _MAX_IDENTIFIER = MAX_IDENTIFIER_BYTES


cdef void scratch_init(Scratch* s) noexcept nogil:
    s.cols = NULL
    s.ncols = 0
    s.cols_cap = 0
    s.rcols = NULL
    s.nrcols = 0
    s.rcols_cap = 0


cdef void scratch_free(Scratch* s) noexcept nogil:
    free(s.cols)
    free(s.rcols)
    scratch_init(s)


cdef int _reserve_cols(Reader* r, Scratch* s, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t cap
    cdef TupleCol* p
    if need <= s.cols_cap:
        return 0
    cap = s.cols_cap * 2
    if cap < need:
        cap = need
    if cap < 64:
        cap = 64
    p = <TupleCol*>realloc(s.cols, cap * sizeof(TupleCol))
    if p == NULL:
        return reader_fail(r, E_SHORT, r.pos, b"out of memory for TupleData columns", 0, 0)
    s.cols = p
    s.cols_cap = cap
    return 0


cdef int _reserve_rcols(Reader* r, Scratch* s, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t cap
    cdef RelCol* p
    if need <= s.rcols_cap:
        return 0
    cap = s.rcols_cap * 2
    if cap < need:
        cap = need
    if cap < 16:
        cap = 16
    p = <RelCol*>realloc(s.rcols, cap * sizeof(RelCol))
    if p == NULL:
        return reader_fail(r, E_SHORT, r.pos, b"out of memory for Relation columns", 0, 0)
    s.rcols = p
    s.rcols_cap = cap
    return 0


cdef inline int _name(Reader* r, Slice* out, const char* what) noexcept nogil:
    """A String that must be valid UTF-8 (identifiers, origin names, prefixes, gids)."""
    cdef Py_ssize_t start = r.pos
    if read_cstring(r, &out.off, &out.len, what) < 0:
        return -1
    if not utf8_valid(r.buf + out.off, out.len):
        return reader_fail(r, E_UTF8, start, what, 0, 0)
    return 0


cdef inline int _identifier(Reader* r, Slice* out, const char* what) noexcept nogil:
    """A name of a relation, column or type: a String no longer than a server writes."""
    cdef Py_ssize_t start = r.pos
    if _name(r, out, what) < 0:
        return -1
    if out.len > _MAX_IDENTIFIER:
        return reader_fail(r, E_TOO_LONG, start, what, _MAX_IDENTIFIER, out.len)
    return 0


cdef inline int _bool(Reader* r, uint8_t* out, const char* what) noexcept nogil:
    cdef Py_ssize_t at = r.pos
    if read_u8(r, out, what) < 0:
        return -1
    if out[0] > 1:
        return reader_fail(r, E_BAD_VALUE, at, what, 0, out[0])
    return 0


cdef int _tuple(Reader* r, Scratch* s, Py_ssize_t* start, Py_ssize_t* count) noexcept nogil:
    """TupleData: Int16 ncols, then per column kind n/u or t/b + Int32 len + bytes.

    Each column needs at least one byte, so reserving min(ncols, bytes left) slots is
    enough: a column count larger than that fails on a short read first. The loop keeps
    the reader's position in locals: stores through the uint8 kind would otherwise make
    the compiler reload ``r`` after every column.
    """
    cdef int16_t ncols
    cdef Py_ssize_t i, base, at, left, pos, n
    cdef const uint8_t* buf
    cdef int32_t vlen
    cdef uint32_t raw
    cdef uint8_t kind
    cdef TupleCol* c
    at = r.pos
    if read_i16(r, &ncols, b"TupleData column count") < 0:
        return -1
    if ncols < 0:
        return reader_fail(r, E_NEGATIVE, at, b"TupleData column count", 0, ncols)
    base = s.ncols
    left = r.len - r.pos
    if _reserve_cols(r, s, base + (ncols if ncols < left else left)) < 0:
        return -1
    buf = r.buf
    n = r.len
    pos = r.pos
    c = s.cols + base
    for i in range(ncols):
        if pos >= n:
            r.pos = pos
            reader_fail(r, E_SHORT, pos, b"TupleData column kind", 1, 0)
            r.err_col = <int>i
            return -1
        kind = buf[pos]
        c.kind = kind
        if kind == 116 or kind == 98:  # 't' text, 'b' binary
            at = pos + 1
            if n - at < 4:
                r.pos = pos
                reader_fail(r, E_SHORT, at, b"TupleData value length", 4, 0)
                r.err_col = <int>i
                return -1
            memcpy(&raw, buf + at, 4)
            vlen = <int32_t>pgc_be32(raw)
            if vlen < 0:
                r.pos = pos
                reader_fail(r, E_NEGATIVE, at, b"TupleData value length", 0, vlen)
                r.err_col = <int>i
                return -1
            if vlen > n - at - 4:
                r.pos = pos
                reader_fail(r, E_SHORT, at + 4, b"TupleData value", vlen, 0)
                r.err_col = <int>i
                return -1
            c.off = at + 4
            c.len = vlen
            pos = at + 4 + vlen
        elif kind == 110 or kind == 117:  # 'n' NULL, 'u' unchanged TOAST
            c.off = 0
            c.len = 0
            pos += 1
        else:
            r.pos = pos
            reader_fail(r, E_BAD_VALUE, pos, b"TupleData column kind", 0, kind)
            r.err_col = <int>i
            return -1
        c += 1
    r.pos = pos
    s.ncols = base + ncols
    start[0] = base
    count[0] = ncols
    return 0


# One parse function per message, in the order of facts.MESSAGES and of the plain-Python
# twin's readers (_parse_py.py): ``r`` is just after the tag (and the streaming xid);
# each returns 0, or -1 with the error recorded in ``r``.

cdef inline int _begin(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u64(r, &m.final_lsn, b"Begin final_lsn") < 0:
        return -1
    if read_i64(r, &m.commit_ts, b"Begin commit_ts") < 0:
        return -1
    if read_u32(r, &m.xid, b"Begin xid") < 0:
        return -1
    m.has_xid = True
    return 0


cdef inline int _commit(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u8(r, &m.flags, b"Commit flags") < 0:
        return -1
    if read_u64(r, &m.commit_lsn, b"Commit commit_lsn") < 0:
        return -1
    if read_u64(r, &m.end_lsn, b"Commit end_lsn") < 0:
        return -1
    return read_i64(r, &m.commit_ts, b"Commit commit_ts")


cdef inline int _origin(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u64(r, &m.origin_lsn, b"Origin origin_lsn") < 0:
        return -1
    return _name(r, &m.origin_name, b"Origin origin_name")


cdef int _relation(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    cdef int16_t ncols
    cdef Py_ssize_t i, at, left
    cdef RelCol* c
    cdef uint8_t ri
    if read_u32(r, &m.relation_id, b"Relation relation_id") < 0:
        return -1
    if _identifier(r, &m.namespace, b"Relation namespace") < 0:
        return -1
    if _identifier(r, &m.relation_name, b"Relation relation_name") < 0:
        return -1
    at = r.pos
    if read_u8(r, &ri, b"Relation replica_identity") < 0:
        return -1
    # relreplident: 'd' default, 'n' nothing, 'f' full, 'i' index
    if ri != 100 and ri != 110 and ri != 102 and ri != 105:
        return reader_fail(r, E_BAD_VALUE, at, b"Relation replica_identity", 0, ri)
    m.replica_identity = ri
    at = r.pos
    if read_i16(r, &ncols, b"Relation column count") < 0:
        return -1
    if ncols < 0:
        return reader_fail(r, E_NEGATIVE, at, b"Relation column count", 0, ncols)
    left = r.len - r.pos
    # each column takes at least 10 bytes (flags, NUL, 2 × Int32)
    if _reserve_rcols(r, s, ncols if ncols < left // 10 + 1 else left // 10 + 1) < 0:
        return -1
    s.nrcols = 0
    for i in range(ncols):
        if i >= s.rcols_cap and _reserve_rcols(r, s, i + 1) < 0:
            return -1
        c = &s.rcols[i]
        if read_u8(r, &c.flags, b"Relation column flags") < 0:
            break
        if _identifier(r, &c.name, b"Relation column name") < 0:
            break
        if read_u32(r, &c.type_oid, b"Relation column type_oid") < 0:
            break
        if read_i32(r, &c.type_modifier, b"Relation column type_modifier") < 0:
            break
        s.nrcols = i + 1
    if s.nrcols != ncols:
        r.err_col = <int>s.nrcols
        return -1
    return 0


cdef inline int _type(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u32(r, &m.type_oid, b"Type type_oid") < 0:
        return -1
    if _identifier(r, &m.namespace, b"Type namespace") < 0:
        return -1
    return _identifier(r, &m.type_name, b"Type type_name")


cdef inline int _insert(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    cdef uint8_t marker
    cdef Py_ssize_t at
    if read_u32(r, &m.relation_id, b"Insert relation_id") < 0:
        return -1
    at = r.pos
    if read_u8(r, &marker, b"Insert new tuple marker") < 0:
        return -1
    if marker != 78:  # 'N'
        return reader_fail(r, E_BAD_VALUE, at, b"Insert new tuple marker", 0, marker)
    return _tuple(r, s, &m.new_start, &m.new_n)


cdef inline int _update(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    cdef uint8_t marker
    cdef Py_ssize_t at
    if read_u32(r, &m.relation_id, b"Update relation_id") < 0:
        return -1
    at = r.pos
    if read_u8(r, &marker, b"Update tuple marker") < 0:
        return -1
    if marker == 75 or marker == 79:  # 'K' key / 'O' old row
        m.old_kind = marker
        if _tuple(r, s, &m.old_start, &m.old_n) < 0:
            return -1
        at = r.pos
        if read_u8(r, &marker, b"Update new tuple marker") < 0:
            return -1
    if marker != 78:  # 'N'
        return reader_fail(r, E_BAD_VALUE, at, b"Update new tuple marker", 0, marker)
    return _tuple(r, s, &m.new_start, &m.new_n)


cdef inline int _delete(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    cdef uint8_t marker
    cdef Py_ssize_t at
    if read_u32(r, &m.relation_id, b"Delete relation_id") < 0:
        return -1
    at = r.pos
    if read_u8(r, &marker, b"Delete old tuple marker") < 0:
        return -1
    if marker != 75 and marker != 79:  # 'K' / 'O'
        return reader_fail(r, E_BAD_VALUE, at, b"Delete old tuple marker", 0, marker)
    m.old_kind = marker
    return _tuple(r, s, &m.old_start, &m.old_n)


cdef inline int _truncate(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    cdef int32_t n32
    cdef Py_ssize_t at = r.pos
    if read_i32(r, &n32, b"Truncate relation count") < 0:
        return -1
    if n32 < 0:
        return reader_fail(r, E_NEGATIVE, at, b"Truncate relation count", 0, n32)
    if read_u8(r, &m.options, b"Truncate options") < 0:
        return -1
    m.nrels = n32
    if _need(r, <Py_ssize_t>n32 * 4, b"Truncate relation_ids") < 0:
        return -1
    m.relids_off = r.pos
    r.pos += <Py_ssize_t>n32 * 4
    return 0


cdef inline int _message(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    cdef int32_t n32
    cdef Py_ssize_t at
    if read_u8(r, &m.flags, b"Message flags") < 0:
        return -1
    if read_u64(r, &m.lsn, b"Message lsn") < 0:
        return -1
    if _name(r, &m.prefix, b"Message prefix") < 0:
        return -1
    at = r.pos
    if read_i32(r, &n32, b"Message content length") < 0:
        return -1
    if n32 < 0:
        return reader_fail(r, E_NEGATIVE, at, b"Message content length", 0, n32)
    if _need(r, n32, b"Message content") < 0:
        return -1
    m.content.off = r.pos
    m.content.len = n32
    r.pos += n32
    return 0


cdef inline int _stream_start(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u32(r, &m.xid, b"Stream Start xid") < 0:
        return -1
    m.has_xid = True
    return _bool(r, &m.first_segment, b"Stream Start first_segment")


cdef inline int _stream_stop(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    return 0


cdef inline int _stream_commit(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u32(r, &m.xid, b"Stream Commit xid") < 0:
        return -1
    m.has_xid = True
    if read_u8(r, &m.flags, b"Stream Commit flags") < 0:
        return -1
    if read_u64(r, &m.commit_lsn, b"Stream Commit commit_lsn") < 0:
        return -1
    if read_u64(r, &m.end_lsn, b"Stream Commit end_lsn") < 0:
        return -1
    return read_i64(r, &m.commit_ts, b"Stream Commit commit_ts")


cdef inline int _stream_abort(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u32(r, &m.xid, b"Stream Abort xid") < 0:
        return -1
    m.has_xid = True
    if read_u32(r, &m.subxid, b"Stream Abort subxid") < 0:
        return -1
    # abort_lsn/abort_ts only with streaming=parallel: decided by the bytes left.
    if r.pos < r.len:
        if read_u64(r, &m.abort_lsn, b"Stream Abort abort_lsn") < 0:
            return -1
        if read_i64(r, &m.abort_ts, b"Stream Abort abort_ts") < 0:
            return -1
        m.has_abort = True
    return 0


cdef inline int _begin_prepare(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u64(r, &m.prepare_lsn, b"Begin Prepare prepare_lsn") < 0:
        return -1
    if read_u64(r, &m.end_lsn, b"Begin Prepare end_lsn") < 0:
        return -1
    if read_i64(r, &m.prepare_ts, b"Begin Prepare prepare_ts") < 0:
        return -1
    if read_u32(r, &m.xid, b"Begin Prepare xid") < 0:
        return -1
    m.has_xid = True
    return _name(r, &m.gid, b"Begin Prepare gid")


cdef inline int _prepare(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    """Prepare, and Stream Prepare (the same fields)."""
    if read_u8(r, &m.flags, b"Prepare flags") < 0:
        return -1
    if read_u64(r, &m.prepare_lsn, b"Prepare prepare_lsn") < 0:
        return -1
    if read_u64(r, &m.end_lsn, b"Prepare end_lsn") < 0:
        return -1
    if read_i64(r, &m.prepare_ts, b"Prepare prepare_ts") < 0:
        return -1
    if read_u32(r, &m.xid, b"Prepare xid") < 0:
        return -1
    m.has_xid = True
    return _name(r, &m.gid, b"Prepare gid")


cdef inline int _commit_prepared(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u8(r, &m.flags, b"Commit Prepared flags") < 0:
        return -1
    if read_u64(r, &m.commit_lsn, b"Commit Prepared commit_lsn") < 0:
        return -1
    if read_u64(r, &m.end_lsn, b"Commit Prepared end_lsn") < 0:
        return -1
    if read_i64(r, &m.commit_ts, b"Commit Prepared commit_ts") < 0:
        return -1
    if read_u32(r, &m.xid, b"Commit Prepared xid") < 0:
        return -1
    m.has_xid = True
    return _name(r, &m.gid, b"Commit Prepared gid")


cdef inline int _rollback_prepared(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    if read_u8(r, &m.flags, b"Rollback Prepared flags") < 0:
        return -1
    if read_u64(r, &m.prepare_end_lsn, b"Rollback Prepared prepare_end_lsn") < 0:
        return -1
    if read_u64(r, &m.rollback_end_lsn, b"Rollback Prepared rollback_end_lsn") < 0:
        return -1
    if read_i64(r, &m.prepare_ts, b"Rollback Prepared prepare_ts") < 0:
        return -1
    if read_i64(r, &m.rollback_ts, b"Rollback Prepared rollback_ts") < 0:
        return -1
    if read_u32(r, &m.xid, b"Rollback Prepared xid") < 0:
        return -1
    m.has_xid = True
    return _name(r, &m.gid, b"Rollback Prepared gid")


cdef inline int _stream_prepare(Reader* r, Parsed* m, Scratch* s) noexcept nogil:
    return _prepare(r, m, s)


cdef int _pgoutput(Reader* r, Parsed* m, Scratch* s, int stream) noexcept nogil:
    """One pgoutput message starting at r.pos (the tag byte). Row changes are tried first:
    they are most of any stream."""
    cdef uint8_t tag
    cdef int rc
    s.ncols = 0
    s.nrcols = 0
    m.has_xid = False
    m.old_kind = 0
    m.old_n = 0
    m.new_n = 0
    m.has_abort = False
    if r.pos >= r.len:
        return reader_fail(r, E_EMPTY, r.pos, b"message type", 1, 0)
    tag = r.buf[r.pos]
    m.tag = tag
    r.pos += 1
    # The streaming xid (proto.c: "transaction ID (if not valid, we're not streaming)")
    if stream == STREAM_YES and is_streamable(tag):
        if read_u32(r, &m.xid, b"streaming xid") < 0:
            return -1
        m.has_xid = True

    if tag == TAG_INSERT:
        rc = _insert(r, m, s)
    elif tag == TAG_UPDATE:
        rc = _update(r, m, s)
    elif tag == TAG_DELETE:
        rc = _delete(r, m, s)
    elif tag == TAG_BEGIN:
        rc = _begin(r, m, s)
    elif tag == TAG_COMMIT:
        rc = _commit(r, m, s)
    elif tag == TAG_RELATION:
        rc = _relation(r, m, s)
    elif tag == TAG_TYPE:
        rc = _type(r, m, s)
    elif tag == TAG_ORIGIN:
        rc = _origin(r, m, s)
    elif tag == TAG_TRUNCATE:
        rc = _truncate(r, m, s)
    elif tag == TAG_LOGICAL_MESSAGE:
        rc = _message(r, m, s)
    elif tag == TAG_STREAM_START:
        rc = _stream_start(r, m, s)
    elif tag == TAG_STREAM_STOP:
        rc = _stream_stop(r, m, s)
    elif tag == TAG_STREAM_COMMIT:
        rc = _stream_commit(r, m, s)
    elif tag == TAG_STREAM_ABORT:
        rc = _stream_abort(r, m, s)
    elif tag == TAG_BEGIN_PREPARE:
        rc = _begin_prepare(r, m, s)
    elif tag == TAG_PREPARE:
        rc = _prepare(r, m, s)
    elif tag == TAG_STREAM_PREPARE:
        rc = _stream_prepare(r, m, s)
    elif tag == TAG_COMMIT_PREPARED:
        rc = _commit_prepared(r, m, s)
    elif tag == TAG_ROLLBACK_PREPARED:
        rc = _rollback_prepared(r, m, s)
    else:
        return reader_fail(r, E_UNKNOWN_TAG, r.pos - 1, b"message type", 0, tag)
    if rc < 0:
        return -1
    return expect_end(r, b"message")


cdef int _pgoutput_any(Reader* r, Parsed* m, Scratch* s, int stream) noexcept nogil:
    """Parse with a known stream state, or find the one reading that fits exactly."""
    cdef Reader r0, r1
    cdef Py_ssize_t start = r.pos
    cdef int rc0, rc1
    if stream != STREAM_UNKNOWN or r.pos >= r.len or not is_streamable(r.buf[r.pos]):
        return _pgoutput(r, m, s, STREAM_NO if stream == STREAM_UNKNOWN else stream)
    r1 = r[0]
    rc1 = _pgoutput(&r1, m, s, STREAM_YES)
    r0 = r[0]
    rc0 = _pgoutput(&r0, m, s, STREAM_NO)
    if rc0 == 0 and rc1 == 0:
        return reader_fail(r, E_AMBIGUOUS, start, b"streaming xid", 0, 0)
    if rc0 == 0:
        r[0] = r0
        return 0
    if rc1 == 0:   # parse again: the no-xid attempt overwrote m and the scratch
        r[0] = r1
        r.pos = start
        return _pgoutput(r, m, s, STREAM_YES)
    # Neither fits: report the reading that got further (tie: without xid).
    r[0] = r1 if r1.err_pos > r0.err_pos else r0
    m.tag = r.buf[start]
    return -1


cdef int parse_payload(Reader* r, Parsed* m, Scratch* s, int stream, int envelope) noexcept nogil:
    cdef uint8_t tag
    m.env = 0
    if r.len == 0:
        m.tag = 0
        return reader_fail(r, E_EMPTY, 0, b"message type", 1, 0)
    tag = r.buf[0]
    m.tag = tag
    if envelope != ENV_NONE and (tag == TAG_XLOG_DATA or tag == TAG_PRIMARY_KEEPALIVE):
        m.env = tag
        r.pos = 1
        if tag == TAG_PRIMARY_KEEPALIVE:
            if read_u64(r, &m.wal_end, b"keepalive wal_end") < 0:
                return -1
            if read_i64(r, &m.send_time, b"keepalive send_time") < 0:
                return -1
            if _bool(r, &m.reply_requested, b"keepalive reply_requested") < 0:
                return -1
            return expect_end(r, b"keepalive")
        if read_u64(r, &m.wal_start, b"XLogData wal_start") < 0:
            return -1
        if read_u64(r, &m.wal_end, b"XLogData wal_end") < 0:
            return -1
        if read_i64(r, &m.send_time, b"XLogData send_time") < 0:
            return -1
        if r.pos >= r.len:
            return reader_fail(r, E_EMPTY, r.pos, b"XLogData payload", 1, 0)
        return _pgoutput_any(r, m, s, stream)
    if envelope == ENV_XLOGDATA:
        return reader_fail(r, E_NOT_ENVELOPE, 0, b"envelope type", 0, tag)
    return _pgoutput_any(r, m, s, stream)


cdef uint32_t relid_at(const uint8_t* buf, Py_ssize_t off, Py_ssize_t i) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, buf + off + 4 * i, 4)
    return pgc_be32(v)
