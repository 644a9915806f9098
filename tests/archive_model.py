"""Random archives shaped as a pgoutput server sends them, with the changes they must give.

Each archive is what one replication session with ``streaming`` and ``two_phase`` on
could send (docs/protocol.md, and what the conformance corpus shows real servers do):

- plain transactions (Begin … Commit), some with an Origin, transactional Logical
  Messages and Truncates, never interleaved with each other;
- streamed transactions, up to three open at once, their Stream Start/Stop blocks
  interleaved with plain transactions and with each other's blocks; changes of
  subtransactions (savepoints, one open at a time, released or rolled back) carry the
  subtransaction's xid, and the open one may be rolled back between blocks (Stream
  Abort with its subxid); the transaction then ends in a Stream Commit, a Stream Abort
  of its own xid, or a Stream Prepare;
- two-phase transactions (Begin Prepare … Prepare, or a Stream Prepare) whose Commit
  Prepared or Rollback Prepared comes later, after other transactions;
- Relations sent before a relation's first change in the session and again when it is
  redefined (another column count), inside the transaction (inside a stream block with
  its xid); non-transactional Logical Messages between transactions.

Commit LSNs rise (PostgreSQL sends commits in commit order). The oracle is the model:
``expected`` lists ``(seq, op)`` of every change a committed transaction made, outside
aborted subtransactions, in commit order and then arrival order (a Truncate: one entry
per relation). It does not come from any decoder.
"""

from __future__ import annotations

import os
import random

from pgoutput_codec import encode_message
from pgoutput_codec.pgoutput.messages import (
    Begin, BeginPrepare, Commit, CommitPrepared, Delete, Insert, LogicalMessage, Origin, Prepare,
    Relation, RelationColumn, RollbackPrepared, StreamAbort, StreamCommit, StreamPrepare, StreamStart,
    StreamStop, Truncate, TupleColumn, Update,
)

RELIDS = (16400, 16401, 16402)


def soak_seeds() -> list[int]:
    """Extra seeds for the Spark random-session tests (Spark against the single process
    and the model): ``PGOUTPUT_CODEC_SOAK_SEEDS=200:230`` (a range, end excluded). None by
    default, for CI's time; a longer hunt than CI's, to run by hand after a change to
    Spark's change paths (a seed takes 20-50 s)."""
    spec = os.environ.get("PGOUTPUT_CODEC_SOAK_SEEDS", "")
    if not spec:
        return []
    lo, _, hi = spec.partition(":")
    return list(range(int(lo), int(hi or int(lo) + 1)))


class _Txn:
    def __init__(self, xid):
        self.xid = xid
        self.changes = []          # (seq, op, xid the change carries)
        self.current = None        # the open subtransaction (SAVEPOINT) changes go to; None: top
        self.aborted = set()

    def given(self):
        return [(s, op) for s, op, x in self.changes if x not in self.aborted]


