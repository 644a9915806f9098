"""``encode_message``: the exact inverse of the pgoutput decoder (docs/protocol.md).

Byte layouts follow PostgreSQL's ``src/backend/replication/logical/proto.c``
(``logicalrep_write_*``) and the walsender's XLogData / keepalive frames. Field widths
are written once, in the precompiled ``struct.Struct`` objects below. The fast path
packs straight away; only when ``struct`` refuses a value does the slow path run to
name the offending field (so building millions of Insert payloads stays cheap).
"""

from __future__ import annotations

import struct

from ..errors import PgoutputEncodeError
from .facts import FACTS
from .messages import (
    Begin, BeginPrepare, Commit, CommitPrepared, Delete, Insert, LogicalMessage, Origin,
    PrimaryKeepalive, Prepare, Relation, RollbackPrepared, StreamAbort, StreamCommit,
    StreamPrepare, StreamStart, StreamStop, Truncate, Type, Update, XLogData,
)

__all__ = ["encode_message", "encode_tuple"]

# Value ranges by struct code: LSNs 'Q', timestamps 'q', xids/OIDs 'I', type_modifier
# and lengths 'i', Int16 counts 'h', Int8 flags 'B'.
_RANGES = {
    "B": (0, 0xFF),
    "h": (0, 0x7FFF),
    "H": (0, 0xFFFF),
    "I": (0, 0xFFFFFFFF),
    "i": (-0x80000000, 0x7FFFFFFF),
    "Q": (0, 0xFFFFFFFFFFFFFFFF),
    "q": (-0x8000000000000000, 0x7FFFFFFFFFFFFFFF),
}
_WHAT = {
    "B": "Int8 (0..255)", "h": "Int16 count (0..32767)", "H": "UInt16",
    "I": "UInt32", "i": "Int32", "Q": "UInt64", "q": "Int64",
}

_TAG_XID = struct.Struct("!BI")
_U32 = struct.Struct("!I")
_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")
_BEGIN = struct.Struct("!BQqI")
_COMMIT = struct.Struct("!BBQQq")
_ORIGIN = struct.Struct("!BQ")
_REL_TAIL = struct.Struct("!Bh")
_BYTE = [bytes((i,)) for i in range(256)]
_RELCOL_TAIL = struct.Struct("!Ii")
_TRUNCATE = struct.Struct("!iB")
_MESSAGE_HEAD = struct.Struct("!BBQ")  # dummy lead byte keeps _pack uniform
_STREAM_START = struct.Struct("!BIB")
_STREAM_COMMIT = struct.Struct("!BIBQQq")
_STREAM_ABORT = struct.Struct("!BII")
_STREAM_ABORT_PARALLEL = struct.Struct("!BIIQq")
_BEGIN_PREPARE = struct.Struct("!BQQqI")
_PREPARE = struct.Struct("!BBQQqI")  # also Commit Prepared and Stream Prepare
_ROLLBACK_PREPARED = struct.Struct("!BBQQqqI")
_XLOGDATA = struct.Struct("!BQQq")
_KEEPALIVE = struct.Struct("!BQqB")

_NULL = b"n"
_UNCHANGED = b"u"
_KIND_TAG = {"t": b"t", "b": b"b"}


def _fail(msg, text):
    return PgoutputEncodeError(f"{type(msg).__name__} ('{msg.type}'): {text}")


def _check(msg, fields):
    """Slow path: name the first field whose value does not fit its struct code."""
    for name, code, value in fields:
        lo, hi = _RANGES[code]
        if not isinstance(value, int):
            raise _fail(msg, f"{name} must be an int, not {type(value).__name__}")
        if not lo <= value <= hi:
            raise _fail(msg, f"{name} = {value} does not fit {_WHAT[code]}")


def _pack(msg, st, tag, fields):
    try:
        return st.pack(tag, *[f[2] for f in fields])
    except struct.error:
        _check(msg, fields)
        raise  # pragma: no cover - _check always raises when struct refuses


