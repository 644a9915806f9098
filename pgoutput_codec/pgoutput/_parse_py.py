"""pgoutput messages read in plain Python: the readable reference of the wire format
(docs/protocol.md), with the same validation, exception types, ``.offset`` and
``.message_type`` as the compiled parser (``_parse.pyx``; docs/DESIGN.md).

Two users: the plain-Python twin of the decoder (``_decode_py``, the differential-test
oracle, selected by ``PGOUTPUT_CODEC_NO_EXTENSIONS=1``), and ``transcode``, which reads
the control messages of archives whose names are in another client encoding (the
compiled parser reads names as UTF-8 only).

Layouts follow PostgreSQL's ``logicalrep_read_*`` / ``logicalrep_write_*``
(``src/backend/replication/logical/proto.c``) and the walsender frames
(``src/backend/replication/walsender.c``: XLogData 'w', keepalive 'k').
"""

from __future__ import annotations

import struct

import pyarrow as pa

from ..errors import UTF8_HINT, AmbiguousMessageError, PgoutputDecodeError
from .facts import CONTROL_TAGS, MESSAGES, STREAMABLE_TAGS
from .messages import (
    MAX_IDENTIFIER_BYTES, Begin, BeginPrepare, Commit, CommitPrepared, Delete, Insert,
    LogicalMessage, Origin, PrimaryKeepalive, Prepare, Relation, RelationColumn, RollbackPrepared, StreamAbort,
    StreamCommit, StreamPrepare, StreamStart, StreamStop, Truncate, TupleColumn, Type,
    Update, XLogData,
)

__all__ = ["as_bytes", "payload_values", "decode_row", "decode_payload", "infer_initial_state"]

_U8 = struct.Struct("!B")
_I16 = struct.Struct("!h")
_U32 = struct.Struct("!I")
_I32 = struct.Struct("!i")
_U64 = struct.Struct("!Q")
_I64 = struct.Struct("!q")

_NULL_COL = TupleColumn("n", None)
_UNCHANGED_COL = TupleColumn("u", None)


class _Fail(Exception):
    """Internal: where a reading stopped and why (turned into PgoutputDecodeError)."""

    def __init__(self, offset, what):
        super().__init__(what)
        self.offset = offset
        self.what = what


class _Reader:
    """Bounds-checked big-endian reads over ``buf[pos:end]`` (the twin of ``_native/reader.pxd``)."""

    __slots__ = ("buf", "pos", "end", "names")

    def __init__(self, buf, pos, end, names="utf-8"):
        self.buf = buf
        self.pos = pos
        self.end = end
        self.names = names   # the encoding of Strings: transcode.py reads other client encodings

    def _need(self, n, what):
        left = self.end - self.pos
        if n > left:
            raise _Fail(self.pos, f"{what} needs {n} bytes, {left} left")

    def _unpack(self, st, what):
        self._need(st.size, what)
        v = st.unpack_from(self.buf, self.pos)[0]
        self.pos += st.size
        return v

    def u8(self, what):
        return self._unpack(_U8, what)

    def i16(self, what):
        return self._unpack(_I16, what)

    def u32(self, what):
        return self._unpack(_U32, what)

    def i32(self, what):
        return self._unpack(_I32, what)

    def u64(self, what):
        return self._unpack(_U64, what)

    def i64(self, what):
        return self._unpack(_I64, what)

    def count(self, st, what):
        """A signed length or count; negative values are malformed."""
        start = self.pos
        n = self._unpack(st, what)
        if n < 0:
            raise _Fail(start, f"{what} {n} is negative")
        return n

    def take(self, n, what):
        left = self.end - self.pos
        if n > left:
            raise _Fail(self.pos, f"{what} length {n} exceeds the {left} bytes left")
        start = self.pos
        self.pos += n
        return self.buf[start:self.pos]

    def name(self, what):
        """A NUL-terminated String that must be strict UTF-8 (or strict ``self.names``)."""
        start = self.pos
        nul = self.buf.find(b"\0", start, self.end)
        if nul < 0:
            raise _Fail(start, f"{what}: String without NUL terminator")
        try:
            s = self.buf[start:nul].decode(self.names)
        except UnicodeDecodeError as e:
            hint = f"; {UTF8_HINT}" if self.names == "utf-8" else ""
            label = "UTF-8" if self.names == "utf-8" else self.names
            raise _Fail(start, f"{what} is not valid {label} (byte {start + e.start}{hint})") from None
        self.pos = nul + 1
        return s

    def identifier(self, what):
        """A relation, column or type name: a String no longer than a server writes."""
        start = self.pos
        s = self.name(what)
        if self.pos - 1 - start > MAX_IDENTIFIER_BYTES:
            raise _Fail(start, f"{what} of {self.pos - 1 - start} bytes: a server's names are at most "
                               f"{MAX_IDENTIFIER_BYTES} bytes")
        return s

    def choice(self, allowed, what):
        start = self.pos
        v = self.u8(what)
        if v not in allowed:
            names = ", ".join(repr(chr(a)) if a > 1 else str(a) for a in sorted(allowed))
            raise _Fail(start, f"{what} 0x{v:02X} is not one of {names}")
        return v

    def end_here(self):
        if self.pos != self.end:
            raise _Fail(self.pos, f"{self.end - self.pos} trailing bytes after the message")


