"""openGauss DML records → change rows, a column at a time: no Python object per record
or per value.

The rules are those of :func:`.columns.change_row` and :func:`.columns.record_columns`,
which stay as their one-record statement (and the tests' reference). What makes a whole
batch cheap is that a table has few column lists and its tuples few shapes: each record's
tuples are named by a *shape* (the names and types of its columns: a hash, checked
column by column, :func:`_shapes`), the column list of every record is decided per shape
and per (list, old-tuple shape) pair, and the before/after values are gathered from the
decoded tuples' flat children by indices computed per (list, tuple shape) pair with
numpy. The shapes are found by ``_shapes.pyx`` over the Arrow buffers (``_shapes`` here
is its numpy twin, the reference when ``PGOUTPUT_CODEC_NO_EXTENSIONS`` is set).
``bench/opengauss_bench.py --changes`` times it against record by record and against
pgoutput's ``decode_changes`` on the same changes (docs/benchmarks.md), whose Relation
names the columns once where every openGauss record names them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._native import USING_EXTENSIONS
from ..arrays import one_array, share_lists, typed_array
from ..schema import CHANGE_COLUMN_LISTS, TUPLE_COLUMN, TUPLE_TYPE
from ..selection import table_selected
from .columns import OPENGAUSS_CHANGE_SCHEMA, column_types, key_names, record_columns, relation_of, unquote

__all__ = ["change_rows", "record_kinds", "selected_dml", "transaction_runs", "RecordKinds", "Runs"]

_KIND_CHARS = np.frombuffer(b"ntu", dtype=np.uint8)    # kind codes 0 'n', 1 't', 2 'u'


def _length(strings: pa.Array) -> pa.Array:
    return pc.cast(pc.binary_length(strings), pa.string())


def _codes(values: pa.Array) -> np.ndarray:
    """Dictionary codes of ``values`` (int64; -1 for null): equal values, equal codes."""
    enc = pc.dictionary_encode(values)
    return pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def table_ids(recs: pa.Table):
    """(per record its table's number, the number of tables): (schema, table) pairs,
    a null name apart from an empty one."""
    s = _codes(one_array(recs.column("schema")))
    t = _codes(one_array(recs.column("table")))
    u, inv = np.unique(s * (int(t.max(initial=0)) + 2) + (t + 1), return_inverse=True)
    return inv.reshape(len(s)).astype(np.int64), len(u)


class RecordKinds(NamedTuple):
    """Per record (numpy bool masks): Begin, Commit, DML; and its table's number
    (:func:`table_ids`). Read once per batch, shared by the walk, the shapes and the rows."""
    begin: np.ndarray
    commit: np.ndarray
    dml: np.ndarray
    table: np.ndarray


def record_kinds(recs: pa.Table) -> RecordKinds:
    types = recs.column("type")

    def mask(t):
        return pc.fill_null(t, False).to_numpy(zero_copy_only=False)
    return RecordKinds(mask(pc.equal(types, "B")), mask(pc.equal(types, "C")),
                       mask(pc.is_in(types, value_set=pa.array(["I", "U", "D"]))), table_ids(recs)[0])


def selected_dml(kinds: RecordKinds, recs: pa.Table, patterns, cache: dict | None = None) -> np.ndarray:
    """The DML records of the tables ``patterns`` (white-table-list) selects: judged once
    per table (``cache``: (schema, table) -> selected, kept across batches)."""
    if patterns is None or not kinds.dml.any():
        return kinds.dml
    cache = {} if cache is None else cache
    first = np.flatnonzero(kinds.dml)
    ut, at = np.unique(kinds.table[first], return_index=True)
    chosen = np.zeros(int(kinds.table.max(initial=0)) + 1, bool)
    for u, r in zip(ut.tolist(), recs.select(["schema", "table"]).take(pa.array(first[at], pa.int64())).to_pylist(),
                    strict=True):
        t = (r["schema"], r["table"])
        if t not in cache:
            cache[t] = table_selected(patterns, t[0] or "", t[1] or "")
        chosen[u] = cache[t]
    return kinds.dml & chosen[kinds.table]


class Runs(NamedTuple):
    """A batch's events (Begin, Commit and selected DML records) in transactions: see
    :func:`transaction_runs`."""
    ev: np.ndarray       # record index of each event, in arrival order
    kind: np.ndarray     # per event: 0 Begin, 1 Commit, 2 DML
    run: np.ndarray      # per event, its run: a transaction, or the part of one in a frame
    first: np.ndarray    # per run, the index (into ``ev``) of its first event
    starts: np.ndarray   # per run: it starts its transaction (else continues one open at its frame's start)


def transaction_runs(kinds: RecordKinds, selected: np.ndarray, frame: np.ndarray | None = None,
                     open_at: np.ndarray | None = None) -> Runs:
    """The events of records (``kinds``, ``selected``: :func:`selected_dml`) cut into
    runs, one step per transaction, not per record. openGauss sends whole transactions,
    so each is a run of events ended by its Commit or, never committed, by the next
    Begin: a transaction starts at a Begin, and at a Commit or DML record that follows a
    Commit, or that opens its frame when no transaction is open at the frame's start. A
    run also ends at its frame's end. ``frame``: per record its frame number (rising;
    default: one frame), ``open_at``: per frame, whether a transaction is open at its
    start (default: none). The single-process walk and Spark's pass 2 both cut here."""
    ev = np.flatnonzero(kinds.begin | kinds.commit | selected)
    kind = np.where(kinds.begin[ev], 0, np.where(kinds.commit[ev], 1, 2))
    if not len(ev):
        empty = np.zeros(0, np.int64)
        return Runs(ev, kind, empty, empty, np.zeros(0, bool))
    efr = np.zeros(len(ev), np.int64) if frame is None else frame[ev]
    is_open = np.zeros(int(efr[-1]) + 1, bool) if open_at is None else np.asarray(open_at, bool)
    new_frame = np.r_[True, efr[1:] != efr[:-1]]
    after_c = np.r_[False, kind[:-1] == 1] & ~new_frame
    start = (kind == 0) | after_c | (new_frame & ~is_open[efr])
    cut = start | new_frame
    first = np.flatnonzero(cut)
    return Runs(ev, kind, np.cumsum(cut) - 1, first, start[first])


