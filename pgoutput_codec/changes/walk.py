"""The transaction state machine of pgoutput, run over control messages only.

Which transaction a change row belongs to, whether that transaction commits, and which
Relation definition applies, are decided by the control messages around the row (Begin,
Commit, Relation, Type, Origin, Stream Start/Stop/Commit/Abort, Begin Prepare, Prepare,
Commit/Rollback Prepared, Stream Prepare). :class:`TransactionWalk` holds that state and
walks it forward; the sequential :class:`~pgoutput_codec.changes.ChangeDecoder` and the
parallel :class:`~pgoutput_codec.changes.ControlPlan` each own one and read it through the
attributes below.

A transaction is a *slot* (an int handed out in arrival order); the rows of a slot are
held by the decoder (``Txn.pending``), not here.
"""

from __future__ import annotations

import copy
import os
from array import array
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .rows import VERSION_SCHEMA, control_rows, rows_at, tag_codes, version_widths
from .checkpoint import BEFORE_ALL, Checkpoint
from ..commitorder import TAKE, REPLAY, judge_commit, order_error
from ..pgoutput.facts import CONTROL_TAGS
from ..schema import relation_fingerprint

__all__ = ["Txn", "TransactionWalk"]


#: the messages that begin or end a transaction or a stream block
_MARKERS = frozenset(CONTROL_TAGS) - frozenset("RYO")


@dataclass
class Txn:
    """One transaction the walk knows, from its first row or Begin to its end."""
    xid: int | None                     # None: its Begin came before the archive started
    kind: str = "tx"                    # "tx", "stream", "prepared"
    origin: str | None = None
    gid: str | None = None
    aborted_subxids: set = field(default_factory=set)
    pending: list = field(default_factory=list)   # pa.Table pieces or spill-file paths
    pending_bytes: int = 0

    def discard(self) -> None:
        """Remove the spill files of the rows held (the transaction will not commit)."""
        for p in self.pending:
            if isinstance(p, str) and os.path.exists(p):
                os.unlink(p)


def _column_list_keys(columns: pa.StructArray):
    """``key(a, b)``: the column structs ``[a, b)`` of decoded Relations as bytes (names,
    their lengths, the other fields' values): two equal keys, two equal column lists."""
    parts = columns.flatten()
    at = columns.type.get_field_index("name")
    names = parts[at]
    bufs = names.buffers()
    off = np.frombuffer(bufs[1], np.int32)[names.offset:names.offset + len(names) + 1] if bufs[1] is not None \
        else np.zeros(len(names) + 1, np.int32)
    data = bufs[2]
    others = [arr.to_numpy(zero_copy_only=False) for k, arr in enumerate(parts) if k != at]

    def key(a: int, b: int) -> tuple:
        text = data.slice(int(off[a]), int(off[b] - off[a])).to_pybytes() if data is not None else b""
        return (text, (off[a:b + 1] - off[a]).tobytes(), *(v[a:b].tobytes() for v in others))
    return key


