"""Decoders of the 't' (text) and 'j' (json) styles of openGauss/GaussDB parallel decoding
(docs/protocol.md, openGauss; openGauss ``parallel_decode.cpp`` ``parallel_decode_change_to_text``/
``_to_json``/``PrintLiteral``, ``parallel_reorderbuffer.cpp`` ``ParallelOutputBegin``/
``ParallelOutputCommit``). Plain Python: these styles are for people, not throughput.

Frames: with sending-batch=1 every record is UInt32 length (8 + text bytes) + UInt64 lsn +
text, and UInt32 0 ends the batch; with sending-batch=0 a frame is one record's bare text
(``lsn`` is then null). Either may sit in an XLogData 'w' envelope.

Values are returned as the type output function's text, the same bytes the 'b' style
carries: quotes removed and doubled quotes undone, ``true``/``false`` back to ``t``/``f``,
``B'101'`` back to ``101``; ``null`` is a null value, ``unchanged-toast-datum`` a null
value with ``unchanged_toast`` set, ``(no-tuple-data)`` a null tuple. In 'j' an empty
``columns_*``/``old_keys_*`` list is a null tuple (the server sends empty lists for both).

Error policy as in the 'b' style: a line that does not parse is an error row and the next
record is still read (its length is known); broken framing ends the frame with an error row.
"""

from __future__ import annotations

import json
import re
import struct

import pyarrow as pa

from ..arrays import payload_chunks
from ..errors import PgoutputDecodeError
from ._parse_py import ENVELOPES
from .messages import Column, Frame, Record
from .schema import HEARTBEATS_KEY, RECORD_SCHEMA

__all__ = ["decode_text_frame", "decode_text_batch", "parse_line", "parse_literal"]

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_XLOG = struct.Struct(">QQq")
_NAMES = {"B": "Begin", "C": "Commit", "I": "Insert", "U": "Update", "D": "Delete", None: "Frame"}
_BEGIN = re.compile(r"BEGIN CSN: (\d+) first_lsn: ([0-9A-Fa-f]+)/([0-9A-Fa-f]+)(?: xid: (\d+))?"
                    r"(?: commit_time: (.*?))?(?: origin_id: (\d+))?(?: user_name: (.*))?\Z", re.S)
_COMMIT = re.compile(r"commit(?: xid: (\d+))?(?: \(at (.*)\))?\Z", re.S)
_OPS = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}
_OP_MARKS = tuple(f" {op}:" for op in _OPS)


class _Bad(Exception):
    def __init__(self, at, what, tag=None):
        super().__init__(what)
        self.at, self.what, self.tag = at, what, tag


def _err(at, what, tag, fatal=False):
    text = f"{_NAMES.get(tag, 'Record')} ({tag!r}) at byte {at}: {what}" if tag else f"Frame at byte {at}: {what}"
    if fatal:
        text += "; the rest of the frame was not decoded"
    return PgoutputDecodeError(text, at, tag)


def parse_literal(s: str, p: int):
    """A PrintLiteral value at s[p:]: ``(value, unchanged_toast, end)``."""
    if s.startswith("'", p) or s.startswith("B'", p):
        q = p + (2 if s[p] == "B" else 1)
        out = []
        while True:
            k = s.find("'", q)
            if k < 0:
                raise _Bad(p, "unterminated quoted literal")
            out.append(s[q:k])
            if s.startswith("''", k) and s[p] != "B":
                out.append("'")
                q = k + 2
                continue
            return "".join(out).encode("utf-8"), False, k + 1
    k = s.find(" ", p)
    k = len(s) if k < 0 else k
    tok = s[p:k]
    if not tok:
        raise _Bad(p, "empty value")
    if tok == "null":
        return None, False, k
    if tok == "unchanged-toast-datum":
        return None, True, k
    if tok == "true":
        return b"t", False, k
    if tok == "false":
        return b"f", False, k
    return tok.encode("utf-8"), False, k


def _quoted_ident(s, p):
    """A quote_identifier'd name at s[p] == '"': returns (name as sent, end)."""
    q = p + 1
    while True:
        k = s.find('"', q)
        if k < 0:
            raise _Bad(p, "unterminated quoted identifier")
        if s.startswith('""', k):
            q = k + 2
            continue
        return s[p:k + 1], k + 1


def _columns(s, p, stop=None):
    cols = []
    while p < len(s) and s.startswith(" ", p) and not (stop and s.startswith(stop, p)):
        p += 1
        if s.startswith('"', p):
            name, p = _quoted_ident(s, p)
            if not s.startswith("[", p):
                raise _Bad(p, f"column {len(cols)}: '[' expected after the name")
        else:
            k = s.find("[", p)
            if k <= p:
                raise _Bad(p, f"column {len(cols)}: name[type]:value expected")
            name, p = s[p:k], k
        k = s.find("]:", p)
        if k < 0:
            raise _Bad(p, f"column {len(cols)}: ']:' expected after the type")
        type_name = s[p + 1:k]
        value, toast, p = parse_literal(s, k + 2)
        cols.append(Column(name, None, value, type_name, toast))
    return tuple(cols), p