class _Tuples:
    """One tuple column of the records (``new_tuple``/``old_tuple``): offsets into its
    flat children, per-record length and validity, and each record's shape id (-1: no
    tuple) with one representative record per shape."""

    def __init__(self, lst: pa.ListArray):
        self.list = lst
        self.offsets = lst.offsets.to_numpy().astype(np.int64)
        self.lengths = np.diff(self.offsets)
        self.valid = lst.is_valid().to_numpy(zero_copy_only=False)
        vals = lst.values
        self.values = vals
        self.shape, self.rep = tuple_shapes(self.offsets, self.lengths, self.valid, vals)
        self._py = {}

    def tuple_of(self, shape: int):
        """The representative tuple of a shape, as dicts (once per shape)."""
        t = self._py.get(shape)
        if t is None:
            t = self._py[shape] = self.list[int(self.rep[shape])].as_py()
        return t

    def source_kinds(self):
        """Per flat element: kind code ('u' unchanged TOAST, 'n' NULL, else 't')."""
        unchanged = self.values.field("unchanged_toast").to_numpy(zero_copy_only=False)
        isnull = self.values.field("value").is_null().to_numpy(zero_copy_only=False)
        return np.where(unchanged, 2, np.where(isnull, 0, 1)).astype(np.uint8)


_K = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5,
               0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53], np.uint64)


