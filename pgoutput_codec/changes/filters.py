"""What a plan tells a query engine about the rows it keeps, as data it can test without
Python: the rows left out (:class:`RowDrops`), the rows given as I/U/D changes
(:class:`GivenHeads`), and the same judged on payload heads (:class:`RowFilters`, the
plan's methods)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..arrays import one_binary, order_keys
from .tags import BEFORE_ALL, HEAD_BYTES, IS_ROW_CHANGE

__all__ = ["RowDrops", "GivenHeads", "RowFilters"]


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


class RowFilters:
    """The row filters of a :class:`~pgoutput_codec.changes.ControlPlan` (its base class):
    which rows it leaves out and which it gives, as data (:meth:`row_drops`,
    :meth:`given_heads`) and judged on the rows' head bytes (:meth:`keep_mask`,
    :meth:`head_facts`). Reads the plan's walk results."""

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
            lo = None if key[a] == BEFORE_ALL else int(key[a])
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
        firsts = {int(rel[i]): None if key[start[i]] == BEFORE_ALL else int(key[start[i]])
                  for i in np.flatnonzero(pick)}
        fp = self.version_table.column("relation_version").to_pylist()
        fingerprints = sorted({fp[v] for v in (range(len(fp)) if chosen is None else np.flatnonzero(chosen).tolist())})
        index = {f: i for i, f in enumerate(fingerprints)}
        versions = {}
        for r, k, v, p in zip(rel.tolist(), key.tolist(), self.ev_ver.tolist(), pick.tolist(), strict=True):
            if r in firsts:   # the same definition sent again starts nothing; another table's: dropped rows
                at = versions.setdefault(r, [])
                if p and (not at or at[-1][1] != index[fp[v]]):
                    at.append((None if k == BEFORE_ALL else k, index[fp[v]]))
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
        rows = np.flatnonzero(IS_ROW_CHANGE[tag] & (lengths >= rel_at + 4))

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
        keys = order_keys(order)
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
        keys = order_keys(order)
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
