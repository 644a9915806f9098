"""Encoders for openGauss/GaussDB parallel decoding output (docs/protocol.md, openGauss): the exact
inverse of the decoders, used by tests and the benchmark.

- 'b': :func:`encode_record` (one record, no separator), :func:`encode_frame` (a batch or
  a sending-batch=0 frame), :func:`encode_heartbeat`, :func:`xlogdata` (the 'w' envelope);
- 't'/'j': :func:`text_line` / :func:`json_line` (one record as the server prints it) and
  :func:`encode_text_frame` (bare, or with the UInt32 length + UInt64 lsn batch framing).
"""

from __future__ import annotations

import json
import re
import struct

from ..errors import PgoutputEncodeError
from .messages import Column, Frame, Record

__all__ = [
    "encode_record", "encode_frame", "encode_heartbeat", "xlogdata",
    "text_line", "json_line", "encode_text_frame", "print_literal", "quote_identifier",
]

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def _u16(v, what):
    if not 0 <= v <= 0xFFFF:
        raise PgoutputEncodeError(f"{what} {v} does not fit in UInt16")
    return _U16.pack(v)


def _u32(v, what):
    if not 0 <= v <= 0xFFFFFFFF:
        raise PgoutputEncodeError(f"{what} {v} does not fit in UInt32")
    return _U32.pack(v)


def _u64(v, what):
    if v is None or not 0 <= v <= 0xFFFFFFFFFFFFFFFF:
        raise PgoutputEncodeError(f"{what} {v!r} does not fit in UInt64")
    return _U64.pack(v)


def _text16(s, what):
    b = s.encode("utf-8")
    return _u16(len(b), what + " length") + b


def _text32(s, what):
    b = s.encode("utf-8")
    return _u32(len(b), what + " length") + b


def _tuple(cols):
    out = [_u16(len(cols), "attrnum")]
    for c in cols:
        c = Column(*c) if not isinstance(c, Column) else c
        if c.unchanged_toast:
            raise PgoutputEncodeError("the 'b' style has no unchanged-TOAST marker")
        out.append(_text16(c.name, "column name"))
        out.append(_u32(c.type_oid if c.type_oid is not None else 0, "type_oid"))
        out.append(_U32.pack(0xFFFFFFFF) if c.value is None else _u32(len(c.value), "value length") + bytes(c.value))
    return b"".join(out)


def _options(rec, allowed):
    order = rec.options
    if order is None:
        order = "".join(t for t, k in zip("XTON", ("xid", "commit_time", "origin_id", "user_name"), strict=False)
                        if t in allowed and getattr(rec, k) is not None)
    out = []
    for t in order:
        if t not in allowed:
            raise PgoutputEncodeError(f"option {t!r} is not allowed in {rec.type!r}")
        if t == "X":
            out.append(b"X" + _u64(rec.xid, "xid"))
        elif t == "T":
            out.append(b"T" + _text32(rec.commit_time, "commit_time"))
        elif t == "O":
            out.append(b"O" + _u32(rec.origin_id, "origin_id"))
        else:
            out.append(b"N" + _text32(rec.user_name, "user_name"))
    return b"".join(out)


def encode_record(rec: Record) -> bytes:
    """One 'b' record without its separator."""
    t = rec.type
    if t == "B":
        body = _u64(rec.csn, "csn") + _u64(rec.first_lsn, "first_lsn") + _options(rec, "XTON")
    elif t == "C":
        body = _options(rec, "XT")
    elif t in ("I", "U", "D"):
        body = _text16(rec.schema, "schema") + _text16(rec.table, "table")
        if rec.new_tuple is not None:
            if t == "D":
                raise PgoutputEncodeError("a Delete has no new tuple")
            body += b"N" + _tuple(rec.new_tuple)
        if rec.old_tuple is not None:
            if t == "I":
                raise PgoutputEncodeError("an Insert has no old tuple")
            body += b"O" + _tuple(rec.old_tuple)
    else:
        raise PgoutputEncodeError(f"unknown record type {t!r}")
    payload = _u64(rec.lsn if rec.lsn is not None else 0, "lsn") + t.encode() + body
    return _u32(len(payload), "record length") + payload


