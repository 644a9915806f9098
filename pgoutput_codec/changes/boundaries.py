"""Transaction boundaries of a run of messages, read from tag bytes and a few fields,
without the walk's state (relations, slots, held rows): where a transaction begins and
ends, its xid and LSN. What the command needs before any change row is made —
``capture`` where it may cut the slot's rows (no transaction open after a row),
``inspect`` which Inserts sit in a COPY transaction (Begin xid 0) and at which LSN.
Both are fed in batches, in arrival order, the state carried from one to the next."""

from __future__ import annotations

import numpy as np

__all__ = ["Boundaries", "boundaries"]


class Boundaries:
    """The transaction boundaries of a slot's rows, fed one payload at a time in the order
    peeked: :meth:`closes` tells whether no transaction is open after a row whose LSN is
    the end of a WAL record, so that advancing the slot to it re-sends nothing of what
    precedes it (a Commit, Prepare, Commit/Rollback Prepared, Stream Commit/Prepare, or a
    non-transactional message)."""

    def __init__(self):
        self.in_tx = False
        self.streams = set()

    def closes(self, data) -> bool:
        """Take the next row's payload; true when the slot may be advanced to its LSN."""
        tag = data[:1]
        closes = False
        if tag in (b"B", b"b"):
            self.in_tx = True
        elif tag in (b"C", b"P"):
            self.in_tx, closes = False, True
        elif tag == b"S":
            self.streams.add(int.from_bytes(data[1:5], "big"))
        elif tag in (b"c", b"p"):
            self.streams.discard(int.from_bytes(data[1:5], "big"))
            closes = True
        elif tag == b"A":
            xid, sub = int.from_bytes(data[1:5], "big"), int.from_bytes(data[5:9], "big")
            if xid == sub:
                self.streams.discard(xid)
            # not a cut point: the row's LSN is where the abort record starts
        elif tag in (b"K", b"r"):
            closes = True
        elif tag == b"M":
            closes = True   # non-transactional outside a transaction; its LSN is the record end
        return closes and not self.in_tx and not self.streams


def boundaries(begin: np.ndarray, end: np.ndarray, xid: np.ndarray, lsn: np.ndarray, carried: list):
    """The plain transaction (Begin … Commit) each of a batch's rows sits in: per row, its
    Begin's ``xid`` and ``lsn`` (the Begin's final LSN, its commit's) and whether it sits
    in one, as (inside, xid, lsn). ``begin``, ``end``: the Begin and Commit rows (masks);
    ``xid``, ``lsn``: the rows' fields, read at the Begins. ``carried``: [inside, xid,
    lsn] of the transaction open at the batch's start, left as at its end (a row before
    the batch's first Begin or Commit sits in it)."""
    n = len(begin)
    at = np.flatnonzero(begin | end)
    if not len(at):
        return (np.full(n, carried[0], bool), np.full(n, carried[1], np.int64),
                np.full(n, carried[2], np.uint64))
    # the state after each Begin or Commit, carried forward to the rows after it
    opened = begin[at]
    b_xid = np.where(opened, xid[at], 0).astype(np.int64)
    b_lsn = np.where(opened, lsn[at], 0).astype(np.uint64)
    idx = np.searchsorted(at, np.arange(n), side="right") - 1
    before = idx < 0
    k = np.maximum(idx, 0)
    inside = np.where(before, carried[0], opened[k])
    out_xid = np.where(before, carried[1], b_xid[k])
    out_lsn = np.where(before, np.uint64(carried[2]), b_lsn[k]).astype(np.uint64)
    carried[:] = [bool(opened[-1]), int(b_xid[-1]), int(b_lsn[-1])]
    return inside, out_xid, out_lsn
