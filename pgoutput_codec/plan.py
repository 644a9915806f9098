"""Parallel change decoding: a control plan built once, change rows decoded anywhere.

A pgoutput archive is a sequence, but only its control messages (≈1%: Begin, Commit,
Relation, Stream Start/Stop/Commit/Abort, prepares, …) carry the state that decides
what a change row means — which transaction it belongs to, whether that transaction
committed, which Relation definition and stream state apply. So:

1. :func:`control_candidates` reads one byte per row and keeps the control rows (cheap,
   parallel, no decoding);
2. :meth:`ControlPlan.build` decodes those rows in arrival order (on one machine: they
   are few) and runs the same transaction state machine as :class:`ChangeDecoder`
   (:class:`~pgoutput_codec.walk.TransactionWalk`): every segment between two control rows gets its
   transaction and stream state, every transaction its commit facts and rank;
3. :meth:`ControlPlan.changes` decodes ANY subset of the archive's rows — any partition,
   any order — given each row's arrival-order key, and returns their committed change
   rows with ``commit_rank``: sorting by (``commit_rank``, ``seq``) gives exactly the
   rows and order of :func:`decode_changes`.

Arrival order is the ``order`` key given (an int64 per row: the archive's ``seq``, or
file index and row index combined), never the ``lsn``: a change's LSN goes backwards
when transactions interleave. Keys must be unique.
"""

from __future__ import annotations

import copy
import gc
import re
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._batch import initial_stream_state
from ._gather import take_table
from .arrays import lsn_array, one_binary
from .batch import decode_batch_rows, decode_batch_with_state, envelope_code, message_tags
from .checkpoint import Checkpoint
from .changerows import change_columns, control_rows, rows_at, tag_codes, truncate_row
from .changes import ChangeDecoder
from .relations import one_bearer
from .selection import commit_window, in_commit_window, intersect_windows, table_selected
from .errors import PgoutputDecodeError
from .messages import format_lsn
from .walk import TransactionWalk, Txn
from .schema import CHANGE_SCHEMA

__all__ = ["control_candidates", "ControlPlan", "checkpoint_after", "CONTROL_TAGS", "INERT_TAGS", "ENVELOPE_INERT_TAGS",
           "HEAD_BYTES", "spread_rows", "RowDrops", "GivenHeads"]

#: Tags whose messages drive the state; every other row is a change (I U D T) or inert (M k).
CONTROL_TAGS = b"BCORYSEcAbPKrp"
_IS_CONTROL = np.zeros(256, dtype=bool)
for _t in CONTROL_TAGS:
    _IS_CONTROL[_t] = True
_IS_CHANGE = np.zeros(256, dtype=bool)
for _t in b"IUDT":
    _IS_CHANGE[_t] = True
#: Tags of messages that never make a change row: logical decoding messages ('M') and,
#: in a replication envelope, keepalives ('k').
INERT_TAGS = b"M"
ENVELOPE_INERT_TAGS = b"k"
#: Bytes of a payload that :meth:`ControlPlan.keep_mask` reads: an XLogData header (25),
#: the tag, a streaming xid and the relation id (I/U/D all start tag, [xid], relid), and
#: the byte after it (an Update's 'K'/'O' when it sends its old key or row).
HEAD_BYTES = 25 + 1 + 4 + 4 + 1
#: Control rows :meth:`ControlPlan.build` walks at a time (tests make it small).
_WALK_CHUNK = 65536
#: An order key below every other: a checkpoint's Relations are in force before any row.
_BEFORE_ALL = int(np.iinfo(np.int64).min)
_IS_ROW_CHANGE = np.zeros(256, dtype=bool)
for _t in b"IUD":
    _IS_ROW_CHANGE[_t] = True


#: ``ControlPlan.build`` walks chunks of plain transactions with array operations (tests
#: turn it off to compare with the Python walk).
_VECTORIZED_WALK = True
#: A run of plain control rows shorter than this is walked in Python with the rows around
#: it: the array walk costs about 120 µs a chunk whatever its size, the Python walk about
#: 2.2 µs a row (measured on one-row transactions; tests make it 1).
_MIN_ARRAY_RUN = 64


class RowDrops(NamedTuple):
    """What :meth:`ControlPlan.keep_mask` leaves out, as data a query engine can test
    without Python (:meth:`ControlPlan.row_drops`): an I/U/D row whose payload is long
    enough to hold its relation id is left out when its order key lies in one of
    ``segments``, when its relation id has a key range in ``relids`` that holds its key,
    or when it is read inside a stream block (its key lies in one of ``stream``: the
    relation id then comes 4 bytes later, after the xid) and one of ``aborted``, a pair
    (key ranges, xids), has a range holding its key and its xid. All offsets are 25
    bytes later in an XLogData 'w' frame unless ``envelope`` is "none". Ranges are
    ``(lo, hi)`` order keys, bounds exclusive, None for an open end."""
    envelope: str
    segments: list
    stream: list
    relids: dict
    aborted: list


class GivenHeads(NamedTuple):
    """Which of the rows :meth:`ControlPlan.row_drops` keeps :meth:`ControlPlan.changes`
    gives as I/U/D changes, as data (:meth:`ControlPlan.given_heads`): an I/U/D row whose
    payload holds its relation id (offsets as in :class:`RowDrops`, with ``envelope``
    and ``stream``), whose key lies in none of ``orphans`` (the ranges outside any
    transaction) and whose relation id is in ``firsts`` with its key past that id's first
    Relation (None: before the archive). ``fingerprints``: the distinct
    ``relation_version`` fingerprints of the chosen Relation versions; ``versions``: per
    relation id of ``firsts``, ``(key, i)`` pairs, keys rising: from each key on (the
    first: from the id's first Relation on) the version in force has
    ``fingerprints[i]``. ``serial``: the given transactions' rows and their commits come
    in the same order (no streamed or prepared transaction committed after a later
    one's rows), so that a given row's commit rank rises with its order key."""
    envelope: str
    stream: list
    orphans: list
    firsts: dict
    fingerprints: list
    versions: dict
    serial: bool


class _Walked:
    """One chunk of :meth:`ControlPlan.build`'s walk: per segment (``seg_slot``,
    ``seg_stream``, one more than the chunk's control rows), per commit in commit order
    (``slots``, ``xid``, ``lsn``, ``ts`` as µs, ``origin``; ``aborted``: commit index ->
    aborted subtransaction xids), the Relation rows (``r_keys`` positions in the chunk,
    ``r_rel``, ``r_versions``) and the Type rows (``y_keys`` positions, ``y_types``)."""

    def __init__(self, seg_slot, seg_stream, slots, xid, lsn, ts, origin, aborted, r_keys, r_rel, r_versions,
                 y_keys, y_types):
        self.seg_slot, self.seg_stream = seg_slot, seg_stream
        self.slots, self.xid, self.lsn, self.ts, self.origin, self.aborted = slots, xid, lsn, ts, origin, aborted
        self.r_keys, self.r_rel, self.r_versions = r_keys, r_rel, r_versions
        self.y_keys, self.y_types = y_keys, y_types


