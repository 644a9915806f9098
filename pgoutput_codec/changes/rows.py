"""From a batch of decoded messages to the columns of change rows: the tag byte of every
row, the control messages as dicts for the transaction walk, the relation version of
every row, and the Insert/Update/Delete/Truncate columns gathered without a Python object
per row. Shared by the sequential ``ChangeDecoder`` and the parallel ``ControlPlan``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._versions import relation_versions
from .._native.builders import nulls
from .._native.gather import take_lists
from ..arrays import list_lengths, one_array, share_lists
from ..pgoutput.facts import MESSAGE_CLASSES
from ..schema import CHANGE_COLUMN_LISTS, TUPLE_TYPE

__all__ = ["commit_order", "tag_codes", "control_rows", "rows_at", "DEFINITION_FIELDS", "change_columns", "light_change_columns",
           "truncate_columns", "versions_before", "newest_versions", "version_widths", "width_errors", "corrupt_rows",
           "OUTSIDE_TRANSACTION", "spread", "with_commits", "row_versions", "values_u32", "to_numpy_u", "VERSION_SCHEMA",
           "COPY_XID", "copied_ops"]

#: the xid of a COPY transaction: no server transaction has it (InvalidTransactionId),
#: so the Inserts of a transaction of xid 0 are rows copied from the table (op 'R')
COPY_XID = 0

#: The columns of a relation-versions table (one row per Relation definition).
VERSION_SCHEMA = pa.schema([
    pa.field("schema", pa.string()), pa.field("table", pa.string()),
    pa.field("relation_id", pa.uint32()), pa.field("columns", CHANGE_COLUMN_LISTS),
    pa.field("relation_version", pa.uint64()),
])


def tag_codes(type_col: pa.Array) -> np.ndarray:
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


# Fields the transaction walk reads from every control message, and those it reads of
# Relation and Type messages (:meth:`walk.TransactionWalk.definitions`).
_WALK_FIELDS = ("type", "xid", "subxid", "commit_lsn", "commit_ts", "origin_name", "gid", "first_segment")
DEFINITION_FIELDS = ("type", "xid", "relation_id", "namespace", "relation_name", "replica_identity", "columns",
                     "type_oid", "type_name")


def control_rows(msgs, ctrl_idx: np.ndarray) -> list[dict]:
    """The control messages ``ctrl_idx`` of a decoded batch as dicts for the transaction walk (``walk.TransactionWalk.walk``).

    Why not ``msgs.take(...).to_pylist()``: that builds a Python object for every one
    of the ~40 message fields of every row; the walk reads eight, so those are taken
    column by column, and of
    R/Y rows the definition's too. Values are Python objects as ``to_pylist`` gives
    them, except ``commit_ts``: microseconds since 1970 (int)."""
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
        for k, m in zip(whole, rows_at(msgs, ctrl_idx[whole], DEFINITION_FIELDS), strict=True):
            rows[k].update(m)
    return rows


def rows_at(msgs, idx, fields) -> list[dict]:
    """Messages ``idx`` of a decoded batch as dicts of their ``fields`` (Relation, Type,
    Truncate rows), taken column by column."""
    take = pa.array(idx, pa.int64())
    cols = [msgs.field(f).take(take).to_pylist() for f in fields]
    return [dict(zip(fields, vals, strict=True)) for vals in zip(*cols, strict=True)]


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
        "columns": share_lists(versions.column("columns"), ver),
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
    """Light rows (``changes.LightChangeDecoder``'s) of messages ``idx`` (``tags``: every
    message's tag byte): NumPy gathers of the numeric columns (Arrow's take allocates
    fresh pages, which cost more than the gather)."""
    xid = msgs.field("xid")
    xid_np = to_numpy_u(xid, np.uint32) if msg_xid and xid.null_count != len(xid) else None
    return {
        "op": _one_char_strings(tags[idx]),
        "seq": pa.array(seq[idx]),
        "lsn": _lsn_at(lsn, idx),
        "msg_xid": pa.array(xid_np[idx]) if xid_np is not None else pa.array(np.zeros(len(idx), np.uint32)),
        "_src": pa.array(idx.astype(np.int64, copy=False)),
        "_ver": pa.array(ver.astype(np.int64, copy=False)),
    }


def truncate_columns(msgs, t_rows: np.ndarray, versions: pa.Table, version_of, seq: pa.Array, lsn: pa.Array):
    """The change rows of the Truncate messages ``t_rows`` of a decoded batch: one per
    relation a message names, each once, in the message's order (the server names a
    relation once; a payload naming one many times would otherwise make as many rows).
    ``version_of(relation_ids, rows)``: the Relation version in force for each (-1:
    unknown, a row with no schema, table or columns). Returns (columns, the message
    row of each change row, its version) — shared by ChangeDecoder and ControlPlan."""
    lists = msgs.field("relation_ids").take(pa.array(t_rows, pa.int64()))
    rids = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    parent = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(rids):
        first = np.unique(parent << 32 | rids, return_index=True)[1]
        keep = np.sort(first)
        rids, parent = rids[keep], parent[keep]
    at = np.asarray(t_rows, np.int64)[parent]
    ver = np.asarray(version_of(rids, at), np.int64)
    n, known = len(at), ver >= 0
    vtake = pa.array(np.where(known, ver, 0), pa.int64(), mask=~known)
    take = pa.array(at, pa.int64())
    cols = {
        "op": _one_char_strings(np.full(n, ord("T"), np.uint8)),
        "seq": seq.take(take),
        "lsn": _lsn_at(lsn, at),
        "schema": versions.column("schema").take(vtake),
        "table": versions.column("table").take(vtake),
        "relation_id": pa.array(rids, pa.uint32()),
        "columns": share_lists(versions.column("columns"), ver),
        "relation_version": versions.column("relation_version").take(vtake),
        "before_kind": nulls(n, pa.string()),
        "before": nulls(n, TUPLE_TYPE),
        "after": nulls(n, TUPLE_TYPE),
        "truncate_options": msgs.field("options").take(take),
    }
    return cols, at, ver


def versions_before(ev_rel: np.ndarray, ev_key: np.ndarray, ev_ver: np.ndarray, relids: np.ndarray,
                    keys: np.ndarray) -> np.ndarray:
    """The version of the newest Relation event of each relation id before each key (-1:
    none). Events ``(ev_rel, ev_key, ev_ver)`` sorted by relation id, then key."""
    out = np.full(len(relids), -1, dtype=np.int64)
    for rid in np.unique(relids):
        lo, hi = np.searchsorted(ev_rel, [rid, rid + 1])
        if lo == hi:
            continue
        sel = np.flatnonzero(relids == rid)
        pos = np.searchsorted(ev_key[lo:hi], keys[sel], side="left") - 1
        good = pos >= 0
        out[sel[good]] = ev_ver[lo:hi][pos[good]]
    return out


def newest_versions(r_events, relids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The version in force for each (relation id, row) of a chunk: its newest Relation
    before the row in the chunk, else the map the chunk started with (-1: none).
    ``r_events``: :func:`row_versions`' (positions, relation ids, versions, start map)."""
    r_pos, r_rel, r_ver, start = r_events
    order = np.lexsort((r_pos, r_rel))
    out = versions_before(r_rel[order].astype(np.int64), r_pos[order], r_ver[order], relids, rows)
    miss = out < 0
    for rid in np.unique(relids[miss]):
        v = start.get(int(rid))
        if v is not None:
            out[miss & (relids == rid)] = v
    return out


