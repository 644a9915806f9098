# cython: language_level=3
"""``decode_message``: one payload to a message object (messages.py).

The parse is the shared C parse (_parse.pyx); this module only turns a ``Parsed``
struct into Python objects. It is not the hot path — ``decode_batch`` is.

There is no code per message: each message's class is called with its fields (the
facts table's field list) read from the struct by one reading per field, ``_FIELDS``.
A message made of known fields needs no edit here; a new field needs its reading.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_SetItem
from cpython.object cimport PyObject_Call
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

from pgoutput_codec.pgoutput._errors cimport make_error
from pgoutput_codec.pgoutput._facts cimport TAG_PRIMARY_KEEPALIVE, TAG_XLOG_DATA
from pgoutput_codec.pgoutput._parse cimport (
    ENV_AUTO, Parsed, STREAM_NO, STREAM_UNKNOWN, STREAM_YES, Scratch, Slice, TupleCol,
    parse_payload, relid_at, scratch_free, scratch_init,
)
from pgoutput_codec._native.reader cimport E_AMBIGUOUS, Reader, reader_init

import sys

from pgoutput_codec.pgoutput import messages as M
from pgoutput_codec.pgoutput.facts import MESSAGES

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


# How each message field is read from the Parsed struct: one entry per FIELD (not per
# message), so a message made of known fields is decoded from its class's field list.
cdef enum:
    K_XID = 1        # uint32, None unless has_xid
    K_U8
    K_U32
    K_U64
    K_I64
    K_BOOL
    K_CHAR           # uint8 as a 1-character str
    K_OPT_CHAR       # uint8, None when 0
    K_STR            # Slice as str
    K_BYTES          # Slice as bytes
    K_ABORT_U64      # None unless has_abort
    K_ABORT_I64
    K_OLD_TUPLE      # None unless old_kind
    K_NEW_TUPLE
    K_COLUMNS
    K_RELIDS

cdef Parsed _P
cdef Py_ssize_t _at(void* p):
    return <char*>p - <char*>&_P

_FIELDS = {
    "xid": (K_XID, _at(&_P.xid)),
    "subxid": (K_U32, _at(&_P.subxid)),
    "final_lsn": (K_U64, _at(&_P.final_lsn)),
    "commit_lsn": (K_U64, _at(&_P.commit_lsn)),
    "end_lsn": (K_U64, _at(&_P.end_lsn)),
    "commit_ts": (K_I64, _at(&_P.commit_ts)),
    "flags": (K_U8, _at(&_P.flags)),
    "origin_lsn": (K_U64, _at(&_P.origin_lsn)),
    "origin_name": (K_STR, _at(&_P.origin_name)),
    "relation_id": (K_U32, _at(&_P.relation_id)),
    "namespace": (K_STR, _at(&_P.namespace)),
    "relation_name": (K_STR, _at(&_P.relation_name)),
    "replica_identity": (K_CHAR, _at(&_P.replica_identity)),
    "columns": (K_COLUMNS, 0),
    "type_oid": (K_U32, _at(&_P.type_oid)),
    "type_name": (K_STR, _at(&_P.type_name)),
    "old_kind": (K_OPT_CHAR, _at(&_P.old_kind)),
    "old_tuple": (K_OLD_TUPLE, 0),
    "new_tuple": (K_NEW_TUPLE, 0),
    "options": (K_U8, _at(&_P.options)),
    "relation_ids": (K_RELIDS, 0),
    "lsn": (K_U64, _at(&_P.lsn)),
    "prefix": (K_STR, _at(&_P.prefix)),
    "content": (K_BYTES, _at(&_P.content)),
    "first_segment": (K_BOOL, _at(&_P.first_segment)),
    "abort_lsn": (K_ABORT_U64, _at(&_P.abort_lsn)),
    "abort_ts": (K_ABORT_I64, _at(&_P.abort_ts)),
    "prepare_lsn": (K_U64, _at(&_P.prepare_lsn)),
    "prepare_ts": (K_I64, _at(&_P.prepare_ts)),
    "gid": (K_STR, _at(&_P.gid)),
    "prepare_end_lsn": (K_U64, _at(&_P.prepare_end_lsn)),
    "rollback_end_lsn": (K_U64, _at(&_P.rollback_end_lsn)),
    "rollback_ts": (K_I64, _at(&_P.rollback_ts)),
}


# tag byte -> its class, field names and (kind, offset) per field, from the facts table
cdef enum:
    MAX_FIELDS = 16
cdef int _NF[256]
cdef int _KIND[256][MAX_FIELDS]
cdef Py_ssize_t _OFF[256][MAX_FIELDS]
cdef list _CLS = [None] * 256
cdef list _NAMES = [None] * 256
for _f in MESSAGES:
    _t = ord(_f.tag)
    if len(_f.fields) > MAX_FIELDS:
        raise ImportError(f"{_f.name} has more than {MAX_FIELDS} fields (_decode.pyx MAX_FIELDS)")
    for _i, _name in enumerate(_f.fields):
        if _name not in _FIELDS:
            raise ImportError(f"field {_name!r} of {_f.name} has no reading from the Parsed struct "
                              "(_decode.pyx _FIELDS)")
        _KIND[_t][_i], _OFF[_t][_i] = _FIELDS[_name]
    _NF[_t] = len(_f.fields)
    _CLS[_t] = _f.cls
    _NAMES[_t] = tuple(sys.intern(n) for n in _f.fields)


cdef inline object _field(const uint8_t* buf, Parsed* m, Scratch* s, int kind, Py_ssize_t off):
    cdef char* p = <char*>m + off
    cdef Py_ssize_t i
    if kind == K_XID:
        return m.xid if m.has_xid else None
    if kind == K_U8:
        return (<uint8_t*>p)[0]
    if kind == K_U32:
        return (<uint32_t*>p)[0]
    if kind == K_U64:
        return (<uint64_t*>p)[0]
    if kind == K_I64:
        return (<int64_t*>p)[0]
    if kind == K_BOOL:
        return bool((<uint8_t*>p)[0])
    if kind == K_CHAR:
        return chr((<uint8_t*>p)[0])
    if kind == K_OPT_CHAR:
        return chr((<uint8_t*>p)[0]) if (<uint8_t*>p)[0] else None
    if kind == K_STR:
        return _str(buf, (<Slice*>p)[0])
    if kind == K_BYTES:
        return _bytes(buf, (<Slice*>p).off, (<Slice*>p).len)
    if kind == K_ABORT_U64:
        return (<uint64_t*>p)[0] if m.has_abort else None
    if kind == K_ABORT_I64:
        return (<int64_t*>p)[0] if m.has_abort else None
    if kind == K_OLD_TUPLE:
        return _tuple(buf, s, m.old_start, m.old_n) if m.old_kind else None
    if kind == K_NEW_TUPLE:
        return _tuple(buf, s, m.new_start, m.new_n)
    if kind == K_COLUMNS:
        return tuple([_RelationColumn(s.rcols[i].flags, _str(buf, s.rcols[i].name),
                                      s.rcols[i].type_oid, s.rcols[i].type_modifier)
                      for i in range(s.nrcols)])
    if kind == K_RELIDS:
        return tuple([relid_at(buf, m.relids_off, i) for i in range(m.nrels)])
    raise AssertionError(f"unknown field kind {kind}")


cdef object _message(const uint8_t* buf, Parsed* m, Scratch* s):
    """The message object of ``m``, its fields read by the facts table's field list."""
    cdef uint8_t t = m.tag
    cdef int i
    cdef tuple names = <tuple>_NAMES[t]
    cdef dict kw = {}
    for i in range(_NF[t]):
        PyDict_SetItem(kw, <object>PyTuple_GET_ITEM(names, i), _field(buf, m, s, _KIND[t][i], _OFF[t][i]))
    return PyObject_Call(_CLS[t], (), kw)


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
