"""A table's changes replayed in commit order, row by key: its snapshot as of a commit and
its history (every version of every row with the commits it was valid between)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import one_array
from ..idents import free_name
from ..typecatalog.retyped import retyped_names, text_form
from ..schema import TS
from ..typecatalog.columns import convert_column
from ..typecatalog.errors import ConversionError
from .base import history_over_base
from .rules import (KNOWN, alike_rows, as_added, base_for, carry_toast, columns_in_force, end_versions, filled,
                    found_keys, gone, identity_key, key_move, missing_values, row_key, same_copy, unknown_key_error,
                    unsaid, warn_incomplete)
from .rows import column_set_ids, rows_of, table_columns, table_registry
from .typed import columns_out, type_of, typed_changes, variant_index

__all__ = ["snapshot", "history", "history_names", "HISTORY_COLUMNS", "replay", "typed_rows", "canonical_keys",
           "HeldRows"]


class HeldRows:
    """The rows a replay holds, keyed by the replica identity of the change being
    applied. Each change names its row by the key of its own Relation (primary key,
    index or, under FULL, the whole row), and a table's identity may change while the
    archive runs (``ALTER TABLE … REPLICA IDENTITY``): when a change's key columns are
    not the ones the rows are keyed by, every key held is re-made from the images
    (:meth:`rekey`, :func:`.rules.found_keys`), as a subscriber looks rows up by the key
    each change sends.

    ``store``: key → image; ``count``: key → how many rows alike it holds, where more
    than one (``alike``: a table whose rows may repeat, :func:`.rules.alike_rows`);
    ``open_ver``: key → its current versions (history), the oldest first;
    ``net`` (net_changes, or None): ``stamp`` key → last commit (lsn, ts), ``deleted``
    key → the image of a row the changes removed (its last image, else the old image
    that named it), ``src`` key → (key, key columns) of the row before these changes it
    descends from through key changes (None: inserted here), ``moved`` [(image, stamp)]:
    rows an Update moved off a net key (``keycols``, :func:`net_key`) that its own
    identity's key does not hold, ``truncated``, ``counted`` [(image, +1 or -1, stamp)]:
    each row added or removed, in order (a table whose rows may repeat). ``hides``: the identity in force does
    not hold every net key column (an Update may then move a row's net key unsaid)."""

    def __init__(self, net, alike: bool = False):
        self.keycols = None
        self.hides = False
        self.alike = alike
        self.store: dict = {}
        self.count: dict = {}
        self.vague: set = set()     # keys of store with an unsaid ('u') value: settle()
        self.open_ver: dict = {}
        self.net = net

    def rekey(self, keycols: tuple) -> None:
        found_keys(self, keycols)

    def settle(self, key: tuple) -> None:
        """Find the row a change names by ``key`` when it is held under a key with a
        value the changes never said: a row older than the changes, whose Update under
        one identity sent a column as unchanged TOAST, keyed after an ``ALTER TABLE …
        REPLICA IDENTITY FULL`` by every column — that one too, unknown. A change under
        FULL sends it (the old row, TOAST values inline): the held key is re-made with
        it, so the change finds its row instead of leaving it held (a row the server no
        longer has). Only keys with an unsaid value are looked at (rare)."""
        if key in self.store or not self.vague:
            return
        for k in list(self.vague):
            if k not in self.store:
                self.vague.discard(k)
            elif all(a == b or a[0] == "u" for a, b in zip(k, key, strict=True)):
                break
        else:
            return
        self.vague.discard(k)
        self.store[key] = self.store.pop(k)
        if k in self.count:
            self.count[key] = self.count.pop(k)
        if k in self.open_ver:
            self.open_ver[key] = self.open_ver.pop(k)
        if self.net is not None:
            for part in ("stamp", "src"):
                if k in self.net[part]:
                    self.net[part][key] = self.net[part].pop(k)

    def take(self, key: tuple):
        """Remove the row ``key`` names, one of several alike: its image (None: none held)."""
        n = self.count.get(key)
        if n is None:
            return self.store.pop(key, None)
        if n > 2:
            self.count[key] = n - 1
        else:
            del self.count[key]
        return self.store[key]

    def put(self, key: tuple, image: dict) -> None:
        """Hold ``image`` under ``key``: one more row where the rows may repeat and one
        alike is held, else the key's row."""
        if self.alike and key in self.store:
            self.count[key] = self.count.get(key, 1) + 1
        else:
            self.store[key] = image

    def rows(self) -> list:
        """The images held, each as many times as the rows alike it."""
        return [img for k, img in self.store.items() for _ in range(self.count.get(k, 1))]


def replay(rows: pa.Table, name: str, keep_history: bool, net: dict | None = None, cols: list | None = None):
    """Replay one table's changes (``rows``, :func:`resolve`'s) on raw (kind, data)
    values, keyed by replica identity (:class:`HeldRows`; ``net``: its ``net`` dict, filled).
    A value sent under another type than the column's in ``cols`` (the table's columns;
    an ``ALTER COLUMN … TYPE`` in the archive) is held as (kind, data, (type_oid,
    type_modifier)), and :func:`typed_rows` reads it by that type."""
    if cols is None:
        cols = table_columns(rows, "", _rows=rows) if len(rows) else []
    held = HeldRows(net, alike_rows(column_set_ids(rows)[1]) if len(rows) else False)
    versions = []   # (key, row, start_lsn, start_ts, op) ; end filled when replaced
    newest = {c["name"]: type_of(c) for c in cols}
    odd_of: dict = {}    # relation_version -> [(column, type)] of its columns typed otherwise
    canon = canonical_keys(rows, cols)
    listed, listed_fp = None, object()   # the column names of the change before (None: none yet)

    def close(key, lsn, ts, one=False):
        if keep_history:
            end_versions(versions, held.open_ver, key, lsn, ts, one)

    def counted(img, n, lsn, ts):
        if net is not None and held.alike:
            net["counted"].append((img, n, (lsn, ts)))

    for i, r in enumerate(rows.to_pylist()):
        op = r["op"]
        lsn, ts = r["commit_lsn"], r["commit_ts"]
        if op == "T":
            for key in list(held.store):
                close(key, lsn, ts)
            held.store.clear()
            held.count.clear()
            if net is not None:
                net.update(truncated=(lsn, ts), stamp={}, deleted={}, src={}, moved=[], counted=[])
            continue
        if op not in ("I", "U", "D", "R"):
            continue
        rcols = r["columns"] or []
        names = [c["name"] for c in rcols]
        fp = r.get("relation_version")
        if rcols and (fp is None or fp != listed_fp):
            as_added(held.store, listed, names, net["counted"] if net is not None and held.alike else None)
            listed, listed_fp = names, fp
        flagged = [c["name"] for c in rcols if c["flags"] & 1]
        keycols = identity_key(rcols)
        held.rekey(keycols)
        before = dict(zip(names, [(v["kind"], v["data"]) for v in r["before"]], strict=False)) \
            if r["before"] is not None else None
        after = dict(zip(names, [(v["kind"], v["data"]) for v in r["after"]], strict=False)) \
            if r["after"] is not None else None
        odd = odd_of.get(fp) if fp is not None else None
        if odd is None:
            odd = [(c["name"], type_of(c)) for c in rcols if newest.get(c["name"], type_of(c)) != type_of(c)]
            if fp is not None:
                odd_of[fp] = odd
        for img in (before, after) if odd else ():
            for nm, t in odd:
                v = None if img is None else img.get(nm)
                if v is not None and v[0] in ("t", "b"):
                    img[nm] = (v[0], v[1], t)
        for side, img in (("before", before), ("after", after)) if canon else ():
            for nm, texts in canon[side].items():
                v = None if img is None else img.get(nm)
                if v is not None and v[0] in ("t", "b") and texts[i] is not None:
                    img[nm] = ("t", texts[i])
        same = False
        if op in ("I", "R"):
            # a copied row ('R') is an Insert that may meet the row of its key held: it
            # replaces it, one equal to it (a copy taken again) making no new version;
            # where rows may repeat (no key) it adds a row, as an Insert does
            key = row_key(after, keycols)
            same = same_copy(op, held.store.get(key), after, held.alike)
            if not same and not held.alike:
                close(key, lsn, ts)
            held.put(key, after)
            counted(after, 1, lsn, ts)
            if net is not None:
                net["src"][key] = None
        elif op == "U":
            # the old image ('K' key or 'O' whole row under FULL identity) names the row;
            # without one the key did not change
            if before is None and not flagged:
                raise ValueError(unknown_key_error(name, lsn))
            src = before if before is not None else after
            old_key = row_key(src, keycols)
            held.settle(old_key)
            old = held.take(old_key)
            new = carry_toast(after, before, old)
            new_key = row_key(new, keycols)
            close(old_key, lsn, ts, one=held.alike)
            if not held.alike:
                close(new_key, lsn, ts)
            held.put(new_key, new)
            counted(gone(old, src, keycols), -1, lsn, ts)
            counted(new, 1, lsn, ts)
            if unsaid(new_key):
                held.vague.add(new_key)
            after = new
            key = new_key
            if net is not None:
                src = net["src"].pop(old_key) if old_key in net["src"] else (old_key, keycols)
                net["src"][new_key] = src
                if key_move(old_key, new_key):
                    net["deleted"][old_key] = gone(old, before, keycols)
                    net["stamp"][old_key] = (lsn, ts)
                elif held.hides and old is not None and row_key(old, net["keycols"]) != row_key(new, net["keycols"]):
                    # the net key holds a column this identity's key does not (u under
                    # DEFAULT, before USING INDEX (u)): the row left that net key unsaid
                    net["moved"].append((old, (lsn, ts)))
        else:   # "D"
            key = row_key(before, keycols)
            held.settle(key)
            old = held.take(key)
            close(key, lsn, ts, one=held.alike)
            counted(gone(old, before, keycols), -1, lsn, ts)
            if net is not None:
                net["deleted"][key] = gone(old, before, keycols)
                net["stamp"][key] = (lsn, ts)
                net["src"].pop(key, None)
            continue
        if net is not None:
            net["deleted"].pop(key, None)
            net["stamp"][key] = (lsn, ts)
        if keep_history and not same:
            held.open_ver.setdefault(key, []).append(len(versions))
            versions.append([key, after, op, lsn, ts, None, None])
    return held, versions


def canonical_keys(rows: pa.Table, cols: list[dict]) -> dict:
    """For the columns that may name a row (key flagged, or every column of a version
    that flags none) and were sent under several types: each row's value as the text
    form of its newest type, per side (None where that does not hold it). The replay
    compares raw values, and an ``ALTER COLUMN id TYPE bigint`` changes them: in binary
    mode ``int4`` 2 is 4 bytes and ``int8`` 2 is 8, so the Update of a row inserted before
    the ``ALTER`` found no row and the snapshot held it twice; ``numeric`` ``5`` and
    ``5.00`` differ as text. Read by type, cast and written back as text, both are one key."""
    if not len(rows):
        return {}
    reps = column_set_ids(rows)[1]
    keyish = set()
    for cl in reps:
        keyish |= {c["name"] for c in cl or () if c["flags"] & 1} or {c["name"] for c in cl or ()}
    retyped = retyped_names(reps)
    mine = [c for c in cols if c["name"] in keyish and c["name"] in retyped]
    if not mine:
        return {}
    typed = typed_changes(rows, columns=mine)
    out = {}
    for side in ("before", "after"):
        struct = one_array(typed.column(side))
        out[side] = {}
        for c in mine:
            values = struct.field(c["name"])
            texts = [text_form(v) for v in values.to_pylist()]
            # a text form the column's own parser does not read back as the value: not used
            try:
                back = convert_column(pa.array(["n" if t is None else "t" for t in texts], pa.string()),
                                      pa.array(texts, pa.binary()), *type_of(c)).values
                same = pc.fill_null(pc.equal(back, values), False).to_numpy(zero_copy_only=False)
            except (ConversionError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                continue
            out[side][c["name"]] = [t if ok else None for t, ok in zip(texts, same, strict=True)]
    return out


def typed_rows(rowdicts: list[dict], cols: list[dict], registry=None):
    """Columns ``cols`` of replayed images (column -> raw value), typed; a value held
    with its own type (:func:`replay`) is read by it and cast."""
    if any(len(v) > 2 for r in rowdicts for v in r.values()):
        return typed_rows_of_types(rowdicts, cols, registry)
    triples = []
    for c in cols:
        vals = [r.get(c["name"]) or ("n", None) for r in rowdicts]
        triples.append((pa.array([v[0] for v in vals], pa.string()), pa.array([v[1] for v in vals], pa.binary()),
                        None))
    return columns_out(triples, cols, registry)


def typed_rows_of_types(rowdicts: list[dict], cols: list[dict], registry=None):
    """:func:`typed_rows` where some values were sent under an earlier type: every
    column's values in one flat child, indexed by type (:func:`columns_out`)."""
    n = len(rowdicts)
    kinds, data, triples, variants = [], [], [], {}
    for c in cols:
        main = np.full(n, -1, dtype=np.int64)
        for i, r in enumerate(rowdicts):
            v = r.get(c["name"])
            if v is None:
                continue
            idx = variant_index(variants, c["name"], v[2], n) if len(v) > 2 else main
            idx[i] = len(kinds)
            kinds.append(v[0])
            data.append(v[1])
        triples.append(main)
    k, d = pa.array(kinds, pa.string()), pa.array(data, pa.binary())
    return columns_out([(k, d, main) for main in triples], cols, registry, variants)


def snapshot(changes: pa.Table, name: str, as_of_lsn: int | None = None, *, registry=None,
             missing: dict | None = None, base=None, base_lsn=None) -> pa.Table:
    """The table as of commit LSN ``as_of_lsn`` (inclusive; None = all changes): the
    columns of the Relation in force then (:func:`columns_in_force`). ``missing``:
    {column: value} that the server gave a column added to the table (``ADD COLUMN …
    DEFAULT``) in the rows older than it, which no change has sent since: pgoutput sends
    nothing for them, so they are null unless named here (:func:`missing_values`).

    ``base``/``base_lsn``: the table's rows as of an LSN (:mod:`.base`: an Arrow table, a
    Parquet path, or a mapping by table name), acting as copied rows ('R') committed
    then: the changes committed at or below it are in them and are skipped, the later
    ones applied on top. A table with no copied row and no base warns
    (:class:`.rules.IncompleteTableWarning`)."""
    rows = rows_of(changes, name, as_of_lsn)
    if base_for(base, base_lsn, name)[0] is not None:
        raise ValueError("a base is applied by pgoutput_codec.tables.snapshot (over net changes)")
    if base is not KNOWN:
        warn_incomplete(rows if as_of_lsn is None else rows.filter(pc.fill_null(pc.less_equal(
            rows.column("commit_lsn"), pa.scalar(as_of_lsn, pa.uint64())), False)), name)
    cols = table_columns(changes, name, _rows=rows)
    registry = table_registry(rows, registry)
    fill = missing_values(missing, cols, registry).raw
    if as_of_lsn is not None and len(rows):
        rows = rows.filter(pc.fill_null(pc.less_equal(rows.column("commit_lsn"), pa.scalar(as_of_lsn, pa.uint64())),
                                        False))
    held, _ = replay(rows, name, False, cols=cols)
    current = columns_in_force(rows)
    shown = cols if current is None else [c for c in cols if c["name"] in current]
    arrays, names = typed_rows(filled(held.rows(), fill), shown, registry)
    return pa.Table.from_arrays(arrays, names=names) if names else pa.table({})


def history(changes: pa.Table, name: str, *, registry=None, base=None, base_lsn=None) -> pa.Table:
    """Every version of every row (SCD type 2): typed columns, ``__OP`` (the change that
    made the version), ``__START_LSN``/``__START_AT`` (its commit) and
    ``__END_LSN``/``__END_AT`` (the commit that replaced or deleted it; null = current).
    A table column bearing one of these names keeps it; the other column is named apart
    (``___OP``: :func:`~pgoutput_codec.idents.free_name`, :func:`history_names`).

    ``base``/``base_lsn``: the table's rows as of an LSN (:mod:`.base`), a version each
    (``__OP`` 'R', ``__START_LSN`` the base's LSN, ``__START_AT`` null); the changes
    committed at or below it are in them and are skipped. A table with no copied row
    and no base warns (:class:`.rules.IncompleteTableWarning`)."""
    rows = rows_of(changes, name)
    b, b_lsn = base_for(base, base_lsn, name)
    if b is not None:
        return history_over_base(rows, name, lambda later: history(later, name, registry=registry, base=KNOWN),
                                 lambda later: typed_changes(later, registry=registry), b, b_lsn)
    if base is not KNOWN:
        warn_incomplete(rows, name)
    cols = table_columns(changes, name, _rows=rows)
    registry = table_registry(rows, registry)
    _, versions = replay(rows, name, True, cols=cols)
    arrays, names = typed_rows([v[1] for v in versions], cols, registry)
    extra = [pa.array([v[2] for v in versions], pa.string()), pa.array([v[3] for v in versions], pa.uint64()),
             pa.array([v[4] for v in versions], TS), pa.array([v[5] for v in versions], pa.uint64()),
             pa.array([v[6] for v in versions], TS)]
    return pa.Table.from_arrays(arrays + extra, names=names + history_names(names))


#: history's own columns, in their order
HISTORY_COLUMNS = ("__OP", "__START_LSN", "__START_AT", "__END_LSN", "__END_AT")


def history_names(columns: list) -> list:
    """The names of :func:`history`'s own columns (:data:`HISTORY_COLUMNS`) beside the
    table's ``columns``: each its own, or named apart from a table column bearing it
    (:func:`~pgoutput_codec.idents.free_name`). Shared with the Spark path."""
    return [free_name(c, set(columns)) for c in HISTORY_COLUMNS]