def version_widths(versions: list) -> np.ndarray:
    """The number of columns of every Relation version (index = version)."""
    return np.fromiter((len(v.get("columns") or ()) for v in versions), np.int64, count=len(versions))


def width_errors(msgs, idx: np.ndarray, ver: np.ndarray, widths: np.ndarray):
    """The Insert/Update/Delete rows ``idx`` (Relation versions ``ver``) whose TupleData
    holds another number of columns than their Relation: ``(bad, [(row, text), ...])``,
    ``bad`` a mask over ``idx``. The server writes both from the same column set, so a
    difference is corruption; read by position, the values would land in wrong columns
    or be padded with nulls."""
    want = widths[ver]
    bad = np.zeros(len(idx), bool)
    for side in ("new_tuple", "old_tuple"):
        lens = list_lengths(msgs.field(side))[idx]
        bad |= (lens >= 0) & (lens != want)
    return bad, [(int(idx[k]), _width_text(msgs, int(idx[k]), int(want[k]))) for k in np.flatnonzero(bad)]


#: the error of a change row whose transaction is not in the archive before it (its
#: Begin lost, or the row sent again after its Commit): reported, not guessed
OUTSIDE_TRANSACTION = "change outside any transaction"


def corrupt_rows(msgs, idx: np.ndarray, ver: np.ndarray, widths: np.ndarray):
    """The Insert/Update/Delete rows ``idx`` (Relation versions ``ver``) that are errors,
    not changes: ``(bad, [(row, text), ...])``, ``bad`` a mask over ``idx``. First those
    whose relation no Relation message named before them (``ver`` < 0: they have no
    width), then those whose TupleData width differs from their Relation's
    (:func:`width_errors`)."""
    bad = ver < 0
    rel = msgs.field("relation_id")
    wrong = [(int(idx[k]), f"change to relation {rel[int(idx[k])].as_py()} before any Relation message "
              "for it (start decoding earlier, or resume from a state)") for k in np.flatnonzero(bad)]
    known = np.flatnonzero(~bad)
    wide, wrong_width = width_errors(msgs, idx[known], ver[known], widths)
    bad[known[wide]] = True
    return bad, wrong + wrong_width