class Session:
    """One replication session; ``build()`` returns (payloads, expected)."""

    def __init__(self, seed: int, *, events: int = 40):
        self.r = random.Random(seed)
        self.events = events
        self.msgs = []
        self.expected = []
        self.lsn = 1000
        self.xid = 700
        self.ncols = {rid: 2 for rid in RELIDS}
        self.sent = set()           # relation ids whose current definition the session sent
        self.streams = {}           # top xid -> _Txn
        self.prepared = {}          # gid -> _Txn
        self.gids = 0

    # ---- helpers ---------------------------------------------------------------
    def _next_lsn(self):
        self.lsn += self.r.randint(8, 400)
        return self.lsn

    def _next_xid(self):
        self.xid += self.r.randint(1, 5)
        return self.xid

    def _put(self, m):
        self.msgs.append(m)
        return len(self.msgs) - 1

    def _relation(self, rid, xid=None):
        cols = tuple(RelationColumn(1 if i == 0 else 0, f"c{i}", 23 if i == 0 else 25, -1)
                     for i in range(self.ncols[rid]))
        self._put(Relation(xid=xid, relation_id=rid, namespace="public", relation_name=f"t{rid}",
                           replica_identity="d", columns=cols))
        self.sent.add(rid)

    def _row(self, rid):
        return tuple(TupleColumn("t", str(self.r.randint(0, 10**6) if i == 0 else "v" * self.r.randint(0, 9)).encode())
                     for i in range(self.ncols[rid]))

    def _changes(self, txn, xid=None, n=None):
        """Up to a few changes into ``txn``; ``xid``: the xid they carry (stream blocks)."""
        top = None if xid is None else txn.xid   # a Relation in a stream block: the top xid
        for _ in range(self.r.randint(1, 4) if n is None else n):
            rid = self.r.choice(RELIDS)
            if self.r.random() < 0.08:   # redefined: the next change sends it again
                self.ncols[rid] = self.r.randint(1, 4)
                self.sent.discard(rid)
            if rid not in self.sent:
                self._relation(rid, top)
            kind = self.r.random()
            if kind < 0.5:
                m = Insert(xid=xid, relation_id=rid, new_tuple=self._row(rid))
                op = "I"
            elif kind < 0.75:
                old = self.r.random() < 0.3
                m = Update(xid=xid, relation_id=rid, old_kind="K" if old else None,
                           old_tuple=self._row(rid) if old else None, new_tuple=self._row(rid))
                op = "U"
            elif kind < 0.93:
                m = Delete(xid=xid, relation_id=rid, old_kind="K", old_tuple=self._row(rid))
                op = "D"
            elif kind < 0.97:
                rids = tuple(self.r.sample(RELIDS, self.r.randint(1, 2)))
                for t in rids:
                    if t not in self.sent:
                        self._relation(t, top)
                seq = self._put(Truncate(xid=xid, options=0, relation_ids=rids))
                txn.changes.extend((seq, "T", xid) for _ in rids)
                continue
            else:
                self._put(LogicalMessage(xid=xid, flags=1, lsn=self._next_lsn(), prefix="app", content=b"m"))
                continue
            txn.changes.append((self._put(m), op, xid))

    def _on_commit(self, txn, lsn):
        self.expected += txn.given()

    def _on_end(self, txn):
        """A transaction ended without committing."""

    # ---- events ----------------------------------------------------------------
    def _plain(self):
        txn = _Txn(self._next_xid())
        lsn = self._next_lsn()
        self._put(Begin(final_lsn=lsn, commit_ts=lsn, xid=txn.xid))
        if self.r.random() < 0.15:
            self._put(Origin(origin_lsn=lsn - 1, origin_name="upstream"))
        self._changes(txn)
        self._put(Commit(flags=0, commit_lsn=lsn, end_lsn=lsn + 4, commit_ts=lsn))
        self.lsn += 4
        self._on_commit(txn, lsn)

    def _stream_block(self):
        if len(self.streams) < 3 and (not self.streams or self.r.random() < 0.4):
            txn = _Txn(self._next_xid())
            self.streams[txn.xid] = txn
            first = True
        else:
            txn = self.r.choice(list(self.streams.values()))
            first = False
        self._put(StreamStart(xid=txn.xid, first_segment=first))
        # a stream block sends a relation's definition again in it (pgoutput resends
        # in each block the relations the streamed transaction has not yet sent)
        self.sent.clear()
        for _ in range(self.r.randint(1, 3)):
            roll = self.r.random()
            if roll < 0.3:      # SAVEPOINT (the open one RELEASEd: its changes stay with the top)
                txn.current = self._next_xid()
            elif roll < 0.4:    # RELEASE SAVEPOINT
                txn.current = None
            self._changes(txn, xid=txn.xid if txn.current is None else txn.current, n=1)
        self._put(StreamStop())
        self.sent.clear()

    def _stream_end(self):
        txn = self.streams[self.r.choice(list(self.streams))]
        roll = self.r.random()
        if txn.current is not None and roll < 0.25:   # ROLLBACK TO SAVEPOINT; the transaction goes on
            txn.aborted.add(txn.current)
            self._put(StreamAbort(xid=txn.xid, subxid=txn.current))
            txn.current = None
            return
        del self.streams[txn.xid]
        lsn = self._next_lsn()
        if roll < 0.65:
            self._put(StreamCommit(xid=txn.xid, flags=0, commit_lsn=lsn, end_lsn=lsn + 4, commit_ts=lsn))
            self.lsn += 4
            self._on_commit(txn, lsn)
        elif roll < 0.8:
            self._put(StreamAbort(xid=txn.xid, subxid=txn.xid))
            self._on_end(txn)
        else:
            gid = self._gid()
            self._put(StreamPrepare(flags=0, prepare_lsn=lsn, end_lsn=lsn + 4, prepare_ts=lsn, xid=txn.xid,
                                    gid=gid))
            self.lsn += 4
            self.prepared[gid] = txn

    def _gid(self):
        self.gids += 1
        return f"g{self.gids}"

    def _two_phase(self):
        txn = _Txn(self._next_xid())
        lsn = self._next_lsn()
        gid = self._gid()
        self._put(BeginPrepare(prepare_lsn=lsn, end_lsn=lsn + 4, prepare_ts=lsn, xid=txn.xid, gid=gid))
        self._changes(txn)
        self._put(Prepare(flags=0, prepare_lsn=lsn, end_lsn=lsn + 4, prepare_ts=lsn, xid=txn.xid, gid=gid))
        self.lsn += 4
        self.prepared[gid] = txn

    def _finish_prepared(self):
        gid = self.r.choice(list(self.prepared))
        txn = self.prepared.pop(gid)
        lsn = self._next_lsn()
        if self.r.random() < 0.7:
            self._put(CommitPrepared(flags=0, commit_lsn=lsn, end_lsn=lsn + 4, commit_ts=lsn, xid=txn.xid, gid=gid))
            self._on_commit(txn, lsn)
        else:
            self._put(RollbackPrepared(flags=0, prepare_end_lsn=lsn - 4, rollback_end_lsn=lsn + 4, prepare_ts=lsn,
                                       rollback_ts=lsn, xid=txn.xid, gid=gid))
            self._on_end(txn)
        self.lsn += 4

    def build(self, *, finish: bool = True):
        """(payloads, expected). ``finish``: end every open transaction (else the archive
        ends with some still open, as a lake cut at any moment does)."""
        for _ in range(self.events):
            roll = self.r.random()
            if roll < 0.35:
                self._plain()
            elif roll < 0.6:
                self._stream_block()
            elif roll < 0.72 and self.streams:
                self._stream_end()
            elif roll < 0.8:
                self._two_phase()
            elif roll < 0.9 and self.prepared:
                self._finish_prepared()
            elif roll < 0.95:
                self._put(LogicalMessage(xid=None, flags=0, lsn=self._next_lsn(), prefix="nt", content=b""))
            else:
                self._plain()
        while finish and (self.streams or self.prepared):
            if self.streams:
                self._stream_end()
            else:
                self._finish_prepared()
        return [encode_message(m) for m in self.msgs], self.expected