def _cstring(msg, name, value):
    if not isinstance(value, str):
        raise _fail(msg, f"{name} must be a str, not {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _fail(msg, f"{name} is not encodable as UTF-8: {e.reason}") from None
    if b"\0" in raw:
        raise _fail(msg, f"{name} contains a NUL character (a String is NUL-terminated)")
    return raw + b"\0"


def _bool_byte(msg, name, value):
    if value is True or value is False or (type(value) is int and value in (0, 1)):
        return int(value)
    raise _fail(msg, f"{name} must be a bool, not {value!r}")


def _prefix(msg, tag):
    xid = msg.xid
    if xid is None:
        return tag
    if type(xid) is int and 0 <= xid <= 0xFFFFFFFF:
        return _TAG_XID.pack(ord(tag), xid)
    _check(msg, [("xid", "I", xid)])
    raise AssertionError("unreachable")  # pragma: no cover


def _tuple_parts(msg, name, tup, out):
    """Append the TupleData of ``tup`` to ``out`` (a list of bytes)."""
    if not isinstance(tup, tuple):
        raise _fail(msg, f"{name} must be a tuple of TupleColumn, not {type(tup).__name__}")
    n = len(tup)
    if n > 0x7FFF:
        raise _fail(msg, f"{name} has {n} columns, more than an Int16 count holds (32767)")
    out.append(_I16.pack(n))
    for i, col in enumerate(tup):
        try:
            kind, data = col
        except (TypeError, ValueError):
            raise _fail(msg, f"{name} column {i} must be a (kind, data) pair, not {col!r}") from None
        if kind == "n" or kind == "u":
            if data is not None:
                raise _fail(msg, f"{name} column {i} of kind {kind!r} must have data None")
            out.append(_NULL if kind == "n" else _UNCHANGED)
            continue
        tag = _KIND_TAG.get(kind) if isinstance(kind, str) else None
        if tag is None:
            raise _fail(msg, f"{name} column {i} kind {kind!r} is not one of 'n', 'u', 't', 'b'")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise _fail(msg, f"{name} column {i} of kind {kind!r} needs bytes data, "
                             f"not {type(data).__name__}")
        data = bytes(data)
        if len(data) > 0x7FFFFFFF:
            raise _fail(msg, f"{name} column {i} value of {len(data)} bytes does not fit an Int32 length")
        out.append(tag)
        out.append(_I32.pack(len(data)))
        out.append(data)
    return out


def encode_tuple(columns) -> bytes:
    """TupleData bytes of a tuple of ``TupleColumn`` (Int16 count, then each column)."""
    return b"".join(_tuple_parts(Insert(relation_id=0, new_tuple=()), "tuple", tuple(columns), []))


def _relid(msg):
    rid = msg.relation_id
    if type(rid) is int and 0 <= rid <= 0xFFFFFFFF:
        return _U32.pack(rid)
    _check(msg, [("relation_id", "I", rid)])
    raise AssertionError("unreachable")  # pragma: no cover


# One encoder per message, in the order of facts.MESSAGES.

_WRITE = {}


def _writes(*classes):
    def register(encoder):
        _WRITE.update(dict.fromkeys(classes, encoder))
        return encoder
    return register


@_writes(Begin)
def _enc_begin(m):
    return _pack(m, _BEGIN, 0x42, [("final_lsn", "Q", m.final_lsn), ("commit_ts", "q", m.commit_ts),
                                    ("xid", "I", m.xid)])


@_writes(Commit)
def _enc_commit(m):
    return _pack(m, _COMMIT, 0x43, [("flags", "B", m.flags), ("commit_lsn", "Q", m.commit_lsn),
                                     ("end_lsn", "Q", m.end_lsn), ("commit_ts", "q", m.commit_ts)])


@_writes(Origin)
def _enc_origin(m):
    return _pack(m, _ORIGIN, 0x4F, [("origin_lsn", "Q", m.origin_lsn)]) + _cstring(m, "origin_name", m.origin_name)


@_writes(Relation)
def _enc_relation(m):
    ri = m.replica_identity
    if ri not in ("d", "n", "f", "i"):
        raise _fail(m, f"replica_identity {ri!r} is not one of 'd', 'n', 'f', 'i'")
    cols = m.columns
    if not isinstance(cols, tuple):
        raise _fail(m, f"columns must be a tuple of RelationColumn, not {type(cols).__name__}")
    if len(cols) > 0x7FFF:
        raise _fail(m, f"{len(cols)} columns, more than an Int16 count holds (32767)")
    out = [_prefix(m, b"R"), _relid(m), _cstring(m, "namespace", m.namespace),
           _cstring(m, "relation_name", m.relation_name), _REL_TAIL.pack(ord(ri), len(cols))]
    for i, col in enumerate(cols):
        try:
            flags, name, type_oid, type_modifier = col
        except (TypeError, ValueError):
            raise _fail(m, f"columns[{i}] must be a RelationColumn, not {col!r}") from None
        if not _is_u8(flags):
            _check(m, [(f"columns[{i}].flags", "B", flags)])
        out.append(_BYTE[flags])
        out.append(_cstring(m, f"columns[{i}].name", name))
        try:
            out.append(_RELCOL_TAIL.pack(type_oid, type_modifier))
        except struct.error:
            _check(m, [(f"columns[{i}].type_oid", "I", type_oid),
                       (f"columns[{i}].type_modifier", "i", type_modifier)])
            raise  # pragma: no cover
    return b"".join(out)


@_writes(Type)
def _enc_type(m):
    return b"".join((_prefix(m, b"Y"), _pack_u32(m, "type_oid", m.type_oid),
                     _cstring(m, "namespace", m.namespace), _cstring(m, "type_name", m.type_name)))


def _pack_u32(m, name, value):
    if type(value) is int and 0 <= value <= 0xFFFFFFFF:
        return _U32.pack(value)
    _check(m, [(name, "I", value)])
    raise AssertionError("unreachable")  # pragma: no cover


@_writes(Insert)
def _enc_insert(m):
    out = [_prefix(m, b"I"), _relid(m), b"N"]
    return b"".join(_tuple_parts(m, "new_tuple", m.new_tuple, out))


@_writes(Update)
def _enc_update(m):
    out = [_prefix(m, b"U"), _relid(m)]
    kind = m.old_kind
    if kind is None:
        if m.old_tuple is not None:
            raise _fail(m, "old_tuple is set but old_kind is None (must be 'K' or 'O')")
    elif kind == "K" or kind == "O":
        if m.old_tuple is None:
            raise _fail(m, f"old_kind is {kind!r} but old_tuple is None")
        out.append(kind.encode())
        _tuple_parts(m, "old_tuple", m.old_tuple, out)
    else:
        raise _fail(m, f"old_kind {kind!r} is not one of 'K', 'O', None")
    out.append(b"N")
    return b"".join(_tuple_parts(m, "new_tuple", m.new_tuple, out))


@_writes(Delete)
def _enc_delete(m):
    kind = m.old_kind
    if kind != "K" and kind != "O":
        raise _fail(m, f"old_kind {kind!r} is not one of 'K', 'O'")
    out = [_prefix(m, b"D"), _relid(m), kind.encode()]
    return b"".join(_tuple_parts(m, "old_tuple", m.old_tuple, out))


@_writes(Truncate)
def _enc_truncate(m):
    ids = m.relation_ids
    if not isinstance(ids, tuple):
        raise _fail(m, f"relation_ids must be a tuple of ints, not {type(ids).__name__}")
    n = len(ids)
    head = _prefix(m, b"T") + _pack(m, _TRUNCATE, n, [("options", "B", m.options)])
    try:
        body = struct.pack(f"!{n}I", *ids)
    except struct.error:
        _check(m, [(f"relation_ids[{i}]", "I", v) for i, v in enumerate(ids)])
        raise  # pragma: no cover
    return head + body


@_writes(LogicalMessage)
def _enc_message(m):
    content = m.content
    if not isinstance(content, (bytes, bytearray, memoryview)):
        raise _fail(m, f"content must be bytes, not {type(content).__name__}")
    content = bytes(content)
    if len(content) > 0x7FFFFFFF:
        raise _fail(m, f"content of {len(content)} bytes does not fit an Int32 length")
    head = _pack(m, _MESSAGE_HEAD, 0, [("flags", "B", m.flags), ("lsn", "Q", m.lsn)])[1:]
    return b"".join((_prefix(m, b"M"), head, _cstring(m, "prefix", m.prefix),
                     _I32.pack(len(content)), content))


def _is_u8(v):
    return type(v) is int and 0 <= v <= 0xFF


@_writes(StreamStart)
def _enc_stream_start(m):
    fs = _bool_byte(m, "first_segment", m.first_segment)
    return _pack(m, _STREAM_START, 0x53, [("xid", "I", m.xid), ("first_segment", "B", fs)])


@_writes(StreamStop)
def _enc_stream_stop(m):
    return b"E"


@_writes(StreamCommit)
def _enc_stream_commit(m):
    return _pack(m, _STREAM_COMMIT, 0x63, [("xid", "I", m.xid), ("flags", "B", m.flags),
                                           ("commit_lsn", "Q", m.commit_lsn), ("end_lsn", "Q", m.end_lsn),
                                           ("commit_ts", "q", m.commit_ts)])


@_writes(StreamAbort)
def _enc_stream_abort(m):
    fields = [("xid", "I", m.xid), ("subxid", "I", m.subxid)]
    if m.abort_lsn is None and m.abort_ts is None:
        return _pack(m, _STREAM_ABORT, 0x41, fields)
    if m.abort_lsn is None or m.abort_ts is None:
        raise _fail(m, "abort_lsn and abort_ts must be both set (streaming=parallel) or both None")
    fields += [("abort_lsn", "Q", m.abort_lsn), ("abort_ts", "q", m.abort_ts)]
    return _pack(m, _STREAM_ABORT_PARALLEL, 0x41, fields)


@_writes(BeginPrepare)
def _enc_begin_prepare(m):
    return _pack(m, _BEGIN_PREPARE, 0x62, [("prepare_lsn", "Q", m.prepare_lsn), ("end_lsn", "Q", m.end_lsn),
                                           ("prepare_ts", "q", m.prepare_ts), ("xid", "I", m.xid)]
                 ) + _cstring(m, "gid", m.gid)


@_writes(Prepare, StreamPrepare)
def _enc_prepare(m):
    # 'P' and 'p' share logicalrep_write_prepare_common (proto.c).
    return _pack(m, _PREPARE, ord(m.type), [("flags", "B", m.flags), ("prepare_lsn", "Q", m.prepare_lsn),
                                            ("end_lsn", "Q", m.end_lsn), ("prepare_ts", "q", m.prepare_ts),
                                            ("xid", "I", m.xid)]) + _cstring(m, "gid", m.gid)


@_writes(CommitPrepared)
def _enc_commit_prepared(m):
    return _pack(m, _PREPARE, 0x4B, [("flags", "B", m.flags), ("commit_lsn", "Q", m.commit_lsn),
                                     ("end_lsn", "Q", m.end_lsn), ("commit_ts", "q", m.commit_ts),
                                     ("xid", "I", m.xid)]) + _cstring(m, "gid", m.gid)


@_writes(RollbackPrepared)
def _enc_rollback_prepared(m):
    return _pack(m, _ROLLBACK_PREPARED, 0x72, [
        ("flags", "B", m.flags), ("prepare_end_lsn", "Q", m.prepare_end_lsn),
        ("rollback_end_lsn", "Q", m.rollback_end_lsn), ("prepare_ts", "q", m.prepare_ts),
        ("rollback_ts", "q", m.rollback_ts), ("xid", "I", m.xid)]) + _cstring(m, "gid", m.gid)


@_writes(XLogData)
def _enc_xlogdata(m):
    inner = m.payload
    enc = _ENCODERS.get(type(inner))
    if enc is None or type(inner) in (XLogData, PrimaryKeepalive):
        raise _fail(m, f"payload must be a pgoutput message, not {type(inner).__name__}")
    return _pack(m, _XLOGDATA, 0x77, [("wal_start", "Q", m.wal_start), ("wal_end", "Q", m.wal_end),
                                      ("send_time", "q", m.send_time)]) + enc(inner)


@_writes(PrimaryKeepalive)
def _enc_keepalive(m):
    rr = _bool_byte(m, "reply_requested", m.reply_requested)
    return _pack(m, _KEEPALIVE, 0x6B, [("wal_end", "Q", m.wal_end), ("send_time", "q", m.send_time),
                                       ("reply_requested", "B", rr)])


#: message class -> its encoder, for every message of the facts table
_ENCODERS = {f.cls: _WRITE[f.cls] for f in FACTS.values()}


def encode_message(message) -> bytes:
    """The wire bytes of one message object (the inverse of ``decode_message``).

    Streamable messages (R Y I U D T M) carry the streaming xid right after the tag
    when ``message.xid`` is not None. Raises :class:`PgoutputEncodeError` when a field
    does not fit its wire type.
    """
    enc = _ENCODERS.get(type(message))
    if enc is None:
        raise PgoutputEncodeError(f"not a pgoutput message object: {type(message).__name__}")
    return enc(message)
