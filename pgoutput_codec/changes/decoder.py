"""From messages to changes: the ``ChangeDecoder``.

A stream of pgoutput messages (in arrival order, in chunks) becomes one row per row
change (``schema.CHANGE_SCHEMA``), emitted when its transaction commits:

- plain transactions: Begin … Commit;
- streamed transactions: (Stream Start … Stream Stop)+ then Stream Commit — held until
  then, dropped on Stream Abort (an abort of a subtransaction drops only the changes
  carrying that subtransaction's xid); a Stream Abort for an unknown xid is ignored
  (PostgreSQL 18 has been reported to send one on v1 streams);
- two-phase: Begin Prepare … Prepare (or streamed … Stream Prepare) become changes at
  Commit Prepared and vanish on Rollback Prepared.

How the work is split (no Python object per change row): messages are decoded by the
Cython batch decoder; the relation version of every row comes from one C walk
(``_versions.relation_versions``); the transaction of every row comes from the segment
it sits in between two control messages, so Python runs once per control message
(Begin, Commit, Relation, …), never per change — and a chunk of plain transactions
(``_plain_transactions``) is resolved with NumPy, without Python per transaction either;
rows are gathered with ``_gather``'s whole-row copies.

Rows of a transaction still open at the end of a chunk are kept (Arrow tables) in the
decoder's state, spilled to Arrow IPC files once they pass ``max_txn_in_memory_mb``.
``ChangeDecoder.state`` is a plain, picklable snapshot (relation and type caches, open
transactions, stream state) from which :meth:`ChangeDecoder.from_state` resumes exactly:
the basis for decoding an archive in independent chunks.
"""

from __future__ import annotations

import os
import tempfile
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._native.gather import take_table
from ..arrays import lsn_array, one_array
from ..pgoutput.batch import PAYLOAD_ERROR, decode_batch_with_state, with_payload_errors
from .rows import (DEFINITION_FIELDS, commit_order, OUTSIDE_TRANSACTION, change_columns, corrupt_rows,
                   light_change_columns, newest_versions, row_versions, tag_codes, truncate_columns, with_commits)
from .checkpoint import Checkpoint
from ..errors import PgoutputDecodeError
from ..pgoutput.facts import CHANGE_TAGS, END_TAGS
from ..schema import CHANGE_FIELDS, CHANGE_OPTIONAL, CHANGE_SCHEMA
from ..selection import commit_window, in_commit_window, intersect_windows, parse_table_list, table_selected
from ..threads import payload_bytes, worker_count
from ..typecatalog.catalog import CATALOG_KEY, catalog_of
from .chunks import plain_walk
from .walk import TransactionWalk, Txn

__all__ = ["ChangeDecoder", "LightChangeDecoder", "take_rising"]

_CHANGE_TAGS = np.zeros(256, dtype=bool)
_CHANGE_TAGS[np.frombuffer(CHANGE_TAGS.encode(), np.uint8)] = True

# Columns of pending (not yet committed) change rows: the change schema without the
# transaction's commit facts, plus the message's own (sub)transaction xid.
#: the most archive rows :meth:`ChangeDecoder.feed` decodes at once
FEED_ROWS = 1 << 16

_PENDING_FIELDS = [f for f in CHANGE_FIELDS if f.name not in ("xid", "commit_lsn", "commit_ts", "origin")]
_PENDING_SCHEMA = pa.schema(_PENDING_FIELDS + [pa.field("msg_xid", pa.uint32())])
# Light rows (``LightChangeDecoder``, for ``tables.decode_table_changes``): the
# commit columns only, no values and no relation facts, but where they are — ``_src``,
# the message's row in the decoded batch, and ``_ver``, the relation version (index into
# ``walk.versions``, -1 unknown) — so the typed columns are converted straight from the
# batch's tuple children. ``msg_xid`` is 0 where the message carried none.
_LIGHT_KEEP = ("op", "seq", "lsn", "xid", "commit_lsn", "commit_ts", "origin")
_LIGHT_EXTRA = [pa.field("_src", pa.int64()), pa.field("_ver", pa.int64())]
_LIGHT_PENDING_SCHEMA = pa.schema([f for f in _PENDING_SCHEMA if f.name in _LIGHT_KEEP or f.name == "msg_xid"]
                                  + _LIGHT_EXTRA)
# Control rows the vectorized path handles: Begin, Commit, Relation, Type, logical
# Message, keepalive, Origin.
_COMMIT_TS = CHANGE_SCHEMA.field("commit_ts").type
_PLAIN_CTRL = np.zeros(256, dtype=bool)
for _t in b"BCRYMkO":
    _PLAIN_CTRL[_t] = True


