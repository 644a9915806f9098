"""From messages to changes: the ``ChangeDecoder`` and ``decode_changes``.

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
(``_changes.relation_versions``); the transaction of every row comes from the segment
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

import bisect
import copy
import fnmatch
import hashlib
import os
import tempfile
from array import array
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _changes
from ._builders import nulls
from ._gather import take_lists, take_table
from .batch import decode_batch_with_state
from .checkpoint import Checkpoint
from .errors import ArchiveOrderError, PgoutputDecodeError
from .messages import format_lsn, parse_lsn
from .schema import CHANGE_FIELDS, CHANGE_OPTIONAL, CHANGE_SCHEMA, RELATION_COLUMNS_TYPE

__all__ = ["ChangeDecoder", "decode_changes", "parse_table_list", "relation_fingerprint"]

_CHANGE_TAGS = np.zeros(256, dtype=bool)
for _t in b"IUDT":
    _CHANGE_TAGS[_t] = True

# Columns of pending (not yet committed) change rows: the change schema without the
# transaction's commit facts, plus the message's own (sub)transaction xid.
_PENDING_FIELDS = [f for f in CHANGE_FIELDS if f.name not in ("xid", "commit_lsn", "commit_ts", "origin")]
_PENDING_SCHEMA = pa.schema(_PENDING_FIELDS + [pa.field("msg_xid", pa.uint32())])
# Light rows (``ChangeDecoder(_light=True)``, for ``tables.decode_table_changes``): the
# commit columns only, no values and no relation facts, but where they are — ``_src``,
# the message's row in the decoded batch, and ``_ver``, the relation version (index into
# ``_versions``, -1 unknown) — so the typed columns are converted straight from the
# batch's tuple children. ``msg_xid`` is 0 where the message carried none.
_LIGHT_KEEP = ("op", "seq", "lsn", "xid", "commit_lsn", "commit_ts", "origin")
_LIGHT_EXTRA = [pa.field("_src", pa.int64()), pa.field("_ver", pa.int64())]
_LIGHT_PENDING_SCHEMA = pa.schema([f for f in _PENDING_SCHEMA if f.name in _LIGHT_KEEP or f.name == "msg_xid"]
                                  + _LIGHT_EXTRA)
_VERSION_SCHEMA = pa.schema([
    pa.field("schema", pa.string()), pa.field("table", pa.string()),
    pa.field("relation_id", pa.uint32()), pa.field("columns", RELATION_COLUMNS_TYPE),
    pa.field("relation_version", pa.uint64()),
])


def relation_fingerprint(rel: dict) -> int:
    """64-bit content hash of a Relation definition (the ``relation_version`` column)."""
    cols = ";".join(f"{c['name']}\x00{c['type_oid']}\x00{c['type_modifier']}\x00{c['flags']}"
                    for c in rel["columns"] or ())
    text = f"{rel['schema']}\x01{rel['table']}\x01{rel['relation_id']}\x01{rel['replica_identity']}\x01{cols}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def parse_table_list(spec):
    """openGauss white-table-list syntax (``public.t1,*.t3,my_schema.*``) to (schema, table)
    glob pairs; ``None``/empty means every table. Identifiers with a '.' may be quoted."""
    if spec is None:
        return None
    items = spec if isinstance(spec, (list, tuple)) else [s for s in spec.split(",")]
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if item.startswith('"'):
            end = item.index('"', 1)
            sch, rest = item[1:end], item[end + 1:]
            tbl = rest[1:] if rest.startswith(".") else "*"
        elif "." in item:
            sch, tbl = item.split(".", 1)
        else:
            sch, tbl = "*", item
        out.append((sch, tbl.strip('"')))
    return out or None


def _lsn_bound(v):
    """An LSN given as an int (NumPy's too), a ``Decimal`` (Spark's ``max(commit_lsn)``),
    decimal digits or ``X/Y`` text."""
    if v is None:
        return None
    if isinstance(v, str):
        return int(v) if v.strip().isdigit() else parse_lsn(v.strip())
    if isinstance(v, float) or int(v) != v:
        raise ValueError(f"not an LSN: {v!r}")
    return int(v)


def commit_window(after_lsn=None, until_lsn=None):
    """The commit-LSN window ``(after_lsn, until_lsn]`` (ints, Decimals or ``X/Y`` text;
    None: an open end) as a pair of ints or None, or None when both ends are open: the
    transactions whose commit LSN lies in it are the ones given."""
    after, until = _lsn_bound(after_lsn), _lsn_bound(until_lsn)
    if after is not None and until is not None and until < after:
        raise ValueError(f"until_lsn {until_lsn} is before after_lsn {after_lsn}")
    return None if after is None and until is None else (after, until)


def intersect_windows(w0, w1):
    """The intersection of two commit windows (None: unbounded)."""
    (a0, u0), (a1, u1) = w0 or (None, None), w1 or (None, None)
    a = max((v for v in (a0, a1) if v is not None), default=None)
    u = min((v for v in (u0, u1) if v is not None), default=None)
    return None if a is None and u is None else (a, u)


def in_commit_window(commit_lsn, window) -> np.ndarray:
    """Per commit LSN (uint64 Arrow array, chunked or not; null: outside): inside ``window``."""
    lsn = commit_lsn.combine_chunks() if isinstance(commit_lsn, pa.ChunkedArray) else commit_lsn
    inside = lsn.is_valid().to_numpy(zero_copy_only=False)
    v = pc.fill_null(lsn, 0).to_numpy(zero_copy_only=False)
    after, until = window
    if after is not None:
        inside &= v > np.uint64(after)
    if until is not None:
        inside &= v <= np.uint64(until)
    return inside


def _table_selected(patterns, schema, table):
    if patterns is None:
        return True
    return any(fnmatch.fnmatchcase(schema, s) and fnmatch.fnmatchcase(table, t) for s, t in patterns)


@dataclass
class _Txn:
    xid: int | None                     # None: its Begin came before the archive started
    kind: str = "tx"                    # "tx", "stream", "prepared"
    origin: str | None = None
    gid: str | None = None
    aborted_subxids: set = field(default_factory=set)
    pending: list = field(default_factory=list)   # pa.Table pieces or spill-file paths
    pending_bytes: int = 0


def _tag_codes(type_col: pa.Array) -> np.ndarray:
    """The message tag byte of every row (0 for an error row), without a Python object
    per row: the ``type`` column is a 1-character string, so its data buffer holds it."""
    n = len(type_col)
    codes = np.zeros(n, dtype=np.uint8)
    if n == 0 or type_col.null_count == n:
        return codes
    offs = np.frombuffer(type_col.buffers()[1], dtype=np.int32, count=type_col.offset + n + 1)[type_col.offset:]
    data = np.frombuffer(type_col.buffers()[2], dtype=np.uint8)
    if not type_col.null_count:
        if offs[n] - offs[0] == n:    # one byte per row (no error row): the data itself
            return data[offs[0]:offs[0] + n]
        return data[offs[:-1]]
    valid = type_col.is_valid().to_numpy(zero_copy_only=False)
    starts = offs[:-1][valid]
    codes[valid] = data[starts]
    return codes


# Fields the transaction walk reads from every control message; Relation and Type
# messages (rare) are read whole.
_WALK_FIELDS = ("type", "xid", "subxid", "commit_lsn", "commit_ts", "origin_name", "gid", "first_segment")


def control_rows(msgs, ctrl_idx: np.ndarray) -> list[dict]:
    """The control messages ``ctrl_idx`` of a decoded batch as dicts for ``_walk``.

    Why not ``msgs.take(...).to_pylist()``: that builds a Python object for every one
    of the ~40 message fields of every row (18 ms for 4 000 Begin/Commit pairs); the
    walk reads eight, so those are taken column by column and R/Y rows whole. Values are
    Python objects as ``to_pylist`` gives them, except ``commit_ts``: microseconds since
    1970 (int)."""
    if not len(ctrl_idx):
        return []
    take = pa.array(ctrl_idx, pa.int64())
    # commit_ts as integer µs: a timezone-aware datetime per row costs 2.5 µs; the
    # commit-fact arrays are built from the integers with the timestamp type
    cols = [(msgs.field(f).take(take).cast(pa.int64()) if f == "commit_ts" else msgs.field(f).take(take)).to_pylist()
            for f in _WALK_FIELDS]
    rows = [dict(zip(_WALK_FIELDS, vals, strict=True)) for vals in zip(*cols, strict=True)]
    whole = [k for k, t in enumerate(cols[0]) if t in ("R", "Y")]
    if whole:
        full = rows_at(msgs, ctrl_idx[whole])
        for k, m in zip(whole, full, strict=True):
            rows[k] = m
    return rows


def rows_at(msgs, idx) -> list[dict]:
    """Messages ``idx`` of a decoded batch as dicts (Relation, Type, Truncate rows: few).
    A take of the ~40-field message struct costs 0.13 ms however few rows it takes; a
    slice costs nothing, so a few rows are read one slice each."""
    if len(idx) <= 8:
        return [msgs.slice(int(i), 1).to_pylist()[0] for i in idx]
    return msgs.take(pa.array(idx, pa.int64())).to_pylist()


def change_columns(msgs, idx: np.ndarray, ver: np.ndarray, versions: pa.Table, seq: pa.Array,
                   lsn: pa.Array) -> dict:
    """The change-row columns of Insert/Update/Delete messages ``idx`` of a decoded batch,
    their relation versions ``ver`` indexing the ``versions`` table (schema, table,
    columns, relation_version) — shared by the sequential decoder and the plan."""
    take = pa.array(idx, pa.int64())
    vtake = pa.array(ver, pa.int64())
    return {
        "op": msgs.field("type").take(take),
        "seq": seq,
        "lsn": _lsn_at(lsn, idx),
        "schema": versions.column("schema").take(vtake),
        "table": versions.column("table").take(vtake),
        "relation_id": msgs.field("relation_id").take(take),
        "columns": take_lists(versions.column("columns"), ver),
        "relation_version": versions.column("relation_version").take(vtake),
        "before_kind": msgs.field("old_kind").take(take),
        "before": take_lists(msgs.field("old_tuple"), idx),
        "after": take_lists(msgs.field("new_tuple"), idx),
        "truncate_options": nulls(len(idx), pa.uint8()),
    }


def _one_char_strings(codes: np.ndarray) -> pa.Array:
    """Tag bytes as a string array of one character each (no take of the type column)."""
    n = len(codes)
    offsets = np.arange(n + 1, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(np.ascontiguousarray(codes, dtype=np.uint8))])


def _lsn_at(lsn: pa.Array, idx: np.ndarray) -> pa.Array:
    """The archive lsn of rows ``idx`` (an all-null column stays on the shared zero buffer)."""
    return nulls(len(idx), lsn.type) if lsn.null_count == len(lsn) else lsn.take(pa.array(idx, pa.int64()))


def light_change_columns(msgs, tags: np.ndarray, idx: np.ndarray, ver: np.ndarray, seq: np.ndarray,
                         lsn: pa.Array, msg_xid: bool = True) -> dict:
    """Light rows (see ``_LIGHT_PENDING_SCHEMA``) of messages ``idx`` (``tags``: every
    message's tag byte): NumPy gathers of the numeric columns (Arrow's take allocated
    fresh pages, 1-4 ms a column)."""
    xid = msgs.field("xid")
    xid_np = _to_numpy_u(xid, np.uint32) if msg_xid and xid.null_count != len(xid) else None
    return {
        "op": _one_char_strings(tags[idx]),
        "seq": pa.array(seq[idx]),
        "lsn": _lsn_at(lsn, idx),
        "msg_xid": pa.array(xid_np[idx]) if xid_np is not None else pa.array(np.zeros(len(idx), np.uint32)),
        "_src": pa.array(idx.astype(np.int64, copy=False)),
        "_ver": pa.array(ver.astype(np.int64, copy=False)),
    }


def truncate_row(rel: dict, relation_id: int, seq, lsn, options: int, **extra) -> dict:
    """The change row of one relation of a Truncate message (``rel``: its Relation
    definition at that point, {} if unknown) — shared by ChangeDecoder and ControlPlan."""
    return dict(op="T", seq=seq, lsn=lsn, schema=rel.get("schema"), table=rel.get("table"),
                relation_id=relation_id, columns=rel.get("columns"),
                relation_version=relation_fingerprint(rel) if rel else None,
                before_kind=None, before=None, after=None, truncate_options=options, **extra)


# Control rows the vectorized path handles: Begin, Commit, Relation, Type, logical
# Message, keepalive, Origin.
_PLAIN_CTRL = np.zeros(256, dtype=bool)
for _t in b"BCRYMkO":
    _PLAIN_CTRL[_t] = True


def _spread(per_txn: pa.Array, rank: np.ndarray) -> pa.Array:
    """A per-transaction column to the rows (``rank``: transaction of each row), in NumPy
    when it has no nulls (Arrow's take allocated fresh pages: 2 ms per column)."""
    if per_txn.null_count or not len(per_txn):
        return per_txn.take(pa.array(rank, pa.int64()))
    typ = per_txn.type
    width = typ.bit_width // 8
    # the values buffer viewed as integers of the same width, gathered, handed back
    vals = np.frombuffer(per_txn.buffers()[1], dtype=f"<u{width}", count=per_txn.offset + len(per_txn))
    return pa.Array.from_buffers(typ, len(rank), [None, pa.py_buffer(vals[per_txn.offset:][rank])])


def _row_versions(msgs, tags, r_versions: list, relmap_start: dict):
    """Relation version of every row (one C walk from the map as it was before this
    chunk's Relations: ``r_versions`` are the versions its 'R' rows defined, in order),
    and the Relation events Truncates look up (positions, relation ids, versions, start map)."""
    relids = _values_u32(msgs.field("relation_id"))
    r_ver = np.asarray(r_versions, dtype=np.int64)
    # (relation_versions turns the map it is given into the map after the chunk: a copy,
    # so Truncates look up the map as it was before the chunk)
    versions = _changes.relation_versions(np.ascontiguousarray(tags), np.ascontiguousarray(relids), r_ver,
                                          dict(relmap_start))
    r_pos = np.flatnonzero(tags == ord("R"))
    return versions, (r_pos, relids[r_pos], r_ver, relmap_start)


def _values_u32(col: pa.Array) -> np.ndarray:
    """A uint32 column's values buffer, viewed: its null slots hold whatever the builder
    left there, so only rows known valid may be read (the relation ids of R/I/U/D rows;
    a fill_null copy cost 0.13 ms on 200 k rows)."""
    if col.null_count == len(col) or col.buffers()[1] is None:
        return np.zeros(len(col), np.uint32)
    return np.frombuffer(col.buffers()[1], np.uint32, count=col.offset + len(col))[col.offset:]


def _to_numpy_u(col: pa.Array, dtype) -> np.ndarray:
    return col.fill_null(0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _lsn_array(lsn, n):
    if lsn is None:
        return nulls(n, pa.uint64())
    if isinstance(lsn, pa.ChunkedArray):
        lsn = lsn.combine_chunks()
    if not isinstance(lsn, pa.Array):
        lsn = pa.array(lsn)
    if pa.types.is_string(lsn.type) or pa.types.is_large_string(lsn.type):
        return pa.array([None if v is None else parse_lsn(v) for v in lsn.to_pylist()], pa.uint64())
    return lsn.cast(pa.uint64())


class ChangeDecoder:
    """Feed messages in arrival order, get committed row changes.

    Options (client-side twins of openGauss's decoding options):
    ``tables`` — white-table-list (``"public.t1,*.t3,my_schema.*"``), default all;
    ``skip_empty_xacts`` — when False, a committed transaction with no (selected) change
    yields one ``op='C'`` row carrying its commit facts; ``include_xids``,
    ``include_timestamp``, ``include_origin`` — keep the ``xid`` / ``commit_ts`` /
    ``origin`` columns; ``max_txn_in_memory_mb`` — an open transaction's rows spill to
    Arrow IPC files in ``spill_dir`` past this size; ``errors`` — ``"raise"`` (default:
    a malformed payload raises ``PgoutputDecodeError`` naming its seq, lsn and byte
    offset) or ``"collect"`` (the row is skipped and listed in :attr:`errors`);
    ``after_lsn``, ``until_lsn`` — give only the transactions whose commit LSN lies in
    ``(after_lsn, until_lsn]`` (ints or ``X/Y`` text): the changes of an incremental run
    after the last commit the previous run gave, or a replay up to a point. The same
    rows as filtering ``commit_lsn``; the parallel decoders (``ControlPlan``, Spark's
    ``decode_changes``) skip the others' rows before decoding them. ``resume`` — a
    :class:`~pgoutput_codec.checkpoint.Checkpoint` of the run before: its Relation and
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
    the run before gave them.
    """

    _VECTORIZED = True     # tests turn the plain-transaction path off to compare

    def __init__(self, *, tables=None, skip_empty_xacts=True, include_xids=True,
                 include_timestamp=True, include_origin=True, max_txn_in_memory_mb=256,
                 spill_dir=None, errors="raise", registry=None, after_lsn=None, until_lsn=None,
                 resume=None, replays="drop", _light=False):
        if errors not in ("raise", "collect"):
            raise ValueError("errors must be 'raise' or 'collect'")
        if replays not in ("drop", "keep"):
            raise ValueError(f"replays must be 'drop' or 'keep', not {replays!r}")
        self.options = dict(tables=tables, skip_empty_xacts=skip_empty_xacts, include_xids=include_xids,
                            include_timestamp=include_timestamp, include_origin=include_origin,
                            max_txn_in_memory_mb=max_txn_in_memory_mb, spill_dir=spill_dir, errors=errors,
                            after_lsn=after_lsn, until_lsn=until_lsn,
                            resume=None if resume is None else Checkpoint.of(resume), replays=replays)
        self._window = commit_window(after_lsn, until_lsn)
        self._patterns = parse_table_list(tables)
        self._in_stream = False
        self._walk_stream = False   # stream state as the control walk sees it
        self._seq = 0
        self._versions: list[dict] = []          # relation definitions, index = version
        self._relmap: dict[int, int] = {}        # relation_id -> current version
        self._types: list[tuple] = []            # Type messages seen (type_oid, namespace, name)
        self._ctx = -1                           # slot of the transaction rows now belong to
        self._txns: dict[int, _Txn] = {}
        self._streams: dict[int, int] = {}       # streamed top-level xid -> slot
        self._prepared: dict[str, int] = {}      # gid -> slot
        self._next_slot = 0
        self.errors: list[dict] = []
        self.counts = {"rows_in": 0, "rows_decoded": 0, "rows_in_error": 0, "changes": 0,
                       "replayed_transactions": 0}
        self._committed = array("Q")   # commit LSNs taken, rising (replays="drop")
        self._floor = None             # a checkpoint's after_lsn: commits up to it not checked
        self.replayed: list[dict] = []   # the replays dropped: xid, commit_lsn, seq
        self.registry = registry
        self._light = _light
        self._pending_schema = _LIGHT_PENDING_SCHEMA if _light else _PENDING_SCHEMA
        self.last_batch = None     # light mode: the decoded messages _src points into
        self._from_key = None
        self._seeded = []          # (relation_id, version) taught by a checkpoint
        if resume is not None:   # (kept in options: from_state resumes a resumed decoder alike)
            self._resume(self.options["resume"])

    def _resume(self, cp: Checkpoint):
        """Start where a checkpoint says: its definitions, stream state and commit LSN."""
        self._from_key = cp.from_key
        self._floor = cp.after_lsn
        self._window = intersect_windows(self._window, commit_window(cp.after_lsn))
        self._in_stream = self._walk_stream = cp.in_stream
        for oid, ns, name in cp.types:
            self._type(dict(type_oid=oid, namespace=ns, type_name=name))
        for rel in cp.relations:
            v = self._add_version(copy.deepcopy(rel))
            self._relmap[rel["relation_id"]] = v
            self._seeded.append((rel["relation_id"], v))

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> dict:
        """A picklable snapshot; :meth:`from_state` resumes from it exactly."""
        txns = {}
        for slot, t in self._txns.items():
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
        return {
            "version": 1, "options": dict(self.options), "in_stream": self._in_stream, "seq": self._seq,
            "versions": copy.deepcopy(self._versions), "relmap": dict(self._relmap),
            "types": list(self._types), "ctx": self._ctx, "txns": txns, "streams": dict(self._streams),
            "prepared": dict(self._prepared), "next_slot": self._next_slot,
            "committed": self._committed.tobytes(), "replayed": copy.deepcopy(self.replayed),
        }

    @classmethod
    def from_state(cls, state: dict, **overrides) -> "ChangeDecoder":
        opts = dict(state["options"])
        opts.update(overrides)
        self = cls(**opts)
        self._in_stream = state["in_stream"]
        self._seq = state["seq"]
        self._versions = copy.deepcopy(state["versions"])
        self._relmap = {int(k): v for k, v in state["relmap"].items()}
        self._types = list(state["types"])
        self._ctx = state["ctx"]
        for slot, t in state["txns"].items():
            pieces = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in t["pending"]]
            self._txns[int(slot)] = _Txn(xid=t["xid"], kind=t["kind"], origin=t["origin"], gid=t["gid"],
                                         aborted_subxids=set(t["aborted_subxids"]), pending=pieces,
                                         pending_bytes=sum(p.nbytes for p in pieces))
        self._streams = {int(k): v for k, v in state["streams"].items()}
        self._prepared = dict(state["prepared"])
        self._next_slot = state["next_slot"]
        self._committed = array("Q")
        self._committed.frombytes(state.get("committed", b""))
        self.replayed = copy.deepcopy(state.get("replayed", []))
        self.counts["replayed_transactions"] = len(self.replayed)
        return self

    @property
    def open_transactions(self) -> list[dict]:
        """Transactions begun but not (yet) committed or aborted."""
        return [dict(slot=s, xid=t.xid, kind=t.kind, gid=t.gid,
                     rows=sum(len(p) if isinstance(p, pa.Table) else 0 for p in t.pending))
                for s, t in self._txns.items()]

    @property
    def relations(self) -> dict:
        """relation_id -> the newest Relation definition seen."""
        return {rid: self._versions[v] for rid, v in self._relmap.items()}

    @property
    def output_schema(self) -> pa.Schema:
        drop = {col for opt, col in CHANGE_OPTIONAL.items() if not self.options[opt]}
        if self._light:
            return pa.schema([f for f in CHANGE_FIELDS if f.name not in drop and f.name in _LIGHT_KEEP] + _LIGHT_EXTRA)
        return pa.schema([f for f in CHANGE_FIELDS if f.name not in drop])

    # ------------------------------------------------------------------ feeding
    def _new_slot(self, txn: _Txn) -> int:
        slot = self._next_slot
        self._next_slot += 1
        self._txns[slot] = txn
        return slot

    def _add_version(self, rel: dict) -> int:
        cur = self._relmap.get(rel["relation_id"])
        if cur is not None and self._versions[cur] == rel:
            return cur     # streamed transactions resend unchanged Relations: keep one version
        self._versions.append(rel)
        return len(self._versions) - 1

    def feed(self, values, lsn=None, seq=None) -> pa.Table:
        """Decode the next payloads (arrival order) and return the changes of the
        transactions that committed in them. ``values``: binary array/list of payloads,
        or a table with a ``data`` column (and optional ``lsn``, ``seq`` columns)."""
        if isinstance(values, pa.Table):
            if lsn is None and "lsn" in values.column_names:
                lsn = values.column("lsn")
            if seq is None and "seq" in values.column_names:
                seq = values.column("seq")
            values = values.column("data")
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        msgs, self._in_stream = decode_batch_with_state(values, in_stream=self._in_stream)
        n = len(msgs)
        if self._light:
            if self._txns:
                raise ValueError("a light ChangeDecoder decodes one input in one feed")
            self.last_batch = msgs
        lsn_arr = _lsn_array(lsn, n)
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
        tags = _tag_codes(msgs.field("type"))
        errors = msgs.field("error")
        if errors.null_count != n:
            self._handle_errors(errors, seq_arr, lsn_arr)
        self.counts["rows_decoded"] += errors.null_count   # null error = decoded
        out = self._process(msgs, tags, seq_arr, lsn_arr)
        if self._window is not None and len(out):
            inside = in_commit_window(out.column("commit_lsn"), self._window)
            if not inside.all():
                self.counts["changes"] -= int((~inside).sum())
                out = out.filter(pa.array(inside))
        return out

    def _handle_errors(self, errors, seq_arr, lsn_arr):
        bad = np.flatnonzero(errors.is_valid().to_numpy(zero_copy_only=False))
        self.counts["rows_in_error"] += len(bad)
        for i in bad[: 1 if self.options["errors"] == "raise" else len(bad)]:
            rec = dict(seq=seq_arr[int(i)].as_py(), lsn=lsn_arr[int(i)].as_py(), error=errors[int(i)].as_py())
            if self.options["errors"] == "raise":
                where = f"seq {rec['seq']}" + (f", lsn {rec['lsn']:X}" if rec["lsn"] is not None else "")
                raise PgoutputDecodeError(f"archive row {where}: {rec['error']}")
            self.errors.append(rec)

    def _process(self, msgs, tags, seq_arr, lsn_arr) -> pa.Table:
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
            return fast
        seg_counts = np.bincount(seg[change_idx], minlength=len(ctrl_idx) + 1) if n else np.zeros(1, int)
        ctrl = control_rows(msgs, ctrl_idx)
        relmap_start = dict(self._relmap)
        ctrl_keys = seq_arr.to_numpy(zero_copy_only=False)[ctrl_idx]
        seg_slot, commits, r_versions, _ = self._walk(ctrl, seg_counts, ctrl_keys)

        versions, r_events = _row_versions(msgs, tags, r_versions, relmap_start)
        rows = self._change_rows(msgs, tags, change_idx, versions, seq_arr, lsn_arr, r_events)
        row_slot = seg_slot[seg[rows["_src"]]] if len(rows["_src"]) else np.zeros(0, np.int64)
        table = rows["table"]

        return self._emit(commits, table, row_slot)

    def _plain_transactions(self, msgs, tags, ctrl_idx, seg, change_idx, seq_arr, lsn_arr):
        """The common chunk, vectorized: only plain transactions (Begin … Commit, never
        interleaved, none open before or after), Relation/Type/Message/keepalive control
        rows, every change inside a transaction. Then commit order is arrival order, and
        the walk and the emit need no Python per transaction (at 100 changes per
        transaction they cost more than decoding the messages). Returns None for any
        other chunk, which takes the general path (same result; tests compare them)."""
        if self._ctx >= 0 or self._txns or self._walk_stream or not self.options["skip_empty_xacts"] \
                or not len(change_idx):
            return None
        ctags = tags[ctrl_idx]
        if not _PLAIN_CTRL[ctags].all():
            return None
        bc = np.flatnonzero((ctags == ord("B")) | (ctags == ord("C")))
        bct = ctags[bc]
        if len(bct) % 2 or not ((bct[0::2] == ord("B")).all() and (bct[1::2] == ord("C")).all()):
            return None
        ntx = len(bct) // 2
        lsns = self._plain_commits(msgs.field("commit_lsn").take(pa.array(ctrl_idx[bc[1::2]], pa.int64())))
        if lsns is None:
            return None
        # transaction open after each control row (-1 none); change rows must all be in one
        opened = np.full(len(ctrl_idx) + 1, -2, dtype=np.int64)
        opened[0] = -1
        opened[bc[0::2] + 1] = np.arange(ntx)
        opened[bc[1::2] + 1] = -1
        idx = np.maximum.accumulate(np.where(opened != -2, np.arange(len(opened)), 0))
        state = opened[idx]
        row_txn = state[seg[change_idx]]
        if (row_txn < 0).any():
            return None
        o_pos = np.flatnonzero(ctags == ord("O"))
        o_txn = state[o_pos + 1]
        if (o_txn < 0).any():        # an Origin outside a transaction: the walk ignores it
            return None
        # Relation and Type rows, in order (few)
        rt = ctrl_idx[(ctags == ord("R")) | (ctags == ord("Y"))]
        relmap_start = dict(self._relmap)
        r_versions = self._definitions(rows_at(msgs, rt))
        self._next_slot += ntx
        self._committed.frombytes(lsns.tobytes())
        versions, r_events = _row_versions(msgs, tags, r_versions, relmap_start)
        rows = self._change_rows(msgs, tags, change_idx, versions, seq_arr, lsn_arr, r_events, msg_xid=False)
        table = rows["table"]
        schema = self.output_schema
        if not len(table):
            return schema.empty_table()
        # rows stay in arrival order, which is commit order here
        src = rows["_src"]
        rank = row_txn if len(src) == len(change_idx) and (src == change_idx).all() else state[seg[src]]
        b_rows, c_rows = ctrl_idx[bc[0::2]], ctrl_idx[bc[1::2]]
        xid = _to_numpy_u(msgs.field("xid").take(pa.array(b_rows, pa.int64())), np.uint32)
        commit_lsn = msgs.field("commit_lsn").take(pa.array(c_rows, pa.int64()))
        commit_ts = msgs.field("commit_ts").take(pa.array(c_rows, pa.int64()))
        extra = {
            "xid": pa.array(xid[rank]),
            "commit_lsn": _spread(commit_lsn, rank),
            "commit_ts": _spread(commit_ts, rank),
            "origin": nulls(len(table), pa.string()),
        }
        if len(o_pos):               # the transaction's last Origin names it
            names = [None] * ntx
            for t, nm in zip(o_txn, msgs.field("origin_name").take(pa.array(ctrl_idx[o_pos], pa.int64())).to_pylist(),
                             strict=True):
                names[t] = nm
            extra["origin"] = pa.array(names, pa.string()).take(pa.array(rank, pa.int64()))
        for name, arr in extra.items():
            table = table.append_column(name, arr)
        out = table.drop_columns(["msg_xid"]).select(schema.names).cast(schema)
        self.counts["changes"] += len(out)
        return out

    def _relation(self, m: dict) -> int:
        """A Relation message: its version (the newest definition wins from here on)."""
        v = self._add_version(dict(
            schema=m["namespace"] or "pg_catalog", table=m["relation_name"],
            relation_id=m["relation_id"], replica_identity=m["replica_identity"],
            columns=m["columns"]))
        self._relmap[m["relation_id"]] = v
        return v

    def _definitions(self, rows) -> list[int]:
        """Relation and Type rows (dicts, in arrival order) learnt: the version each
        Relation defines."""
        versions = []
        for m in rows:
            if m["type"] == "R":
                versions.append(self._relation(m))
            else:
                self._type(m)
        return versions

    def _plain_commits(self, lsn: pa.Array) -> np.ndarray | None:
        """For the vectorized paths: the commit LSNs of a chunk's plain transactions (in
        order) to record once they are taken, when :meth:`_commit` would take every one
        without judging it — each above every commit taken before and above a
        checkpoint's ``after_lsn``. None when one needs judging (a replay, out of order,
        at or below that floor, no LSN): the walk must take the chunk. With
        ``replays="keep"`` nothing is judged or recorded (empty)."""
        if self.options["replays"] == "keep":
            return np.zeros(0, np.uint64)
        if lsn.null_count:
            return None
        v = lsn.to_numpy(zero_copy_only=False).astype(np.uint64)
        floor = max(self._committed[-1] if self._committed else 0, self._floor or 0)
        if len(v) and (v[0] <= floor or (np.diff(v.astype(np.int64)) <= 0).any()):
            return None
        return v

    def _type(self, m: dict):
        """A Type message: kept, and taught to the registry (domains resolve through it)."""
        self._types.append((m["type_oid"], m["namespace"], m["type_name"]))
        if self.registry is not None:
            self.registry.add_type_message(m["type_oid"], m["namespace"], m["type_name"])

    def _walk(self, ctrl: list, seg_counts, keys=None):
        """The transaction state machine, run over the control messages of a chunk.

        ``ctrl``: the decoded control rows in arrival order; ``seg_counts[k]``: how many
        change rows sit between control rows k-1 and k (segment k). Returns, per segment,
        the transaction slot its rows belong to and the stream state, the commits in
        order as (slot, commit message), and the relation version of each Relation row.
        Shared by the sequential ChangeDecoder and the parallel ControlPlan. ``keys``:
        the control rows' order keys, to name a commit out of order or replayed.
        """
        seg_slot = np.full(len(ctrl) + 1, -1, dtype=np.int64)
        seg_stream = np.zeros(len(ctrl) + 1, dtype=bool)
        commits = []          # (slot, commit facts) in commit order
        r_versions = []
        for k in range(len(ctrl) + 1):
            if seg_counts[k] and self._ctx < 0:
                # changes whose Begin is not in the archive: their Commit will come
                self._ctx = self._new_slot(_Txn(xid=None))
            seg_slot[k] = self._ctx
            seg_stream[k] = self._walk_stream
            if k == len(ctrl):
                break
            m = ctrl[k]
            t = m["type"]
            if t == "B":
                self._ctx = self._new_slot(_Txn(xid=m["xid"]))
            elif t == "C":
                if self._ctx >= 0:
                    self._commit(commits, self._ctx, m, keys, k)
                self._ctx = -1
            elif t == "O":
                if self._ctx >= 0:
                    self._txns[self._ctx].origin = m["origin_name"]
            elif t == "R":
                r_versions.append(self._relation(m))
            elif t == "Y":
                self._type(m)
            elif t == "S":
                self._walk_stream = True
                slot = self._streams.get(m["xid"])
                if slot is not None and m["first_segment"]:
                    # the server streams this transaction again from its start (a new
                    # decoding session after a reconnect): what we hold is superseded
                    self._drop(self._streams.pop(m["xid"]))
                    slot = None
                if slot is None:
                    slot = self._streams[m["xid"]] = self._new_slot(_Txn(xid=m["xid"], kind="stream"))
                self._ctx = slot
            elif t == "E":
                self._walk_stream = False
                self._ctx = -1
            elif t == "c":
                slot = self._streams.pop(m["xid"], None)
                if slot is not None:
                    self._commit(commits, slot, m, keys, k)
            elif t == "A":
                slot = self._streams.get(m["xid"])
                if slot is not None:   # a stray abort (unknown xid) is tolerated
                    if m["subxid"] == m["xid"]:
                        self._drop(self._streams.pop(m["xid"]))
                    else:
                        self._txns[slot].aborted_subxids.add(m["subxid"])
            elif t == "b":
                self._ctx = self._new_slot(_Txn(xid=m["xid"], kind="prepared", gid=m["gid"]))
            elif t == "P":
                if self._ctx >= 0:
                    self._txns[self._ctx].gid = m["gid"]
                    self._prepared[m["gid"]] = self._ctx
                self._ctx = -1
            elif t == "p":
                slot = self._streams.pop(m["xid"], None)
                if slot is not None:
                    self._txns[slot].gid = m["gid"]
                    self._txns[slot].kind = "prepared"
                    self._prepared[m["gid"]] = slot
            elif t == "K":
                slot = self._prepared.pop(m["gid"], None)
                if slot is not None:
                    self._commit(commits, slot, m, keys, k)
            elif t == "r":
                slot = self._prepared.pop(m["gid"], None)
                if slot is not None:
                    self._drop(slot)
            # 'M' logical messages and 'k' keepalives carry no row changes
        return seg_slot, commits, r_versions, seg_stream

    def _commit(self, commits: list, slot: int, m: dict, keys, k: int):
        """Transaction ``slot`` commits (control row ``k``): taken, or dropped as a replay
        of an earlier commit, or refused out of order (see ``replays``)."""
        lsn = m["commit_lsn"]
        unchecked = self._floor is not None and lsn is not None and lsn <= self._floor   # the run before's
        if self.options["replays"] == "keep" or lsn is None or unchecked:
            commits.append((slot, m))
            return
        verdict = judge_commit(self._committed, lsn)
        if verdict == TAKE:
            commits.append((slot, m))
            return
        key = None if keys is None else int(keys[k])
        if verdict == REPLAY:
            xid = self._txns[slot].xid
            self.replayed.append(dict(xid=m["xid"] if xid is None else xid, commit_lsn=lsn, seq=key))
            self.counts["replayed_transactions"] += 1
            self._drop(slot)
            return
        raise order_error(m["type"], lsn, self._committed[-1], key)

    def _emit(self, commits, table: pa.Table, row_slot: np.ndarray) -> pa.Table:
        """Rows of the transactions committed in this chunk, in commit order, with their
        commit facts; rows of transactions still open are kept in the state.

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
                txn = self._txns.get(int(part_slots[0]))
                if txn is not None:   # None: its transaction was aborted in this chunk
                    self._hold(txn, take_table(table, part_idx))
        pieces, piece_rank = [], []
        txns = []
        for slot, _ in commits:
            txn = self._txns.pop(slot)
            txns.append(txn)
            for p in txn.pending:
                p = self._load(p)
                pieces.append(p)
                piece_rank.append(np.full(len(p), rank_of[slot], dtype=np.int64))
        cur = np.flatnonzero(row_rank >= 0)
        if len(cur):
            # the common case, every row committed here: no copy
            pieces.append(table if len(cur) == len(table) else take_table(table, cur))
            piece_rank.append(row_rank[cur])
        schema = self.output_schema
        if not pieces and self.options["skip_empty_xacts"]:
            return schema.empty_table()
        rows = pa.concat_tables(pieces) if pieces else self._pending_schema.empty_table()
        rank = np.concatenate(piece_rank) if piece_rank else np.zeros(0, np.int64)
        # subtransactions aborted inside streamed transactions
        drop = np.zeros(len(rows), dtype=bool)
        msg_xid = None
        for k, txn in enumerate(txns):
            if txn.aborted_subxids:
                if msg_xid is None:
                    msg_xid = rows.column("msg_xid").to_numpy(zero_copy_only=False)
                drop |= (rank == k) & np.isin(msg_xid, np.fromiter(txn.aborted_subxids, np.float64))
        if drop.any():
            keep = ~drop
            rows, rank = rows.filter(pa.array(keep)), rank[keep]
        # empty transactions: one 'C' row each when asked for
        if not self.options["skip_empty_xacts"]:
            seen = np.zeros(n_commits, dtype=bool)
            seen[rank] = True
            empty = np.flatnonzero(~seen)
            if len(empty):
                markers = pa.Table.from_pylist([dict(op="C", _src=-1, _ver=-1)] * len(empty),
                                               schema=self._pending_schema)
                rows = pa.concat_tables([rows, markers])
                rank = np.concatenate([rank, empty])
        if not len(rows):
            return schema.empty_table()
        seq = rows.column("seq").fill_null(-1).to_numpy(zero_copy_only=False)
        d_rank, d_seq = np.diff(rank), np.diff(seq)
        if not ((d_rank > 0) | ((d_rank == 0) & (d_seq >= 0))).all():   # else already in order: no sort, no copy
            order = np.lexsort((seq, rank))
            rows = take_table(rows, order)
            rank = rank[order]
        facts = [m for _, m in commits]
        xids = [t.xid if t.xid is not None else m.get("xid") for t, m in zip(txns, facts, strict=True)]
        extra = {
            "xid": _spread(pa.array(xids, pa.uint32()), rank),
            "commit_lsn": _spread(pa.array([m.get("commit_lsn") for m in facts], pa.uint64()), rank),
            "commit_ts": _spread(pa.array([m.get("commit_ts") for m in facts], CHANGE_SCHEMA.field("commit_ts").type),
                                 rank),
            "origin": pa.array([t.origin for t in txns], pa.string()).take(pa.array(rank, pa.int64())),
        }
        for name, arr in extra.items():
            rows = rows.append_column(name, arr)
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
        if (ver < 0).any():
            i = int(iud[np.flatnonzero(ver < 0)[0]])
            raise PgoutputDecodeError(
                f"archive row seq {seq_arr[i].as_py()}: change to relation {msgs.field('relation_id')[i].as_py()} "
                "before any Relation message for it (start decoding earlier, or resume from a state)")
        if self._light:
            cols = light_change_columns(msgs, tags, iud, ver, seq_arr.to_numpy(zero_copy_only=False), lsn_arr,
                                        msg_xid)
        else:
            cols = change_columns(msgs, iud, ver, self._version_table(), seq_arr.take(take), lsn_arr)
            cols["msg_xid"] = msgs.field("xid").take(take)
        table = pa.table(cols, schema=self._pending_schema)
        src = iud
        if len(t_rows):
            trows, tsrc = [], []
            tm = rows_at(msgs, t_rows)
            r_pos, r_rel, r_ver, start_map = r_events
            for i, m in zip(t_rows, tm, strict=True):
                for rid in m["relation_ids"]:
                    before = np.flatnonzero((r_pos < i) & (r_rel == rid))
                    v = int(r_ver[before[-1]]) if len(before) else start_map.get(rid)
                    rel = self._versions[v] if v is not None else {}
                    trows.append(truncate_row(rel, rid, seq_arr[int(i)].as_py(), lsn_arr[int(i)].as_py(),
                                              m["options"], msg_xid=m["xid"] or 0 if self._light else m["xid"],
                                              _src=int(i), _ver=-1 if v is None else v))
                    tsrc.append(i)
            table = pa.concat_tables([table, pa.Table.from_pylist(trows, schema=self._pending_schema)])
            src = np.concatenate([iud, np.asarray(tsrc, dtype=iud.dtype)])
            order = np.argsort(src, kind="stable")
            table = take_table(table, order)
            src = src[order]
        if self._patterns is not None and len(table) and self._light:
            # light rows: decided once per relation version
            ok = [v for v, d in enumerate(self._versions) if _table_selected(self._patterns, d["schema"], d["table"])]
            mask = np.isin(table.column("_ver").to_numpy(), np.asarray(ok, np.int64))
            table = table.filter(pa.array(mask))
            src = src[mask]
        elif self._patterns is not None and len(table):
            # decide once per distinct schema.table, then filter with a vector is_in
            key = pc.binary_join_element_wise(pc.fill_null(table.column("schema"), ""),
                                              pc.fill_null(table.column("table"), ""), "\x00")
            chosen = [k for k in pc.unique(key).to_pylist()
                      if _table_selected(self._patterns, *k.split("\x00", 1))]
            mask = pc.is_in(key, value_set=pa.array(chosen, pa.string()))
            table = table.filter(mask)
            src = src[mask.to_numpy(zero_copy_only=False)]
        return {"table": table, "_src": src}

    def _version_table(self) -> pa.Table:
        if getattr(self, "_vt_len", -1) != len(self._versions):
            self._vt = pa.Table.from_pylist(
                [dict({k: v[k] for k in ("schema", "table", "relation_id", "columns")},
                      relation_version=relation_fingerprint(v)) for v in self._versions],
                schema=_VERSION_SCHEMA)
            self._vt_len = len(self._versions)
        return self._vt

    # ------------------------------------------------------------------ transactions
    def _hold(self, txn: _Txn, rows: pa.Table):
        txn.pending.append(rows)
        txn.pending_bytes += rows.nbytes
        if txn.pending_bytes > self.options["max_txn_in_memory_mb"] * (1 << 20):
            self._spill(txn)

    def _spill(self, txn: _Txn):
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

    def _drop(self, slot: int):
        txn = self._txns.pop(slot, None)
        if txn is None:
            return
        for p in txn.pending:
            if isinstance(p, str) and os.path.exists(p):
                os.unlink(p)
        if self._ctx == slot:
            self._ctx = -1


TAKE, REPLAY, OUT_OF_ORDER = "take", "replay", "out of order"


def judge_commit(taken, lsn: int) -> str:
    """The ``replays="drop"`` rule for a commit at ``lsn``, one place for pgoutput and
    openGauss: servers send transactions in commit order, so commit LSNs rise. ``taken``:
    the commit LSNs taken before, rising (appended to when this one is taken). TAKE: above
    every one; REPLAY: equal to one (a consumer that reconnected before confirming what
    it had archived receives it again); else OUT_OF_ORDER (:func:`order_error`)."""
    if not taken or lsn > taken[-1]:
        taken.append(lsn)
        return TAKE
    i = bisect.bisect_left(taken, lsn)
    return REPLAY if i < len(taken) and taken[i] == lsn else OUT_OF_ORDER


def order_error(message_type: str, lsn: int, previous: int, key=None) -> ArchiveOrderError:
    """The error for a commit :func:`judge_commit` finds OUT_OF_ORDER (``key``: its order key)."""
    where = "" if key is None else f"seq {key}: "
    return ArchiveOrderError(
        f"{where}'{message_type}' commit at LSN {format_lsn(lsn)} after a commit at {format_lsn(previous)}, "
        "and no commit before it had this LSN (not a replay): the archive is not in arrival order (files "
        "listed out of order? give order_by=, the archive's arrival-order column) — or it spans a "
        "timeline switch, whose LSNs restart lower: replays='keep' gives every commit as it comes",
        message_type=message_type, seq=key, commit_lsn=lsn, previous_lsn=previous)


def decode_changes(input, *, source: str = "pgoutput", **options) -> pa.Table:
    """Decode a whole archive into change rows (``schema.CHANGE_SCHEMA``), in commit order.

    ``input``: a binary array / list of payloads in arrival order, or a table shaped like
    ``pg_logical_slot_get_binary_changes`` output (``data``, optional ``lsn`` as text or
    int, ``xid``, ``seq``). Rows are taken in the order given — never re-sorted by
    ``lsn``: a change's LSN goes backwards when transactions interleave. Options: see
    :class:`ChangeDecoder`. ``source="opengauss"`` reads openGauss/GaussDB frames instead
    (``style=`` 'b'/'t'/'j', ``exclude_users=``; see ``opengauss.changes``).
    """
    if source == "opengauss":
        from .opengauss.changes import decode_changes as og
        if isinstance(input, pa.Table):
            input = input.column("data")
        return og(input, **options)
    if source != "pgoutput":
        raise ValueError(f"source must be 'pgoutput' or 'opengauss', got {source!r}")
    dec = ChangeDecoder(**options)
    return dec.feed(input)


def __getattr__(name):
    # The parallel path lives in plan.py (it builds on this module); re-exported here.
    if name in ("ControlPlan", "control_candidates", "decode_changes_parallel"):
        from . import plan
        return getattr(plan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