def _shapes(offsets, lengths, valid, vals):
    """Per record the id of its tuple's shape (names and types, in order; -1: no tuple)
    and one representative record per shape (the twin of ``_shapes.tuple_shapes``, which
    numbers shapes as first met; here they are numbered by hash). Each column is three integers (name code,
    OID, type name code); a record's shape is a 64-bit hash of them and their positions,
    checked against its representative element by element, so that a hash collision
    cannot merge two shapes (it falls back to the length-prefixed text key)."""
    n = len(lengths)
    lo, hi = int(offsets[0]), int(offsets[-1])
    part = vals.slice(lo, hi - lo)
    name = _codes(part.field("name"))
    oid_arr = part.field("type_oid")
    oid = pc.fill_null(oid_arr, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    oid = np.where(oid_arr.is_null().to_numpy(zero_copy_only=False), -1, oid)
    tname = _codes(part.field("type_name"))
    starts = offsets[:-1] - lo
    pos = np.arange(hi - lo, dtype=np.int64) - np.repeat(starts, lengths)
    with np.errstate(over="ignore"):
        e = ((name + 1).astype(np.uint64) * _K[0] + (oid + 2).astype(np.uint64) * _K[1]
             + (tname + 2).astype(np.uint64) * _K[2] + (pos + 1).astype(np.uint64) * _K[3])
        e ^= e >> np.uint64(31)
        e *= _K[4]
        e ^= e >> np.uint64(29)
        h = lengths.astype(np.uint64) * _K[5]
        full = np.flatnonzero(lengths > 0)
        if len(full):
            h[full] += np.add.reduceat(e, starts[full])
    rows = np.flatnonzero(valid)
    shape = np.full(n, -1, np.int64)
    if not len(rows):
        return shape, np.zeros(0, np.int64)
    u, first, inv = np.unique(h[rows], return_index=True, return_inverse=True)
    shape[rows] = inv.reshape(len(rows))
    rep = rows[first]
    # every record equals its shape's representative, column by column
    r0 = np.where(valid, rep[np.maximum(shape, 0)], 0)
    if np.array_equal(lengths[r0][rows], lengths[rows]):
        mine = np.flatnonzero(np.repeat(valid, lengths))      # the elements of every tuple
        theirs = np.repeat(starts[r0], lengths)[mine] + pos[mine]
        if (np.array_equal(name[mine], name[theirs]) and np.array_equal(oid[mine], oid[theirs])
                and np.array_equal(tname[mine], tname[theirs])):
            return shape, rep
    return _shapes_by_text(offsets, valid, vals)


def _shapes_by_text(offsets, valid, vals):
    """:func:`_shapes` by a length-prefixed text key per tuple ("<bytes>:<name>:<oid>:
    <bytes>:<type name>" per column): slower, exact."""
    name, tname = vals.field("name"), vals.field("type_name")
    elem = pc.binary_join_element_wise(
        _length(name), name, pc.fill_null(pc.cast(vals.field("type_oid"), pa.string()), ""),
        pc.if_else(pc.is_null(tname), "-", _length(tname)), pc.fill_null(tname, ""), ":")
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), elem), ";")
    enc = pc.dictionary_encode(joined)
    shape = np.where(valid, enc.indices.to_numpy(zero_copy_only=False), -1).astype(np.int64)
    rows = np.flatnonzero(shape >= 0)
    rep = np.full(len(enc.dictionary), -1, np.int64)
    u, first = np.unique(shape[rows], return_index=True)
    rep[u] = rows[first]
    return shape, rep


# the compiled shapes, unless PGOUTPUT_CODEC_NO_EXTENSIONS selects their NumPy twin
if USING_EXTENSIONS:
    from ._shapes import tuple_shapes
else:
    tuple_shapes = _shapes


class _Lists:
    """Column lists (tuples of (name, type OID, typmod)) numbered as met."""

    def __init__(self):
        self.ids, self.cols = {}, []

    def id(self, cols) -> int:
        if cols is None:
            return -1
        i = self.ids.get(cols)
        if i is None:
            i = self.ids[cols] = len(self.cols)
            self.cols.append(cols)
        return i