def _dml_head(s):
    """'table <schema> <table> <OP>:' -> (schema, table, tag, end). The server prints the
    names unquoted (``appendStringInfo("table %s %s")``), so a name with a space cannot be
    told apart from the next one: that is an error, never a guess. One find per
    operation keyword: linear in the line."""
    if not s.startswith("table "):
        raise _Bad(0, "'table <schema> <table> INSERT|UPDATE|DELETE:' expected")
    ends = [k for k in (s.find(mark, 6) for mark in _OP_MARKS) if k >= 0]
    if not ends:
        raise _Bad(0, "'table <schema> <table> INSERT|UPDATE|DELETE:' expected")
    k = min(ends)
    names = s[6:k].split(" ")
    if len(names) != 2 or not all(names):
        raise _Bad(6, f"{s[6:k]!r} is not one schema and one table name: the text style prints "
                      "names unquoted, so names with spaces cannot be told apart (decode-style 'j' or 'b' "
                      "quotes them)")
    return names[0], names[1], _OPS[s[k + 1:k + 7]], k + 8


def _dml_text(s, lsn):
    schema, table, tag, p = _dml_head(s)
    new = old = None
    try:
        if tag == "U" and s.startswith(" old-key:", p):
            old, p = _columns(s, p + len(" old-key:"), stop=" new-tuple:")
            if not s.startswith(" new-tuple:", p):
                raise _Bad(p, "' new-tuple:' expected after the old key")
            p += len(" new-tuple:")
        if s.startswith(" (no-tuple-data)", p):
            p += len(" (no-tuple-data)")
        else:
            cols, p = _columns(s, p)
            if tag == "D":
                old = cols
            else:
                new = cols
        if p != len(s):
            raise _Bad(p, f"{len(s) - p} characters left after the tuple data")
    except _Bad as b:
        b.tag = tag
        raise
    return Record(tag, lsn, schema=schema, table=table, new_tuple=new, old_tuple=old)


def _split_qualified(name):
    parts, p = [], 0
    while True:
        if name.startswith('"', p):
            raw, p = _quoted_ident(name, p)
            parts.append(raw[1:-1].replace('""', '"'))
        else:
            k = name.find(".", p)
            k = len(name) if k < 0 else k
            parts.append(name[p:k])
            p = k
        if p == len(name):
            break
        if name[p] != ".":
            raise _Bad(0, f"bad qualified table_name {name!r}")
        p += 1
    if len(parts) != 2:
        raise _Bad(0, f"table_name {name!r} is not schema.table")
    return parts


def _json_cols(obj, prefix, tag):
    names, types, vals = (obj.get(f"{prefix}_{k}") for k in ("name", "type", "val"))
    if not (isinstance(names, list) and isinstance(types, list) and isinstance(vals, list)
            and len(names) == len(types) == len(vals)):
        raise _Bad(0, f"{prefix}_name/_type/_val must be lists of one length", tag)
    cols = []
    for i, (n, t, v) in enumerate(zip(names, types, vals, strict=False)):
        if not (isinstance(n, str) and isinstance(t, str) and isinstance(v, str)):
            raise _Bad(0, f"{prefix} column {i}: strings expected", tag)
        value, toast, end = parse_literal(v, 0)
        if end != len(v):
            raise _Bad(0, f"{prefix} column {i}: bad literal {v!r}", tag)
        cols.append(Column(n, None, value, t, toast))
    return tuple(cols) or None


def _dml_json(s, lsn):
    try:
        obj = json.loads(s)
    except ValueError as e:
        raise _Bad(getattr(e, "pos", 0), f"invalid JSON: {e.msg if hasattr(e, 'msg') else e}") from None
    except RecursionError:   # json's decoder recurses once per level
        raise _Bad(0, "invalid JSON: nested too deep") from None
    if not isinstance(obj, dict):
        raise _Bad(0, "a JSON object expected")
    tag = _OPS.get(obj.get("op_type"))
    if tag is None:
        raise _Bad(0, f"unknown op_type {obj.get('op_type')!r}")
    tn = obj.get("table_name")
    if not isinstance(tn, str):
        raise _Bad(0, "table_name missing", tag)
    try:
        schema, table = _split_qualified(tn)
    except _Bad as b:
        b.tag = tag
        raise
    new = _json_cols(obj, "columns", tag)
    old = _json_cols(obj, "old_keys", tag)
    if tag == "I" and old is not None or tag == "D" and new is not None:
        raise _Bad(0, "tuple not allowed for this op_type", tag)
    return Record(tag, lsn, schema=schema, table=table, new_tuple=new, old_tuple=old)


def _uint(m, group: int, bits: int, what: str, tag: str, base: int = 10):
    """A regex group as an unsigned int of ``bits`` bits; the Arrow columns are
    uint64/uint32, so a longer number is a malformed line, not an overflow later."""
    text = m.group(group)
    if text is None:
        return None
    v = int(text, base)
    if v >> bits:
        raise _Bad(m.start(group), f"{what} {text} does not fit {bits} bits", tag)
    return v


