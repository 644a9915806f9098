"""Plain-Python twin of the 'b' (binary) style decoder: the readable reference of
docs/protocol.md, openGauss and the oracle the compiled ``_parse.pyx`` is tested against (same rows,
same error texts and offsets). ``decode_frame``/``decode_record`` use it.

Layout (openGauss ``parallel_decode.cpp`` ``parallel_decode_change_to_bin``/``AppendTuple``,
``parallel_reorderbuffer.cpp`` ``ParallelOutputBegin``/``ParallelOutputCommit``/
``ParallelCheckBatch``): UInt32 length (the bytes after itself up to the separator), UInt64
lsn, Byte1 tag, body, then 'P' (more follows) or 'F' (batch done); 'P' + UInt32 0 also ends
a batch (idle flush).

Error policy: a record whose length and separator are intact but whose body is bad becomes
an error row and decoding goes on with the next record (the length says where it is). A
broken frame (length past the end, missing or bad separator, bytes after the end) becomes
one error row ending in "the rest of the frame was not decoded": lengths after that point
cannot be trusted. Records before the problem are kept either way.
"""

from __future__ import annotations

import struct

from ._errors import (E_BAD_VALUE, E_EMPTY, E_NEGATIVE, E_NOT_ENVELOPE, E_NULL_ROW, E_SHORT,
                      E_TRAILING, E_UNKNOWN_TAG, E_UTF8, format_error, make_error)
from .messages import Column, Frame, Record

__all__ = ["decode_frame_items", "decode_frame", "decode_record", "ENVELOPES"]

ENVELOPES = ("auto", "none", "xlogdata")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_XLOG = struct.Struct(">QQq")
_NULL = 0xFFFFFFFF
_KNOWN = frozenset(b"BCIUDH")
_MARKERS = {ord("I"): b"N", ord("U"): b"NO", ord("D"): b"O"}


class _Fail(Exception):
    def __init__(self, code, pos, what="", want=0, left=0, value=0, col=-1):
        self.code, self.pos, self.what, self.want = code, pos, what, want
        self.left, self.value, self.col = left, value, col


class _Reader:
    __slots__ = ("data", "pos", "end")

    def __init__(self, data, pos, end):
        self.data, self.pos, self.end = data, pos, end

    def need(self, n, what, col=-1):
        if n > self.end - self.pos:
            raise _Fail(E_SHORT, self.pos, what, n, self.end - self.pos, col=col)

    def u8(self, what):
        self.need(1, what)
        self.pos += 1
        return self.data[self.pos - 1]

    def u16(self, what, col=-1):
        self.need(2, what, col)
        self.pos += 2
        return _U16.unpack_from(self.data, self.pos - 2)[0]

    def u32(self, what, col=-1):
        self.need(4, what, col)
        self.pos += 4
        return _U32.unpack_from(self.data, self.pos - 4)[0]

    def u64(self, what):
        self.need(8, what)
        self.pos += 8
        return _U64.unpack_from(self.data, self.pos - 8)[0]

    def raw(self, n, what, col=-1):
        self.need(n, what, col)
        self.pos += n
        return bytes(self.data[self.pos - n:self.pos])

    def text(self, n, what, col=-1):
        start = self.pos
        b = self.raw(n, what, col)
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise _Fail(E_UTF8, start, what, col=col) from None


def _options(r, allowed, what):
    """Tagged optional fields of B/C, in any order, each at most once."""
    out, order = {}, ""
    while r.pos < r.end:
        at = r.pos
        opt = r.u8(what)
        if opt not in allowed:
            raise _Fail(E_BAD_VALUE, at, what, value=opt)
        c = chr(opt)
        if c in order:
            raise _Fail(E_BAD_VALUE, at, "repeated option", value=opt)
        order += c
        if c == "X":
            out["xid"] = r.u64("xid")
        elif c == "T":
            out["commit_time"] = r.text(r.u32("commit_time length"), "commit_time")
        elif c == "O":
            out["origin_id"] = r.u32("origin_id")
        else:
            out["user_name"] = r.text(r.u32("user_name length"), "user_name")
    return out, order


def _tuple(r):
    cols = []
    for i in range(r.u16("attrnum")):
        name = r.text(r.u16("column name length", i), "column name", i)
        oid = r.u32("type_oid", i)
        n = r.u32("value length", i)
        cols.append(Column(name, oid, None if n == _NULL else r.raw(n, "value", i)))
    return tuple(cols)


def _body(r, lsn, tag):
    """Parse one record body in r (narrowed to the record); None for a heartbeat."""
    if tag == 0x42:  # 'B'
        csn = r.u64("csn")
        first_lsn = r.u64("first_lsn")
        opts, order = _options(r, b"XTON", "Begin option")
        return Record("B", lsn, csn=csn, first_lsn=first_lsn, options=order, **opts)
    if tag == 0x43:  # 'C'
        opts, order = _options(r, b"XT", "Commit option")
        return Record("C", lsn, options=order, **opts)
    if tag in _MARKERS:
        schema = r.text(r.u16("schema length"), "schema")
        table = r.text(r.u16("table length"), "table")
        allowed = _MARKERS[tag]
        tuples = {}
        while r.pos < r.end:
            at = r.pos
            m = r.u8("tuple marker")
            i = allowed.find(bytes([m]))
            if i < 0:
                raise _Fail(E_BAD_VALUE, at, "tuple marker", value=m)
            allowed = allowed[i + 1:]
            tuples["new_tuple" if m == 0x4E else "old_tuple"] = _tuple(r)
        return Record(chr(tag), lsn, schema=schema, table=table, **tuples)
    if tag == 0x48:  # 'H': GaussDB heartbeat, body not interpreted
        r.pos = r.end
        return None
    raise _Fail(E_UNKNOWN_TAG, r.pos - 1, value=tag)