def _in_force(has_new, new_list, group, table, initial_of):
    """Per record, the id in force (the record's own where ``has_new``, else the latest
    earlier one's of its table in its group, else ``initial_of(group, table)``), by one
    stable sort and a running maximum: column lists from new tuples, keys from old ones."""
    n = len(has_new)
    key = group.astype(np.int64) * (int(table.max(initial=0)) + 1 if n else 1) + table
    order = np.argsort(key, kind="stable")
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if n else np.zeros(0, np.int64)
    seg_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    pos = np.where(has_new[order], np.arange(n), -1)
    last = np.maximum.accumulate(pos) if n else pos
    own = last >= seg_start
    out = np.empty(n, np.int64)
    out[order] = np.where(own, new_list[order][np.maximum(last, 0)], -2)
    lead = np.flatnonzero(out == -2)
    if len(lead):     # one call per (group, table) whose first records come before its new tuples
        u, first, inv = np.unique(key[lead], return_index=True, return_inverse=True)
        vals = np.array([initial_of(int(group[lead[i]]), int(table[lead[i]])) for i in first], np.int64)
        out[lead] = vals[inv.reshape(len(lead))]
    return out


def _aligned(side: _Tuples, rows: np.ndarray, lists: np.ndarray, names_of, out_valid: np.ndarray) -> pa.Array:
    """``before``/``after`` of the output rows: record ``rows[i]``'s tuple aligned to the
    names of column list ``lists[i]`` (null where the record has no such tuple)."""
    n = len(rows)
    valid = out_valid
    width = np.zeros(n, np.int64)
    width[valid] = _widths(lists[valid], names_of)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(width, out=offsets[1:])
    src = np.full(int(offsets[-1]), -1, np.int64)
    shape = np.where(valid, side.shape[np.maximum(rows, 0)], -1)
    key = lists * (int(shape.max(initial=-1)) + 2) + (shape + 1)
    sel = np.flatnonzero(valid)
    if len(sel):
        uk, inv, count = np.unique(key[sel], return_inverse=True, return_counts=True)
        by_pair = sel[np.argsort(inv.reshape(len(sel)), kind="stable")]     # members of each pair together
        ends = np.cumsum(count)
        for j in range(len(uk)):
            members = by_pair[ends[j] - count[j]:ends[j]]
            i0 = members[0]
            names = names_of(int(lists[i0]))
            tup = side.tuple_of(int(shape[i0]))
            at = {unquote(c["name"]): p for p, c in enumerate(tup)}    # a name twice: the last
            pmap = np.array([at.get(nm, -1) for nm in names], np.int64)
            if not len(pmap):
                continue
            base = side.offsets[rows[members]]
            s = base[:, None] + pmap[None, :]
            s[:, pmap < 0] = -1
            dst = offsets[members][:, None] + np.arange(len(pmap))[None, :]
            src[dst.ravel()] = s.ravel()
    codes = side.source_kinds()
    kind = np.where(src >= 0, codes[np.maximum(src, 0)] if len(codes) else 0, 0).astype(np.uint8)
    m = len(src)
    kinds = pa.Array.from_buffers(pa.string(), m, [None, pa.py_buffer(np.arange(m + 1, dtype=np.int32)),
                                                   pa.py_buffer(_KIND_CHARS[kind].tobytes())])
    take = pa.array(src, pa.int64(), mask=kind != 1)
    data = side.values.field("value").take(take).cast(pa.binary())
    items = pa.StructArray.from_arrays([kinds, data], fields=list(TUPLE_COLUMN))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items, type=TUPLE_TYPE,
                                    mask=pa.array(~valid))


def _widths(lists, names_of):
    """The number of columns of each list id in ``lists`` (one lookup per distinct id)."""
    u, inv = np.unique(lists, return_inverse=True)
    w = np.array([len(names_of(int(x))) for x in u], np.int64)
    return w[inv].reshape(len(lists))