_BOOL = frozenset((0, 1))
_REPLICA_IDENTITY = frozenset(b"dnfi")
_OLD_MARKERS = frozenset(b"KO")
_UPDATE_MARKERS = frozenset(b"KON")
_NEW_MARKER = frozenset(b"N")


def _tuple(r, label):
    n = r.count(_I16, f"{label} column count")
    cols = []
    append = cols.append
    for i in range(n):
        kpos = r.pos
        k = r.u8(f"{label} column {i} kind")
        if k == 0x6E:    # 'n'
            append(_NULL_COL)
        elif k == 0x75:  # 'u'
            append(_UNCHANGED_COL)
        elif k == 0x74 or k == 0x62:  # 't', 'b'
            ln = r.count(_I32, f"{label} column {i} value length")
            append(TupleColumn(chr(k), r.take(ln, f"{label} column {i} value")))
        else:
            raise _Fail(kpos, f"{label} column {i} kind 0x{k:02X} is not one of 'n', 'u', 't', 'b'")
    return tuple(cols)


# One reader per message, in the order of facts.MESSAGES and of the compiled parser's
# functions (_parse.pyx): ``r`` is positioned just after the tag; ``xid`` is the streaming
# xid already read (streamable messages) or None.

_READ = {}


def _reads(cls):
    def register(reader):
        _READ[cls] = reader
        return reader
    return register


@_reads(Begin)
def _begin(r, xid):
    return Begin(final_lsn=r.u64("final_lsn"), commit_ts=r.i64("commit_ts"), xid=r.u32("xid"))


@_reads(Commit)
def _commit(r, xid):
    return Commit(flags=r.u8("flags"), commit_lsn=r.u64("commit_lsn"), end_lsn=r.u64("end_lsn"),
                  commit_ts=r.i64("commit_ts"))


@_reads(Origin)
def _origin(r, xid):
    return Origin(origin_lsn=r.u64("origin_lsn"), origin_name=r.name("origin_name"))


@_reads(Relation)
def _relation(r, xid):
    relation_id = r.u32("relation_id")
    namespace = r.identifier("namespace")
    relation_name = r.identifier("relation_name")
    ri = r.choice(_REPLICA_IDENTITY, "replica_identity")
    n = r.count(_I16, "column count")
    cols = []
    for i in range(n):
        cols.append(RelationColumn(r.u8(f"column {i} flags"), r.identifier(f"column {i} name"),
                                   r.u32(f"column {i} type_oid"), r.i32(f"column {i} type_modifier")))
    return Relation(xid=xid, relation_id=relation_id, namespace=namespace, relation_name=relation_name,
                    replica_identity=chr(ri), columns=tuple(cols))


