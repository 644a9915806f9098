"""Where a chunk of a table copied while the stream runs goes in the archive.

A chunk is taken between two watermarks, each a transaction of its own that holds one
transactional logical message (prefix :data:`PREFIX`, JSON ``{"chunk": ID, "mark":
"low"|"high"}``): the low one is emitted, then the chunk's rows are read under a fresh
snapshot ``S`` (``pg_current_snapshot()``), then the high one is emitted. Reading the
stream, capture finds both and places the chunk (:func:`place`):

- a transaction that touches the chunk's table (an Insert, Update or Delete on its relid,
  a Truncate naming it) and that ``S`` sees is already in the chunk; one ``S`` does not
  see must come after the chunk in the archive, to be applied on top of it;
- so: if no touching transaction between the two watermarks is visible, the chunk goes
  into the low watermark's transaction; if all are, into the high one's; otherwise (or if
  a touching transaction before the low watermark is one ``S`` does not see) it cannot be
  placed and is taken again;
- "into": that watermark transaction becomes a copy transaction (its Begin's xid 0), its
  message kept, the chunk's Relation and Inserts after it, then its own Commit
  (:func:`splice`).

Everything here is pure: rows in, decisions and rows out; :mod:`.capture` talks to the
server.
"""

from __future__ import annotations

import json
from typing import NamedTuple, Optional

import pyarrow as pa

__all__ = ["PREFIX", "Snapshot", "Tx", "Scanner", "place", "splice", "mark_content",
           "RETAKE", "copy_begin"]

#: the prefix of the watermark messages capture emits
PREFIX = "pgoutput_codec.watermark"

#: :func:`place`'s answer for a chunk that cannot be placed: take it again
RETAKE = "retake"

_PREFIX_BYTES = PREFIX.encode()


def mark_content(chunk_id: int, mark: str) -> str:
    """The content of a watermark message."""
    return json.dumps({"chunk": chunk_id, "mark": mark})


class Snapshot(NamedTuple):
    """A ``pg_current_snapshot()`` (64-bit xids): which transactions it sees."""

    xmin: int
    xmax: int
    xip: frozenset

    @classmethod
    def parse(cls, text: str) -> "Snapshot":
        """``'xmin:xmax:xip1,xip2'`` as the server prints a ``pg_snapshot``."""
        lo, hi, xip = text.split(":")
        return cls(int(lo), int(hi), frozenset(int(x) for x in xip.split(",") if x))

    def full(self, xid32: int) -> int:
        """The 64-bit xid of a stream's 32-bit xid: the one within 2^31 below ``xmax``
        (the transactions a stream sends near a snapshot are that recent)."""
        x = (self.xmax & ~0xFFFFFFFF) | xid32
        if x > self.xmax + (1 << 31):
            x -= 1 << 32
        elif x + (1 << 31) < self.xmax:
            x += 1 << 32
        return x

    def visible(self, xid32: int) -> bool:
        """Whether the snapshot sees the (committed) transaction ``xid32``."""
        x = self.full(xid32)
        return x < self.xmin or (x < self.xmax and x not in self.xip)


class Tx(NamedTuple):
    """A transaction the stream committed: the rows of its Begin (or first row) and of
    its Commit in the scanned sequence, its top-level xid, the relids of interest it
    touched (None: not known, taken as all) and its watermark ``(chunk, mark)`` if it
    is one."""

    begin: int
    commit: int
    xid: int
    touches: Optional[frozenset]
    mark: Optional[tuple]


def _u32(data, at):
    return int.from_bytes(data[at:at + 4], "big")


def _message_mark(data, at):
    """The (chunk, mark) of a watermark message whose flags byte is at ``at``, or None."""
    end = data.find(b"\0", at + 9)
    if end < 0 or data[at + 9:end] != _PREFIX_BYTES:
        return None
    try:
        content = json.loads(bytes(data[end + 5:end + 5 + _u32(data, end + 1)]))
        return int(content["chunk"]), str(content["mark"])
    except (ValueError, KeyError, TypeError):
        return None


