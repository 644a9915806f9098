"""A base: a table's rows as of a commit LSN, from outside the archive (an export, a copy
made before capture began, an earlier snapshot), standing for the table's start. Its
rows act as copied rows ('R') committed at ``base_lsn``: the changes committed at or
below it are already in them and are skipped, the later ones are applied on top (an
unchanged TOAST value taken from the base's row).

``base=`` of ``snapshot``, ``history``, ``net_changes`` and ``mirror`` takes an Arrow
table, a Parquet file path, or, for many tables, a mapping ``{"schema.table": base}``;
``base_lsn=`` an LSN (int, or ``X/Y`` text) or a mapping of them by the same names. A
mapping that does not name the table gives it no base."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import one_array
from ..typecatalog.companions import owner
from .rules import alike_rows, columns_in_force

__all__ = ["after_base", "net_over_base", "base_rows_in", "BASE_OP", "snapshot_over_base",
           "history_over_base", "base_batch"]

#: the ``__OP`` of a base's rows in ``history``: they act as copied rows
BASE_OP = "R"


def after_base(rows: pa.Table, lsn: int) -> pa.Table:
    """The change rows committed after the base's LSN (the others are in it)."""
    if not len(rows):
        return rows
    return rows.filter(pc.fill_null(pc.greater(rows.column("commit_lsn"), pa.scalar(lsn, pa.uint64())), False))