def decode_frame_items(data, envelope="auto"):
    """Decode one input row. Returns ``(items, heartbeats, end, xlogdata)`` where items are
    ``Record`` objects and ``(text, offset, tag, lsn, fatal)`` error tuples, in order."""
    items = []
    hb = 0
    if data is None:
        return [(format_error(E_NULL_ROW, 0, None, "", 0, 0, 0, -1, True), 0, None, None, True)], 0, None, None
    data = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    n = len(data)

    def fail(f, tag, lsn, fatal):
        items.append((format_error(f.code, f.pos, tag, f.what, f.want, f.left, f.value, f.col, fatal),
                      f.pos, tag, lsn, fatal))

    if n == 0:
        fail(_Fail(E_EMPTY, 0), None, None, True)
        return items, hb, None, None
    r = _Reader(data, 0, n)
    xlog = None
    if envelope == "xlogdata" and data[0] != 0x77:
        fail(_Fail(E_NOT_ENVELOPE, 0), None, None, True)
        return items, hb, None, None
    if envelope != "none" and data[0] == 0x77:
        r.pos = 1
        try:
            r.need(24, "XLogData header")
        except _Fail as f:
            fail(f, 0x77, None, True)
            return items, hb, None, None
        xlog = _XLOG.unpack_from(data, 1)
        r.pos = 25
    after_p = False
    end = None
    while True:
        start = r.pos
        try:
            length = r.u32("record length")
        except _Fail as f:
            fail(f, None, None, True)
            break
        if length == 0:
            end = "P0" if after_p else "0"
            if r.pos != n:
                fail(_Fail(E_TRAILING, r.pos, "the UInt32 0 that ends the batch", value=n - r.pos),
                     None, None, True)
            break
        if length < 9:
            fail(_Fail(E_NEGATIVE, start, "record length", value=length), None, None, True)
            break
        lsn = tag = None
        if n - r.pos >= 9:
            lsn = _U64.unpack_from(data, r.pos)[0]
            tag = data[r.pos + 8]
        if length > n - r.pos:
            fail(_Fail(E_SHORT, r.pos, "record", length, n - r.pos), tag, lsn, True)
            break
        body_end = r.pos + length
        sub = _Reader(data, r.pos + 9, body_end)
        rec = err = None
        try:
            rec = _body(sub, lsn, tag)
        except _Fail as f:
            err = f
        sep = data[body_end] if body_end < n else None
        if sep is None or sep not in (0x50, 0x46):
            if err is not None:
                fail(err, tag, lsn, True)
            elif sep is None:
                fail(_Fail(E_SHORT, body_end, "separator", 1, 0), tag, lsn, True)
            else:
                fail(_Fail(E_BAD_VALUE, body_end, "separator", value=sep), tag, lsn, True)
            break
        if err is not None:
            fail(err, tag, lsn, False)
        elif rec is None:
            hb += 1
        else:
            items.append(rec)
        r.pos = body_end + 1
        if sep == 0x46:
            end = "F"
            if r.pos != n:
                fail(_Fail(E_TRAILING, r.pos, "the batch end 'F'", value=n - r.pos), None, None, True)
            break
        after_p = True
    return items, hb, end, xlog


def decode_frame(data, *, envelope="auto") -> Frame:
    """Decode one 'b' frame (a batch, or one record with sending-batch=0) into a
    :class:`Frame`; raise ``PgoutputDecodeError`` at the first problem."""
    if envelope not in ENVELOPES:
        raise ValueError(f"envelope must be one of {ENVELOPES}, not {envelope!r}")
    items, hb, end, xlog = decode_frame_items(data, envelope)
    recs = []
    for it in items:
        if isinstance(it, tuple):
            raise make_error(it[0], it[1], it[2])
        recs.append(it)
    return Frame(tuple(recs), end, xlog, hb)


def decode_record(data) -> Record:
    """Decode exactly one record: UInt32 length, UInt64 lsn, tag, body, and optionally its
    separator ('P' or 'F'). A heartbeat is an error here (there is nothing to return)."""
    n = len(data)
    if n >= 4:
        length = _U32.unpack_from(data, 0)[0]
        if length + 4 == n:
            data = bytes(data) + b"F"
        elif length + 5 == n and data[-1] == 0x50:
            data = bytes(data[:-1]) + b"F"
    frame = decode_frame(data, envelope="none")
    if frame.heartbeats or len(frame.records) != 1:
        raise make_error("Frame at byte 0: expected exactly one Begin/Commit/Insert/Update/Delete record", 0, None)
    return frame.records[0]