def change_rows(recs: pa.Table, take: np.ndarray, seq: np.ndarray, commit: dict, declared: dict, *,
                group: np.ndarray | None = None, initial_of=None, initial_key_of=None,
                kinds: RecordKinds | None = None) -> pa.Table:
    """The change rows (``OPENGAUSS_CHANGE_SCHEMA``) of records ``recs`` (decoded, no
    error rows; arrival order within each ``group``): row ``i`` is record ``take[i]``
    (-1: an empty transaction's 'C' marker), with ``seq[i]`` and the commit facts
    ``commit`` (arrays ``xid``, ``commit_lsn``, ``origin``, ``commit_ts``, one per row).
    Every DML record of ``recs`` sets the columns in force for its table, given or not.
    ``group`` (default: one) numbers the runs of records walked apart, and
    ``initial_of(group, (schema, table))`` gives a table's columns in force at a run's
    start (None: none); by default the table's first new tuple's, as one walk over the
    whole input gives. The key in force likewise, from old tuples (``initial_key_of``:
    a table's key names at a run's start; by default its first old tuple's), unless
    ``declared`` ({table: key columns}) names the table's. ``kinds``:
    :func:`record_kinds` of ``recs``, when already read."""
    n_rec = len(recs)
    new = _Tuples(one_array(recs.column("new_tuple")))
    old = _Tuples(one_array(recs.column("old_tuple")))
    kinds = kinds or record_kinds(recs)
    dml, table = kinds.dml, kinds.table
    sch = one_array(recs.column("schema"))
    tbl = one_array(recs.column("table"))

    lists = _Lists()
    grp = np.zeros(n_rec, np.int64) if group is None else np.asarray(group, np.int64)
    by_table = _ByTable(dml, grp, table, sch, tbl)
    in_force = by_table.in_force(new, column_types, initial_of, lists)
    keys = _Lists()
    key_ids = by_table.in_force(old, lambda tup: tuple(key_names(tup)), None if initial_key_of is None else
                                lambda g, t: None if (k := initial_key_of(g, t)) is None else tuple(k), keys)

    take = np.asarray(take, np.int64)
    n = len(take)
    is_rec = take >= 0
    rows = np.maximum(take, 0)
    # the record's columns: those in force plus the old tuple's extra ones, per pair
    base = np.where(is_rec, in_force[rows], -1)
    oshape = np.where(is_rec & old.valid[rows] & (old.lengths[rows] > 0), old.shape[rows], -1)
    final = np.full(n, -1, np.int64)
    pair = base * (int(oshape.max(initial=-1)) + 2 if n else 1) + (oshape + 1)
    sel = np.flatnonzero(is_rec)
    if len(sel):
        up, first, inv = np.unique(pair[sel], return_index=True, return_inverse=True)
        ids = np.empty(len(up), np.int64)
        for j in range(len(up)):
            i0 = sel[first[j]]
            b, o = int(base[i0]), int(oshape[i0])
            cols = record_columns(None if b < 0 else lists.cols[b], old.tuple_of(o) if o >= 0 else None)
            ids[j] = lists.id(cols)
        final[sel] = ids[inv]
    names = {}

    def names_of(i):
        v = names.get(i)
        if v is None:
            v = names[i] = [c[0] for c in lists.cols[i]]
        return v

    # columns and relation_version per (table, list, key)
    tl = np.where(is_rec, (table[rows] * (len(lists.cols) + 1) + final) * (len(keys.cols) + 1)
                  + key_ids[rows] + 1, -1)
    col_ids = np.full(n, -1, np.int64)
    col_vals, fps = [], []
    if len(sel):
        ut, first, inv = np.unique(tl[sel], return_index=True, return_inverse=True)
        for j in range(len(ut)):
            i0 = sel[first[j]]
            schema, tab = sch[int(rows[i0])].as_py(), tbl[int(rows[i0])].as_py()
            c = lists.cols[int(final[i0])]
            k = int(key_ids[rows[i0]])
            key = declared.get((schema, tab)) or (keys.cols[k] if k >= 0 else ())
            columns, fp = relation_of(schema, tab, c, frozenset(key))
            col_vals.append(columns)
            fps.append(fp)
        col_ids[sel] = inv
    columns = share_lists(pa.array(col_vals, CHANGE_COLUMN_LISTS), np.where(is_rec, col_ids, -1))
    idx = pa.array(col_ids, pa.int64(), mask=~is_rec)
    version = pa.array(fps, pa.uint64()).take(idx)

    new_valid = is_rec & new.valid[rows]
    old_valid = is_rec & old.valid[rows]
    after = _aligned(new, rows, final, names_of, new_valid)
    before = _aligned(old, rows, final, names_of, old_valid)
    width = np.zeros(n, np.int64)
    width[is_rec] = _widths(final[is_rec], names_of)
    full_old = old_valid & (old.lengths[rows] > 0) & (old.lengths[rows] >= width)    # a whole old row (FULL)
    before_kind = pc.if_else(pa.array(full_old), pa.scalar("O"), pa.scalar("K")).cast(pa.string())
    before_kind = pc.if_else(pa.array(old_valid), before_kind, pa.nulls(n, pa.string()))

    rec_take = pa.array(rows, pa.int64(), mask=~is_rec)
    op = pc.if_else(pa.array(is_rec), one_array(recs.column("type")).take(rec_take), pa.scalar("C"))
    cols = {
        "op": op,
        "seq": pa.array(seq, pa.int64(), mask=~is_rec),
        "lsn": one_array(recs.column("lsn")).take(rec_take),
        "xid": typed_array(commit["xid"], pa.uint64()),
        "commit_lsn": typed_array(commit["commit_lsn"], pa.uint64()),
        "commit_ts": commit["commit_ts"],
        "origin": typed_array(commit["origin"], pa.string()),
        "schema": sch.take(rec_take),
        "table": tbl.take(rec_take),
        "relation_id": pa.nulls(n, pa.uint32()),
        "columns": columns,
        "relation_version": version,
        "before_kind": before_kind,
        "before": before,
        "after": after,
        "truncate_options": pa.nulls(n, pa.uint8()),
    }
    return pa.table([cols[f.name].cast(f.type) for f in OPENGAUSS_CHANGE_SCHEMA], schema=OPENGAUSS_CHANGE_SCHEMA)