@_reads(Type)
def _type(r, xid):
    return Type(xid=xid, type_oid=r.u32("type_oid"), namespace=r.identifier("namespace"),
                type_name=r.identifier("type_name"))


@_reads(Insert)
def _insert(r, xid):
    relation_id = r.u32("relation_id")
    r.choice(_NEW_MARKER, "new tuple marker")
    return Insert(xid=xid, relation_id=relation_id, new_tuple=_tuple(r, "new tuple"))


@_reads(Update)
def _update(r, xid):
    relation_id = r.u32("relation_id")
    marker = r.choice(_UPDATE_MARKERS, "tuple marker")
    old_kind = old = None
    if marker != 0x4E:
        old_kind = chr(marker)
        old = _tuple(r, "old tuple")
        r.choice(_NEW_MARKER, "new tuple marker")
    return Update(xid=xid, relation_id=relation_id, old_kind=old_kind, old_tuple=old,
                  new_tuple=_tuple(r, "new tuple"))


@_reads(Delete)
def _delete(r, xid):
    relation_id = r.u32("relation_id")
    marker = r.choice(_OLD_MARKERS, "old tuple marker")
    return Delete(xid=xid, relation_id=relation_id, old_kind=chr(marker), old_tuple=_tuple(r, "old tuple"))


@_reads(Truncate)
def _truncate(r, xid):
    n = r.count(_I32, "relation count")
    options = r.u8("options")
    raw = r.take(4 * n, f"{n} relation_ids")
    return Truncate(xid=xid, options=options, relation_ids=struct.unpack(f"!{n}I", raw))


@_reads(LogicalMessage)
def _message(r, xid):
    flags = r.u8("flags")
    lsn = r.u64("lsn")
    prefix = r.name("prefix")
    n = r.count(_I32, "content length")
    return LogicalMessage(xid=xid, flags=flags, lsn=lsn, prefix=prefix, content=r.take(n, "content"))


@_reads(StreamStart)
def _stream_start(r, xid):
    return StreamStart(xid=r.u32("xid"), first_segment=bool(r.choice(_BOOL, "first_segment")))


@_reads(StreamStop)
def _stream_stop(r, xid):
    return StreamStop()


@_reads(StreamCommit)
def _stream_commit(r, xid):
    return StreamCommit(xid=r.u32("xid"), flags=r.u8("flags"), commit_lsn=r.u64("commit_lsn"),
                        end_lsn=r.u64("end_lsn"), commit_ts=r.i64("commit_ts"))


@_reads(StreamAbort)
def _stream_abort(r, xid):
    xid = r.u32("xid")
    subxid = r.u32("subxid")
    # abort_lsn/abort_ts only with streaming=parallel (PG16+): decided by the bytes left.
    if r.pos == r.end:
        return StreamAbort(xid=xid, subxid=subxid)
    return StreamAbort(xid=xid, subxid=subxid, abort_lsn=r.u64("abort_lsn"), abort_ts=r.i64("abort_ts"))


@_reads(BeginPrepare)
def _begin_prepare(r, xid):
    return BeginPrepare(prepare_lsn=r.u64("prepare_lsn"), end_lsn=r.u64("end_lsn"),
                        prepare_ts=r.i64("prepare_ts"), xid=r.u32("xid"), gid=r.name("gid"))


@_reads(Prepare)
def _prepare(r, xid, cls=Prepare):
    return cls(flags=r.u8("flags"), prepare_lsn=r.u64("prepare_lsn"), end_lsn=r.u64("end_lsn"),
               prepare_ts=r.i64("prepare_ts"), xid=r.u32("xid"), gid=r.name("gid"))