def _width_text(msgs, i: int, want: int) -> str:
    """The error of row ``i``, at the byte of the column count that disagrees: after the
    tag, the streamed xid (when in a stream) and the relation id, and for an Update's new
    tuple after its old one (1 byte marker, 2 bytes count, each column's kind and value)."""
    tag = msgs.field("type")[i].as_py()
    pos = 1 + (4 if msgs.field("xid")[i].is_valid else 0) + 4
    old, new = msgs.field("old_tuple")[i].as_py(), msgs.field("new_tuple")[i].as_py()
    if old is not None and len(old) != want:
        side, n = "old", len(old)
    else:
        side, n = "new", len(new)
        if old is not None:
            pos += 3 + sum(1 + (4 + len(c["data"]) if c["kind"] in ("t", "b") else 0) for c in old)
    return (f"{MESSAGE_CLASSES[tag].__name__} ({tag!r}) at byte {pos + 1}: the {side} TupleData has {n} "
            f"column{'s' if n != 1 else ''}, its Relation {want}")


def copied_ops(op: pa.Array, txn_xid, rank: np.ndarray) -> pa.Array:
    """The ``op`` column with each Insert of a COPY transaction (xid :data:`COPY_XID`)
    made 'R', a copied row (Debezium's 'r'). ``txn_xid``: the xid of each transaction
    (None where unknown: a Begin before the archive), ``rank``: the transaction of each
    row. As given (no copy) when no transaction is a copy, the common case."""
    xid = np.array([x == COPY_XID if x is not None else False for x in txn_xid], bool) \
        if isinstance(txn_xid, list) else \
        pc.fill_null(pc.equal(txn_xid, pa.scalar(COPY_XID, txn_xid.type)), False).to_numpy(zero_copy_only=False)
    if not xid.any() or not len(rank):
        return op
    copied = pa.array(xid[rank])
    return pc.if_else(pc.and_(copied, pc.fill_null(pc.equal(op, "I"), False)), pa.scalar("R", op.type), op)