def encode_heartbeat(lsn: int, body: bytes = b"") -> bytes:
    """A GaussDB 'H' record (its body is opaque to the decoder)."""
    payload = _u64(lsn, "lsn") + b"H" + body
    return _u32(len(payload), "record length") + payload


def xlogdata(payload: bytes, wal_start: int = 0, wal_end: int = 0, send_time: int = 0) -> bytes:
    """Wrap a frame in the 25-byte big-endian XLogData header."""
    return b"w" + _U64.pack(wal_start) + _U64.pack(wal_end) + struct.pack(">q", send_time) + payload


def encode_frame(records, *, end: str = "F", xlog=None) -> bytes:
    """A 'b' frame. ``records``: a :class:`Frame` (its end/xlogdata win) or a sequence of
    :class:`Record`/pre-encoded record bytes (e.g. :func:`encode_heartbeat`).
    ``end``: 'F' (last separator), 'P0' ('P' + UInt32 0, idle flush) or '0' (only
    UInt32 0, no records). ``xlog``: ``(wal_start, wal_end, send_time)`` to wrap in 'w'."""
    if isinstance(records, Frame):
        end, xlog, records = records.end, records.xlogdata, records.records
    parts = [r if isinstance(r, (bytes, bytearray)) else encode_record(r) for r in records]
    if end == "F":
        if not parts:
            raise PgoutputEncodeError("a frame ending in 'F' needs at least one record")
        out = b"P".join(parts) + b"F"
    elif end == "P0":
        if not parts:
            raise PgoutputEncodeError("'P' + UInt32 0 needs at least one record")
        out = b"".join(p + b"P" for p in parts) + b"\0\0\0\0"
    elif end == "0":
        if parts:
            raise PgoutputEncodeError("end '0' is a frame without records")
        out = b"\0\0\0\0"
    else:
        raise PgoutputEncodeError(f"end must be 'F', 'P0' or '0', not {end!r}")
    return xlogdata(out, *xlog) if xlog is not None else out


# ---- text ('t') and json ('j') styles ------------------------------------------------

# PrintLiteral (parallel_decode.cpp): these types print bare, bool as true/false,
# bit/varbit as B'...', everything else single-quoted with quotes doubled.
BARE_TYPES = frozenset({"tinyint", "smallint", "integer", "bigint", "oid", "real",
                        "double precision", "numeric"})
_BIT_TYPES = frozenset({"bit", "bit varying"})
_PLAIN_IDENT = re.compile(r"[a-z_][a-z0-9_$]*\Z")


def base_type(type_name: str) -> str:
    """``numeric(10,2)`` -> ``numeric``; arrays (``integer[]``) stay as they are."""
    if type_name.endswith("]"):
        return type_name
    return type_name.split("(", 1)[0]


