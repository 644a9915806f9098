# cython: language_level=3
"""``decode_message``: one payload to a message object (messages.py).

The parse is the shared C parse (_parse.pyx); this module only turns a ``Parsed``
struct into Python objects. It is not the hot path — ``decode_batch`` is.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint8_t

from pgoutput_codec.pgoutput._errors cimport make_error
from pgoutput_codec.pgoutput._facts cimport (
    TAG_BEGIN, TAG_BEGIN_PREPARE, TAG_COMMIT, TAG_COMMIT_PREPARED, TAG_DELETE, TAG_INSERT,
    TAG_LOGICAL_MESSAGE, TAG_ORIGIN, TAG_PREPARE, TAG_PRIMARY_KEEPALIVE, TAG_RELATION,
    TAG_ROLLBACK_PREPARED, TAG_STREAM_ABORT, TAG_STREAM_COMMIT, TAG_STREAM_PREPARE, TAG_STREAM_START,
    TAG_STREAM_STOP, TAG_TRUNCATE, TAG_TYPE, TAG_UPDATE, TAG_XLOG_DATA,
)
from pgoutput_codec.pgoutput._parse cimport (
    ENV_AUTO, Parsed, STREAM_NO, STREAM_UNKNOWN, STREAM_YES, Scratch, Slice, TupleCol,
    parse_payload, relid_at, scratch_free, scratch_init,
)
from pgoutput_codec._native.reader cimport E_AMBIGUOUS, Reader, reader_init

from pgoutput_codec.pgoutput import messages as M

cdef object _TupleColumn = M.TupleColumn
cdef object _RelationColumn = M.RelationColumn
# One shared object per kind: n/u columns cost no allocation.
cdef object _COL_N = M.TupleColumn("n", None)
cdef object _COL_U = M.TupleColumn("u", None)


cdef inline str _str(const uint8_t* buf, Slice s):
    # UTF-8 validity was checked by the parser.
    return PyUnicode_DecodeUTF8(<const char*>buf + s.off, s.len, NULL)


cdef inline bytes _bytes(const uint8_t* buf, Py_ssize_t off, Py_ssize_t n):
    return PyBytes_FromStringAndSize(<const char*>buf + off, n)


cdef tuple _tuple(const uint8_t* buf, Scratch* s, Py_ssize_t start, Py_ssize_t n):
    cdef Py_ssize_t i
    cdef TupleCol* c
    cdef list out = [None] * n
    for i in range(n):
        c = &s.cols[start + i]
        if c.kind == 110:
            out[i] = _COL_N
        elif c.kind == 117:
            out[i] = _COL_U
        else:
            out[i] = _TupleColumn("t" if c.kind == 116 else "b", _bytes(buf, c.off, c.len))
    return tuple(out)


cdef object _message(const uint8_t* buf, Parsed* m, Scratch* s):
    cdef uint8_t t = m.tag
    cdef Py_ssize_t i
    xid = m.xid if m.has_xid else None
    if t == TAG_INSERT:
        return M.Insert(xid=xid, relation_id=m.relation_id,
                        new_tuple=_tuple(buf, s, m.new_start, m.new_n))
    if t == TAG_UPDATE:
        return M.Update(xid=xid, relation_id=m.relation_id,
                        old_kind=chr(m.old_kind) if m.old_kind else None,
                        old_tuple=_tuple(buf, s, m.old_start, m.old_n) if m.old_kind else None,
                        new_tuple=_tuple(buf, s, m.new_start, m.new_n))
    if t == TAG_DELETE:
        return M.Delete(xid=xid, relation_id=m.relation_id, old_kind=chr(m.old_kind),
                        old_tuple=_tuple(buf, s, m.old_start, m.old_n))
    if t == TAG_BEGIN:
        return M.Begin(final_lsn=m.final_lsn, commit_ts=m.commit_ts, xid=m.xid)
    if t == TAG_COMMIT:
        return M.Commit(flags=m.flags, commit_lsn=m.commit_lsn, end_lsn=m.end_lsn,
                        commit_ts=m.commit_ts)
    if t == TAG_RELATION:
        return M.Relation(
            xid=xid, relation_id=m.relation_id, namespace=_str(buf, m.namespace),
            relation_name=_str(buf, m.relation_name), replica_identity=chr(m.replica_identity),
            columns=tuple([
                _RelationColumn(s.rcols[i].flags, _str(buf, s.rcols[i].name),
                                s.rcols[i].type_oid, s.rcols[i].type_modifier)
                for i in range(s.nrcols)
            ]),
        )
    if t == TAG_TYPE:
        return M.Type(xid=xid, type_oid=m.type_oid, namespace=_str(buf, m.namespace),
                      type_name=_str(buf, m.type_name))
    if t == TAG_ORIGIN:
        return M.Origin(origin_lsn=m.origin_lsn, origin_name=_str(buf, m.origin_name))
    if t == TAG_TRUNCATE:
        return M.Truncate(xid=xid, options=m.options,
                          relation_ids=tuple([relid_at(buf, m.relids_off, i) for i in range(m.nrels)]))
    if t == TAG_LOGICAL_MESSAGE:
        return M.LogicalMessage(xid=xid, flags=m.flags, lsn=m.lsn, prefix=_str(buf, m.prefix),
                                content=_bytes(buf, m.content.off, m.content.len))
    if t == TAG_STREAM_START:
        return M.StreamStart(xid=m.xid, first_segment=bool(m.first_segment))
    if t == TAG_STREAM_STOP:
        return M.StreamStop()
    if t == TAG_STREAM_COMMIT:
        return M.StreamCommit(xid=m.xid, flags=m.flags, commit_lsn=m.commit_lsn,
                              end_lsn=m.end_lsn, commit_ts=m.commit_ts)
    if t == TAG_STREAM_ABORT:
        if m.has_abort:
            return M.StreamAbort(xid=m.xid, subxid=m.subxid, abort_lsn=m.abort_lsn,
                                 abort_ts=m.abort_ts)
        return M.StreamAbort(xid=m.xid, subxid=m.subxid)
    if t == TAG_BEGIN_PREPARE:
        return M.BeginPrepare(prepare_lsn=m.prepare_lsn, end_lsn=m.end_lsn,
                              prepare_ts=m.prepare_ts, xid=m.xid, gid=_str(buf, m.gid))
    if t == TAG_PREPARE or t == TAG_STREAM_PREPARE:
        cls = M.Prepare if t == TAG_PREPARE else M.StreamPrepare
        return cls(flags=m.flags, prepare_lsn=m.prepare_lsn, end_lsn=m.end_lsn,
                   prepare_ts=m.prepare_ts, xid=m.xid, gid=_str(buf, m.gid))
    if t == TAG_COMMIT_PREPARED:
        return M.CommitPrepared(flags=m.flags, commit_lsn=m.commit_lsn, end_lsn=m.end_lsn,
                                commit_ts=m.commit_ts, xid=m.xid, gid=_str(buf, m.gid))
    if t == TAG_ROLLBACK_PREPARED:
        return M.RollbackPrepared(flags=m.flags, prepare_end_lsn=m.prepare_end_lsn,
                                  rollback_end_lsn=m.rollback_end_lsn, prepare_ts=m.prepare_ts,
                                  rollback_ts=m.rollback_ts, xid=m.xid, gid=_str(buf, m.gid))
    raise AssertionError(f"parser accepted unknown tag {t}")  # unreachable: the parser rejects it


cdef inline int stream_mode(object in_stream) except -1:
    if in_stream is None:
        return STREAM_UNKNOWN
    return STREAM_YES if in_stream else STREAM_NO


def decode_message(data, *, in_stream=None):
    """Decode one payload (bytes-like) into a message object.

    ``in_stream``: True/False says whether the payload was sent inside a Stream
    Start/Stop block (R/Y/I/U/D/T/M then carry a streaming xid); None finds the one
    reading that consumes the payload exactly and raises ``AmbiguousMessageError`` when
    both do. A payload starting with 'w' (XLogData) or 'k' (keepalive) is unwrapped.
    Raises ``PgoutputDecodeError`` (with ``offset`` and ``message_type``) on bad input.
    """
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef const uint8_t* buf = &view[0] if view.shape[0] else <const uint8_t*>b""
    cdef Reader r
    cdef Parsed m
    cdef Scratch s
    cdef int rc
    reader_init(&r, buf, view.shape[0])
    scratch_init(&s)
    try:
        rc = parse_payload(&r, &m, &s, stream_mode(in_stream), ENV_AUTO)
        if rc < 0:
            err = make_error(&r, m.tag)
            if r.err == E_AMBIGUOUS:
                err.readings = (decode_message(data, in_stream=False),
                                decode_message(data, in_stream=True))
            raise err
        if m.env == TAG_PRIMARY_KEEPALIVE:
            return M.PrimaryKeepalive(wal_end=m.wal_end, send_time=m.send_time,
                                      reply_requested=bool(m.reply_requested))
        msg = _message(buf, &m, &s)
        if m.env == TAG_XLOG_DATA:
            return M.XLogData(wal_start=m.wal_start, wal_end=m.wal_end, send_time=m.send_time,
                              payload=msg)
        return msg
    finally:
        scratch_free(&s)