def _definition_rows(ctrl: list, where) -> tuple:
    """Where the Relation and Type rows among ``ctrl`` (dicts at chunk positions
    ``where``) sit and what they say: (r_keys, r_rel, y_keys, y_types)."""
    r = [(k, m) for k, m in zip(where, ctrl, strict=True) if m["type"] == "R"]
    y = [(k, m) for k, m in zip(where, ctrl, strict=True) if m["type"] == "Y"]
    return (np.array([k for k, _ in r], np.int64), np.array([m["relation_id"] for _, m in r], np.int64),
            np.array([k for k, _ in y], np.int64), [(m["type_oid"], m["namespace"], m["type_name"]) for _, m in y])


def _python_walk(walk: TransactionWalk, msgs, idx: np.ndarray, phantom: bool, keys: np.ndarray) -> _Walked:
    """A chunk of control rows (message rows ``idx``) through :meth:`TransactionWalk.walk`;
    its committed transactions are let go."""
    ctrl = control_rows(msgs, idx)
    counts = np.zeros(len(idx) + 1, dtype=np.int64)
    counts[0] = phantom
    seg_slot, commits, r_v, seg_stream = walk.walk(ctrl, counts, keys)
    txns = [walk.txns.pop(slot) for slot, _ in commits]   # in commit order
    r_keys, r_rel, y_keys, y_types = _definition_rows(ctrl, range(len(ctrl)))
    return _Walked(
        seg_slot, seg_stream, np.array([slot for slot, _ in commits], np.int64),
        pa.array([t.xid if t.xid is not None else m.get("xid") for t, (_, m) in zip(txns, commits, strict=True)],
                 pa.uint32()),
        pa.array([m.get("commit_lsn") for _, m in commits], pa.uint64()),
        pa.array([m.get("commit_ts") for _, m in commits], pa.int64()),
        pa.array([t.origin for t in txns], pa.string()),
        {j: np.fromiter(t.aborted_subxids, np.int64) for j, t in enumerate(txns) if t.aborted_subxids},
        r_keys, r_rel, np.array(r_v, np.int64), y_keys, y_types)


_PLAIN_TAGS = np.zeros(256, dtype=bool)
for _t in b"BCRY":
    _PLAIN_TAGS[_t] = True


def _plain_walk(walk: TransactionWalk, msgs, tags: np.ndarray, idx: np.ndarray, phantom: bool) -> _Walked | None:
    """The common chunk, with array operations: Begin … Commit pairs that never
    interleave, Relations and Types, no stream or two-phase marker, no Origin — then
    what the walk does is a function of the B/C pattern. None for any other chunk
    (the Python walk takes it; tests compare the two)."""
    t = tags[idx]
    if walk.in_stream or not _PLAIN_TAGS[t].all():
        return None
    bc = np.flatnonzero((t == ord("B")) | (t == ord("C")))
    pattern = t[bc]
    ctx = walk.ctx
    if phantom and ctx < 0:   # rows before the first control row: a transaction begun before the archive
        ctx = -2              # (made below, once the chunk is known to be plain)
    # a Commit of the transaction open before the chunk, then B C pairs, maybe a last B left open
    lead = 1 if len(pattern) and pattern[0] == ord("C") else 0
    if lead and ctx == -1:
        return None           # a Commit with nothing open: the walk ignores it
    pairs = pattern[lead:]
    open_end = len(pairs) % 2
    if not ((pairs[0:len(pairs) - open_end:2] == ord("B")).all() and (pairs[1::2] == ord("C")).all()
            and (not open_end or pairs[-1] == ord("B"))):
        return None
    c_rows = idx[bc[lead:][1::2]] if len(pairs) > 1 else np.zeros(0, np.int64)
    if lead:
        c_rows = np.concatenate([idx[bc[:1]], c_rows])
    lsn = msgs.field("commit_lsn").take(pa.array(c_rows, pa.int64()))
    taken = walk.plain_commits(lsn)   # None: a commit to judge (replay, order): the walk does
    if taken is None:
        return None
    # plain: from here on the chunk is walked
    if ctx == -2:
        ctx = walk.ctx = walk.new_slot(Txn(xid=None))
    n_b = int((pairs == ord("B")).sum())
    first = walk.next_slot
    walk.next_slot += n_b
    # the open transaction after each control row: a B opens slot first + j, a C closes
    opened = np.full(len(idx) + 1, -2, dtype=np.int64)
    opened[0] = ctx
    b_at = bc[lead:][0::2]
    opened[b_at + 1] = first + np.arange(n_b)
    opened[bc[lead:][1::2] + 1] = -1
    if lead:
        opened[bc[0] + 1] = -1
    fill = np.maximum.accumulate(np.where(opened != -2, np.arange(len(opened)), 0))
    seg_slot = opened[fill]
    b_xid = msgs.field("xid").take(pa.array(idx[b_at], pa.int64())).cast(pa.uint32())
    committed_b = n_b - open_end
    slots = first + np.arange(committed_b)
    xid = b_xid.slice(0, committed_b)
    origin = pa.nulls(committed_b, pa.string())
    aborted = {}
    if lead:                  # the transaction open before the chunk commits first
        before = walk.txns.pop(ctx)
        slots = np.concatenate([[ctx], slots])
        xid = pa.concat_arrays([pa.array([before.xid], pa.uint32()), xid])
        origin = pa.concat_arrays([pa.array([before.origin], pa.string()), origin])
        if before.aborted_subxids:
            aborted[0] = np.fromiter(before.aborted_subxids, np.int64)
    if open_end:              # the last Begin's transaction stays open into the next chunk
        walk.txns[first + n_b - 1] = Txn(xid=b_xid[n_b - 1].as_py())
    walk.ctx = int(seg_slot[-1])
    walk.committed.frombytes(taken.tobytes())
    ts = msgs.field("commit_ts").take(pa.array(c_rows, pa.int64())).cast(pa.int64())
    ry = np.flatnonzero((t == ord("R")) | (t == ord("Y")))
    defs = control_rows(msgs, idx[ry])
    r_keys, r_rel, y_keys, y_types = _definition_rows(defs, ry)
    return _Walked(seg_slot, np.zeros(len(idx) + 1, bool), slots, xid, lsn, ts, origin, aborted,
                   r_keys, r_rel, np.array(walk.definitions(defs), np.int64), y_keys, y_types)


def _walk_bounds(t: np.ndarray) -> list:
    """Where :meth:`ControlPlan.build` cuts its walk of control rows with tags ``t``, as
    (start, end, array walk?): runs of plain rows (Begin, Commit, Relation, Type) for the
    array walk, the rows between them (streams, two-phase, Origins, and plain runs too
    short to pay) for the Python walk, each cut every ``_WALK_CHUNK`` rows. A streamed
    transaction in an archive of plain ones then costs its own rows, not its chunk's
    (any cut gives the same plan: the walk carries its state across)."""
    n = len(t)
    if not _VECTORIZED_WALK or n == 0:
        runs = [(0, n, False)]
    else:
        plain = _PLAIN_TAGS[t]
        cut = np.flatnonzero(plain[1:] != plain[:-1]) + 1
        starts, ends = np.concatenate([[0], cut]), np.concatenate([cut, [n]])
        array = plain[starts] & (ends - starts >= _MIN_ARRAY_RUN)
        # neighbouring runs the same walk takes are one run
        first = np.concatenate([[True], array[1:] != array[:-1]])
        runs = list(zip(starts[first].tolist(), np.append(starts[first][1:], n).tolist(), array[first].tolist(),
                        strict=True))
    return [(a, min(a + _WALK_CHUNK, b), arr) for a0, b, arr in runs for a in range(a0, max(b, a0 + 1), _WALK_CHUNK)]