def print_literal(type_name: str, value) -> str:
    """A value (type output text, bytes or str) as PrintLiteral writes it."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8")
    b = base_type(type_name)
    if b in BARE_TYPES:
        return value
    if b == "boolean":
        return "true" if value == "t" else "false"
    if b in _BIT_TYPES:
        return f"B'{value}'"
    return "'" + value.replace("'", "''") + "'"


def quote_identifier(name: str) -> str:
    """openGauss quote_identifier, without its keyword list (a keyword stays bare here)."""
    if _PLAIN_IDENT.match(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def _lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _begin_commit_line(rec: Record) -> str:
    if rec.type == "B":
        s = f"BEGIN CSN: {rec.csn} first_lsn: {_lsn_text(rec.first_lsn)}"
        if rec.xid is not None:
            s += f" xid: {rec.xid}"
        if rec.commit_time is not None:
            s += f" commit_time: {rec.commit_time}"
        if rec.origin_id is not None:
            s += f" origin_id: {rec.origin_id}"
        if rec.user_name is not None:
            s += f" user_name: {rec.user_name}"
        return s
    s = "commit" if rec.xid is None else f"commit xid: {rec.xid}"
    if rec.commit_time is not None:
        s += f" (at {rec.commit_time})"
    return s


def _text_cols(cols) -> str:
    out = []
    for c in cols:
        if c.unchanged_toast:
            v = "unchanged-toast-datum"
        elif c.value is None:
            v = "null"
        else:
            v = print_literal(c.type_name, c.value)
        out.append(f" {c.name}[{c.type_name}]:{v}")
    return "".join(out)


_OPS = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}


def text_line(rec: Record) -> str:
    """One record as the 't' style prints it (parallel_decode_change_to_text)."""
    if rec.type in ("B", "C"):
        return _begin_commit_line(rec)
    s = f"table {rec.schema} {rec.table} {_OPS[rec.type]}:"
    if rec.type == "I":
        s += " (no-tuple-data)" if rec.new_tuple is None else _text_cols(rec.new_tuple)
    elif rec.type == "U":
        if rec.old_tuple is not None:
            s += " old-key:" + _text_cols(rec.old_tuple) + " new-tuple:"
        s += " (no-tuple-data)" if rec.new_tuple is None else _text_cols(rec.new_tuple)
    else:
        s += " (no-tuple-data)" if rec.old_tuple is None else _text_cols(rec.old_tuple)
    return s


def _json_cols(cols):
    names, types, vals = [], [], []
    for c in cols or ():
        if c.unchanged_toast:
            raise PgoutputEncodeError("the 'j' style has no unchanged-TOAST marker")
        names.append(c.name)
        types.append(c.type_name)
        vals.append("null" if c.value is None else print_literal(c.type_name, c.value))
    return names, types, vals


def json_line(rec: Record) -> str:
    """One record as the 'j' style prints it (parallel_decode_change_to_json, cJSON
    unformatted; BEGIN/COMMIT stay text lines)."""
    if rec.type in ("B", "C"):
        return _begin_commit_line(rec)
    if rec.type == "I" and rec.old_tuple is not None or rec.type == "D" and rec.new_tuple is not None:
        raise PgoutputEncodeError(f"{_OPS[rec.type]} cannot carry that tuple in the 'j' style")
    n, t, v = _json_cols(rec.new_tuple)
    on, ot, ov = _json_cols(rec.old_tuple)
    obj = {
        "table_name": quote_identifier(rec.schema) + "." + quote_identifier(rec.table),
        "op_type": _OPS[rec.type],
        "columns_name": n, "columns_type": t, "columns_val": v,
        "old_keys_name": on, "old_keys_type": ot, "old_keys_val": ov,
    }
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def encode_text_frame(records, *, style: str = "t", batch: bool = True, xlog=None) -> bytes:
    """A 't'/'j' frame: with ``batch`` (sending-batch=1) every record is UInt32 (8 + text
    bytes) + UInt64 lsn + text and UInt32 0 ends the batch; without, exactly one record's
    bare text."""
    line = text_line if style == "t" else json_line if style == "j" else None
    if line is None:
        raise PgoutputEncodeError(f"style must be 't' or 'j', not {style!r}")
    if batch:
        parts = []
        for r in records:
            b = line(r).encode("utf-8")
            parts.append(_u32(8 + len(b), "record length") + _u64(r.lsn if r.lsn is not None else 0, "lsn") + b)
        out = b"".join(parts) + b"\0\0\0\0"
    else:
        if len(records) != 1:
            raise PgoutputEncodeError("a bare text frame holds exactly one record")
        out = line(records[0]).encode("utf-8")
    return xlogdata(out, *xlog) if xlog is not None else out