def _aligned(base: pa.Table, schema: pa.Schema, name: str) -> pa.Table:
    """The base's rows with the columns of ``schema`` (by name; one the base lacks null,
    as for a column added after it), cast to their types."""
    arrays = []
    for f in schema:
        if f.name in base.column_names:
            col = base.column(f.name)
            try:
                arrays.append(col.cast(f.type) if not col.type.equals(f.type) else col)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ValueError(f"base of {name}: column {f.name} of type {col.type} is not the table's "
                                 f"{f.type}: {e}") from None
        else:
            arrays.append(pa.nulls(len(base), f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _keys(t: pa.Table, cols: list) -> list:
    return list(zip(*[t.column(c).to_pylist() for c in cols], strict=True)) if cols else [()] * len(t)


def base_rows_in(base: pa.Table, net_after: pa.Table, keycols: list) -> np.ndarray:
    """Mask of the base rows no row of ``net_after`` (a net changes batch) names."""
    named = set(_keys(net_after.filter(pc.not_equal(net_after.column(len(net_after.schema) - 6), "truncate")),
                      keycols))
    return np.array([k not in named for k in _keys(base, keycols)], bool)


def net_over_base(base: pa.Table, lsn: int, net_after: pa.Table, name: str, relation=None,
                  alike: bool = False) -> pa.Table:
    """A ``net_changes`` batch of the base's rows (upserts at ``lsn``) followed by the
    changes after it (``net_after``, their batch): each key once, its last image; an
    upsert's unchanged TOAST values filled from the base's row of its key. ``alike``: a
    table with no key, whose batches are counts (:func:`.columnlists.alike_rows`): every
    base row, then the batch, each row of it one row more or fewer."""
    ctl_names = net_after.column_names[-6:]
    data_schema = pa.schema(list(net_after.schema)[:-6])
    if not len(data_schema):           # no change after the base: its columns as they are
        data_schema = base.schema
    keycols = [f.name for f in net_after.schema.field(ctl_names[2]).type] or \
        [f.name for f in data_schema if owner(f.name, data_schema.names) is None]
    ops = one_array(net_after.column(ctl_names[0])).to_pylist() if len(net_after) else []
    if "truncate" in ops:              # the base's rows were emptied after it: the batch as it is
        return net_after
    aligned = _aligned(base, data_schema, name)
    missing_keys = [k for k in keycols if k not in base.column_names]
    if missing_keys:
        raise ValueError(f"base of {name} lacks key column(s) {missing_keys}")
    if len(net_after) and not alike:
        net_after = _filled(net_after, aligned, keycols, ctl_names)
        aligned = aligned.filter(pa.array(base_rows_in(aligned, net_after, keycols)))
    n = len(aligned)
    ctl_types = {f.name: f.type for f in net_after.schema} if len(net_after.schema) > 6 else {}
    from_type = ctl_types.get(ctl_names[2]) or pa.struct([data_schema.field(k) for k in keycols])
    ctl = [pa.array(["upsert"] * n, pa.string()), pa.array([[]] * n, pa.list_(pa.string())),
           pa.nulls(n, from_type), pa.array([lsn] * n, pa.uint64()),
           pa.nulls(n, ctl_types.get(ctl_names[4], pa.timestamp("us", tz="UTC"))),
           pa.array([relation] * n, pa.uint32())]
    head = pa.Table.from_arrays(aligned.columns + ctl, names=list(data_schema.names) + ctl_names)
    if not len(net_after) or len(net_after.schema) <= 6:
        return head
    return pa.concat_tables([head, net_after.cast(head.schema)])


def _filled(net_after: pa.Table, base: pa.Table, keycols: list, ctl: list) -> pa.Table:
    """``net_after`` with the unchanged TOAST values of its upserts taken from the base's
    row of their key (``__UNCHANGED_FROM`` when the key changed), and no longer listed."""
    unchanged = net_after.column(ctl[1]).to_pylist()
    if not any(unchanged):
        return net_after
    frm = net_after.column(ctl[2]).to_pylist()
    own = _keys(net_after, keycols)
    at = {k: i for i, k in enumerate(_keys(base, keycols))}
    cols = {c: net_after.column(c).to_pylist() for c in {c for u in unchanged if u for c in u}
            if c in net_after.column_names}
    base_vals = {c: base.column(c).to_pylist() for c in cols if c in base.column_names}
    for i, u in enumerate(unchanged):
        if not u:
            continue
        key = tuple(frm[i][k] for k in keycols) if frm[i] is not None else own[i]
        j = at.get(key)
        if j is None:
            continue
        left = []
        for c in u:
            if c in base_vals:
                cols[c][i] = base_vals[c][j]
            else:
                left.append(c)
        unchanged[i] = left
    out = net_after
    for c, vals in cols.items():
        k = out.schema.get_field_index(c)
        out = out.set_column(k, c, pa.array(vals, out.schema.field(k).type))
    k = out.schema.get_field_index(ctl[1])
    return out.set_column(k, ctl[1], pa.array(unchanged, out.schema.field(k).type))


def snapshot_over_base(rows: pa.Table, name: str, as_of_lsn, net_of, base: pa.Table, lsn: int) -> pa.Table:
    """``snapshot`` over a base: the base's rows with the net changes after it applied
    (``rows``: the table's change rows, ``net_of(rows)``: their ``net_changes``)."""
    if as_of_lsn is not None and as_of_lsn < lsn:
        raise ValueError(f"{name}: the base is as of {lsn}, after as_of_lsn {as_of_lsn}: a base cannot say what "
                         "the table held before it")
    from .rows import column_set_ids
    later = after_base(rows, lsn)
    if as_of_lsn is not None:
        later = later.filter(pc.fill_null(pc.less_equal(later.column("commit_lsn"), pa.scalar(as_of_lsn, pa.uint64())),
                                          False))
    alike = bool(len(later)) and alike_rows(column_set_ids(later)[1])
    net = net_over_base(base, lsn, net_of(later), name, alike=alike)
    ops = net.column(len(net.schema) - 6)
    kept = net.filter(pc.equal(ops, "upsert")).select(list(range(len(net.schema) - 6)))
    if alike:     # the batch is counts: each delete removes one row alike
        kept = _counted(kept, net.filter(pc.equal(ops, "delete")).select(list(range(len(net.schema) - 6))))
    current = columns_in_force(later)
    if current is None:
        return kept
    return kept.select([c for c in kept.column_names if c in current or
                        owner(c, current) is not None])


def _counted(upserts: pa.Table, deletes: pa.Table) -> pa.Table:
    """``upserts`` (rows, each one row) less one row alike each row of ``deletes``."""
    if not len(deletes):
        return upserts
    held: dict = {}
    for i, r in enumerate(upserts.to_pylist()):
        held.setdefault(repr(r), []).append(i)
    drop = np.zeros(len(upserts), bool)
    for r in deletes.to_pylist():
        at = held.get(repr(r))
        if at:
            drop[at.pop()] = True
    return upserts.filter(pa.array(~drop))


def _alike_ends(base_rows: list, versions: list, tc: pa.Table, keycols: list) -> list:
    """For a table with no key: the (end LSN, end time) of each base row, then of each
    version of ``versions`` (the history of the changes after the base, one per row
    image set by ``tc``'s changes, in order) — a removal (Update, Delete) ends the oldest
    row alike held (the base's first), a Truncate every row, as the replay does."""
    from collections import deque

    def key(img):
        return repr(tuple(img.get(k) for k in keycols))
    held: dict = {}
    for i in range(len(base_rows)):
        held.setdefault(key(base_rows[i]), deque()).append(i)
    ends: dict = {}
    j = len(base_rows)
    rows = base_rows + versions
    for op, before, after, clsn, cts in zip(*[tc.column(c).to_pylist() for c in (
            "op", "before", "after", "commit_lsn", "commit_ts")], strict=True):
        if op == "T":
            for q in held.values():
                for i in q:
                    ends[i] = (clsn, cts)
            held.clear()
            continue
        if op in ("U", "D") and before is not None:
            q = held.get(key(before))
            if q:
                ends[q.popleft()] = (clsn, cts)
        if op in ("I", "R", "U") and after is not None and j < len(rows):
            held.setdefault(key(rows[j]), deque()).append(j)
            j += 1
    return [ends.get(i, (None, None)) for i in range(len(rows))]


def history_over_base(rows: pa.Table, name: str, hist_of, changes_of, base: pa.Table, lsn: int) -> pa.Table:
    """``history`` over a base: a version of each base row (``__OP`` 'R', from ``lsn``,
    ``__START_AT`` null: the base says no time), ended by the first change after it that
    names its key (or a Truncate), then the versions of the changes after it
    (``hist_of(rows)``), an unchanged TOAST value taken from the base's row it
    descends from (``changes_of(rows)``: their ``typed_changes``)."""
    later = after_base(rows, lsn)
    hist = hist_of(later)
    n_ctl = 5
    data = list(hist.schema)[:-n_ctl]
    hnames = hist.column_names[-n_ctl:]
    if not data:
        data = list(base.schema)
    schema = pa.schema(data + list(hist.schema)[-n_ctl:])
    from .rows import table_columns
    cols = table_columns(later, "", _rows=later) if len(later) else []
    keycols = [c["name"] for c in cols if c["flags"] & 1] or \
        [f.name for f in data if owner(f.name, [g.name for g in data]) is None]
    missing_keys = [k for k in keycols if k not in base.column_names]
    if missing_keys:
        raise ValueError(f"base of {name} lacks key column(s) {missing_keys}")
    base_rows = _aligned(base, pa.schema(data), name).to_pylist()

    def key(img):
        return tuple(img.get(k) for k in keycols) if img is not None else None
    open_at = {key(r): i for i, r in enumerate(base_rows)}
    ends: dict = {}
    carry = {key(r): r for r in base_rows}     # the values a chain of changes from a base row holds
    fills: dict = {}
    if len(later):
        tc = changes_of(later)
        for op, before, after, clsn, cts, unch in zip(*[tc.column(c).to_pylist() for c in (
                "op", "before", "after", "commit_lsn", "commit_ts", "unchanged")], strict=True):
            if op == "T":
                for i in open_at.values():
                    ends.setdefault(i, (clsn, cts))
                open_at.clear()
                carry.clear()
                continue
            k = key(before) if before is not None and any(v is not None for v in key(before)) else key(after)
            if k in open_at:
                ends.setdefault(open_at.pop(k), (clsn, cts))
            held = carry.pop(k, None)
            got = {}
            if op == "U" and held is not None and after is not None:
                new = dict(after)
                for c in unch or ():
                    if c in held:
                        new[c] = held[c]
                carry[key(new)] = new
                got = {c: held[c] for c in unch or () if c in held}
            if op in ("I", "U", "R") and after is not None:
                # one entry per version the change makes, in order: several changes of a
                # key in one transaction share (key, commit LSN)
                fills.setdefault((key(after if op != "U" or held is None else new), clsn), []).append(got)
    first = []
    for i, r in enumerate(base_rows):
        end = ends.get(i, (None, None))
        first.append({**r, hnames[0]: BASE_OP, hnames[1]: lsn, hnames[2]: None, hnames[3]: end[0], hnames[4]: end[1]})
    versions = hist.to_pylist()
    from .rows import column_set_ids
    if len(later) and alike_rows(column_set_ids(later)[1]):
        # rows alike: a removal ends the oldest held, the base's before the changes'
        both = _alike_ends(base_rows, versions, changes_of(later),
                           [f.name for f in data if owner(f.name, [g.name for g in data]) is None])
        for v, (e_lsn, e_at) in zip(first + versions, both, strict=True):
            v[hnames[3]], v[hnames[4]] = e_lsn, e_at
    if any(g for f in fills.values() for g in f):
        for v in versions:
            pending = fills.get((key(v), v[hnames[1]]))
            if pending:
                v.update(pending.pop(0))
    return pa.Table.from_pylist(first + versions, schema=schema)


#: the control columns of a net changes batch of no row (net_over_base's columns beside the base's)
_NO_NET = pa.schema([pa.field("__OP", pa.string()), pa.field("__UNCHANGED", pa.list_(pa.string())),
                     pa.field("__UNCHANGED_FROM", pa.struct([])), pa.field("__COMMIT_LSN", pa.uint64()),
                     pa.field("__COMMIT_AT", pa.timestamp("us", tz="UTC")), pa.field("__RELATION_ID", pa.uint32())])


def base_batch(base: pa.Table, lsn: int, name: str, keys=None, relation=None) -> pa.Table:
    """The base's rows as a ``net_changes`` batch of upserts at ``lsn`` (a mirror's
    first batch), keyed by ``keys`` (None or empty: every column)."""
    net = net_over_base(base, lsn, _NO_NET.empty_table(), name, relation)
    if keys:
        data = net.column_names[:-6]
        k = net.schema.get_field_index("__UNCHANGED_FROM")
        struct = pa.struct([net.schema.field(c) for c in keys if c in data])
        net = net.set_column(k, "__UNCHANGED_FROM", pa.nulls(len(net), struct))
    return net