@contextmanager
def _cyclic_gc_paused():
    """Python's cyclic garbage collector off inside (as it was, after)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def control_candidates(values, *, envelope: str = "auto") -> np.ndarray:
    """Boolean mask of the rows whose message is a control message (by tag byte only)."""
    return _IS_CONTROL[message_tags(values, envelope=envelope)]


def _glob_exact(name: str) -> str:
    """A glob (``fnmatch``) matching ``name`` only."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def spread_rows(table: pa.Table, at: np.ndarray, n: int) -> pa.Table:
    """``n`` rows: ``table``'s rows at positions ``at`` (in order), null rows elsewhere."""
    pick = np.full(n, -1, dtype=np.int64)
    pick[at] = np.arange(len(table))
    return table.take(pa.array(pick, mask=pick < 0))


def _row_name(key, lsn: pa.Array, i: int) -> str:
    """How errors name an archive row: its order key, and its lsn when the archive has one."""
    v = lsn[i].as_py()
    return f"archive row seq {key}" + (f" (lsn {format_lsn(v)})" if v is not None else "")


def _keys(order) -> np.ndarray:
    if isinstance(order, pa.ChunkedArray):
        order = order.combine_chunks()
    if isinstance(order, pa.Array):
        if order.null_count:
            raise ValueError("the order key must not be null")
        order = order.to_numpy(zero_copy_only=False)
    return np.asarray(order, dtype=np.int64)


