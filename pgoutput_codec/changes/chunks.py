"""The plan's walk over an archive's control rows, in chunks: a chunk of plain transactions
(Begin … Commit, Relations, Types) with array operations, any other through
:meth:`~pgoutput_codec.changes.walk.TransactionWalk.walk`; what each chunk leaves is a few
values per commit (:class:`Walked`), not Python objects per transaction."""

from __future__ import annotations

import gc
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from .walk import TransactionWalk, Txn

__all__ = ["Walked", "python_walk", "plain_walk", "walk_bounds", "cyclic_gc_paused", "WALK_CHUNK", "VECTORIZED_WALK",
           "MIN_ARRAY_RUN"]

#: Control rows :meth:`ControlPlan.build` walks at a time (tests make it small).
WALK_CHUNK = 65536

#: ``ControlPlan.build`` walks chunks of plain transactions with array operations (tests
#: turn it off to compare with the Python walk).
VECTORIZED_WALK = True

#: A run of plain control rows shorter than this is walked in Python with the rows around
#: it: the array walk has a cost per chunk whatever its size, the Python walk a cost per
#: row (bench/plan_bench.py; tests make it 1).
MIN_ARRAY_RUN = 64


class Walked:
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


def definition_rows(ctrl: list, where) -> tuple:
    """Where the Relation and Type rows among ``ctrl`` (dicts at chunk positions
    ``where``) sit and what they say: (r_keys, r_rel, y_keys, y_types)."""
    r = [(k, m) for k, m in zip(where, ctrl, strict=True) if m["type"] == "R"]
    y = [(k, m) for k, m in zip(where, ctrl, strict=True) if m["type"] == "Y"]
    return (np.array([k for k, _ in r], np.int64), np.array([m["relation_id"] for _, m in r], np.int64),
            np.array([k for k, _ in y], np.int64), [(m["type_oid"], m["namespace"], m["type_name"]) for _, m in y])


def python_walk(walk: TransactionWalk, msgs, idx: np.ndarray, phantom: bool, keys: np.ndarray) -> Walked:
    """A chunk of control rows (message rows ``idx``) through :meth:`TransactionWalk.walk`;
    its committed transactions are let go."""
    ctrl = walk.control_dicts(msgs, idx)
    counts = np.zeros(len(idx) + 1, dtype=np.int64)
    counts[0] = phantom
    seg_slot, commits, r_v, seg_stream = walk.walk(ctrl, counts, keys)
    txns = [walk.txns.pop(slot) for slot, _ in commits]   # in commit order
    r_keys, r_rel, y_keys, y_types = definition_rows(ctrl, range(len(ctrl)))
    return Walked(
        seg_slot, seg_stream, np.array([slot for slot, _ in commits], np.int64),
        pa.array([t.xid if t.xid is not None else m.get("xid") for t, (_, m) in zip(txns, commits, strict=True)],
                 pa.uint32()),
        pa.array([m.get("commit_lsn") for _, m in commits], pa.uint64()),
        pa.array([m.get("commit_ts") for _, m in commits], pa.int64()),
        pa.array([t.origin for t in txns], pa.string()),
        {j: np.fromiter(t.aborted_subxids, np.int64) for j, t in enumerate(txns) if t.aborted_subxids},
        r_keys, r_rel, np.array(r_v, np.int64), y_keys, y_types)


PLAIN_TAGS = np.zeros(256, dtype=bool)
for _t in b"BCRY":
    PLAIN_TAGS[_t] = True