class TableSession(Session):
    """A session whose changes keep two tables consistent, for the typed-table oracle:
    ``public.a`` (REPLICA IDENTITY DEFAULT: key ``id``) and ``public.b`` (FULL: the old
    row with every Update and Delete). Columns ``id`` int4, ``v`` text, ``n`` int8.

    Changes act on what their transaction sees (the committed rows plus its own changes
    outside aborted subtransactions) and take row locks as PostgreSQL does, so no two
    open transactions touch one row and a TRUNCATE waits for no one (it runs only on a
    table no other open transaction touched, and locks it). Updates change the key now
    and then and send an unchanged ``v`` as unchanged TOAST ('u'). ``states``: (commit
    LSN, the tables after that commit), one per commit; ``landed``: for each, the number
    of payloads up to and including its commit.

    ``flips``: now and then a table's REPLICA IDENTITY flips between DEFAULT and FULL (an
    ``ALTER TABLE`` committed between two changes, while no open transaction holds a lock
    on the table and no streamed one is open, whose later chunks the server would send
    the Relation again), and the next change sends the new Relation first.

    ``retypes``: now and then, under the same conditions, ``n`` changes type between
    ``int8`` and ``numeric(20,2)`` (``ALTER COLUMN n TYPE``): the server rewrites the rows
    without sending them, and later changes send ``n`` in the new type's text form
    (``5.00``), old images under FULL included: the same value, other bytes.

    ``readds``: now and then, under the same conditions, the column of ``v`` and ``n``
    that is not last is dropped and added again by its name in one statement (``DROP
    COLUMN v, ADD COLUMN v text``): every row holds null there, the column comes back
    last (the Relation lists ``id, n, v``), and nothing is sent for the rows; the next
    change of the table is an Insert. ``dropped``: per table, [commit LSN before the
    ALTER, column, commit LSN that shows it], in order. An archive shows the ALTER only
    with the table's next committed change, which sends the Relation, and only where one
    ALTER came between (after two the columns are listed as before): :meth:`unseen`."""

    #: numeric(20,2)'s type modifier: ((precision << 16) | scale) + 4
    NUMERIC_TYPMOD = ((20 << 16) | 2) + 4

    TABLES = {16400: ("a", "d"), 16401: ("b", "f")}
    TRUNCATES = True

    def __init__(self, seed: int, *, events: int = 40, flips: bool = False, retypes: bool = False,
                 readds: bool = False):
        super().__init__(seed, events=events)
        self.flips, self.retypes, self.readds = flips, retypes, readds
        self.order = {rid: ("v", "n") for rid in self.TABLES}   # the columns after id, as listed
        self.dropped = {rid: [] for rid in self.TABLES}
        self.numeric = {rid: False for rid in self.TABLES}   # n is numeric(20,2), not int8
        self.ident = {rid: ident for rid, (_, ident) in self.TABLES.items()}
        self.ncols = {rid: 3 for rid in self.TABLES}
        self.committed = {rid: {} for rid in self.TABLES}
        self.states = []
        self.landed = []         # per state: how many payloads the archive holds at its commit
        self.locks = {}          # (rid, id) or (rid, None) for a whole table -> top xid
        self.next_id = 1
        self.ops = {}            # top xid -> [(carried xid, rid, op, args)]
        self.fixed_keys = set()  # tables whose rows are never deleted nor change key

    def _relation(self, rid, xid=None):
        name, ident = self.TABLES[rid][0], self.ident[rid]
        full = ident == "f"
        n_type = (1700, self.NUMERIC_TYPMOD) if self.numeric[rid] else (20, -1)
        by = {"v": RelationColumn(int(full), "v", 25, -1), "n": RelationColumn(int(full), "n", *n_type)}
        cols = (RelationColumn(1, "id", 23, -1), *(by[c] for c in self.order[rid]))
        self._put(Relation(xid=xid, relation_id=rid, namespace="public", relation_name=name,
                           replica_identity=ident, columns=cols))
        self.sent.add(rid)

    @staticmethod
    def _apply(tables, rid, op, args):
        t = tables[rid]
        if op == "I":
            t[args[0]] = args[1]
        elif op == "U":
            old_id, new_id, (v, n) = args
            row = t.pop(old_id)
            t[new_id] = (row[0] if v is _UNCHANGED else v, n)
        elif op == "D":
            del t[args]
        else:
            t.clear()

    def _view(self, txn):
        tables = {rid: dict(rows) for rid, rows in self.committed.items()}
        for x, rid, op, args in self.ops.get(txn.xid, ()):
            if x not in txn.aborted:
                self._apply(tables, rid, op, args)
        return tables

    def _free(self, rid, key, txn):
        return self.locks.get((rid, key), txn.xid) == txn.xid and self.locks.get((rid, None), txn.xid) == txn.xid

    @staticmethod
    def _val(v):
        return TupleColumn("n", None) if v is None else TupleColumn("t", str(v).encode())

    def _changes(self, txn, xid=None, n=None):
        top = None if xid is None else txn.xid
        carried = txn.xid if xid is None else xid
        for _ in range(self.r.randint(1, 4) if n is None else n):
            rid = self.r.choice(list(self.TABLES))
            if self.flips and xid is None and not self.streams and self.r.random() < 0.1 \
                    and not any(r == rid for r, _ in self.locks):
                self.ident[rid] = "f" if self.ident[rid] == "d" else "d"
                self.sent.discard(rid)
            if self.retypes and xid is None and not self.streams and self.r.random() < 0.1 \
                    and not any(r == rid for r, _ in self.locks):
                self.numeric[rid] = not self.numeric[rid]
                self.sent.discard(rid)
            if self.readds and xid is None and not self.streams and self.r.random() < 0.1 \
                    and not any(r == rid for r, _ in self.locks):
                col, last = self.order[rid]
                self.order[rid] = (last, col)
                self.dropped[rid].append([self.states[-1][0] if self.states else 0, col, None])
                at = 0 if col == "v" else 1
                self.committed[rid] = {k: tuple(None if i == at else x for i, x in enumerate(row))
                                       for k, row in self.committed[rid].items()}
                self.sent.discard(rid)
                readded = True
            else:
                readded = False
            num = self._num if self.numeric[rid] else self._val
            full = self.ident[rid] == "f"

            def tup(key, v, n, rid=rid):
                return (key, *(v if c == "v" else n for c in self.order[rid]))
            if not self._free(rid, None, txn):
                continue
            if rid not in self.sent:
                self._relation(rid, top)
            view = self._view(txn)[rid]
            mine = [k for k in view if self._free(rid, k, txn)]
            roll = 0.0 if readded else self.r.random()
            if roll < 0.45 or not mine:
                key, row = self.next_id, (self._text(), self._int())
                self.next_id += 1
                m = Insert(xid=xid, relation_id=rid, new_tuple=tup(self._val(key), self._val(row[0]), num(row[1])))
                op, args, locked = "I", (key, row), [key]
            elif roll < 0.75:
                old = self.r.choice(mine)
                v0, n0 = view[old]
                new = old
                if self.r.random() < 0.25 and rid not in self.fixed_keys:
                    new = self.next_id
                    self.next_id += 1
                v = _UNCHANGED if v0 is not None and self.r.random() < 0.4 else self._text()
                n1 = self._int()
                vcol = TupleColumn("u", None) if v is _UNCHANGED else self._val(v)
                old_tuple = None
                if full:
                    old_tuple = tup(self._val(old), self._val(v0), num(n0))
                elif new != old:
                    old_tuple = (self._val(old), TupleColumn("n", None), TupleColumn("n", None))
                m = Update(xid=xid, relation_id=rid, old_kind=None if old_tuple is None else ("O" if full else "K"),
                           old_tuple=old_tuple, new_tuple=tup(self._val(new), vcol, num(n1)))
                op, args, locked = "U", (old, new, (v, n1)), [old, new]
            elif roll < 0.95 or not self.TRUNCATES:
                if rid in self.fixed_keys:
                    continue
                old = self.r.choice(mine)
                v0, n0 = view[old]
                old_tuple = tup(self._val(old), self._val(v0), num(n0)) if full else \
                    (self._val(old), TupleColumn("n", None), TupleColumn("n", None))
                m = Delete(xid=xid, relation_id=rid, old_kind="O" if full else "K", old_tuple=old_tuple)
                op, args, locked = "D", old, [old]
            else:
                if any(h != txn.xid for (r, _), h in self.locks.items() if r == rid):
                    continue   # TRUNCATE would wait for the other transaction
                m = Truncate(xid=xid, options=0, relation_ids=(rid,))
                op, args, locked = "T", None, [None]
            seq = self._put(m)
            txn.changes.append((seq, op, carried))
            self.ops.setdefault(txn.xid, []).append((carried, rid, op, args))
            for k in locked:
                self.locks[(rid, k)] = txn.xid

    @staticmethod
    def _num(v):
        """An int8 value as numeric(20,2) sends it."""
        return TupleColumn("n", None) if v is None else TupleColumn("t", f"{v}.00".encode())

    def _text(self):
        return None if self.r.random() < 0.1 else "v" * self.r.randint(0, 6) + str(self.r.randint(0, 99))

    def _int(self):
        return None if self.r.random() < 0.15 else self.r.randint(-(2**40), 2**40)

    def _release(self, txn):
        self.locks = {k: h for k, h in self.locks.items() if h != txn.xid}

    def _on_commit(self, txn, lsn):
        for rid in {rid for x, rid, _, _ in self.ops.get(txn.xid, ()) if x not in txn.aborted}:
            # the table's first committed change since ALTERs: its Relation shows one, not two
            # (each moves the other column last: after two they are listed as before)
            pending = [e for e in self.dropped[rid] if e[2] is None]
            if len(pending) == 1:
                pending[0][2] = lsn
            for e in pending:
                e[2] = e[2] or -1        # -1: never shown
        super()._on_commit(txn, lsn)
        self.committed = self._view(txn)
        self.ops.pop(txn.xid, None)
        self._release(txn)
        self.states.append((lsn, {rid: dict(rows) for rid, rows in self.committed.items()}))
        self.landed.append(len(self.msgs))

    def _on_end(self, txn):
        self.ops.pop(txn.xid, None)
        self._release(txn)

    def rows(self, tables, rid):
        """The rows of table ``rid`` in ``tables`` as snapshot gives them (dicts)."""
        return [dict(id=k, v=v, n=n) for k, (v, n) in tables[rid].items()]

    def table(self, tables, rid, copied_at=None):
        """:meth:`rows` as an Arrow table of the decoded column types (:meth:`copied` as of
        commit ``copied_at``, when given)."""
        import pyarrow as pa
        rows = self.rows(tables, rid) if copied_at is None else self.copied(tables, rid, copied_at)
        return pa.Table.from_pylist(rows, schema=pa.schema(
            [("id", pa.int32()), ("v", pa.string()), ("n", pa.int64())]))

    def key_columns(self, rid, changes=None):
        """The columns a decoder keys table ``rid`` by: ``id``, every column under FULL;
        with ``flips``, those every identity the table's ``changes`` (decoded change rows:
        their Relations' key flags, as sent) were sent under held."""
        if not self.flips:
            return ["id"] if self.TABLES[rid][1] == "d" else ["id", "v", "n"]
        keys = {"id", "v", "n"}
        for t, cols in zip(changes.column("table").to_pylist(), changes.column("columns").to_pylist(), strict=True):
            if t == self.TABLES[rid][0] and cols:
                keys &= {c["name"] for c in cols if c["flags"] & 1}
        return [k for k in ("id", "v", "n") if k in keys]

    def alive(self, history_rows, lsn, rid=None):
        """The row versions of ``history`` rows (dicts) alive at commit LSN ``lsn``: the
        table as of that commit. history keeps each version's image as sent: a column
        dropped and added again (``readds``, of table ``rid``) since the version began
        and by ``lsn`` is null in the table, so it is here."""
        gone = self.dropped.get(rid, ()) if rid is not None else ()
        return [{k: None if any(h["__START_LSN"] <= at < lsn and k == c for at, c, _ in gone) else h[k]
                 for k in ("id", "v", "n")} for h in history_rows
                if h["__START_LSN"] <= lsn and (h["__END_LSN"] is None or h["__END_LSN"] > lsn)]

    def unseen(self, rid, lsn=None) -> bool:
        """Whether table ``rid`` had a column dropped and added again (before commit
        ``lsn``; None: at all) that no committed change of it shows by then: the archive
        has no Relation saying so, and a snapshot holds the dropped column's values."""
        last = float("inf") if lsn is None else lsn
        return any(at < last and (shown is None or shown < 0 or shown > last) for at, _, shown in self.dropped[rid])

    def copied(self, tables, rid, lsn):
        """:meth:`rows` of ``tables`` (the table as of commit ``lsn``) in a copy that then
        drops and adds again the columns the server did after it (its net changes hold only
        the rows changed): where net changes after ``lsn`` are merged."""
        gone = {c for at, c, _ in self.dropped[rid] if at >= lsn}
        return [{k: None if k in gone else v for k, v in r.items()} for r in self.rows(tables, rid)]