class _ByTable:
    """What is in force for each DML record's table, in arrival order within its group:
    its columns (from new tuples) and its key (from old tuples), by one rule."""

    def __init__(self, dml, grp, table, sch, tbl):
        self.dml, self.grp, self.table, self.sch, self.tbl = dml, grp, table, sch, tbl

    def in_force(self, side: _Tuples, value_of, initial_of, numbering: _Lists) -> np.ndarray:
        """Per record the id (in ``numbering``) of what is in force: ``value_of`` its own
        ``side`` tuple (once per tuple shape), else the latest earlier one's of its table
        in its group, else ``initial_of(group, (schema, table))`` (default: the table's
        first one in the batch, as one walk over the whole input gives); -1: none."""
        dml, table = self.dml, self.table
        has = dml & side.valid & (side.lengths > 0)
        shape_id = np.full(len(side.rep), -1, np.int64)
        for s in np.unique(side.shape[has]):
            shape_id[s] = numbering.id(value_of(side.tuple_of(int(s))))
        own = np.where(has, shape_id[np.maximum(side.shape, 0)] if len(shape_id) else -1, -1)
        if initial_of is None:     # np.unique's first occurrence
            with_one = np.flatnonzero(has)
            ut, at = np.unique(table[with_one], return_index=True)
            first = dict(zip(ut.tolist(), own[with_one[at]].tolist(), strict=True))
            init = lambda g, t: first.get(t, -1)   # noqa: E731
        else:
            def init(g, t):
                key = (self.sch[_first_of(table, t)].as_py(), self.tbl[_first_of(table, t)].as_py())
                return numbering.id(initial_of(g, key))
        d = np.flatnonzero(dml)
        out = np.full(len(dml), -1, np.int64)
        if len(d):
            out[d] = _in_force(has[d], own[d], self.grp[d], table[d], init)
        return out


def _first_of(table, t):
    return int(np.argmax(table == t))
