"""A table's net changes: one row per key changed (its last image, or its deletion) and a
truncate, the batch an incremental run merges into a copy of the table."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..schema import TS
from .columnlists import filled, missing_values, net_key
from .replay import NULL, replay, typed_rows, unsaid
from .rows import column_set_ids, resolve, table_columns, table_registry

__all__ = ["net_changes"]


def net_changes(changes: pa.Table, name: str, *, registry=None, missing: dict | None = None) -> pa.Table:
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
    ``missing``: as for :func:`snapshot`, in the upserts' images."""
    rows_of, replaced = resolve(changes, name)
    # another relation bore the name before this one in these changes (dropped, or
    # renamed away): the target's rows are that relation's, so it is cleared first
    truncated = (rows_of.column("commit_lsn")[0].as_py(), rows_of.column("commit_ts")[0].as_py()) \
        if replaced and len(rows_of) else None
    cols = table_columns(changes, name, _rows=rows_of)
    registry = table_registry(rows_of, registry)
    fill = missing_values(missing, cols, registry).raw
    # every identity the table's changes were sent under, a Truncate's too (its Relation
    # is the identity in force then: a copy made under it is keyed by it), as Spark's
    # versions job counts them
    said = rows_of.filter(pc.is_valid(rows_of.column("columns"))) if len(rows_of) else rows_of
    newest = (said.column("columns")[len(said) - 1].as_py() or []) if len(said) else []
    keycols = net_key([c for c in column_set_ids(said)[1] if c], newest) if newest else \
        [c["name"] for c in cols]
    net = {"stamp": {}, "deleted": {}, "truncated": truncated, "src": {}, "moved": [], "keycols": tuple(keycols)}
    relation = pc.max(rows_of.column("relation_id")).as_py() if len(rows_of) else None
    store, _ = replay(rows_of, name, False, net, cols)

    def ikey(img):
        return tuple(img.get(c, NULL)[:2] for c in keycols)
    # one entry per key: the rows held (upserts) over the keys gone; among several of one
    # key (the replay's keys may be wider), the last change
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
    stamps = [e[0] for e in entries.values()]
    ops = [e[1] for e in entries.values()]
    rows = [filled([e[2]], fill)[0] if e[1] == "upsert" else e[2] for e in entries.values()]
    src = [e[3] for e in entries.values()]
    unchanged = [e[4] for e in entries.values()]
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