@_reads(CommitPrepared)
def _commit_prepared(r, xid):
    return CommitPrepared(flags=r.u8("flags"), commit_lsn=r.u64("commit_lsn"), end_lsn=r.u64("end_lsn"),
                          commit_ts=r.i64("commit_ts"), xid=r.u32("xid"), gid=r.name("gid"))


@_reads(RollbackPrepared)
def _rollback_prepared(r, xid):
    return RollbackPrepared(flags=r.u8("flags"), prepare_end_lsn=r.u64("prepare_end_lsn"),
                            rollback_end_lsn=r.u64("rollback_end_lsn"), prepare_ts=r.i64("prepare_ts"),
                            rollback_ts=r.i64("rollback_ts"), xid=r.u32("xid"), gid=r.name("gid"))


@_reads(StreamPrepare)
def _stream_prepare(r, xid):
    return _prepare(r, xid, StreamPrepare)


#: tag byte -> (class name for error text, reader, carries the streaming xid)
_READERS = {ord(f.tag): (f.name, _READ[f.cls], f.streamable) for f in MESSAGES}


def _error(cls_name, tag, offset, what, exc=PgoutputDecodeError):
    return exc(f"{cls_name} ('{tag}') at byte {offset}: {what}", offset, tag)


def _read_one(buf, start, reader, with_xid, names="utf-8"):
    """One reading of the message whose tag is at ``start``; raises _Fail."""
    r = _Reader(buf, start + 1, len(buf), names)
    xid = r.u32("streaming xid") if with_xid else None
    msg = reader(r, xid)
    r.end_here()
    return msg


def _decode_pgoutput(buf, start, in_stream, names="utf-8"):
    """The pgoutput message at ``buf[start:]`` (offsets count from ``buf[0]``); its Strings
    in the encoding ``names``."""
    if start >= len(buf):
        if start == 0:
            raise PgoutputDecodeError("empty payload at byte 0", 0, None)
        raise _error("XLogData", "w", start, "payload needs 1 byte, 0 left")
    t = buf[start]
    entry = _READERS.get(t)
    if entry is None:
        raise PgoutputDecodeError(f"unknown message type 0x{t:02X} ({chr(t)!r}) at byte {start}", start, chr(t))
    cls_name, reader, streamable = entry
    tag = chr(t)
    if not streamable or in_stream is not None:
        try:
            return _read_one(buf, start, reader, bool(streamable and in_stream), names)
        except _Fail as f:
            raise _error(cls_name, tag, f.offset, f.what) from None
    # Stateless: the one reading that consumes the payload exactly wins.
    results = []
    for with_xid in (False, True):
        try:
            results.append(_read_one(buf, start, reader, with_xid, names))
        except _Fail as f:
            results.append(f)
    plain, streamed = results
    plain_ok = not isinstance(plain, _Fail)
    streamed_ok = not isinstance(streamed, _Fail)
    if plain_ok and streamed_ok:
        err = _error(cls_name, tag, start, "payload reads both with and without the streaming xid; "
                     "pass in_stream=True or False", AmbiguousMessageError)
        err.readings = (plain, streamed)
        raise err
    if plain_ok:
        return plain
    if streamed_ok:
        return streamed
    f = streamed if streamed.offset > plain.offset else plain
    raise _error(cls_name, tag, f.offset, f.what)


def _decode_xlogdata(buf, in_stream, names="utf-8"):
    r = _Reader(buf, 1, len(buf))
    try:
        wal_start = r.u64("wal_start")
        wal_end = r.u64("wal_end")
        send_time = r.i64("send_time")
    except _Fail as f:
        raise _error("XLogData", "w", f.offset, f.what) from None
    return XLogData(wal_start=wal_start, wal_end=wal_end, send_time=send_time,
                    payload=_decode_pgoutput(buf, 25, in_stream, names))


def _decode_keepalive(buf):
    r = _Reader(buf, 1, len(buf))
    try:
        msg = PrimaryKeepalive(wal_end=r.u64("wal_end"), send_time=r.i64("send_time"),
                               reply_requested=bool(r.choice(_BOOL, "reply_requested")))
        r.end_here()
    except _Fail as f:
        raise _error("PrimaryKeepalive", "k", f.offset, f.what) from None
    return msg