class ControlPlan:
    """Everything needed to decode change rows in parallel; picklable (broadcast it).

    Options are those of :class:`ChangeDecoder` (``tables``, ``include_*``, ``errors``,
    ``registry``); ``skip_empty_xacts=False`` is not supported here (no marker rows).
    """

    @classmethod
    def build(cls, payloads, order, *, envelope: str = "auto", in_stream=None, lsn=None, resume=None,
              **options) -> "ControlPlan":
        """``lsn``: the rows' archive lsn, to name a malformed row by it too. ``resume``:
        a :class:`~pgoutput_codec.checkpoint.Checkpoint` (or its JSON) of the run
        before; the rows given must then be those with order key >= its ``from_key``."""
        keys = _keys(order)
        cp = None if resume is None else Checkpoint.of(resume)
        if cp is not None:
            if len(keys) and keys.min() < cp.from_key:
                raise ValueError(f"order key {int(keys.min())} is before the checkpoint's from_key {cp.from_key}: "
                                 "resume over the archive's rows with order key >= from_key")
            in_stream = cp.in_stream
        values = one_binary(payloads)
        srt = np.argsort(keys, kind="stable")
        keys = keys[srt]
        if len(keys) > 1 and (np.diff(keys) == 0).any():
            raise ValueError("order keys of control rows are not unique")
        values = values.take(pa.array(srt, pa.int64()))
        env = envelope_code(envelope)
        if in_stream is None:
            in_stream = bool(initial_stream_state(values, env))
        options.setdefault("errors", "raise")
        dec = ChangeDecoder(resume=cp, **options)
        self = cls()
        self.start_key = None if cp is None else cp.from_key
        # commit ranks given out start here (a run resumed: past the runs before)
        self.rank_base = 0 if cp is None else cp.rank_base
        walk = dec.walk
        seeded = walk.seeded
        self.options = dict(options)
        self.envelope = envelope
        msgs, _ = decode_batch_with_state(values, envelope=envelope, in_stream=bool(in_stream))
        err = msgs.field("error")
        self.errors = []
        ok = err.is_null().to_numpy(zero_copy_only=False)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            self.errors = [dict(seq=int(keys[i]), error=err[int(i)].as_py()) for i in bad]
            if options["errors"] == "raise":
                i = int(srt[bad[0]])
                raise PgoutputDecodeError(f"{_row_name(keys[bad[0]], lsn_array(lsn, len(values)), i)}: "
                                          f"{self.errors[0]['error']}")
        tags = tag_codes(msgs.field("type"))
        keep = ok & _IS_CONTROL[tags]
        ctrl_idx = np.flatnonzero(keep)
        self.ctrl_keys = keys[ctrl_idx]
        walk.in_stream = bool(in_stream)
        n_ctrl = len(ctrl_idx)
        self.seg_slot = np.empty(n_ctrl + 1, np.int64)
        self.seg_stream = np.empty(n_ctrl + 1, bool)
        walked = []
        # The walk, in chunks of control rows: the row dicts it reads and the transactions
        # it committed are let go after each chunk, so what stays is a few values per
        # commit, not Python objects per transaction (400 000 one-row transactions: 148
        # MiB, against 596 MiB holding them all). It makes a few objects per control row
        # and no reference cycles; Python's cyclic collector, set off by those
        # allocations, would rescan everything alive and take half the time (6.2 s with
        # it, 3.2 s without). A run of plain transactions (Begin … Commit, Relations, Types) is
        # walked with array operations instead (see _plain_walk, _walk_bounds).
        with _cyclic_gc_paused():
            for a, b, array in _walk_bounds(tags[ctrl_idx]):
                # rows before the first control row: changes whose Begin precedes the archive —
                # except in a run resumed from a checkpoint, which starts at a Begin (or after the end)
                phantom = a == 0 and (cp is None or cp.from_key == _BEFORE_ALL)
                w = (_plain_walk(walk, msgs, tags, ctrl_idx[a:b], phantom) if array else None) \
                    or _python_walk(walk, msgs, ctrl_idx[a:b], phantom, self.ctrl_keys[a:b])
                end = b + 1 if b == n_ctrl else b     # segment b is the next chunk's first
                self.seg_slot[a:end] = w.seg_slot[:end - a]
                self.seg_stream[a:end] = w.seg_stream[:end - a]
                w.r_keys = self.ctrl_keys[a:b][w.r_keys]
                w.y_keys = self.ctrl_keys[a:b][w.y_keys]
                walked.append(w)
        self.replayed = dec.replayed   # transactions received again and dropped (see ChangeDecoder)
        # transactions that committed, in commit order
        self.commit_slots = np.concatenate([w.slots for w in walked])
        self.commit_xid = pa.concat_arrays([w.xid for w in walked])
        self.commit_lsn = pa.concat_arrays([w.lsn for w in walked])
        self.commit_ts = pa.concat_arrays([w.ts for w in walked]).cast(CHANGE_SCHEMA.field("commit_ts").type)
        self.commit_origin = pa.concat_arrays([w.origin for w in walked])
        self.commit_ranks = None   # a plan for_keys: the whole plan's rank of each commit kept
        self.key_range = None
        self.aborted, done = {}, 0
        for w in walked:
            self.aborted.update((done + j, v) for j, v in w.aborted.items())
            done += len(w.slots)
        self._window(dec.window)
        # what is left open (committed transactions were let go above)
        self.open_transactions = [dict(slot=s, xid=t.xid, kind=t.kind, gid=t.gid) for s, t in walk.txns.items()]
        # the open ones that can still commit: the transaction in progress, streamed ones,
        # prepared ones (a Begin after rows whose Begin preceded the archive leaves those behind)
        self.live_slots = {s for s in [walk.ctx, *walk.streams.values(), *walk.prepared.values()] if s >= 0}
        # relation events: (relid, key) -> version, sorted by relid then key
        # (a checkpoint's definitions: events before every key)
        ev_rel = np.concatenate([np.array([rid for rid, _ in seeded], np.int64), *[w.r_rel for w in walked]])
        ev_key = np.concatenate([np.full(len(seeded), _BEFORE_ALL, np.int64), *[w.r_keys for w in walked]])
        ev_ver = np.concatenate([np.array([v for _, v in seeded], np.int64), *[w.r_versions for w in walked]])
        o = np.lexsort((ev_key, ev_rel))
        self.ev_rel, self.ev_key, self.ev_ver = ev_rel[o], ev_key[o], ev_ver[o]
        self.versions = walk.versions
        self.version_table = walk.version_table()
        self.type_events = [(_BEFORE_ALL, t) for t in (cp.types if cp is not None else ())] + [
            (int(k), t) for w in walked for k, t in zip(w.y_keys.tolist(), w.y_types, strict=True)]
        self.patterns = dec.patterns
        self.output_schema = pa.schema(list(dec.output_schema) + [pa.field("commit_rank", pa.int64())])
        self.registry = options.get("registry")
        return self

    def _window(self, window):
        """Give only the transactions whose commit LSN lies in ``window`` (see
        :func:`~pgoutput_codec.selection.commit_window`; None: all). Ranks stay those of
        the whole archive."""
        self.window = window
        self.in_window = None if window is None else in_commit_window(self.commit_lsn, window)

    def between(self, after_lsn=None, until_lsn=None) -> "ControlPlan":
        """This plan giving only the transactions committed in ``(after_lsn,
        until_lsn]`` as well (the window narrowed, never widened)."""
        other = copy.copy(self)
        other._window(intersect_windows(self.window, commit_window(after_lsn, until_lsn)))
        return other

    def checkpoint(self) -> Checkpoint:
        """Where the next run resumes (:mod:`pgoutput_codec.checkpoint`): after the
        largest commit LSN this plan gives, from the first key of the earliest
        transaction it does not give (still open, or committed after the window)."""
        if self.key_range is not None:
            raise ValueError("a plan for_keys has no checkpoint: ask the whole plan")
        lsn = pc.fill_null(self.commit_lsn, 0).to_numpy(zero_copy_only=False).astype(np.uint64)
        given = lsn if self.in_window is None else lsn[self.in_window]
        after = self.window[0] if self.window is not None else None
        if len(given):
            after = int(given.max()) if after is None else max(after, int(given.max()))
        # committed after the window (none given, no lower bound: every commit is later)
        later = np.flatnonzero(lsn > np.uint64(after)) if after is not None else np.arange(len(lsn))
        held = [dict(t) for t in self.open_transactions if t["slot"] in self.live_slots] + [
            dict(slot=int(self.commit_slots[k]), xid=self.commit_xid[int(k)].as_py(), kind="committed later", gid=None)
            for k in later]
        for t in held:
            t["from_key"] = self._first_key(t.pop("slot"))
        if held:
            from_key = min(t["from_key"] for t in held)
        elif len(self.ctrl_keys):
            from_key = int(self.ctrl_keys[-1]) + 1
        else:
            from_key = self.start_key if self.start_key is not None else _BEFORE_ALL
        rels = {}
        for rid, key, ver in zip(self.ev_rel.tolist(), self.ev_key.tolist(), self.ev_ver.tolist(), strict=True):
            if key < from_key:
                rels[rid] = (key, ver)   # sorted by relid then key: the last one wins
        # in the order they were sent (which relation bears a name: ControlPlan.bearer)
        rels = {rid: ver for rid, (_, ver) in sorted(rels.items(), key=lambda kv: kv[1])}
        return Checkpoint(
            from_key=int(from_key), after_lsn=after,
            in_stream=bool(self.seg_stream[np.searchsorted(self.ctrl_keys, from_key, side="left")]),
            relations=tuple(copy.deepcopy(self.versions[v]) for v in rels.values()),
            types=tuple(t for k, t in self.type_events if k < from_key),
            rank_base=self.rank_base + len(self.commit_slots),
            held_by=tuple(held))

    def _first_key(self, slot: int) -> int:
        """The order key of the control row that opened transaction ``slot`` (rows before
        the first control row: the run's first possible key)."""
        seg = int(np.flatnonzero(self.seg_slot == slot)[0])
        if seg > 0:
            return int(self.ctrl_keys[seg - 1])
        return self.start_key if self.start_key is not None else _BEFORE_ALL

    def __getstate__(self):
        d = dict(self.__dict__)
        d["options"] = {k: v for k, v in d["options"].items() if k != "registry"}
        d["registry"] = None
        return d

    # ------------------------------------------------------------------ executors
    def in_stream_at(self, order) -> np.ndarray:
        """The stream state in force at each order key."""
        return self.seg_stream[np.searchsorted(self.ctrl_keys, _keys(order), side="left")]

    def _versions_at(self, relids: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Version of the newest Relation with that relid sent before each key (-1: none)."""
        out = np.full(len(relids), -1, dtype=np.int64)
        for rid in np.unique(relids):
            lo, hi = np.searchsorted(self.ev_rel, [rid, rid + 1])
            if lo == hi:
                continue
            sel = np.flatnonzero(relids == rid)
            pos = np.searchsorted(self.ev_key[lo:hi], keys[sel], side="left") - 1
            good = pos >= 0
            out[sel[good]] = self.ev_ver[lo:hi][pos[good]]
        return out

    def changes(self, values, order, lsn=None, *, errors: str | None = None) -> pa.Table:
        """Committed change rows among these rows (any subset of the archive, any order),
        with ``commit_rank``. ``errors``: "raise" or "collect" (default: the plan's)."""
        errors = errors or self.options.get("errors", "raise")
        keys = _keys(order)
        values = one_binary(values)
        n = len(values)
        seg = np.searchsorted(self.ctrl_keys, keys, side="left")
        msgs = decode_batch_rows(values, self.seg_stream[seg], envelope=self.envelope)
        lsn_arr = lsn_array(lsn, n)
        self.last_counts = counts = {"rows_in": n, "rows_in_error": 0, "orphans": 0}
        self.last_errors = []
        err = msgs.field("error")
        if err.null_count != n:
            bad = np.flatnonzero(err.is_valid().to_numpy(zero_copy_only=False))
            counts["rows_in_error"] = len(bad)
            if errors == "raise":
                i = int(bad[0])
                raise PgoutputDecodeError(f"{_row_name(keys[i], lsn_arr, i)}: {err[i].as_py()}")
            self.last_errors = [dict(seq=int(keys[i]), error=err[int(i)].as_py()) for i in bad]
        counts["rows_decoded"] = n - counts["rows_in_error"]
        tags = tag_codes(msgs.field("type"))
        idx = np.flatnonzero(_IS_CHANGE[tags])
        slot = self.seg_slot[seg[idx]]
        orphan = slot < 0
        if orphan.any():   # a change outside any transaction: reported, not guessed
            counts["orphans"] = int(orphan.sum())
            if errors == "raise":
                i = int(idx[orphan][0])
                raise PgoutputDecodeError(f"{_row_name(keys[i], lsn_arr, i)}: change outside any transaction")
        rank = self._rank(slot, lambda: pc.fill_null(msgs.field("xid").take(pa.array(idx, pa.int64())), 0)
                          .to_numpy(zero_copy_only=False).astype(np.int64))
        live = rank >= 0
        idx, rank = idx[live], rank[live]
        is_t = tags[idx] == ord("T")
        iud, iud_rank = idx[~is_t], rank[~is_t]
        relids = pc.fill_null(msgs.field("relation_id"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        ver = self._versions_at(relids[iud], keys[iud])
        if (ver < 0).any():
            i = int(iud[np.flatnonzero(ver < 0)[0]])
            raise PgoutputDecodeError(f"{_row_name(keys[i], lsn_arr, i)}: change to relation {relids[i]} before "
                                      "any Relation message for it")
        table = self._rows(msgs, iud, iud_rank, ver, keys, lsn_arr)
        if is_t.any():
            table = pa.concat_tables([table, self._truncates(msgs, idx[is_t], rank[is_t], keys, lsn_arr)])
        chosen = getattr(self, "_chosen", None)
        if chosen is not None and len(table):
            table = table.filter(pc.equal(table.column("relation_id"), pa.scalar(chosen[1], pa.uint32()))
                                 if chosen[1] is not None else pa.array(np.zeros(len(table), bool)))
        elif self.patterns is not None and len(table):
            key = pc.binary_join_element_wise(pc.fill_null(table.column("schema"), ""),
                                              pc.fill_null(table.column("table"), ""), "\x00")
            chosen = [k for k in pc.unique(key).to_pylist() if table_selected(self.patterns, *k.split("\x00", 1))]
            table = table.filter(pc.is_in(key, value_set=pa.array(chosen, pa.string())))
        return table.select(self.output_schema.names).cast(self.output_schema)

    def _commit_positions(self, slot: np.ndarray) -> np.ndarray:
        """Each transaction ``slot``'s position in commit order (-1: it did not commit)."""
        rank = np.full(len(slot), -1, dtype=np.int64)
        if len(self.commit_slots) and len(slot):
            o = np.argsort(self.commit_slots)
            pos = np.minimum(np.searchsorted(self.commit_slots[o], slot), len(o) - 1)
            hit = (self.commit_slots[o][pos] == slot) & (slot >= 0)   # -1: no transaction
            rank[hit] = o[pos[hit]]
        return rank

    def _rank(self, slot: np.ndarray, xid_of) -> np.ndarray:
        """Commit rank of the transaction of each change (its segment's ``slot``); -1
        where it did not commit (rolled back, aborted, still open, or no transaction),
        committed outside the plan's commit-LSN window, or the change's subtransaction
        aborted. ``xid_of()``: the changes' message xids (0
        outside stream blocks), asked for only when a subtransaction aborted."""
        rank = self._commit_positions(slot)
        given = rank >= 0
        if self.in_window is not None and given.any():   # committed outside the commit-LSN window
            rank[given & ~self.in_window[np.maximum(rank, 0)]] = -1
        if self.aborted and len(slot):
            msg_xid = xid_of()
            for k, subxids in self.aborted.items():
                rank[(rank == k) & np.isin(msg_xid, subxids)] = -1
        if self.commit_ranks is not None:   # positions here -> the whole plan's ranks
            given = rank >= 0
            rank[given] = self.commit_ranks[rank[given]]
        return rank

    def _version_selected(self) -> np.ndarray | None:
        """Per Relation version: does ``tables`` select its table (None: no ``tables``);
        for a plan :meth:`for_table`, is it a version of the relation chosen."""
        chosen = getattr(self, "_chosen", None)
        if chosen is not None:
            return chosen[0]
        if self.patterns is None:
            return None
        if getattr(self, "_vsel_len", -1) != len(self.versions):
            self._vsel = np.array([table_selected(self.patterns, v["schema"], v["table"]) for v in self.versions],
                                  dtype=bool)
            self._vsel_len = len(self.versions)
        return self._vsel

    def columns_by_version(self) -> dict:
        """{``relation_version`` fingerprint: that Relation's column list (dicts)}."""
        vt = self.version_table
        return dict(zip(vt.column("relation_version").to_pylist(), vt.column("columns").to_pylist(), strict=True))

    def for_table(self, schema: str, table: str, until_lsn=None) -> "ControlPlan":
        """This plan narrowed to the table named ``schema.table`` (exact names): the
        changes of the relation that bears the name (:meth:`bearer`; as of ``until_lsn``
        when given), under whatever name each was sent — none if the plan's ``tables``
        leaves them out."""
        other = copy.copy(self)
        holder, replaced = self.bearer(schema, table, until_lsn)
        sel = np.array([v["relation_id"] == holder for v in self.versions], dtype=bool)
        base = self._version_selected()
        other._chosen = (sel if base is None else sel & base, holder, replaced)
        return other

    def bearer(self, schema: str, table: str, until_lsn=None) -> tuple:
        """(the relation id of the table named ``schema.table``, or None; whether
        another relation bore the name while these changes ran): the rule of
        :func:`pgoutput_codec.relations.bearer`, on the Relation messages of the
        transactions that committed (up to the window's end, and ``until_lsn``), in
        commit order. A Relation under the name starts a relation's time with it; the
        next one of the relation, or another's under the name, ends it. The relation
        whose time runs at the end bears it (none after a rename away). Relations
        before the window and a checkpoint's count for which one bears it, but "another
        bore it" only if its time reached into the window (or a resumed run): else a
        table replaced long ago would make every later batch begin with a truncate."""
        if not len(self.ev_rel):
            return None, False
        named = np.array([v["schema"] == schema and v["table"] == table for v in self.versions], dtype=bool)
        one = one_bearer([(v["relation_id"], ok) for v, ok in zip(self.versions, named, strict=True)])
        if one and self.versions[one[0]]["relation_id"] is not None:
            # one relation ever bore the name, and only it (the common case; the rows'
            # rule too): it bears it as of any commit. Its Relation may have come in a
            # transaction that commits after others used it, or never (a prepared one
            # committed later, rolled back, still open at the end): the server sends a
            # schema once, so other transactions' rows rely on it all the same, and
            # going by the Relations' commits chose no table
            return self.versions[one[0]]["relation_id"], False
        # each Relation's transaction: its segment's (as for rows); a checkpoint's
        # definitions and those of transactions begun before the archive come first, in
        # the checkpoint's order (their version indexes)
        seg = np.searchsorted(self.ctrl_keys, self.ev_key, side="left")
        slot = np.where(self.ev_key == _BEFORE_ALL, -1, self.seg_slot[np.minimum(seg, len(self.seg_slot) - 1)])
        rank = self._commit_positions(slot)
        # a Relation before the archive's first Begin, in the context open before it
        # that never commits (an archive put together by a tool: no server sends one
        # outside a transaction), defines its relation for all that follows, as the
        # decoder reads it: it counts from the start, as a checkpoint's do
        slot = np.where((slot == self.seg_slot[0]) & (rank < 0), -1, slot) if len(self.seg_slot) else slot
        start = None      # where the batch begins: (commit rank, key)
        if len(self.commit_slots):
            hit = rank >= 0
            lsn = pc.fill_null(self.commit_lsn, 0).to_numpy(zero_copy_only=False).astype(np.uint64)
            end = self.window[1] if self.window is not None else None
            if until_lsn is not None:
                end = int(until_lsn) if end is None else min(end, int(until_lsn))
            late = hit & (lsn[np.maximum(rank, 0)] > np.uint64(end)) if end is not None else np.zeros(len(hit), bool)
            keep = (slot < 0) | (hit & ~late)
            if self.window is not None and self.window[0] is not None:
                inside = np.flatnonzero(self.in_window)
                start = (int(inside[0]) if len(inside) else len(lsn), _BEFORE_ALL)
        else:
            keep = slot < 0
        if start is None and self.start_key is not None:
            start = (0, _BEFORE_ALL)    # a resumed run: its own commits
        order = np.lexsort((self.ev_ver[keep], self.ev_key[keep], rank[keep]))
        cur, replaced = None, False
        for r, k, rel, v in zip(rank[keep][order].tolist(), self.ev_key[keep][order].tolist(),
                                self.ev_rel[keep][order].tolist(), self.ev_ver[keep][order].tolist(), strict=True):
            if cur is not None and cur != rel and not named[v]:
                continue                         # another table's Relation
            if cur is not None and (cur != rel or not named[v]):
                # cur's time with the name ends here: replaced, or renamed away
                replaced = replaced or start is None or (r, k) > start
                cur = None
            if named[v]:
                cur = rel
        return cur, replaced and cur is not None

    def for_keys(self, lo: int, hi: int) -> "ControlPlan":
        """This plan for the rows with order key ``lo <= key <= hi`` only: what
        :meth:`changes`, :meth:`change_rows`, :meth:`keep_mask` and :meth:`head_facts`
        give for those rows is what the whole plan gives (ranks included), for other rows
        it is undefined. What a partition of a data source carries instead of the whole
        plan, so P partitions ship the plan about once, not P times: the segments in the
        range, the commits of their transactions, and the Relation events in force at
        ``lo`` or sent in the range. The Relation versions themselves stay whole (few;
        indexes into them are the plan's). Not for the driver's questions:
        :meth:`checkpoint` refuses, and :meth:`dropped_key_ranges` describes the range only."""
        lo, hi = int(lo), int(hi)
        if self.key_range is not None:
            lo, hi = max(lo, self.key_range[0]), min(hi, self.key_range[1])
        other = copy.copy(self)
        other.key_range = (lo, hi)
        s0, s1 = np.searchsorted(self.ctrl_keys, [lo, hi], side="left")
        other.ctrl_keys = self.ctrl_keys[s0:s1]
        other.seg_slot, other.seg_stream = self.seg_slot[s0:s1 + 1], self.seg_stream[s0:s1 + 1]
        # the commits of the transactions whose rows the range holds, by their position
        slots = np.unique(other.seg_slot)
        o = np.argsort(self.commit_slots, kind="stable")
        pos = np.minimum(np.searchsorted(self.commit_slots[o], slots), max(len(o) - 1, 0))
        hit = (self.commit_slots[o][pos] == slots) if len(o) else np.zeros(len(slots), bool)
        local = np.sort(o[pos[hit]])
        take = pa.array(local, pa.int64())
        other.commit_slots = self.commit_slots[local]
        other.commit_xid, other.commit_lsn = self.commit_xid.take(take), self.commit_lsn.take(take)
        other.commit_ts, other.commit_origin = self.commit_ts.take(take), self.commit_origin.take(take)
        other.commit_ranks = local if self.commit_ranks is None else self.commit_ranks[local]
        other.in_window = None if self.in_window is None else self.in_window[local]
        at = {int(g): i for i, g in enumerate(local)}
        other.aborted = {at[k]: v for k, v in self.aborted.items() if k in at}
        # Relation events: the last one of each relid before lo, and those in the range
        before = self.ev_key < lo
        same_next = np.r_[self.ev_rel[1:] == self.ev_rel[:-1], False]
        last_before = before & ~(same_next & np.r_[before[1:], False])
        ev = last_before | (~before & (self.ev_key <= hi))
        other.ev_rel, other.ev_key, other.ev_ver = self.ev_rel[ev], self.ev_key[ev], self.ev_ver[ev]
        # the driver's: what a run leaves open, its errors and replays, its Types
        other.type_events, other.open_transactions, other.live_slots = [], [], set()
        other.errors, other.replayed = [], []
        return other

    def _chooses_tables(self) -> bool:
        """``tables`` leaves out some Relation version (else it chooses nothing)."""
        chosen = self._version_selected()
        return chosen is not None and not chosen.all()

    def drops_changes(self) -> bool:
        """Whether :meth:`changes` can leave out an I/U/D row of a well-formed archive:
        some transaction did not commit or committed outside the commit-LSN window, a
        subtransaction aborted, or ``tables`` chooses."""
        return self._chooses_tables() or bool(self.aborted) or bool(self._dropped_segments().any())

    def _dropped_segments(self) -> np.ndarray:
        """Per segment: its rows belong to a transaction not given (it did not commit,
        or committed outside the window)."""
        given = self.commit_slots if self.in_window is None else self.commit_slots[self.in_window]
        return (self.seg_slot >= 0) & ~np.isin(self.seg_slot, given)

    def dropped_key_ranges(self, limit: int = 64):
        """When the changes left out are exactly those of whole segments (transactions
        not given: no aborted subtransaction, no ``tables``): the order-key ranges
        ``(lo, hi)`` holding them, bounds exclusive, None for an open end — merged, at
        most ``limit``. None when that does not describe them (then ask
        :meth:`keep_mask` or :meth:`row_drops`). Typical: the rows before the archive's
        first control row (a transaction whose Begin came before the archive and whose
        Commit never came), a transaction still open at its end, or the archive before
        ``after_lsn``. A range may hold control rows: its callers filter change rows
        (I/U/D) only."""
        if self._chooses_tables() or self.aborted:
            return None
        return self._segment_ranges(self._dropped_segments(), limit)

    def _segment_ranges(self, flags: np.ndarray, limit: int):
        """The order-key ranges of the segments ``flags`` marks, merged, at most
        ``limit`` (else None). Segments between two control rows with consecutive keys
        hold no row, so runs merge across them: the thousands of transactions committed
        before ``after_lsn`` make one range, not one each."""
        if not flags.any():
            return []
        bound = self.ctrl_keys
        empty = np.zeros(len(flags), dtype=bool)
        empty[1:-1] = np.diff(bound) == 1
        # a run: marked segments, joined by empty ones, from a marked one to a marked one
        joinable = flags | empty
        starts = np.flatnonzero(joinable & ~np.r_[False, joinable[:-1]])
        ends = np.flatnonzero(joinable & ~np.r_[joinable[1:], False])
        runs = []
        for a, b in zip(starts, ends, strict=True):
            d = np.flatnonzero(flags[a:b + 1])
            if len(d):
                runs.append((a + d[0], a + d[-1]))
        if len(runs) > limit:
            return None
        return [(int(bound[a - 1]) if a > 0 else None, int(bound[b]) if b < len(bound) else None)
                for a, b in runs]

    def _relid_ranges(self) -> dict:
        """{relation id: the key ranges where the Relation version in force belongs to a
        table ``tables`` leaves out} (empty when it chooses none out). A row's version is
        that of the newest Relation with its id before its key, so each range runs from
        such a Relation's key to the next one's that is chosen (exclusive: those keys
        are Relation rows, never I/U/D); a row before its id's first Relation has no
        version and is not in any range (kept: the decoder reports it)."""
        if not self._chooses_tables():
            return {}
        rel, key = self.ev_rel, self.ev_key
        d = ~self._version_selected()[self.ev_ver]
        first = np.r_[True, rel[1:] != rel[:-1]]          # the events sort by (relid, key)
        last = np.r_[first[1:], True]
        starts = np.flatnonzero(d & (first | ~np.r_[False, d[:-1]]))
        ends = np.flatnonzero(d & (last | ~np.r_[d[1:], False]))
        out = {}
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            lo = None if key[a] == _BEFORE_ALL else int(key[a])
            out.setdefault(int(rel[a]), []).append((lo, None if last[b] else int(key[b + 1])))
        return out

    def row_drops(self, limit: int = 64) -> RowDrops | None:
        """:meth:`keep_mask` as data (:class:`RowDrops`), so that Spark can leave the rows
        out by itself, before any of them crosses into Python. None when the plan drops
        nothing, or when more than ``limit`` ranges of one kind (``4 * limit`` relation
        ranges) would describe it: then ask :meth:`keep_mask`."""
        if not self.drops_changes():
            return None
        segments = self._segment_ranges(self._dropped_segments(), limit)
        relids = self._relid_ranges()
        if segments is None or sum(map(len, relids.values())) > 4 * limit:
            return None
        aborted = []   # a subtransaction's rows: its transaction's segments, its xids
        for k, subxids in sorted(self.aborted.items()):
            ranges = self._segment_ranges(self.seg_slot == self.commit_slots[k], limit)
            if ranges is None or len(aborted) >= limit:
                return None
            aborted.append((ranges, sorted(int(x) for x in subxids)))
        stream = self._segment_ranges(self.seg_stream.astype(bool), limit) if relids or aborted else []
        if stream is None:
            return None
        return RowDrops(self.envelope, segments, stream, relids, aborted)

    def given_heads(self, limit: int = 64) -> GivenHeads | None:
        """:meth:`head_facts`' "given" as data (:class:`GivenHeads`), valid on the rows
        that :meth:`dropped_key_ranges` or :meth:`row_drops` keep (all rows when the plan
        drops none): there the transaction is given and the version in force chosen
        wherever the row's relation id has a chosen version past its first Relation. None
        when those two do not describe the rows left out, or ``limit`` ranges do not hold
        the stream blocks or the rows outside any transaction."""
        if self.drops_changes() and self.dropped_key_ranges(limit) is None and self.row_drops(limit) is None:
            return None
        stream = self._segment_ranges(self.seg_stream.astype(bool), limit)
        # between a Commit and the next Begin: listed where a row can lie (keys apart),
        # else an archive of n transactions would need n ranges
        holds = np.ones(len(self.seg_slot), dtype=bool)
        holds[1:-1] = np.diff(self.ctrl_keys) > 1
        orphans = self._segment_ranges((self.seg_slot < 0) & holds, limit)
        if stream is None or orphans is None:
            return None
        chosen = self._version_selected()
        pick = np.ones(len(self.ev_ver), dtype=bool) if chosen is None else chosen[self.ev_ver]
        rel, key = self.ev_rel, self.ev_key
        first = np.r_[True, rel[1:] != rel[:-1]] if len(rel) else np.zeros(0, dtype=bool)   # by (relid, key)
        start = np.maximum.accumulate(np.where(first, np.arange(len(rel)), 0)) if len(rel) else first
        firsts = {int(rel[i]): None if key[start[i]] == _BEFORE_ALL else int(key[start[i]])
                  for i in np.flatnonzero(pick)}
        fp = self.version_table.column("relation_version").to_pylist()
        fingerprints = sorted({fp[v] for v in (range(len(fp)) if chosen is None else np.flatnonzero(chosen).tolist())})
        index = {f: i for i, f in enumerate(fingerprints)}
        versions = {}
        for r, k, v, p in zip(rel.tolist(), key.tolist(), self.ev_ver.tolist(), pick.tolist(), strict=True):
            if r in firsts:   # the same definition sent again starts nothing; another table's: dropped rows
                at = versions.setdefault(r, [])
                if p and (not at or at[-1][1] != index[fp[v]]):
                    at.append((None if k == _BEFORE_ALL else k, index[fp[v]]))
        rank = self._rank(self.seg_slot, lambda: np.zeros(len(self.seg_slot), np.int64))
        given = rank[rank >= 0]
        serial = bool((np.diff(given) >= 0).all())
        return GivenHeads(self.envelope, stream, orphans, firsts, fingerprints, versions, serial)

    def _judge_heads(self, heads, keys):
        """Parse the first :data:`HEAD_BYTES` of each payload: the I/U/D rows that can be
        judged (``rows``), their transaction's commit rank (-1: not given; see
        :meth:`_rank`), the segment's slot, a function giving their relation ids and one
        telling the Updates that send their old key or row, and their tag bytes."""
        heads = one_binary(heads)
        n = len(heads)
        if pa.types.is_large_binary(heads.type):
            heads = heads.cast(pa.binary())
        bufs = heads.buffers()
        offsets = np.frombuffer(bufs[1], np.int32, count=n + 1, offset=heads.offset * 4).astype(np.int64)
        data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        lengths = np.diff(offsets)
        if heads.null_count:
            lengths[~heads.is_valid().to_numpy(zero_copy_only=False)] = 0
        width = np.arange(HEAD_BYTES)
        head = np.zeros((n, HEAD_BYTES), dtype=np.uint8)
        inside = width[None, :] < np.minimum(lengths, HEAD_BYTES)[:, None]
        head[inside] = data[(offsets[:-1, None] + width[None, :])[inside]]
        at = np.where((self.envelope != "none") & (head[:, 0] == ord("w")), 25, 0)   # the tag's byte
        tag = head[np.arange(n), at]
        stream = self.in_stream_at(keys).astype(bool)
        rel_at = at + 1 + 4 * stream
        rows = np.flatnonzero(_IS_ROW_CHANGE[tag] & (lengths >= rel_at + 4))

        def be32(pos):
            w = [head[rows, pos + k].astype(np.int64) for k in range(4)]
            return (w[0] << 24) | (w[1] << 16) | (w[2] << 8) | w[3]

        slot = self.seg_slot[np.searchsorted(self.ctrl_keys, keys[rows], side="left")]
        rank = self._rank(slot, lambda: np.where(stream[rows], be32(at[rows] + 1), 0))
        def sends_old():   # an Update's 'K'/'O' byte right after the relation id
            return (tag[rows] == ord("U")) & np.isin(head[rows, rel_at[rows] + 4], [ord("K"), ord("O")])

        return rows, rank, slot, lambda: be32(rel_at[rows]), sends_old, tag[rows]

    def keep_mask(self, heads, order) -> np.ndarray:
        """False for the rows :meth:`changes` would leave out as I/U/D changes of a
        transaction not given (uncommitted, outside the commit window), an aborted
        subtransaction or a table ``tables`` does not choose — judged from the first
        :data:`HEAD_BYTES` bytes of each payload (``heads``; the rest may be cut) and the
        order key, without decoding. True for every other row, including those it
        cannot judge (too short, another tag, no transaction): they are decoded in full,
        and fail there when malformed."""
        keys = _keys(order)
        keep = np.ones(len(heads), dtype=bool)
        if len(heads) == 0 or not self.drops_changes():
            return keep
        rows, rank, slot, relids, _, _ = self._judge_heads(heads, keys)
        if not len(rows):
            return keep
        drop = (slot >= 0) & (rank < 0)
        if self._chooses_tables():
            chosen = self._version_selected()
            ver = self._versions_at(relids(), keys[rows])
            drop |= (ver >= 0) & ~chosen[np.maximum(ver, 0)]
        keep[rows[drop]] = False
        return keep

    def head_facts(self, heads, order):
        """Per row, from the payload heads and order keys alone: the Relation version
        index (into ``versions``) and commit rank :meth:`changes` would give it — both
        -1 for a row it would not give as an I/U/D change (another tag, not given, a
        table ``tables`` leaves out) or that cannot be judged —, whether it is a
        given Update that sends its old key or row ('K'/'O': the only Updates that can
        change the key) and whether it is a given Delete. For jobs that need only these
        (``table_changes``' list of Relation versions; whether ``snapshot`` must follow
        rows across keys or drop rows) without decoding."""
        keys = _keys(order)
        n = len(heads)
        version = np.full(n, -1, dtype=np.int64)
        rank_out = np.full(n, -1, dtype=np.int64)
        old = np.zeros(n, dtype=bool)
        delete = np.zeros(n, dtype=bool)
        if n == 0:
            return version, rank_out, old, delete
        rows, rank, _, relids, sends_old, tag = self._judge_heads(heads, keys)
        ver = self._versions_at(relids(), keys[rows])
        given = (rank >= 0) & (ver >= 0)
        chosen = self._version_selected()
        if chosen is not None:
            given &= chosen[np.maximum(ver, 0)]
        version[rows[given]] = ver[given]
        rank_out[rows[given]] = rank[given]
        old[rows[given & sends_old()]] = True
        delete[rows[given & (tag == ord("D"))]] = True
        return version, rank_out, old, delete

    def change_rows(self, values, order, lsn=None) -> pa.Table:
        """:meth:`changes` (``errors="raise"``) aligned with the input: one row per input
        row, in input order — the change row of each kept I/U/D row, a null row for every
        other row (control, Truncate, inert, or a change :meth:`changes` leaves out).
        Spark's field UDFs get the rows the row filters keep, but a query's own filter on
        a decoded field is evaluated next to those filters, on every row before them."""
        keys = _keys(order)
        t = self.changes(values, keys, lsn, errors="raise")
        seq = t.column("seq").to_numpy(zero_copy_only=False)
        if len(t) == len(keys) and np.array_equal(seq, keys):
            return t                                    # every row a kept change: the common case
        t = t.filter(pc.not_equal(t.column("op"), "T"))  # one row per relation: not one per payload
        o = np.argsort(keys, kind="stable")
        return spread_rows(t, o[np.searchsorted(keys[o], t.column("seq").to_numpy(zero_copy_only=False))], len(keys))

    def _commit_cols(self, rank):
        at = pa.array(rank if self.commit_ranks is None else np.searchsorted(self.commit_ranks, rank), pa.int64())
        return {"xid": self.commit_xid.take(at), "commit_lsn": self.commit_lsn.take(at),
                "commit_ts": self.commit_ts.take(at), "origin": self.commit_origin.take(at),
                "commit_rank": pa.array(rank + self.rank_base, pa.int64())}

    def _rows(self, msgs, idx, rank, ver, keys, lsn_arr) -> pa.Table:
        cols = change_columns(msgs, idx, ver, self.version_table, pa.array(keys[idx], pa.int64()), lsn_arr)
        cols.update(self._commit_cols(rank))
        return pa.table(cols)

    def _truncates(self, msgs, idx, rank, keys, lsn_arr) -> pa.Table:
        rows, ranks = [], []
        for i, r, m in zip(idx, rank, rows_at(msgs, idx), strict=True):
            for rid in m["relation_ids"]:
                v = int(self._versions_at(np.array([rid]), np.array([keys[i]]))[0])
                rel = self.versions[v] if v >= 0 else {}
                rows.append(truncate_row(rel, rid, int(keys[i]), lsn_arr[int(i)].as_py(), m["options"]))
                ranks.append(r)
        schema = pa.schema([f for f in self.output_schema if f.name not in
                            ("xid", "commit_lsn", "commit_ts", "origin", "commit_rank")])
        t = pa.Table.from_pylist(rows, schema=schema)
        for name, arr in self._commit_cols(np.asarray(ranks, dtype=np.int64)).items():
            t = t.append_column(name, arr)
        return t


def checkpoint_after(values, order, *, envelope: str = "auto", resume=None, **options) -> Checkpoint:
    """The checkpoint of a single-process run (``decode_changes(..., resume=)`` or a
    ``ChangeDecoder``) over these rows — the ones it was fed, with their order keys:
    a :class:`ControlPlan` over their control rows, with the run's options."""
    values = one_binary(values)
    keys = _keys(order)
    mask = control_candidates(values, envelope=envelope)
    return ControlPlan.build(values.filter(pa.array(mask)), keys[mask], envelope=envelope, resume=resume,
                             **options).checkpoint()


def decode_changes_parallel(values, order=None, lsn=None, *, splits: int = 4, **options) -> pa.Table:
    """Single-process demonstration of the parallel path: plan over the control rows,
    then decode the archive in ``splits`` independent pieces; equals ``decode_changes``."""
    values = one_binary(values)
    keys = np.arange(len(values), dtype=np.int64) if order is None else _keys(order)
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], **options)
    lsn_arr = None if lsn is None else lsn_array(lsn, len(values))
    bounds = np.linspace(0, len(values), splits + 1, dtype=int)
    parts = [plan.changes(values.slice(a, b - a), keys[a:b], None if lsn_arr is None else lsn_arr.slice(a, b - a))
             for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    out = pa.concat_tables(parts)
    order_ = pc.sort_indices(out, sort_keys=[("commit_rank", "ascending"), ("seq", "ascending")])
    return take_table(out, order_.to_numpy()).drop_columns(["commit_rank"])