class TransactionWalk:
    """The state of the transaction walk.

    ``replays``: "drop" judges every commit (a commit LSN not above every one before is a
    replay, dropped and listed in :attr:`replayed`, or an archive out of order:
    ``ArchiveOrderError``); "keep" takes every commit as it comes. ``registry``: a
    ``TypeRegistry`` taught every Type message.

    Attributes (read and advanced by the decoders):

    - ``versions``: the Relation definitions seen, index = version; ``relmap``:
      relation id → the version in force;  ``type_of``: type OID → its newest Type message
      (type_oid, namespace, name);
    - ``ctx``: the slot the next change rows belong to (-1: none); ``txns``: slot →
      :class:`Txn` of the transactions open; ``streams``: streamed xid → slot;
      ``prepared``: gid → slot; ``next_slot``: the next slot to hand out;
    - ``in_stream``: inside a Stream Start … Stream Stop block;
    - ``committed``: the commit LSNs taken, rising (``replays="drop"``); ``floor``: a
      checkpoint's ``after_lsn`` (commits at or below it are the run before's, not
      judged, up to ``fresh_key``, the checkpoint's ``end_key``: one at or past it is
      new, judged against ``remembered``, the checkpoint's ``commit_lsns`` that seed
      ``committed``; None: against the floor alone); ``replayed``: the replays dropped (xid, commit_lsn, seq); ``abandoned``:
      the transactions a Begin found still open, dropped (xid, seq of that Begin);
    - ``seeded``: (relation id, version) pairs a checkpoint taught.
    """

    def __init__(self, *, replays: str = "drop", registry=None):
        self.replays = replays
        self.registry = registry
        self.versions: list[dict] = []
        self.relmap: dict[int, int] = {}
        self.type_of: dict[int, tuple] = {}
        self.ctx = -1
        self.txns: dict[int, Txn] = {}
        self.streams: dict[int, int] = {}
        self.prepared: dict[str, int] = {}
        self.next_slot = 0
        self.in_stream = False
        self.committed = array("Q")
        self.floor = None
        self.fresh_key = None
        self.remembered = None
        self.replayed: list[dict] = []
        self.abandoned: list[dict] = []
        self.begun = False
        self.open_at_start = False  # a transaction begun before the archive, not yet given a slot (start_open)
        self.seeded: list[tuple] = []
        # relation id -> the definition (_column_list_keys) that made its version in force: a
        # Relation resent unchanged is then not made into Python objects again
        self.sent: dict[int, tuple] = {}
        self._vt = None
        self._widths = np.zeros(0, np.int64)
        self._vt_len = -1

    # ------------------------------------------------------------------ resuming
    def resume(self, cp: Checkpoint) -> None:
        """Start where a checkpoint says: its definitions, stream state and commit LSN."""
        self.floor = cp.after_lsn
        self.fresh_key = cp.end_key
        # the commits before the checkpoint a replay may repeat: judged as in one run
        self.remembered = cp.commit_lsns
        if self.replays == "drop" and cp.commit_lsns:
            self.committed = array("Q", cp.commit_lsns)
        self.in_stream = cp.in_stream
        self.begun = cp.from_key != BEFORE_ALL
        for oid, ns, name in cp.types:
            self.learn_type(dict(type_oid=oid, namespace=ns, type_name=name))
        for rel in cp.relations:
            v = self.add_version(copy.deepcopy(rel))
            self.relmap[rel["relation_id"]] = v
            self.seeded.append((rel["relation_id"], v))

    def state(self) -> dict:
        """The walk's part of a decoder's picklable state (transactions without their rows)."""
        return {
            "versions": copy.deepcopy(self.versions), "relmap": dict(self.relmap), "types": self.types,
            "ctx": self.ctx, "streams": dict(self.streams), "prepared": dict(self.prepared),
            "next_slot": self.next_slot, "committed": self.committed.tobytes(),
            "replayed": copy.deepcopy(self.replayed), "abandoned": copy.deepcopy(self.abandoned),
            "begun": self.begun, "open_at_start": self.open_at_start,
        }

    def load_state(self, state: dict) -> None:
        """Take back what :meth:`state` gave (transactions are the decoder's to restore)."""
        self.versions = copy.deepcopy(state["versions"])
        self._widths = np.zeros(0, np.int64)
        self.relmap = {int(k): v for k, v in state["relmap"].items()}
        self.type_of = {t[0]: tuple(t) for t in state["types"]}
        self.ctx = state["ctx"]
        self.streams = {int(k): v for k, v in state["streams"].items()}
        self.prepared = dict(state["prepared"])
        self.next_slot = state["next_slot"]
        self.committed = array("Q")
        self.committed.frombytes(state.get("committed", b""))
        self.sent = {}
        self.replayed = copy.deepcopy(state.get("replayed", []))
        self.abandoned = copy.deepcopy(state.get("abandoned", []))
        self.begun = state.get("begun", True)
        self.open_at_start = state.get("open_at_start", False)

    @property
    def types(self) -> list[tuple]:
        """The Type messages seen, one per type OID (the newest)."""
        return list(self.type_of.values())

    # ------------------------------------------------------------------ definitions
    def new_slot(self, txn: Txn) -> int:
        slot = self.next_slot
        self.next_slot += 1
        self.txns[slot] = txn
        return slot

    def add_version(self, rel: dict) -> int:
        cur = self.relmap.get(rel["relation_id"])
        if cur is not None and self.versions[cur] == rel:
            return cur     # streamed transactions resend unchanged Relations: keep one version
        self.versions.append(rel)
        return len(self.versions) - 1

    def relation(self, m: dict) -> int:
        """A Relation message: its version (the newest definition wins from here on). Each
        column keeps the name the Type message sent before it gave its type (the server
        sends one ahead of a Relation whose column has a type that is not built in). One
        :meth:`control_dicts` found resent unchanged keeps the version in force."""
        if m.get("resent"):
            return self.relmap[m["relation_id"]]
        cols = m["columns"]
        if cols is not None and self.type_of:
            cols = [dict(c, type_namespace=t[1], type_name=t[2]) if (t := self.type_of.get(c["type_oid"])) else c
                    for c in cols]
        v = self.add_version(dict(
            schema=m["namespace"] or "pg_catalog", table=m["relation_name"],
            relation_id=m["relation_id"], replica_identity=m["replica_identity"],
            columns=cols))
        self.relmap[m["relation_id"]] = v
        return v

    def learn_type(self, m: dict) -> None:
        """A Type message: kept, and taught to the registry (domains resolve through it)."""
        t = (m["type_oid"], m["namespace"], m["type_name"])
        if self.type_of.get(t[0]) == t:
            return           # resent unchanged, as it is with every transaction that uses it
        self.type_of[t[0]] = t
        if self.registry is not None:
            self.registry.add_type_message(m["type_oid"], m["namespace"], m["type_name"])

    def control_dicts(self, msgs, idx, fields=None) -> list[dict]:
        """``rows.control_rows(msgs, idx)`` (with ``fields``: ``rows_at(msgs, idx,
        fields)``), rows in the order the walk takes them, except a Relation resent
        unchanged: the same definition as the one that made its relation's version in
        force, and no Type changed since. It comes as ``{"type": "R", "relation_id": …,
        "resent": True}``, its column list not made into Python objects again (a
        1,600-column Relation resent 20,000 times would be 32 M dicts)."""
        idx = np.asarray(idx, np.int64)
        make = (lambda at: control_rows(msgs, at)) if fields is None else (lambda at: rows_at(msgs, at, fields))
        if not len(idx):
            return make(idx)
        resent = self._resent(msgs, idx)
        if not resent.any():
            return make(idx)
        rows = [None] * len(idx)
        fresh = np.flatnonzero(~resent)
        for j, m in zip(fresh.tolist(), make(idx[fresh]), strict=True):
            rows[j] = m
        again = np.flatnonzero(resent)
        for j, rid in zip(again.tolist(), msgs.field("relation_id").take(pa.array(idx[again])).to_pylist(),
                          strict=True):
            rows[j] = dict(type="R", relation_id=rid, resent=True)
        return rows

    def _resent(self, msgs, idx) -> np.ndarray:
        """Which of the control rows ``idx`` are Relations resent unchanged;
        :attr:`sent` follows them, in arrival order."""
        out = np.zeros(len(idx), bool)
        codes = tag_codes(msgs.field("type").take(pa.array(idx)))
        ry = np.flatnonzero((codes == ord("R")) | (codes == ord("Y")))
        if not len(ry):
            return out
        tags = {int(j): chr(codes[j]) for j in ry}
        ry = ry.tolist()
        at = pa.array(idx[ry])
        cols = msgs.field("columns")
        offs = cols.offsets.to_numpy()
        valid = cols.is_valid().to_numpy(zero_copy_only=False)
        key_of = _column_list_keys(cols.values)
        fields = {f: msgs.field(f).take(at).to_pylist()
                  for f in ("relation_id", "namespace", "relation_name", "replica_identity", "type_oid", "type_name")}
        types = dict(self.type_of)
        for k, j in enumerate(ry):
            if tags[j] == "Y":
                t = (fields["type_oid"][k], fields["namespace"][k], fields["type_name"][k])
                if types.get(t[0]) != t:      # columns of this type take its new name
                    types[t[0]] = t
                    self.sent.clear()
                continue
            i = int(idx[j])
            key = (fields["namespace"][k], fields["relation_name"][k], fields["replica_identity"][k],
                   key_of(int(offs[i]), int(offs[i + 1])) if valid[i] else None)
            rid = fields["relation_id"][k]
            if self.sent.get(rid) == key:       # (the first of them is walked before it)
                out[j] = True
            else:
                self.sent[rid] = key
        return out

    def definitions(self, rows) -> list[int]:
        """Relation and Type rows (dicts, in arrival order) learnt: the version each
        Relation defines."""
        versions = []
        for m in rows:
            if m["type"] == "R":
                versions.append(self.relation(m))
            else:
                self.learn_type(m)
        return versions

    def version_table(self) -> pa.Table:
        """The Relation versions as a table (``rows.VERSION_SCHEMA``), rebuilt only
        when a version was added."""
        if self._vt_len != len(self.versions):
            self._vt = pa.Table.from_pylist(
                [dict({k: v[k] for k in ("schema", "table", "relation_id", "columns")},
                      relation_version=relation_fingerprint(v)) for v in self.versions],
                schema=VERSION_SCHEMA)
            self._vt_len = len(self.versions)
        return self._vt

    def widths(self) -> np.ndarray:
        """The number of columns of every Relation version (index = version); versions
        are only ever appended, so only the new ones are counted."""
        if len(self._widths) != len(self.versions):
            self._widths = np.concatenate([self._widths, version_widths(self.versions[len(self._widths):])])
        return self._widths

    # ------------------------------------------------------------------ commits
    def plain_commits(self, lsn: pa.Array) -> np.ndarray | None:
        """For the vectorized paths: the commit LSNs of a chunk's plain transactions (in
        order) to record once they are taken, when :meth:`walk` would take every one
        without judging it — each above every commit taken before and above a
        checkpoint's ``after_lsn``. None when one needs judging (a replay, out of order,
        at or below that floor, no LSN): the walk must take the chunk. With
        ``replays="keep"`` nothing is judged or recorded (empty)."""
        if self.replays == "keep":
            # a resumed run: the walk tells the run before's commits from new ones
            low = pc.min(lsn).as_py() if self.floor is not None and len(lsn) else None
            if low is not None and low <= self.floor:
                return None
            return np.zeros(0, np.uint64)
        if lsn.null_count:
            return None
        v = lsn.to_numpy(zero_copy_only=False).astype(np.uint64)
        floor = max(self.committed[-1] if self.committed else 0, self.floor or 0)
        if len(v) and (v[0] <= floor or (np.diff(v.astype(np.int64)) <= 0).any()):
            return None
        return v

    def _commit(self, commits: list, slot: int, m: dict, keys, k: int):
        """Transaction ``slot`` commits (control row ``k``): taken, or dropped as a replay
        of an earlier commit, or refused out of order (see ``replays``)."""
        if self.ctx == slot:     # (a damaged archive: its end came with no Stream Stop)
            self.ctx = -1
        lsn = m["commit_lsn"]
        key = None if keys is None else int(keys[k])
        below = self.floor is not None and lsn is not None and lsn <= self.floor
        past = below and self.fresh_key is not None and key is not None and key >= self.fresh_key
        if past and self.replays == "drop":
            # past where the run before stopped: not one it gave
            if (lsn == self.floor if self.remembered is None
                    else judge_commit(self.committed, lsn) == REPLAY):
                self.replayed.append(dict(xid=self._xid(slot, m), commit_lsn=lsn, seq=key))
                self.drop(slot)
                return
            raise order_error(m["type"], lsn, self.floor, key, floor=True, remembered=self.remembered)
        if self.replays == "keep" and below and not past:
            self.drop(slot)          # the run before's, given by it (keep: no window hides it)
            return
        if self.replays == "keep" or lsn is None or below:     # below: the run before's
            commits.append((slot, m))
            return
        verdict = judge_commit(self.committed, lsn)
        if verdict == TAKE:
            commits.append((slot, m))
            return
        if verdict == REPLAY:
            self.replayed.append(dict(xid=self._xid(slot, m), commit_lsn=lsn, seq=key))
            self.drop(slot)
            return
        raise order_error(m["type"], lsn, self.committed[-1], key)

    def _xid(self, slot: int, m: dict):
        xid = self.txns[slot].xid
        return m["xid"] if xid is None else xid

    def discard_open(self) -> None:
        """Remove the spill files of every transaction still open (their rows then live
        only in what :meth:`ChangeDecoder.state` gave, if it was taken)."""
        for txn in self.txns.values():
            txn.discard()
            txn.pending = [p for p in txn.pending if not isinstance(p, str)]

    def drop(self, slot: int) -> None:
        """Transaction ``slot`` will not commit (aborted, rolled back, replayed, superseded)."""
        txn = self.txns.pop(slot, None)
        if txn is None:
            return
        txn.discard()
        if self.ctx == slot:
            self.ctx = -1
        # (a damaged archive can drop one still named by its gid or xid: its end then finds nothing)
        if txn.gid is not None and self.prepared.get(txn.gid) == slot:
            del self.prepared[txn.gid]
        if txn.xid is not None and self.streams.get(txn.xid) == slot:
            del self.streams[txn.xid]

    # ------------------------------------------------------------------ the walk
    def walk(self, ctrl: list, seg_counts, keys=None, start_open=False):
        """The transaction state machine, run over the control messages of a chunk.

        ``ctrl``: the decoded control rows in arrival order; ``seg_counts[k]``: how many
        change rows sit between control rows k-1 and k (segment k). Returns, per segment,
        the transaction slot its rows belong to and the stream state, the commits in
        order as (slot, commit message), and the relation version of each Relation row.
        ``keys``:
        the control rows' order keys, to name a commit out of order or replayed.
        ``start_open``: at the archive's start, a transaction begun before it is open
        whether or not rows of it come first, as the plan (which sees control rows only)
        takes it: a Commit or Prepare before any Begin ends it (an Origin names it); a
        Begin, Begin Prepare or Stream Start/Stop lets it go.
        """
        seg_slot = np.full(len(ctrl) + 1, -1, dtype=np.int64)
        seg_stream = np.zeros(len(ctrl) + 1, dtype=bool)
        commits = []          # (slot, commit facts) in commit order
        r_versions = []
        if start_open and self.ctx < 0 and not self.begun:
            self.open_at_start = True
        for k in range(len(ctrl) + 1):
            if seg_counts[k] and self.ctx < 0 and (self.open_at_start or not self.begun):
                # changes before the archive's first Begin, Commit or stream marker: their
                # Begin is not in the archive, their Commit will come. Later, a change with
                # no transaction open lost its Begin: its segment keeps slot -1 (an error)
                self.ctx = self.new_slot(Txn(xid=None))
                self.open_at_start = False
            seg_slot[k] = self.ctx
            seg_stream[k] = self.in_stream
            if k == len(ctrl):
                break
            m = ctrl[k]
            t = m["type"]
            if t in _MARKERS:   # (R, Y, O, M come inside a transaction: it may be the one begun before)
                self.begun = True
            if self.open_at_start and self.ctx < 0:
                if t in ("C", "P", "O"):        # it ends (or is named) here
                    self.ctx = self.new_slot(Txn(xid=None))
                if t in ("C", "P", "O", "B", "b", "S", "E"):
                    self.open_at_start = False
            if t in ("B", "b"):
                if self.ctx >= 0 and self.txns[self.ctx].kind != "stream" and self.txns[self.ctx].xid is not None:
                    # a Begin inside a transaction: the server sends a transaction whole,
                    # so the first lost its Commit (or is sent again from its start by a
                    # new decoding session); held for ever it would only grow the state.
                    # (A slot without an xid was opened for rows that may precede the
                    # archive's first Begin, and is left as it is.)
                    self.abandoned.append(dict(xid=self.txns[self.ctx].xid, seq=None if keys is None else int(keys[k])))
                    self.drop(self.ctx)
                self.ctx = self.new_slot(Txn(xid=m["xid"]) if t == "B"
                                         else Txn(xid=m["xid"], kind="prepared", gid=m["gid"]))
            elif t == "C":
                # a Commit ends a transaction its Begin opened (or one begun before the
                # archive); inside a stream block or a Begin Prepare's it is corruption:
                # what is open stays open for its own end
                if self.ctx < 0 or self.txns[self.ctx].kind == "tx":
                    if self.ctx >= 0:
                        self._commit(commits, self.ctx, m, keys, k)
                    self.ctx = -1
            elif t == "O":
                if self.ctx < 0 and not self.begun:   # the transaction begun before the archive
                    self.ctx = self.new_slot(Txn(xid=None))
                if self.ctx >= 0:
                    self.txns[self.ctx].origin = m["origin_name"]
            elif t == "R":
                r_versions.append(self.relation(m))
            elif t == "Y":
                self.learn_type(m)
            elif t == "S":
                self.in_stream = True
                slot = self.streams.get(m["xid"])
                if slot is not None and m["first_segment"]:
                    # the server streams this transaction again from its start (a new
                    # decoding session after a reconnect): what we hold is superseded
                    self.drop(self.streams.pop(m["xid"]))
                    slot = None
                if slot is None:
                    slot = self.streams[m["xid"]] = self.new_slot(Txn(xid=m["xid"], kind="stream"))
                self.ctx = slot
            elif t == "E":
                self.in_stream = False
                self.ctx = -1
            elif t == "c":
                slot = self.streams.pop(m["xid"], None)
                if slot is not None:
                    self._commit(commits, slot, m, keys, k)
            elif t == "A":
                slot = self.streams.get(m["xid"])
                if slot is not None:   # a stray abort (unknown xid) is tolerated
                    if m["subxid"] == m["xid"]:
                        self.drop(self.streams.pop(m["xid"]))
                    else:
                        self.txns[slot].aborted_subxids.add(m["subxid"])
            elif t == "P":
                # a Prepare ends the transaction its Begin Prepare opened (or one begun
                # before the archive); another transaction's is corruption, left alone
                txn = self.txns[self.ctx] if self.ctx >= 0 else None
                if txn is None or txn.xid is None or (txn.kind == "prepared" and txn.xid == m["xid"]):
                    if txn is not None:
                        txn.gid = m["gid"]
                        self.prepared[m["gid"]] = self.ctx
                    self.ctx = -1
            elif t == "p":
                slot = self.streams.pop(m["xid"], None)
                if slot is not None:
                    self.txns[slot].gid = m["gid"]
                    self.txns[slot].kind = "prepared"
                    self.prepared[m["gid"]] = slot
            elif t == "K":
                slot = self.prepared.pop(m["gid"], None)
                if slot is not None:
                    self._commit(commits, slot, m, keys, k)
            elif t == "r":
                slot = self.prepared.pop(m["gid"], None)
                if slot is not None:
                    self.drop(slot)
            # 'M' logical messages and 'k' keepalives carry no row changes
        return seg_slot, commits, r_versions, seg_stream