def as_bytes(data) -> bytes:
    """A payload as ``bytes`` (bytearray and memoryview copied); anything else is a TypeError."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"decode_message() needs a bytes-like payload, not {type(data).__name__}")


# --------------------------------------------------------------------------- batch

def payload_values(values):
    """The payloads of a binary Arrow array (chunked or not) or a list, one by one."""
    if isinstance(values, pa.ChunkedArray):
        for chunk in values.chunks:
            yield from payload_values(chunk)
    elif isinstance(values, (pa.BinaryArray, pa.LargeBinaryArray)):
        yield from values.to_pylist()
    elif isinstance(values, (list, tuple)):
        for v in values:
            if v is not None and not isinstance(v, (bytes, bytearray, memoryview)):
                raise TypeError(f"decode_batch() rows must be bytes or None, not {type(v).__name__}")
            yield v
    else:
        raise TypeError("decode_batch() needs a pa.BinaryArray, pa.LargeBinaryArray, "
                        f"pa.ChunkedArray of those, or a list of bytes; got {type(values).__name__}")


def decode_row(buf: bytes, envelope: str, state: bool, names: str = "utf-8"):
    """One payload read as a message object (``envelope`` as ``decode_batch`` takes it;
    ``state``: inside a stream block; ``names``: the encoding of the names it carries)."""
    if envelope == "none" or (envelope == "auto" and buf[:1] not in (b"w", b"k")):
        return _decode_pgoutput(buf, 0, state, names)
    if not buf:
        raise PgoutputDecodeError("empty payload at byte 0", 0, None)
    if buf[:1] == b"w":
        return _decode_xlogdata(buf, state, names)
    if buf[:1] == b"k":
        return _decode_keepalive(buf)
    t = buf[0]
    raise PgoutputDecodeError(f"message type 0x{t:02X} ({chr(t)!r}) at byte 0 is not a replication "
                              "envelope ('w' or 'k') and envelope='xlogdata'", 0, chr(t))


_STREAMABLE = frozenset(STREAMABLE_TAGS.encode())
_CONTROL = frozenset(CONTROL_TAGS.encode())


def infer_initial_state(payloads, envelope, names="utf-8"):
    """DESIGN.md: the first control row that decides it, else the first other row (twin
    of ``_batch.initial_stream_state``): an 'E' (inside), an 'S' or any message never
    sent inside a stream block (outside), or a R/Y/I/U/D/T/M row that decodes with the
    streaming xid or without it, not both. No row decides: outside."""
    for control in (True, False):
        for raw in payloads:
            if not raw:
                continue
            t = raw[0]
            if envelope != "none" and t == 0x77:
                t = raw[25] if len(raw) > 25 else 0
            if (t in _CONTROL) != control:
                continue
            if t == 0x45:  # 'E'
                return True
            if control and t not in _STREAMABLE:   # S B C O b P K r c A p: outside
                return False
            if t not in _STREAMABLE:
                continue
            fits = []
            for state in (False, True):
                try:
                    decode_row(as_bytes(raw), envelope, state, names)
                except PgoutputDecodeError:
                    continue
                fits.append(state)
            if len(fits) == 1:
                return fits[0]
    return False


def decode_payload(data, *, in_stream=None):
    """Decode one payload (a pgoutput message, or a 'w'/'k' replication envelope).

    ``in_stream``: True/False when the caller knows whether the payload lies inside a
    Stream Start/Stop block; None tries both readings of R/Y/I/U/D/T/M.
    """
    buf = as_bytes(data)
    if buf[:1] == b"w":
        return _decode_xlogdata(buf, in_stream)
    if buf[:1] == b"k":
        return _decode_keepalive(buf)
    return _decode_pgoutput(buf, 0, in_stream)