#: an Update's 'u' column: the value stays as it was (unchanged TOAST)
_UNCHANGED = object()


class OpenGaussSession(TableSession):
    """A :class:`TableSession` as openGauss parallel decoding sends it: each committed
    transaction whole, in commit order (Begin, its changes outside rolled-back
    subtransactions, Commit at its end LSN), in frames of 1-6 records cut anywhere.
    Tuples as ``parallel_decode.cpp`` prints them: a new tuple with every column; an old
    tuple with the replica identity's columns (``public.b`` FULL: the whole row; ``public.a``:
    the key), sent with a Delete and with an Update that changed the key or under FULL
    identity, as PostgreSQL's WAL holds it. Unchanged TOAST ('u') only in the 't' style
    (json and 'b' detoast or carry the value). No Truncate (not decoded by openGauss)."""

    TRUNCATES = False
    TYPES = (("id", 23, "integer"), ("v", 25, "text"), ("n", 20, "bigint"))

    def __init__(self, seed: int, *, events: int = 40):
        super().__init__(seed, events=events)
        self.commits = []        # (commit LSN, xid, tables before, [(rid, op, args)])

    def _on_commit(self, txn, lsn):
        before = {rid: dict(rows) for rid, rows in self.committed.items()}
        ops = [(rid, op, args) for x, rid, op, args in self.ops.get(txn.xid, ()) if x not in txn.aborted]
        super()._on_commit(txn, lsn)
        self.commits.append((lsn, txn.xid, before, ops))

    def _cols(self, style, values, unchanged=()):
        from pgoutput_codec.opengauss.messages import Column
        out = []
        for (name, oid, tname), v in zip(self.TYPES, values, strict=True):
            data = None if v is None else str(v).encode()
            if style == "b":
                out.append(Column(name, oid, data))
            else:
                out.append(Column(name, None, data, tname, name in unchanged))
        return tuple(out)

    def records(self, style: str) -> list:
        """Every committed transaction's records (``opengauss.records.Record``)."""
        from pgoutput_codec.opengauss.messages import Record
        out = []
        for csn, (lsn, xid, before, ops) in enumerate(self.commits, 1):
            tables = {rid: dict(rows) for rid, rows in before.items()}
            first = lsn - 300
            at = f"2024-02-05 14:46:{csn % 60:02d}.{lsn % 1000000:06d}+08"
            out.append(Record("B", lsn=first, csn=csn, first_lsn=first, xid=xid, commit_time=at))
            for i, (rid, op, args) in enumerate(ops):
                name, ident = self.TABLES[rid]
                full = ident == "f"
                t = tables[rid]
                rec = dict(lsn=first + 1 + i, schema="public", table=name)
                if op == "I":
                    rec.update(new_tuple=self._cols(style, (args[0], *args[1])))
                elif op == "U":
                    old, new, (v, n) = args
                    v0, n0 = t[old]
                    unchanged = ("v",) if v is _UNCHANGED and style == "t" else ()
                    rec.update(new_tuple=self._cols(style, (new, v0 if v is _UNCHANGED else v, n), unchanged))
                    if full:
                        rec.update(old_tuple=self._cols(style, (old, v0, n0)))
                    elif old != new:
                        rec.update(old_tuple=self._cols(style, (old, None, None))[:1])
                else:
                    v0, n0 = t[args]
                    rec.update(old_tuple=self._cols(style, (args, v0, n0)) if full else
                               self._cols(style, (args, None, None))[:1])
                out.append(Record(op, **rec))
                self._apply(tables, rid, op, args)
            out.append(Record("C", lsn=lsn + 4, xid=xid, commit_time=at))
        return out

    def frames(self, style: str) -> list:
        """The records as frames (batches) of 1-6 records, cut anywhere."""
        from pgoutput_codec.opengauss.encode import encode_frame, encode_text_frame
        recs = self.records(style)
        out, i = [], 0
        while i < len(recs):
            k = self.r.randint(1, 6)
            part = recs[i:i + k]
            out.append(encode_frame(part) if style == "b" else encode_text_frame(part, style=style))
            i += k
        return out