def take_rising(table: pa.Table, idx: np.ndarray) -> pa.Table:
    """Rows ``idx`` (rising) of ``table``: a slice when they are one run of rows."""
    if len(idx) and idx[-1] - idx[0] + 1 == len(idx):
        return table.slice(int(idx[0]), len(idx))
    return take_table(table, idx)


class ChangeDecoder:
    """Feed messages in arrival order, get committed row changes.

    Options (client-side twins of openGauss's decoding options):
    ``tables`` — white-table-list (``"public.t1,*.t3,my_schema.*"``), default all;
    ``skip_empty_xacts`` — when False, a committed transaction with no (selected) change
    yields one ``op='C'`` row carrying its commit facts; ``include_xids``,
    ``include_timestamp``, ``include_origin`` — keep the ``xid`` / ``commit_ts`` /
    ``origin`` columns; ``max_txn_in_memory_mb`` — an open transaction's rows spill to
    Arrow IPC files in ``spill_dir`` past this size; ``max_memory_mb`` — the rows of all
    open transactions together spill past this size, the largest transaction first (the
    files are removed when their transaction ends and, for those still open, by
    :meth:`close`, a ``with`` block or when the decoder is collected); ``errors`` —
    ``"raise"`` (default:
    a malformed payload raises ``PgoutputDecodeError`` naming its seq, lsn and byte
    offset) or ``"collect"`` (the row is skipped and listed in :attr:`errors`);
    ``after_lsn``, ``until_lsn`` — give only the transactions whose commit LSN lies in
    ``(after_lsn, until_lsn]`` (ints or ``X/Y`` text): the changes of an incremental run
    after the last commit the previous run gave, or a replay up to a point. The same
    rows as filtering ``commit_lsn``; the parallel decoders (``ControlPlan``, Spark's
    ``decode_changes``) skip the others' rows before decoding them. ``resume`` — a
    :class:`~pgoutput_codec.changes.checkpoint.Checkpoint` of the run before: its Relation and
    Type definitions and stream state, and only transactions committed after its
    ``after_lsn``; every row fed must then have a ``seq`` >= its ``from_key``.
    ``replays`` — commit LSNs rise in arrival order (PostgreSQL sends transactions in
    commit order). ``"drop"`` (default): a commit whose LSN is not above every commit
    before it is either a replay of one of them (same commit LSN: a consumer that
    reconnected before confirming what it had archived receives it again) — dropped,
    counted in ``counts["replayed_transactions"]`` and listed in :attr:`replayed` — or
    else the archive is out of order (files listed in the wrong order, a wrong
    ``order_by``): :class:`~pgoutput_codec.errors.ArchiveOrderError` naming both
    commits, in either ``errors`` mode (rows would come out in a wrong commit order).
    ``"keep"``: no check, every commit given as it comes (an archive that spans a
    timeline switch after a point-in-time recovery, whose LSNs restart lower). In a run
    resumed from a checkpoint, commits at or below its ``after_lsn`` are not checked:
    the run before gave them — up to its ``end_key``; one past it is new, judged by the
    checkpoint's ``commit_lsns`` as one run over the archive would judge it (a replay of
    one of them, or ``ArchiveOrderError``; ``"keep"``: given). ``workers``: threads decoding the messages of each feed
    (None: one per core, as many as the feed's size pays for; see
    :func:`~pgoutput_codec.threads.worker_count`); the
    transactions are then followed in this thread. The attribute ``workers`` is the
    number of threads the last feed used: before the first feed, the count given, or 1
    with None (no feed, no size to pay for more).
    """

    _VECTORIZED = True     # tests turn the plain-transaction path off to compare

    #: light rows (see ``LightChangeDecoder``)
    LIGHT = False

    def __init__(self, *, tables=None, skip_empty_xacts=True, include_xids=True,
                 include_timestamp=True, include_origin=True, max_txn_in_memory_mb=256,
                 max_memory_mb=1024, spill_dir=None, errors="raise", registry=None, after_lsn=None, until_lsn=None,
                 resume=None, replays="drop", workers=None):
        if errors not in ("raise", "collect"):
            raise ValueError("errors must be 'raise' or 'collect'")
        if replays not in ("drop", "keep"):
            raise ValueError(f"replays must be 'drop' or 'keep', not {replays!r}")
        self.options = dict(tables=tables, skip_empty_xacts=skip_empty_xacts, include_xids=include_xids,
                            include_timestamp=include_timestamp, include_origin=include_origin,
                            max_txn_in_memory_mb=max_txn_in_memory_mb, max_memory_mb=max_memory_mb,
                            spill_dir=spill_dir, errors=errors,
                            after_lsn=after_lsn, until_lsn=until_lsn,
                            resume=None if resume is None else Checkpoint.of(resume), replays=replays,
                            workers=workers)
        worker_count(workers)        # (a bad count fails here, not at the first feed)
        self._workers = workers
        #: the threads of the last feed (``workers``, or with None as many as its size pays for)
        self.workers = worker_count(workers, 0)
        #: the commit-LSN window of the transactions given (``selection.commit_window``)
        self.window = commit_window(after_lsn, until_lsn)
        #: the table list as (schema, table) globs (``selection.parse_table_list``)
        self.patterns = parse_table_list(tables)
        #: the transaction state machine (relations, open transactions, commits taken)
        self.walk = TransactionWalk(replays=replays, registry=registry)
        # spill files go with the decoder however its run ends: close(), a with block,
        # or the garbage collector (the finalizer holds the walk, not the decoder)
        self._cleanup = weakref.finalize(self, self.walk.discard_open)
        # stream state as the batch decoder sees it; None: inferred from the first rows
        # (an archive may start inside a stream block), as ControlPlan.build infers it
        self._in_stream = None
        self._seq = 0
        self.errors: list[dict] = []
        self.counts = {"rows_in": 0, "rows_decoded": 0, "rows_in_error": 0, "changes": 0,
                       "replayed_transactions": 0, "abandoned_transactions": 0}
        self.registry = registry
        self._light = self.LIGHT
        self._pending_schema = _LIGHT_PENDING_SCHEMA if self._light else _PENDING_SCHEMA
        self.last_batch = None     # light mode: the decoded messages _src points into
        #: the type catalog of the archive tables fed (:meth:`feed`), or None
        self.catalog = None
        self._catalog_raw, self._catalogs_seen = None, set()
        self._from_key = None
        if resume is not None:   # (kept in options: from_state resumes a resumed decoder alike)
            self._resume(self.options["resume"])

    def _resume(self, cp: Checkpoint):
        """Start where a checkpoint says: its definitions, stream state and commit LSN."""
        self._from_key = cp.from_key
        if self.options["replays"] == "drop":
            # (keep: the walk drops the run before's commits, and gives every new one)
            self.window = intersect_windows(self.window, commit_window(cp.after_lsn))
        self._in_stream = cp.in_stream
        self.walk.resume(cp)

    @property
    def replayed(self) -> list[dict]:
        """The transactions received again and dropped (``replays="drop"``): xid,
        commit_lsn, seq."""
        return self.walk.replayed

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> dict:
        """A picklable snapshot; :meth:`from_state` resumes from it exactly."""
        txns = {}
        for slot, t in self.walk.txns.items():
            pieces = []
            for p in t.pending:
                if isinstance(p, str):
                    with pa.OSFile(p, "rb") as f:
                        p = pa.ipc.open_file(f).read_all()
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, p.schema) as w:
                    w.write_table(p)
                pieces.append(sink.getvalue().to_pybytes())
            txns[slot] = dict(xid=t.xid, kind=t.kind, origin=t.origin, gid=t.gid,
                              aborted_subxids=sorted(t.aborted_subxids), pending=pieces)
        return {"version": 1, "options": dict(self.options), "in_stream": self._in_stream, "seq": self._seq,
                "txns": txns, **self.walk.state()}

    @classmethod
    def from_state(cls, state: dict, **overrides) -> "ChangeDecoder":
        opts = dict(state["options"])
        opts.update(overrides)
        self = cls(**opts)
        self._in_stream = state["in_stream"]
        self._seq = state["seq"]
        self.walk.load_state(state)
        for slot, t in state["txns"].items():
            pieces = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in t["pending"]]
            self.walk.txns[int(slot)] = Txn(xid=t["xid"], kind=t["kind"], origin=t["origin"], gid=t["gid"],
                                            aborted_subxids=set(t["aborted_subxids"]), pending=pieces,
                                            pending_bytes=sum(p.nbytes for p in pieces))
        self.counts["replayed_transactions"] = len(self.replayed)
        return self

    @property
    def open_transactions(self) -> list[dict]:
        """Transactions begun but not (yet) committed or aborted."""
        return [dict(slot=s, xid=t.xid, kind=t.kind, gid=t.gid,
                     rows=sum(len(p) if isinstance(p, pa.Table) else 0 for p in t.pending))
                for s, t in self.walk.txns.items()]

    def close(self) -> None:
        """Remove the spill files of the transactions still open. Their rows are then
        gone from this decoder: take :attr:`state` first to resume them elsewhere."""
        self._cleanup()

    def __enter__(self) -> "ChangeDecoder":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    @property
    def relations(self) -> dict:
        """relation_id -> the newest Relation definition seen."""
        return {rid: self.walk.versions[v] for rid, v in self.walk.relmap.items()}

    @property
    def output_schema(self) -> pa.Schema:
        drop = {col for opt, col in CHANGE_OPTIONAL.items() if not self.options[opt]}
        if self._light:
            return pa.schema([f for f in CHANGE_FIELDS if f.name not in drop and f.name in _LIGHT_KEEP] + _LIGHT_EXTRA)
        return pa.schema([f for f in CHANGE_FIELDS if f.name not in drop])

    # ------------------------------------------------------------------ feeding
    def feed(self, values, lsn=None, seq=None) -> pa.Table:
        """Decode the next payloads (arrival order) and return the changes of the
        transactions that committed in them. ``values``: binary array/list of payloads,
        or a table with a ``data`` column (and optional ``lsn``, ``seq`` columns). A
        table read from an archive file carrying a type catalog (``pgoutput_codec.catalog``
        in its schema metadata) makes the rows given from then on carry it too, merged
        with the ones fed before (:func:`~pgoutput_codec.typecatalog.registry_of`)."""
        parts = [t for t in self.feed_parts(values, lsn, seq) if len(t)]
        if not parts:
            return self._carried(self.output_schema.empty_table())
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def feed_parts(self, values, lsn=None, seq=None):
        """:meth:`feed`'s changes as an iterator of tables, in order: a transaction that
        spilled comes back from disk one held piece at a time (its rows of one fed
        chunk), so what is in memory at once stays bounded however large it is. Take
        every table before feeding again: the decoder's state moves on as they come."""
        if isinstance(values, pa.Table):
            self._take_catalog(values)
        for t in self._feed_parts(values, lsn, seq):
            yield self._carried(t)

    def _take_catalog(self, table):
        raw = table.schema.metadata.get(CATALOG_KEY) if table.schema.metadata else None
        if raw is None or raw == self._catalog_raw or raw in self._catalogs_seen:
            return
        self._catalogs_seen.add(raw)
        cat = catalog_of(table)
        self.catalog = cat if self.catalog is None else self.catalog.merge(cat)
        self._catalog_raw = raw if len(self._catalogs_seen) == 1 else self.catalog.to_json().encode()

    def _carried(self, table):
        """``table`` carrying the catalog of the tables fed (their raw JSON: no work a row)."""
        if self._catalog_raw is None:
            return table
        return table.replace_schema_metadata({**(table.schema.metadata or {}), CATALOG_KEY: self._catalog_raw})

    def _feed_parts(self, values, lsn=None, seq=None):
        unread = None
        if isinstance(values, pa.Table):
            if lsn is None and "lsn" in values.column_names:
                lsn = values.column("lsn")
            if seq is None and "seq" in values.column_names:
                seq = values.column("seq")
            if PAYLOAD_ERROR in values.column_names:
                unread = values.column(PAYLOAD_ERROR)
            values = values.column("data")
        values = one_array(values)
        self.workers = worker_count(self._workers, payload_bytes(values))
        msgs, after = decode_batch_with_state(values, in_stream=self._in_stream, workers=self.workers)
        if self._in_stream is not None or len(values):
            self._in_stream = after
        if unread is not None:
            msgs = with_payload_errors(msgs, unread)
        n = len(msgs)
        if self._light:
            if self.walk.txns:
                raise ValueError("a light ChangeDecoder decodes one input in one feed")
            self.last_batch = msgs
        lsn_arr = lsn_array(lsn, n)
        if seq is None:
            seq_arr = pa.array(np.arange(self._seq, self._seq + n, dtype=np.int64))
        else:
            seq_arr = (seq.combine_chunks() if isinstance(seq, pa.ChunkedArray) else pa.array(seq)).cast(pa.int64())
        self._seq += n
        if self._from_key is not None and n:
            if seq is None:
                raise ValueError("a resumed ChangeDecoder needs each row's order key (seq)")
            first = pc.min(seq_arr).as_py()
            if first < self._from_key:
                raise ValueError(f"seq {first} is before the checkpoint's from_key {self._from_key}: "
                                 "feed the archive's rows with seq >= from_key")
        self.counts["rows_in"] += n
        tags = tag_codes(msgs.field("type"))
        errors = msgs.field("error")
        if errors.null_count != n:
            self._handle_errors(errors, seq_arr, lsn_arr)
        self.counts["rows_decoded"] += errors.null_count   # null error = decoded
        # in parts of about FEED_ROWS rows, each ending after a commit where it can (the
        # array walk takes runs of whole transactions): the walk's dicts of control
        # messages (~1 KB each) live for one part, not for the whole input
        cuts = [0, n] if self._light else _part_bounds(tags)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            for out in self._process(msgs.slice(a, b - a), tags[a:b], seq_arr.slice(a, b - a),
                                     lsn_arr.slice(a, b - a)):
                if self.window is not None and len(out):
                    inside = in_commit_window(out.column("commit_lsn"), self.window)
                    if not inside.all():
                        self.counts["changes"] -= int((~inside).sum())
                        out = out.filter(pa.array(inside))
                yield out

    def _handle_errors(self, errors, seq_arr, lsn_arr):
        bad = np.flatnonzero(errors.is_valid().to_numpy(zero_copy_only=False))
        shown = bad[:1] if self.options["errors"] == "raise" else bad
        self._report(len(bad), [(int(i), errors[int(i)].as_py()) for i in shown], seq_arr, lsn_arr)

    def _report(self, count, rows, seq_arr, lsn_arr):
        """``count`` archive rows in error, ``rows`` the (row, error text) of them to raise
        (the first, ``errors="raise"``) or to list in :attr:`errors`."""
        self.counts["rows_in_error"] += count
        for i, text in rows:
            rec = dict(seq=seq_arr[i].as_py(), lsn=lsn_arr[i].as_py(), error=text)
            if self.options["errors"] == "raise":
                where = f"seq {rec['seq']}" + (f", lsn {rec['lsn']:X}" if rec["lsn"] is not None else "")
                raise PgoutputDecodeError(f"archive row {where}: {rec['error']}")
            self.errors.append(rec)

    def _process(self, msgs, tags, seq_arr, lsn_arr):
        """The output tables of one part of the input (see :meth:`_emit`)."""
        n = len(msgs)
        is_change = _CHANGE_TAGS[tags]
        is_ctrl = ~is_change & (tags != 0)
        ctrl_idx = np.flatnonzero(is_ctrl)
        seg = np.cumsum(is_ctrl)                     # row i sits after seg[i] control rows
        change_idx = np.flatnonzero(is_change)

        fast = self._plain_transactions(msgs, tags, ctrl_idx, seg, change_idx, seq_arr, lsn_arr) \
            if self._VECTORIZED else None
        self._last_path = "general" if fast is None else "plain"
        if fast is not None:
            yield fast
            return
        seg_counts = np.bincount(seg[change_idx], minlength=len(ctrl_idx) + 1) if n else np.zeros(1, int)
        ctrl = self.walk.control_dicts(msgs, ctrl_idx)
        relmap_start = dict(self.walk.relmap)
        ctrl_keys = seq_arr.to_numpy(zero_copy_only=False)[ctrl_idx]
        try:
            seg_slot, commits, r_versions, _ = self.walk.walk(ctrl, seg_counts, ctrl_keys, start_open=True)
        finally:
            self.counts["replayed_transactions"] = len(self.walk.replayed)
            self.counts["abandoned_transactions"] = len(self.walk.abandoned)

        versions, r_events = row_versions(msgs, tags, r_versions, relmap_start)
        rows = self._change_rows(msgs, tags, change_idx, versions, seq_arr, lsn_arr, r_events)
        row_slot = seg_slot[seg[rows["_src"]]] if len(rows["_src"]) else np.zeros(0, np.int64)
        table = rows["table"]
        lost = row_slot < 0
        if lost.any():            # no transaction open: its Begin lost, or a row sent again after it
            where = np.unique(rows["_src"][lost])
            self.counts["rows_decoded"] -= len(where)
            self._report(len(where), [(int(i), OUTSIDE_TRANSACTION) for i in where], seq_arr, lsn_arr)
            table, row_slot = take_table(table, np.flatnonzero(~lost)), row_slot[~lost]

        yield from self._emit(commits, table, row_slot)

    def _plain_transactions(self, msgs, tags, ctrl_idx, seg, change_idx, seq_arr, lsn_arr):
        """The common chunk, vectorized: only plain transactions (Begin … Commit, never
        interleaved, none open before or after), Relation/Type/Message/keepalive/Origin
        control rows, every change inside a transaction — walked by the plan's array walk
        (``chunks.plain_walk``). Then commit order is arrival order, and the walk and the
        emit need no Python per transaction (at 100 changes per transaction they cost more
        than decoding the messages). Returns None for any other chunk, which takes the
        general path (same result; tests compare them)."""
        walk = self.walk
        if walk.ctx >= 0 or walk.txns or walk.in_stream or not self.options["skip_empty_xacts"] \
                or not len(change_idx):
            return None
        relmap_start = dict(walk.relmap)
        w = plain_walk(walk, msgs, tags, ctrl_idx, False, accept=_PLAIN_CTRL, whole=True, row_segs=seg[change_idx],
                       fields=DEFINITION_FIELDS)
        if w is None:
            return None
        walk.begun, walk.open_at_start = True, False   # (as the walk's Begin would: a row is in one)
        versions, r_events = row_versions(msgs, tags, w.r_versions, relmap_start)
        rows = self._change_rows(msgs, tags, change_idx, versions, seq_arr, lsn_arr, r_events, msg_xid=False)
        table = rows["table"]
        schema = self.output_schema
        if not len(table):
            return schema.empty_table()
        # rows stay in arrival order, which is commit order here
        rank = w.seg_slot[seg[rows["_src"]]] - int(w.slots[0])
        table = with_commits(table, rank, w.xid, w.lsn, w.ts.cast(_COMMIT_TS), w.origin)
        out = table.drop_columns(["msg_xid"]).select(schema.names).cast(schema)
        self.counts["changes"] += len(out)
        return out

    def _emit(self, commits, table: pa.Table, row_slot: np.ndarray):
        """Rows of the transactions committed in this chunk, in commit order, with their
        commit facts, as tables (several when a transaction spilled); rows of
        transactions still open are kept in the state.

        Vectorized: each row gets the rank of its transaction's commit (-1: not
        committed here), one stable sort by (rank, seq) orders them — rows held from
        earlier chunks come first within a transaction, as their seq is smaller."""
        n_commits = len(commits)
        rank_of = {slot: k for k, (slot, _) in enumerate(commits)}
        slots = np.fromiter(rank_of.keys(), dtype=np.int64, count=n_commits)
        ranks = np.fromiter(rank_of.values(), dtype=np.int64, count=n_commits)
        row_rank = np.full(len(row_slot), -1, dtype=np.int64)
        if n_commits and len(row_slot):
            lo = int(min(slots.min(), row_slot.max()))
            hi = int(max(slots.max(), row_slot.max()))
            if hi - lo < (1 << 20):
                # slots of one chunk are nearby integers: a lookup table, not a search
                lut = np.full(hi - lo + 1, -1, dtype=np.int64)
                lut[slots - lo] = ranks
                inside = (row_slot >= lo) & (row_slot <= hi)
                row_rank[inside] = lut[row_slot[inside] - lo]
            else:
                # far-apart slots (a transaction open since long ago): search instead
                o = np.argsort(slots)
                pos = np.minimum(np.searchsorted(slots[o], row_slot), n_commits - 1)
                hit = slots[o][pos] == row_slot
                row_rank[hit] = ranks[o][pos[hit]]
        # open transactions keep their rows of this chunk
        open_rows = row_rank < 0
        if open_rows.any():
            oslots = row_slot[open_rows]
            oidx = np.flatnonzero(open_rows)
            order = np.argsort(oslots, kind="stable")
            oslots, oidx = oslots[order], oidx[order]
            bounds = np.flatnonzero(np.diff(oslots)) + 1
            for part_slots, part_idx in zip(np.split(oslots, bounds), np.split(oidx, bounds), strict=True):
                txn = self.walk.txns.get(int(part_slots[0]))
                if txn is not None:   # None: its transaction was aborted in this chunk
                    self._hold(txn, take_table(table, part_idx))
        txns = [self.walk.txns.pop(slot) for slot, _ in commits]
        facts = [m for _, m in commits]
        self._within_budget()
        cur = np.flatnonzero(row_rank >= 0)
        # commits given together, but a transaction with spilled rows alone, one held
        # piece at a time (a piece is the transaction's rows of one chunk): so much is
        # read back from disk at once, however large the transaction
        spilled = {k for k, t in enumerate(txns) if any(isinstance(p, str) for p in t.pending)}
        bounds = sorted({0, n_commits} | spilled | {k + 1 for k in spilled})
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            mine = cur if lo == 0 and hi == n_commits else cur[(row_rank[cur] >= lo) & (row_rank[cur] < hi)]
            # the common case, every row committed here, or all but those of a transaction
            # open at the end (one run of rows): no copy
            here = table if len(mine) == len(table) else take_rising(table, mine)
            if lo in spilled:
                given = 0
                for p in txns[lo].pending:
                    p = self._load(p)
                    out = self._finish([p], [np.full(len(p), lo, np.int64)], txns, facts, ())
                    given += len(out)
                    yield out
                yield self._finish([here], [row_rank[mine]], txns, facts, () if given else (lo,))
            else:
                held = [(k, p) for k in range(lo, hi) for p in txns[k].pending]
                pieces = [self._load(p) for _, p in held]
                ranks = [np.full(len(p), k, np.int64) for (k, _), p in zip(held, pieces, strict=True)]
                yield self._finish(pieces + [here], ranks + [row_rank[mine]], txns, facts, range(lo, hi))

    def _finish(self, pieces, piece_rank, txns, facts, committed) -> pa.Table:
        """Output rows of ``pieces`` (pending rows) whose ``piece_rank`` index ``txns`` and
        their commit ``facts``: a subtransaction's rows it aborted dropped, a 'C' row for
        each of ``committed`` that has none (when empty transactions are kept), in
        (commit, seq) order, with their commit columns."""
        schema = self.output_schema
        rows = pa.concat_tables(pieces) if pieces else self._pending_schema.empty_table()
        rank = np.concatenate(piece_rank) if piece_rank else np.zeros(0, np.int64)
        # subtransactions aborted inside streamed transactions
        drop = np.zeros(len(rows), dtype=bool)
        msg_xid = None
        for k, txn in enumerate(txns):      # (few have any: not a search of every row's rank)
            if txn.aborted_subxids:
                if msg_xid is None:
                    msg_xid = rows.column("msg_xid").to_numpy(zero_copy_only=False)
                drop |= (rank == k) & np.isin(msg_xid, np.fromiter(txn.aborted_subxids, np.float64))
        if drop.any():
            keep = ~drop
            rows, rank = rows.filter(pa.array(keep)), rank[keep]
        # empty transactions: one 'C' row each when asked for
        if not self.options["skip_empty_xacts"] and len(committed):
            empty = np.setdiff1d(np.asarray(committed, np.int64), rank)
            if len(empty):
                markers = pa.Table.from_pylist([dict(op="C", _src=-1, _ver=-1)] * len(empty),
                                               schema=self._pending_schema)
                rows = pa.concat_tables([rows, markers])
                rank = np.concatenate([rank, empty])
        if not len(rows):
            return schema.empty_table()
        seq = rows.column("seq").fill_null(-1).to_numpy(zero_copy_only=False)
        order = commit_order(rank, seq)
        if order is not None:
            rows = take_table(rows, order)
            rank = rank[order]
        xids = [t.xid if t.xid is not None else m.get("xid") for t, m in zip(txns, facts, strict=True)]
        rows = with_commits(rows, rank, pa.array(xids, pa.uint32()),
                            pa.array([m.get("commit_lsn") for m in facts], pa.uint64()),
                            pa.array([m.get("commit_ts") for m in facts], _COMMIT_TS),
                            pa.array([t.origin for t in txns], pa.string()))
        out = rows.drop_columns(["msg_xid"]).select(schema.names).cast(schema)
        self.counts["changes"] += len(out)
        return out

    def _change_rows(self, msgs, tags, change_idx, versions, seq_arr, lsn_arr, r_events, msg_xid=True):
        """Pending-row table of this chunk's changes (Truncates expanded per relation).
        ``msg_xid`` False: light rows without the message xids (only aborted streamed
        subtransactions need them)."""
        idx = change_idx
        ctags = tags[idx]
        t_mask = ctags == ord("T")
        if t_mask.any():
            iud, t_rows = idx[~t_mask], idx[t_mask]
        else:                     # (change rows are I/U/D/T)
            iud, t_rows = idx, idx[:0]
        take = pa.array(iud, pa.int64())
        ver = versions[iud]
        bad, wrong = corrupt_rows(msgs, iud, ver, self.walk.widths())
        if wrong:                 # corrupt rows: errors, not changes
            self.counts["rows_decoded"] -= len(wrong)
            self._report(len(wrong), wrong, seq_arr, lsn_arr)
            iud, ver = iud[~bad], ver[~bad]
            take = pa.array(iud, pa.int64())
        if self._light:
            cols = light_change_columns(msgs, tags, iud, ver, seq_arr.to_numpy(zero_copy_only=False), lsn_arr,
                                        msg_xid)
        else:
            cols = change_columns(msgs, iud, ver, self.walk.version_table(), seq_arr.take(take), lsn_arr)
            cols["msg_xid"] = msgs.field("xid").take(take)
        table = pa.table(cols, schema=self._pending_schema)
        src = iud
        if len(t_rows):
            cols, at, ver = truncate_columns(msgs, t_rows, self.walk.version_table(),
                                             lambda rids, rows: newest_versions(r_events, rids, rows), seq_arr,
                                             lsn_arr)
            xid = msgs.field("xid").take(pa.array(at, pa.int64()))
            cols.update(msg_xid=xid.fill_null(0) if self._light else xid, _src=pa.array(at), _ver=pa.array(ver))
            tt = pa.table({f.name: cols[f.name] for f in self._pending_schema}).cast(self._pending_schema)
            table = pa.concat_tables([table, tt])
            src = np.concatenate([iud, at.astype(iud.dtype)])
            order = np.argsort(src, kind="stable")
            table = take_table(table, order)
            src = src[order]
        if self.patterns is not None and len(table) and self._light:
            # light rows: decided once per relation version
            ok = [v for v, d in enumerate(self.walk.versions) if table_selected(self.patterns, d["schema"], d["table"])]
            mask = np.isin(table.column("_ver").to_numpy(), np.asarray(ok, np.int64))
            table = table.filter(pa.array(mask))
            src = src[mask]
        elif self.patterns is not None and len(table):
            # decide once per distinct schema.table, then filter with a vector is_in
            key = pc.binary_join_element_wise(pc.fill_null(table.column("schema"), ""),
                                              pc.fill_null(table.column("table"), ""), "\x00")
            chosen = [k for k in pc.unique(key).to_pylist()
                      if table_selected(self.patterns, *k.split("\x00", 1))]
            mask = pc.is_in(key, value_set=pa.array(chosen, pa.string()))
            table = table.filter(mask)
            src = src[mask.to_numpy(zero_copy_only=False)]
        return {"table": table, "_src": src}

    # ------------------------------------------------------------------ transactions
    def _hold(self, txn: Txn, rows: pa.Table):
        txn.pending.append(rows)
        txn.pending_bytes += rows.nbytes
        if txn.pending_bytes > self.options["max_txn_in_memory_mb"] * (1 << 20):
            self._spill(txn)

    def _within_budget(self):
        """The decoder's budget over the rows of every open transaction: past it the
        largest spill first. Once per chunk, after its commits left the open set."""
        budget = self.options["max_memory_mb"] * (1 << 20)
        held = sum(t.pending_bytes for t in self.walk.txns.values())
        if held > budget:
            for t in sorted(self.walk.txns.values(), key=lambda t: t.pending_bytes, reverse=True):
                if held <= budget:
                    break
                held -= t.pending_bytes
                self._spill(t)

    def _spill(self, txn: Txn):
        spill_dir = self.options["spill_dir"] or tempfile.gettempdir()
        new = []
        for p in txn.pending:
            if isinstance(p, pa.Table):
                fd, path = tempfile.mkstemp(prefix="pgoutput_txn_", suffix=".arrow", dir=spill_dir)
                os.close(fd)
                with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, p.schema) as w:
                    w.write_table(p)
                p = path
            new.append(p)
        txn.pending = new
        txn.pending_bytes = 0

    @staticmethod
    def _load(p):
        if isinstance(p, str):
            with pa.OSFile(p, "rb") as f:
                t = pa.ipc.open_file(f).read_all()
            os.unlink(p)
            return t
        return p


_ENDS = np.frombuffer(END_TAGS.encode(), np.uint8)


def _part_bounds(tags: np.ndarray) -> list:
    """Where :meth:`ChangeDecoder.feed` cuts its input: every FEED_ROWS rows at most,
    after the last transaction end before that when there is one."""
    n = len(tags)
    if n <= FEED_ROWS:
        return [0, n]
    ends = np.flatnonzero(np.isin(tags, _ENDS)) + 1
    cuts = [0]
    while n - cuts[-1] > FEED_ROWS:
        k = int(np.searchsorted(ends, cuts[-1] + FEED_ROWS, side="right")) - 1
        cuts.append(int(ends[k]) if k >= 0 and ends[k] > cuts[-1] else cuts[-1] + FEED_ROWS)
    return cuts + [n]


class LightChangeDecoder(ChangeDecoder):
    """A :class:`ChangeDecoder` whose rows say where their values are instead of holding
    them: the commit columns, ``_src`` (the message's row in :attr:`last_batch`, the
    decoded messages of the one input it is fed) and ``_ver`` (the relation version,
    an index into ``walk.versions``; -1 unknown). ``tables.decode_table_changes``
    converts a table's typed columns straight from the batch's tuples with them."""

    LIGHT = True