def plain_walk(walk: TransactionWalk, msgs, tags: np.ndarray, idx: np.ndarray, phantom: bool, *,
               accept: np.ndarray = PLAIN_TAGS, whole: bool = False, row_segs=None, fields=None) -> Walked | None:
    """The common chunk, with array operations: Begin … Commit pairs that never
    interleave, Relations and Types, no stream or two-phase marker — then what the walk
    does is a function of the B/C pattern. None for any other chunk (the Python walk
    takes it; tests compare the two), with the walk untouched.

    How each driver feeds it: ``accept``, the tags a plain chunk may hold (the plan's
    control rows: :data:`PLAIN_TAGS`; the decoder's also logical messages, keepalives
    and Origins — an Origin names the transaction it sits in, none outside one);
    ``whole``: no transaction open before the chunk or after it (the decoder's rows are
    then emitted at once); ``row_segs``: the segments holding change rows, each of which
    must be inside a transaction; ``fields``: the fields of the Relation and Type rows
    read (:meth:`TransactionWalk.control_dicts`)."""
    t = tags[idx]
    if walk.in_stream or not accept[t].all():
        return None
    bc = np.flatnonzero((t == ord("B")) | (t == ord("C")))
    pattern = t[bc]
    ctx = walk.ctx
    if phantom and ctx < 0:   # rows before the first control row: a transaction begun before the archive
        ctx = -2              # (made below, once the chunk is known to be plain)
    # a Commit of the transaction open before the chunk, then B C pairs, maybe a last B left open
    lead = 1 if len(pattern) and pattern[0] == ord("C") else 0
    if lead and (ctx == -1 or (ctx >= 0 and walk.txns[ctx].kind != "tx")):
        return None           # a Commit with nothing open, or not a Begin's: the walk judges it
    pairs = pattern[lead:]
    open_end = len(pairs) % 2
    if not ((pairs[0:len(pairs) - open_end:2] == ord("B")).all() and (pairs[1::2] == ord("C")).all()
            and (not open_end or pairs[-1] == ord("B"))):
        return None
    if whole and (open_end or ctx != -1):
        return None
    c_rows = idx[bc[lead:][1::2]] if len(pairs) > 1 else np.zeros(0, np.int64)
    if lead:
        c_rows = np.concatenate([idx[bc[:1]], c_rows])
    lsn = msgs.field("commit_lsn").take(pa.array(c_rows, pa.int64()))
    taken = walk.plain_commits(lsn)   # None: a commit to judge (replay, order): the walk does
    if taken is None:
        return None
    made = ctx == -2
    if made:
        ctx = walk.next_slot
    n_b = int((pairs == ord("B")).sum())
    first = walk.next_slot + made
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
    if row_segs is not None and len(row_segs) and (seg_slot[row_segs] < 0).any():
        return None           # a change outside any transaction: the walk reports it
    o_at = np.flatnonzero(t == ord("O"))
    if len(o_at) and (seg_slot[o_at + 1] < 0).any():
        return None           # an Origin outside a transaction: the walk ignores it
    # plain: from here on the chunk is walked
    if made:
        walk.ctx = walk.new_slot(Txn(xid=None))
    walk.next_slot += n_b
    named = {}                # slot -> the name its last Origin gave
    if len(o_at):
        names = msgs.field("origin_name").take(pa.array(idx[o_at], pa.int64())).to_pylist()
        named = dict(zip(seg_slot[o_at + 1].tolist(), names, strict=True))
        if ctx >= 0 and ctx in named:
            walk.txns[ctx].origin = named[ctx]
    b_xid = msgs.field("xid").take(pa.array(idx[b_at], pa.int64())).cast(pa.uint32())
    committed_b = n_b - open_end
    slots = first + np.arange(committed_b)
    xid = b_xid.slice(0, committed_b)
    origin = pa.array([named.get(int(k)) for k in slots], pa.string()) if named else pa.nulls(committed_b, pa.string())
    aborted = {}
    if lead:                  # the transaction open before the chunk commits first
        before = walk.txns.pop(ctx)
        slots = np.concatenate([[ctx], slots])
        xid = pa.concat_arrays([pa.array([before.xid], pa.uint32()), xid])
        origin = pa.concat_arrays([pa.array([before.origin], pa.string()), origin])
        if before.aborted_subxids:
            aborted[0] = np.fromiter(before.aborted_subxids, np.int64)
    if open_end:              # the last Begin's transaction stays open into the next chunk
        last = first + n_b - 1
        walk.txns[last] = Txn(xid=b_xid[n_b - 1].as_py(), origin=named.get(last))
    walk.ctx = int(seg_slot[-1])
    walk.committed.frombytes(taken.tobytes())
    ts = msgs.field("commit_ts").take(pa.array(c_rows, pa.int64())).cast(pa.int64())
    ry = np.flatnonzero((t == ord("R")) | (t == ord("Y")))
    defs = walk.control_dicts(msgs, idx[ry], fields)
    r_keys, r_rel, y_keys, y_types = definition_rows(defs, ry)
    return Walked(seg_slot, np.zeros(len(idx) + 1, bool), slots, xid, lsn, ts, origin, aborted,
                  r_keys, r_rel, np.array(walk.definitions(defs), np.int64), y_keys, y_types)


def walk_bounds(t: np.ndarray) -> list:
    """Where :meth:`ControlPlan.build` cuts its walk of control rows with tags ``t``, as
    (start, end, array walk?): runs of plain rows (Begin, Commit, Relation, Type) for the
    array walk, the rows between them (streams, two-phase, Origins, and plain runs too
    short to pay) for the Python walk, each cut every ``WALK_CHUNK`` rows. A streamed
    transaction in an archive of plain ones then costs its own rows, not its chunk's
    (any cut gives the same plan: the walk carries its state across)."""
    n = len(t)
    if not VECTORIZED_WALK or n == 0:
        runs = [(0, n, False)]
    else:
        plain = PLAIN_TAGS[t]
        cut = np.flatnonzero(plain[1:] != plain[:-1]) + 1
        starts, ends = np.concatenate([[0], cut]), np.concatenate([cut, [n]])
        array = plain[starts] & (ends - starts >= MIN_ARRAY_RUN)
        # neighbouring runs the same walk takes are one run
        first = np.concatenate([[True], array[1:] != array[:-1]])
        runs = list(zip(starts[first].tolist(), np.append(starts[first][1:], n).tolist(), array[first].tolist(),
                        strict=True))
    return [(a, min(a + WALK_CHUNK, b), arr) for a0, b, arr in runs for a in range(a0, max(b, a0 + 1), WALK_CHUNK)]


@contextmanager
def cyclic_gc_paused():
    """Python's cyclic garbage collector off inside (as it was, after)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
