"""A table's net changes: one row per key changed (its last image, or its deletion) and a
truncate, the batch an incremental run merges into a copy of the table; and ``snapshot``
over a base, the base's rows with the net changes after it applied (:mod:`.base`), which
is why it is here and not with the replay's ``snapshot``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._native.keys import key_codes
from ..arrays import kind_bytes, largest, one_array
from ..schema import TS
from . import replay as replayed
from .base import after_base, net_over_base, snapshot_over_base
from .replay import replay, typed_rows
from .rules import (KNOWN, NULL, after_truncate, alike_rows, base_for, count_alike, filled, missing_values, net_key,
                    unsaid, warn_incomplete, whole_row)
from .rows import column_set_ids, resolve, rows_of, table_columns, table_registry
from .typed import columns_out, type_of

__all__ = ["net_changes", "net_of_rows", "net_by_columns", "net_by_replay", "truncate_row", "snapshot"]


def net_changes(changes: pa.Table, name: str, *, registry=None, missing: dict | None = None, base=None,
                base_lsn=None) -> pa.Table:
    """What these changes did to the table, one row per key — the batch to apply to a
    copy of the table (a lake table kept up to date by incremental runs, with a MERGE on
    the replica-identity key; if the identity changed over these changes, on the
    columns every identity held, :func:`net_key`):

    - ``__OP`` ``"upsert"``: the key's last image (typed columns, like :func:`snapshot`);
      ``__UNCHANGED`` lists the columns sent as unchanged TOAST whose value these
      changes never carried: keep the target's value for them — from the row of key
      ``__UNCHANGED_FROM`` (a struct of the key columns) when the key changed in these
      changes, else from the same key;
    - ``__OP`` ``"delete"``: the key (its key columns set, the others null) is gone —
      deleted, or the old key of a key-changing update;
    - ``__OP`` ``"truncate"``, first and at most once: the table was truncated, or
      another relation bore its name before it in these changes (the table was dropped
      and created again, or swapped with a copy: :func:`resolve`); delete every row of
      the target before applying the others (only changes after the last truncate are
      given).

    ``__COMMIT_LSN``/``__COMMIT_AT``: the commit of the key's last change. Rows are in
    that commit order. ``__RELATION_ID``: the relation the rows are of (null for
    openGauss). Keep it with the copy: a batch of another relation means the name passed
    to it after the copy was made — the table dropped and created again, or a copy
    renamed in — and these changes cannot say what to remove; rebuild the copy with
    :func:`snapshot` over the archive. Applied to the table as of the commit before these changes, the
    result is the table after them (tested against :func:`snapshot`). One limit: when
    the identities over the changes hold no column in common (DEFAULT, then USING INDEX
    on other columns), rows are named by the newest one, and a row older than these
    changes that a change sent under another identity removed cannot be named by it:
    its ``delete`` row has null key columns. Take net changes of ranges that do not
    start before such an ``ALTER`` (the rows these changes hold are named right: an
    Update under the earlier identity that changes a column of the newest key sends no
    old key, and the row's key it left is named ``delete`` from its image held).
    ``missing``: as for :func:`snapshot`, in the upserts' images.

    A table whose every Relation here names rows by the whole row (FULL, NOTHING: no
    key, :func:`~.rules.alike_rows`) may hold rows alike, and its net changes are
    counts: an ``upsert`` row per row added more times than removed, a ``delete`` row
    (every column set) per row removed more times than added — apply each as one row
    more or one row fewer, not by a MERGE, which matches every row alike. The control columns
    are the last six, in this order: a table's own column may bear one of their names
    (read them by place).

    ``base``/``base_lsn``: the table's rows as of an LSN (:mod:`.base`: an Arrow table, a
    Parquet path, or a mapping by table name): they come first, as upserts at
    ``base_lsn``; the changes committed at or below it are in them and are skipped. A
    table with no copied row ('R') and no base warns (:class:`.rules.IncompleteTableWarning`):
    the rows it held before capture began are not in the batch."""
    rows_of, replaced = resolve(changes, name)
    return net_of_rows(rows_of, replaced, name, registry=registry, missing=missing, base=base, base_lsn=base_lsn,
                       stacklevel=3)


def net_of_rows(rows_of: pa.Table, replaced: bool, name: str, *, registry=None, missing: dict | None = None,
                base=None, base_lsn=None, sets=None, stacklevel: int = 2) -> pa.Table:
    """:func:`net_changes` of table ``name``'s rows as :func:`~.rows.resolve` gives them
    (and whether another relation bore the name before): for a caller that has resolved
    them already. ``sets``: their :func:`~.rows.column_set_ids`, when known."""
    b, b_lsn = base_for(base, base_lsn, name)
    if b is not None:
        relation = pc.max(rows_of.column("relation_id")).as_py() if len(rows_of) else None
        later = after_base(rows_of, b_lsn)
        alike = bool(len(later)) and alike_rows(column_set_ids(later)[1])
        return net_over_base(b, b_lsn, net_changes(later, name, registry=registry, missing=missing, base=KNOWN),
                             name, relation, alike=alike)
    if base is not KNOWN:
        warn_incomplete(rows_of, name, stacklevel=stacklevel + 1)
    sets = sets if sets is not None else column_set_ids(rows_of)
    cols = table_columns(rows_of, name, _rows=rows_of, _sets=sets)
    registry = table_registry(rows_of, registry, sets=sets)
    by_columns = None if replaced else net_by_columns(rows_of, cols, registry, sets=sets)
    return by_columns if by_columns is not None else net_by_replay(rows_of, name, replaced, cols, registry, missing)


def net_by_replay(rows_of: pa.Table, name: str, replaced: bool, cols: list[dict], registry=None,
                  missing: dict | None = None) -> pa.Table:
    """:func:`net_changes` of any batch: table ``name``'s rows (:func:`resolve`'s, and
    whether another relation bore the name before) replayed key by key."""
    # another relation bore the name before this one in these changes (dropped, or
    # renamed away): the target's rows are that relation's, so it is cleared first
    truncated = (rows_of.column("commit_lsn")[0].as_py(), rows_of.column("commit_ts")[0].as_py()) \
        if replaced and len(rows_of) else None
    fill = missing_values(missing, cols, registry).raw
    # every identity the table's changes were sent under, a Truncate's too (its Relation
    # is the identity in force then: a copy made under it is keyed by it), as Spark's
    # versions job counts them
    said = rows_of.filter(pc.is_valid(rows_of.column("columns"))) if len(rows_of) else rows_of
    newest = (said.column("columns")[len(said) - 1].as_py() or []) if len(said) else []
    keycols = net_key([c for c in column_set_ids(said)[1] if c], newest) if newest else \
        [c["name"] for c in cols]
    net = {"stamp": {}, "deleted": {}, "truncated": truncated, "src": {}, "moved": [], "keycols": tuple(keycols),
           "counted": []}
    relation = pc.max(rows_of.column("relation_id")).as_py() if len(rows_of) else None
    held, _ = replay(rows_of, name, False, net, cols)
    store = held.store
    if held.alike and newest:     # rows alike in every column the table has now
        keycols = [c["name"] for c in newest]

    def ikey(img):
        return tuple(img.get(c, NULL)[:2] for c in keycols)
    if held.alike:
        entries = count_alike(net["counted"], keycols, ikey)
    else:
        entries = keyed_entries(net, store, keycols, ikey)
    stamps = [e[0] for e in entries]
    ops = [e[1] for e in entries]
    rows = [filled([e[2]], fill)[0] if e[1] == "upsert" else e[2] for e in entries]
    src = [e[3] for e in entries]
    unchanged = [e[4] for e in entries]
    if net["truncated"] is not None:
        rows, stamps, ops = [{}] + rows, [net["truncated"]] + stamps, ["truncate"] + ops
        unchanged, src = [[]] + unchanged, [None] + src
    order = sorted(range(len(rows)), key=lambda i: (ops[i] != "truncate", stamps[i][0] or 0))
    arrays, names = typed_rows([rows[i] for i in order], cols, registry)
    from_arrays, from_names = typed_rows([src[i] or {} for i in order],
                                          [c for c in cols if c["name"] in keycols], registry)
    from_key = pa.StructArray.from_arrays(from_arrays, names=from_names,
                                          mask=pa.array([src[i] is None for i in order], pa.bool_()))
    extra = {
        "__OP": pa.array([ops[i] for i in order], pa.string()),
        "__UNCHANGED": pa.array([unchanged[i] for i in order], pa.list_(pa.string())),
        "__UNCHANGED_FROM": from_key,
        "__COMMIT_LSN": pa.array([stamps[i][0] for i in order], pa.uint64()),
        "__COMMIT_AT": pa.array([stamps[i][1] for i in order], TS),
        "__RELATION_ID": pa.array([relation] * len(order), pa.uint32()),
    }
    return pa.Table.from_arrays(arrays + list(extra.values()), names=names + list(extra))


def keyed_entries(net: dict, store: dict, keycols: list, ikey) -> list:
    """The net changes of a table whose rows a key names, as (stamp, op, image, key
    moved from, unchanged columns): one entry per key, the rows held (upserts) over the
    keys gone; among several of one key (the replay's keys may be wider), the last
    change."""
    entries: dict = {}
    for k, img in store.items():
        s = net["src"].get(k)
        frm = None if s is None else {c: v for c, v in zip(s[1], s[0], strict=True) if c in keycols}
        moved = frm if frm is not None and tuple(frm.get(c, NULL) for c in keycols) != ikey(img) else None
        unchanged = sorted(c for c, v in img.items() if v[0] == "u")
        old = entries.get(ikey(img))
        if old is None or (old[0][0] or 0) <= (net["stamp"][k][0] or 0):
            entries[ikey(img)] = (net["stamp"][k], "upsert", img, moved if unchanged else None, unchanged)
    gone = [(img, net["stamp"][k]) for k, img in net["deleted"].items()]
    # and the net keys rows left unsaid (known from their images held: an unchanged
    # TOAST value in one is not)
    gone += [(img, st) for img, st in net["moved"] if not unsaid(ikey(img))]
    for img, stamp in gone:
        old = entries.get(ikey(img))
        if old is None or (old[1] == "delete" and (old[0][0] or 0) <= (stamp[0] or 0)):
            entries[ikey(img)] = (stamp, "delete", {c: img.get(c, NULL) for c in keycols}, None, [])
    return list(entries.values())


#: the ops of row changes (not a Truncate, not a 'C' marker), as bytes
_INSERT, _UPDATE, _DELETE, _COPIED = (ord(c) for c in "IUDR")
#: the net changes' ops, taken by 0 (upsert) / 1 (delete)
_NET_OPS = pa.array(["upsert", "delete"])


def net_by_columns(rows: pa.Table, cols: list[dict], registry=None, *, sets=None) -> pa.Table | None:
    """:func:`net_changes` of the batches most runs see, computed a column at a time: one
    Relation definition throughout (no column added, dropped or retyped), a key flagged,
    no Update that sent an old key (no key changed: not FULL identity), every key value
    said, and unchanged TOAST only in a key's one change. Each key's last change is its
    row. A table with no key (the whole row names a row) in a batch of Inserts and
    Deletes: its rows counted, as :func:`.rules.count_alike`. None: the batch needs the replay.
    ``sets``: the rows' :func:`~.rows.column_set_ids`, when known.

    Its cost is a few vectorized calls whatever the rows: a mirror of many small tables
    calls it once a table."""
    if not len(rows) or not cols:
        return None
    ids, reps = sets if sets is not None else column_set_ids(rows)
    if len(reps) != 1 or (ids < 0).any():
        return None
    rep = reps[0]
    if [c["name"] for c in rep] != [c["name"] for c in cols] or \
            any(type_of(a) != type_of(b) for a, b in zip(rep, cols, strict=True)):
        return None
    # a table with no key (the whole row names a row): rows alike are counted, each
    # Insert one more, each Delete one fewer (its Updates send the old row: the replay's)
    alike = whole_row(rep)
    keys = list(range(len(rep))) if alike else [j for j, c in enumerate(rep) if c["flags"] & 1]
    if not keys:
        return None
    relation = largest(rows.column("relation_id"))
    op = kind_bytes(one_array(rows.column("op")))      # ('n': a null op, a 'C' marker)
    rows, op, truncated = after_truncate(rows, op)
    keep = (op == _INSERT) | (op == _UPDATE) | (op == _DELETE) | (op == _COPIED)
    if not keep.all():
        rows, op = rows.filter(pa.array(keep)), op[keep]
    n, m = len(rows), len(rep)
    is_d = op == _DELETE
    if alike and (op == _UPDATE).any():
        return None          # an Update removes one row alike and adds one (or names none): the replay's
    before, after = one_array(rows.column("before")), one_array(rows.column("after"))
    deletes = int(is_d.sum())
    if after.null_count != deletes or before.null_count != n - deletes or \
            (0 < deletes < n and (before.is_valid().to_numpy(zero_copy_only=False) != is_d).any()):
        return None          # an old key on an Update (the key changed, or FULL), or an odd row
    # each row's image (a Delete's old key, else the new row) in one child: after's, then
    # before's (the one child as it is when every row is of one side)
    a_off, b_off = after.offsets.to_numpy().astype(np.int64), before.offsets.to_numpy().astype(np.int64)
    if not ((np.diff(a_off) == m) | is_d).all() or not ((np.diff(b_off) == m) | ~is_d).all():
        return None
    if not deletes:
        child, starts = after.values, a_off[:-1]
    elif deletes == n:
        child, starts = before.values, b_off[:-1]
    else:
        child = pa.concat_arrays([after.values, before.values])
        starts = np.where(is_d, b_off[:-1] + len(after.values), a_off[:-1])
    kinds, data = child.field("kind"), child.field("data")
    kb = kind_bytes(kinds)
    key_at = np.add.outer(np.asarray(keys, np.int64), starts)       # a row a key column
    key_kinds = kb[key_at]
    said = (key_kinds == ord("t")) | (key_kinds == ord("b"))
    if not (said | (alike & (key_kinds == ord("n")))).all():
        return None          # a key value unsaid or null: the replay's rules
    # rows are keyed by (kind, data), as the replay keys them; the kinds only where they vary
    i_max, i_count, sign_sum = _key_groups([key_codes(data, at) for at in key_at] +
                                           [kk for kk in key_kinds if n and (kk != kk[0]).any()],
                                           np.where(is_d, -1, 1))
    last = np.sort(i_max)
    times = None
    if alike:    # as many rows as each was added more than removed, or removed more than added
        total = sign_sum
        last = i_max[total != 0]
        by_last = np.argsort(last)
        last, times, removed = last[by_last], np.abs(total[total != 0][by_last]), total[total != 0][by_last] < 0
    unchanged = kb[starts[:, None] + np.arange(m)[None, :]] == ord("u")
    some_u = bool(unchanged.any())
    if some_u:       # an unchanged value whose key changed before in the batch: the replay carries it
        with_u = np.flatnonzero(unchanged.any(axis=1))
        if not np.isin(with_u, i_max[i_count == 1]).all():
            return None
    lsn_col = one_array(rows.column("commit_lsn"))
    by_lsn = np.argsort(lsn_col.to_numpy(zero_copy_only=False)[last], kind="stable")
    if times is None:
        order = last[by_lsn]
        dele = is_d[order]
    else:
        order = np.repeat(last[by_lsn], times[by_lsn])
        dele = np.repeat(removed[by_lsn], times[by_lsn])
    # each column's values at its place in the row's image ((offsets, j): offsets + j);
    # a deleted key's other columns null
    base = starts[order]
    gone = np.where(dele, -1, base)
    key_set = set(keys)
    arrays, names = columns_out([(kinds, data, (base if j in key_set else gone, j)) for j in range(m)], cols,
                                registry)
    k = len(order)
    if some_u:     # the unchanged columns of each upsert, by name
        by_name = sorted(range(m), key=lambda j: rep[j]["name"])
        u = unchanged[order][:, by_name] & ~dele[:, None]
        _, jj = np.nonzero(u)
        listed = pa.ListArray.from_arrays(
            pa.array(np.concatenate([[0], np.cumsum(u.sum(axis=1))]).astype(np.int32)),
            pa.array([rep[j]["name"] for j in by_name], pa.string()).take(pa.array(jj)))
    else:
        listed = pa.ListArray.from_arrays(pa.array(np.zeros(k + 1, np.int32)), pa.array([], pa.string()))
    kcols = [c["name"] for c in cols if c["name"] in {rep[j]["name"] for j in keys}]
    # no key moved: a null struct of the key columns, their typed values under the mask
    from_key = pa.StructArray.from_arrays([arrays[names.index(c)] for c in kcols], names=kcols,
                                          mask=pa.array(np.ones(k, bool)))
    taken = pa.array(order)
    stamp_lsn = lsn_col.take(taken)
    stamp_at = one_array(rows.column("commit_ts")).take(taken)
    extra = {"__OP": _NET_OPS.take(pa.array(dele.view(np.int8))), "__UNCHANGED": listed,
             "__UNCHANGED_FROM": from_key,
             "__COMMIT_LSN": stamp_lsn if stamp_lsn.type == pa.uint64() else stamp_lsn.cast(pa.uint64()),
             "__COMMIT_AT": stamp_at if stamp_at.type == TS else stamp_at.cast(TS),
             "__RELATION_ID": pa.array(np.full(k, relation, np.uint32)) if relation is not None
             else pa.nulls(k, pa.uint32())}
    out = pa.Table.from_arrays(arrays + list(extra.values()), names=names + list(extra))
    if truncated is not None:
        out = pa.concat_tables([truncate_row(out.schema, truncated, relation), out])
    return out


def _key_groups(codes: list, sign: np.ndarray) -> tuple:
    """Rows grouped by their values in ``codes`` (integer arrays, one value a row): per
    group its last row, its count of rows and the sum of ``sign`` over them."""
    n = len(sign)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    if len(codes) == 1:
        code = np.asarray(codes[0], np.int64)
    else:     # a code a combination of the parts' codes
        code = np.unique(np.stack([np.asarray(c, np.int64) for c in codes], axis=1), axis=0,
                         return_inverse=True)[1].reshape(-1)
    order = np.argsort(code, kind="stable")
    c = code[order]
    starts = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
    ends = np.append(starts[1:], n)
    return order[ends - 1], ends - starts, np.add.reduceat(sign[order], starts)


def truncate_row(schema: pa.Schema, stamp: tuple, relation: int | None) -> pa.Table:
    """The ``truncate`` row of a :func:`net_changes` table of ``schema``, at commit
    ``stamp`` (LSN, time), of relation ``relation``."""
    row = {c: [None] for c in schema.names}
    row.update(__OP=["truncate"], __UNCHANGED=[[]], __COMMIT_LSN=[stamp[0]], __COMMIT_AT=[stamp[1]],
               __RELATION_ID=[relation])
    return pa.Table.from_pydict(row, schema=schema)


def snapshot(changes: pa.Table, name: str, as_of_lsn: int | None = None, *, registry=None,
             missing: dict | None = None, base=None, base_lsn=None) -> pa.Table:
    b, b_lsn = base_for(base, base_lsn, name)
    if b is None:
        return replayed.snapshot(changes, name, as_of_lsn, registry=registry, missing=missing, base=base)
    return snapshot_over_base(rows_of(changes, name, as_of_lsn), name, as_of_lsn, lambda later: net_changes(
        later, name, registry=registry, missing=missing, base=KNOWN), b, b_lsn)


snapshot.__doc__ = replayed.snapshot.__doc__