class Scanner:
    """Reads a stream's payloads in order (:meth:`feed`) and keeps, in commit order, the
    transactions that touch a relid of ``relids`` (None: any) or are watermarks
    (:attr:`committed`): what :func:`place` needs, in memory that follows those
    transactions only."""

    def __init__(self, relids):
        self.relids = None if relids is None else frozenset(relids)
        self.committed = []
        self._tx = None                  # (begin row, xid, touched, mark) of the open transaction
        self._stream = None              # xid of the open stream block
        self._streams = {}               # xid -> [first row, touched or None, mark]
        self._prepared = {}              # xid -> (first row, touched or None, mark)

    def _touch(self, touched, data, at):
        rel = _u32(data, at)
        if self.relids is None or rel in self.relids:
            touched.add(rel)

    def _truncate(self, touched, data, at):
        for i in range(_u32(data, at)):
            self._touch(touched, data, at + 5 + 4 * i)

    def feed(self, row: int, data) -> None:
        """Take row number ``row``, payload ``data``."""
        tag = data[:1]
        if self._stream is not None and tag in (b"I", b"U", b"D", b"T", b"M"):
            entry = self._streams.get(self._stream)
            if entry is not None and entry[1] is not None:
                if tag == b"T":
                    self._truncate(entry[1], data, 5)
                elif tag == b"M":
                    entry[2] = _message_mark(data, 5) or entry[2]
                else:
                    self._touch(entry[1], data, 5)
            return
        if tag in (b"I", b"U", b"D"):
            if self._tx is not None:
                self._touch(self._tx[2], data, 1)
        elif tag == b"T":
            if self._tx is not None:
                self._truncate(self._tx[2], data, 1)
        elif tag == b"M":
            if self._tx is not None and data[1:2] == b"\x01":
                self._tx[3] = _message_mark(data, 1) or self._tx[3]
        elif tag == b"B":
            self._tx = [row, _u32(data, 17), set(), None]
        elif tag == b"b":
            self._tx = [row, _u32(data, 25), set(), None]
        elif tag == b"C":
            if self._tx is not None:
                self._commit(self._tx[0], row, self._tx[1], self._tx[2], self._tx[3])
            self._tx = None
        elif tag == b"P":
            if self._tx is not None:
                self._prepared[self._tx[1]] = (self._tx[0], self._tx[2], self._tx[3])
            self._tx = None
        elif tag == b"K":
            xid = _u32(data, 26)
            first, touched, mark = self._prepared.pop(xid, (row, None, None))
            self._commit(first, row, xid, touched, mark)
        elif tag == b"r":
            self._prepared.pop(_u32(data, 34), None)
        elif tag == b"S":
            xid = _u32(data, 1)
            self._stream = xid
            if xid not in self._streams:
                # the first block of a transaction: its changes are all ahead; else some
                # went by before this scan began, and what it touched is not known
                self._streams[xid] = [row, set() if data[5:6] == b"\x01" else None, None]
        elif tag == b"E":
            self._stream = None
        elif tag == b"c":
            xid = _u32(data, 1)
            first, touched, mark = self._streams.pop(xid, (row, None, None))
            self._commit(first, row, xid, touched, mark)
        elif tag == b"p":
            xid = _u32(data, 26)
            first, touched, mark = self._streams.pop(xid, (row, None, None))
            self._prepared[xid] = (first, touched, mark)
        elif tag == b"A":
            xid, sub = _u32(data, 1), _u32(data, 5)
            if xid == sub:
                self._streams.pop(xid, None)

    def _commit(self, first, row, xid, touched, mark):
        if mark is not None or touched is None or touched:
            self.committed.append(Tx(first, row, xid, None if touched is None else frozenset(touched), mark))


def place(committed, chunk_id: int, relid: int, snapshot: Snapshot):
    """Where chunk ``chunk_id`` of the table ``relid``, read under ``snapshot``, goes:
    the watermark :class:`Tx` to put it into, :data:`RETAKE`, or None while the high
    watermark is not in ``committed`` (:attr:`Scanner.committed`, in commit order)."""
    low = high = None
    for t in committed:
        if t.mark == (chunk_id, "low"):
            low = t
        elif t.mark == (chunk_id, "high"):
            high = t
    if high is None:
        return None
    if low is None or low.commit > high.commit:
        return RETAKE
    before, between = [], []
    for t in committed:
        if t.touches is not None and relid not in t.touches:
            continue
        if t.commit < low.commit:
            before.append(t)
        elif t.commit < high.commit:
            between.append(t)
    if not all(snapshot.visible(t.xid) for t in before):
        return RETAKE
    seen = [snapshot.visible(t.xid) for t in between]
    if not any(seen):
        return low
    if all(seen):
        return high
    return RETAKE


def copy_begin(begin_payload: bytes) -> bytes:
    """A Begin payload with its xid set to 0: the transaction holds copied rows."""
    return bytes(begin_payload[:17]) + b"\0\0\0\0"


def splice(pieces, first: int, tx: Tx, chunk):
    """The tables ``pieces`` (columns of a captured file, rows numbered from ``first``
    in the sequence the :class:`Tx` rows count) with the chunk's payloads put into
    transaction ``tx``: its Begin's xid 0, the ``xid`` column 0 over its rows, and the
    tables ``chunk`` (a ``data`` column each; the Relation first) inserted before its
    Commit, each row taking the Commit row's ``lsn``. ``seq`` and
    ``lsn_ordinal`` are left for the writer to number."""
    at = first
    for piece in pieces:
        n = len(piece)
        lo, hi = at, at + n
        if hi <= tx.begin or lo > tx.commit:
            yield piece
            at = hi
            continue
        a, b = max(tx.begin, lo) - lo, min(tx.commit, hi - 1) - lo + 1   # rows of tx in this piece
        xid = piece.column("xid").to_pylist()
        data = piece.column("data").to_pylist()
        for i in range(a, b):
            xid[i] = 0
        if lo <= tx.begin < hi:
            data[tx.begin - lo] = copy_begin(data[tx.begin - lo])
        piece = piece.set_column(piece.schema.get_field_index("xid"), "xid", pa.array(xid, pa.int64()))
        piece = piece.set_column(piece.schema.get_field_index("data"), "data", pa.array(data, pa.binary()))
        if lo <= tx.commit < hi:
            cut = tx.commit - lo
            head = piece.slice(0, cut)
            if len(head):
                yield head
            lsn = piece.column("lsn")[cut].as_py()
            for table in chunk:
                m = len(table)
                if m:
                    yield pa.table({
                        "seq": pa.array([0] * m, pa.int64()), "lsn": pa.array([lsn] * m, pa.string()),
                        "lsn_ordinal": pa.array([0] * m, pa.int32()), "xid": pa.array([0] * m, pa.int64()),
                        "data": table.column("data").cast(pa.binary()),
                    }, schema=piece.schema)
            yield piece.slice(cut)
        else:
            yield piece
        at = hi