def parse_line(s: str, style: str, lsn=None) -> Record:
    """One record's text (``_Bad`` offsets are relative to the start of the text)."""
    if s.startswith("BEGIN"):
        m = _BEGIN.match(s)
        if not m:
            raise _Bad(0, "bad BEGIN line", "B")
        ct, user = m.group(5), m.group(7)
        hi = _uint(m, 2, 32, "first_lsn high half", "B", 16)    # printed %X/%X
        lo = _uint(m, 3, 32, "first_lsn low half", "B", 16)
        return Record("B", lsn, csn=_uint(m, 1, 64, "CSN", "B"), first_lsn=(hi << 32) | lo,
                      xid=_uint(m, 4, 64, "xid", "B"), commit_time=ct,
                      origin_id=_uint(m, 6, 32, "origin id", "B"), user_name=user)
    if s.startswith("commit"):
        m = _COMMIT.match(s)
        if not m:
            raise _Bad(0, "bad commit line", "C")
        return Record("C", lsn, xid=_uint(m, 1, 64, "xid", "C"), commit_time=m.group(2))
    if style == "t":
        return _dml_text(s, lsn)
    return _dml_json(s, lsn)


def _frame_items(data, style, envelope, sending_batch):
    """``(items, end, xlog)``; items are Records and ``(PgoutputDecodeError, lsn, fatal)``."""
    items = []
    if data is None:
        return [(_err(0, "null input row", None), None, True)], None, None
    data = bytes(data)
    n = len(data)
    if n == 0:
        return [(_err(0, "empty frame", None), None, True)], None, None
    pos, xlog = 0, None
    if envelope == "xlogdata" and data[0] != 0x77:
        return [(_err(0, "not an XLogData ('w') frame", None), None, True)], None, None
    if envelope != "none" and data[0] == 0x77:
        if n < 25:
            return [(_err(1, f"XLogData header: needs 24 bytes, {n - 1} left", "w", True), None, True)], None, None
        xlog = _XLOG.unpack_from(data, 1)
        pos = 25
    batched = sending_batch if sending_batch is not None else (pos < n and data[pos] == 0)

    def one(start, end, lsn):
        try:
            text = data[start:end].decode("utf-8")
        except UnicodeDecodeError as e:
            items.append((_err(start + e.start, "text is not valid UTF-8", None), lsn, False))
            return
        try:
            items.append(parse_line(text, style, lsn))
        except _Bad as b:
            at = start + len(text[:b.at].encode("utf-8"))
            items.append((_err(at, b.what, b.tag), lsn, False))

    if not batched:
        one(pos, n, None)
        return items, "F", xlog
    while True:
        if n - pos < 4:
            items.append((_err(pos, f"record length: needs 4 bytes, {n - pos} left", None, True), None, True))
            return items, None, xlog
        length = _U32.unpack_from(data, pos)[0]
        if length == 0:
            if pos + 4 != n:
                items.append((_err(pos + 4, f"{n - pos - 4} bytes left after the UInt32 0 that ends the batch",
                                   None, True), None, True))
            return items, "0", xlog
        if length < 8:
            items.append((_err(pos, f"record length {length} is less than 8 (UInt64 lsn)", None, True), None, True))
            return items, None, xlog
        if length > n - pos - 4:
            items.append((_err(pos + 4, f"record: needs {length} bytes, {n - pos - 4} left", None, True),
                          None, True))
            return items, None, xlog
        lsn = _U64.unpack_from(data, pos + 4)[0]
        one(pos + 12, pos + 4 + length, lsn)
        pos += 4 + length


def decode_text_frame(data, style="t", *, envelope="auto", sending_batch=None) -> Frame:
    """One 't'/'j' frame to a :class:`Frame`; raises ``PgoutputDecodeError``."""
    if envelope not in ENVELOPES:
        raise ValueError(f"envelope must be one of {ENVELOPES}, not {envelope!r}")
    items, end, xlog = _frame_items(data, style, envelope, sending_batch)
    recs = []
    for it in items:
        if isinstance(it, tuple):
            raise it[0]
        recs.append(it)
    return Frame(tuple(recs), end, xlog, 0)


def decode_text_batch(values, style="t", *, envelope="auto", sending_batch=None) -> pa.Table:
    """The 't'/'j' path of ``decode_batch``: same schema and error rows as 'b'."""
    batches, base = [], 0
    for chunk in payload_chunks(values):
        rows = []
        for i, data in enumerate(chunk.to_pylist()):
            items, _end, _x = _frame_items(data, style, envelope, sending_batch)
            for it in items:
                if isinstance(it, tuple):
                    e, lsn, _fatal = it
                    t = e.message_type if e.message_type in ("B", "C", "I", "U", "D") else None
                    rows.append({"row": base + i, "lsn": lsn, "type": t, "error": str(e)})
                else:
                    rows.append({"row": base + i, **it.to_row()})
        base += len(chunk)
        batches.append(pa.RecordBatch.from_pylist(rows, schema=RECORD_SCHEMA))
    t = pa.Table.from_batches(batches, schema=RECORD_SCHEMA)
    return t.replace_schema_metadata({HEARTBEATS_KEY: b"0"})