def commit_order(rank: np.ndarray, seq: np.ndarray):
    """The order putting rows in (commit ``rank``, ``seq``) order, stable; None when they
    are in it already (the common case: no sort, no copy)."""
    d_rank, d_seq = np.diff(rank), np.diff(seq)
    if ((d_rank > 0) | ((d_rank == 0) & (d_seq >= 0))).all():
        return None
    return np.lexsort((seq, rank))


def spread(per_txn: pa.Array, rank: np.ndarray) -> pa.Array:
    """A per-transaction column to the rows (``rank``: transaction of each row), in NumPy
    when it has no nulls (Arrow's take allocates fresh pages, which cost more)."""
    if per_txn.null_count or not len(per_txn):
        return per_txn.take(pa.array(rank, pa.int64()))
    typ = per_txn.type
    width = typ.bit_width // 8
    # the values buffer viewed as integers of the same width, gathered, handed back
    vals = np.frombuffer(per_txn.buffers()[1], dtype=f"<u{width}", count=per_txn.offset + len(per_txn))
    return pa.Array.from_buffers(typ, len(rank), [None, pa.py_buffer(vals[per_txn.offset:][rank])])


def with_commits(rows: pa.Table, rank: np.ndarray, xid: pa.Array, commit_lsn: pa.Array, commit_ts: pa.Array,
                 origin: pa.Array) -> pa.Table:
    """Change rows emitted: ``rows`` (in order) with the commit facts of their
    transaction — ``xid``, ``commit_lsn``, ``commit_ts``, ``origin`` are per commit,
    ``rank`` is each row's index into them — and each Insert of a COPY transaction made
    'R' (:func:`copied_ops`). The one place change rows get their commit columns, for
    the :class:`~pgoutput_codec.changes.decoder.ChangeDecoder` and the control plan
    alike."""
    at = pa.array(rank, pa.int64())
    cols = {
        "xid": spread(xid, rank),
        "commit_lsn": spread(commit_lsn, rank),
        "commit_ts": spread(commit_ts, rank),
        "origin": nulls(len(rank), pa.string()) if origin.null_count == len(origin) else origin.take(at),
    }
    for name, arr in cols.items():
        rows = rows.append_column(name, arr)
    op_at = rows.schema.get_field_index("op")
    op = one_array(rows.column(op_at))
    new = copied_ops(op, xid, rank)
    return rows if new is op else rows.set_column(op_at, "op", new)


def row_versions(msgs, tags, r_versions: list, relmap_start: dict):
    """Relation version of every row (one C walk from the map as it was before this
    chunk's Relations: ``r_versions`` are the versions its 'R' rows defined, in order),
    and the Relation events Truncates look up (positions, relation ids, versions, start map)."""
    relids = values_u32(msgs.field("relation_id"))
    r_ver = np.asarray(r_versions, dtype=np.int64)
    # (relation_versions turns the map it is given into the map after the chunk: a copy,
    # so Truncates look up the map as it was before the chunk)
    versions = relation_versions(np.ascontiguousarray(tags), np.ascontiguousarray(relids), r_ver,
                                          dict(relmap_start))
    r_pos = np.flatnonzero(tags == ord("R"))
    return versions, (r_pos, relids[r_pos], r_ver, relmap_start)


def values_u32(col: pa.Array) -> np.ndarray:
    """A uint32 column's values buffer, viewed: its null slots hold whatever the builder
    left there, so only rows known valid may be read (the relation ids of R/I/U/D rows;
    no fill_null copy)."""
    if col.null_count == len(col) or col.buffers()[1] is None:
        return np.zeros(len(col), np.uint32)
    return np.frombuffer(col.buffers()[1], np.uint32, count=col.offset + len(col))[col.offset:]


def to_numpy_u(col: pa.Array, dtype) -> np.ndarray:
    return col.fill_null(0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)
