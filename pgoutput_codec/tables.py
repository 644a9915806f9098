"""Tables from change rows: typed changes of one table, its snapshot, its history.

All of them take the output of ``decode_changes`` (``schema.CHANGE_SCHEMA``) in the
order it gives (commit order; arrival order inside a transaction) and never re-sort by a
change's own LSN. The outputs of several incremental runs read back together may come
in another order of their runs (a lake directory): :func:`_in_commit_order` puts whole
runs back in commit order first.

A table is the relation that bears its name at the end of the changes (or as of
``as_of_lsn``), not every relation that ever bore it: see :func:`_resolve`.

- :func:`table_changes` — one row per change of the table, ``before``/``after`` as
  structs of typed columns (types from ``typecatalog``), plus the commit facts and
  ``unchanged`` (columns sent as 'u': unchanged TOAST, value not in the message). A
  'u' value the message's old image holds is taken from there: under REPLICA IDENTITY
  FULL PostgreSQL sends the old row with its TOAST values inline, so those changes
  carry every value.
- :func:`snapshot` — the table's rows as of a commit LSN (default: everything), rebuilt
  by replica-identity key (FULL identity: the whole old row), deletes removing,
  truncates clearing, unchanged TOAST values taken from the message's old image or
  carried from the earlier image.
- :func:`history` — every version of every row with the commit range it was valid in
  (SCD type 2: ``__START_AT``/``__END_AT`` commit times, ``__START_LSN``/``__END_LSN``).
- :func:`net_changes` — one row per key changed: its last image or its deletion (and
  a truncate), the batch an incremental run applies to a copy of the table by MERGE.

Values that Arrow cannot hold (``infinity`` dates, ``NaN`` numerics…) are null with a
``<column>__special`` string column saying what they were (see docs/types.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._gather import take_table
from .changes import ChangeDecoder, LightChangeDecoder
from .relations import bearer, merge_columns, one_bearer, split_name
from .schema import CHANGE_SCHEMA, TS, relation_fingerprint
from .casts import BOOL as BOOL_OID
from .casts import to_bool as bool_text
from .retyped import retyped_names, text_form, with_earlier_types
from .typecatalog.columns import convert_column, convert_columns
from .typecatalog.columns import materialize as _materialize
from .typecatalog.columns import take_at as _take_at
from .typecatalog.errors import ConversionError

__all__ = ["table_changes", "decode_table_changes", "snapshot", "history", "net_changes", "table_columns"]

_COMMIT_COLS = ["op", "seq", "lsn", "xid", "commit_lsn", "commit_ts", "origin"]


def _one_array(col) -> pa.Array:
    """A table column as one array; a single chunk as is (``combine_chunks`` copies even
    then, which cost 5 ms per 200k-row tuple column)."""
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _rows_of(changes: pa.Table, name: str, as_of_lsn: int | None = None) -> pa.Table:
    """The rows of the table named ``name`` (as of ``as_of_lsn``): see :func:`_resolve`."""
    return _resolve(changes, name, as_of_lsn)[0]


def _holder(versions: list, row_versions):
    """Which relation holds a name (:func:`_resolve`): ``versions`` is one
    (relation, named so) per Relation version, ``row_versions()`` the version index of
    every change row in order (-1: none; asked only when the name moved). Gives (the
    indexes of the holder's versions, whether another relation bore the name)."""
    one = one_bearer(versions)
    if one or not any(ok for _, ok in versions):
        return one, False
    ids = row_versions()
    named = {r for r, ok in versions if ok}
    last = [None] * len(versions)
    for k, (r, _) in enumerate(versions):
        if r in named:    # (the other relations' versions do not matter: one scan each of a few)
            at = np.flatnonzero(ids == k)
            last[k] = int(at[-1]) if len(at) else None
    return bearer(versions, last)


def _as_change_rows(changes: pa.Table) -> pa.Table:
    """Change rows with ``schema.CHANGE_SCHEMA``'s types, as given when they have them.
    Spark's change rows written to Parquet and read back here hold them as Spark types:
    the uint64 columns (``lsn``, ``commit_lsn``, ``relation_version``) as decimal(20,0),
    uint32 as int64, uint8 as int16, ``commit_ts`` as naive nanoseconds (INT96, UTC)
    — the same values, cast back (checked: a value out of range raises, never wraps).
    ``xid`` passes as given: openGauss's are 64-bit (``OPENGAUSS_CHANGE_SCHEMA``) and
    the table functions only carry it. So do other columns (``commit_rank``,
    PERMISSIVE's ``error``)."""
    want = {f.name: f.type for f in CHANGE_SCHEMA if f.name != "xid"}
    fields = [pa.field(f.name, want.get(f.name, f.type)) for f in changes.schema]
    if all(f.type.equals(changes.schema.field(i).type) for i, f in enumerate(fields)):
        return changes
    try:
        return changes.cast(pa.schema(fields))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ValueError(f"these are not change rows (schema.CHANGE_SCHEMA, or Spark's decode_changes rows): {e}") \
            from None


def _in_commit_order(changes: pa.Table) -> pa.Table:
    """The change rows in commit order; as given (one check, no copy) when they already
    are, as the rows of one run are. The rows of several runs read back together — a
    lake directory of run outputs, which ``pq.read_table`` reads in file-name order and
    Spark writes under random names — may come in another order of their runs, and a
    table rebuilt from them in that order takes an earlier run's image for the newest.

    Rows that carry ``commit_rank`` (Spark's, ``ControlPlan.changes``'; ranks rise
    across resumed runs) are sorted by (``commit_rank``, ``seq``). Others by
    ``commit_lsn``, but only as whole runs: where the commit LSN goes down the rows are
    cut into runs, and the runs are put in the order of their commit LSNs when their
    ranges do not overlap (a run gives whole transactions, each once). Ranges that
    overlap are not runs out of order but what ``replays="keep"`` lets through (a
    transaction received twice; a timeline switch, where LSNs start again lower), and
    LSNs cannot order those: the rows stay as given. So do rows with a null key."""
    if "commit_rank" in changes.column_names and "seq" in changes.column_names:
        rank, seq = changes.column("commit_rank"), changes.column("seq")
        if not rank.null_count and not seq.null_count:
            r, s = _one_array(rank).to_numpy(), _one_array(seq).to_numpy()
            if np.any((r[1:] < r[:-1]) | ((r[1:] == r[:-1]) & (s[1:] < s[:-1]))):
                return take_table(changes, np.lexsort((s, r)))
            return changes
    cl = changes.column("commit_lsn")
    if cl.null_count or len(cl) < 2:
        return changes
    c = _one_array(cl).to_numpy()
    cuts = np.flatnonzero(c[1:] < c[:-1]) + 1
    if not len(cuts):
        return changes
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(c)]])
    order = np.argsort(c[starts], kind="stable")
    if np.any(c[starts[order[1:]]] <= c[ends[order[:-1]] - 1]):   # ranges overlap
        return changes
    return take_table(changes, np.concatenate([np.arange(starts[k], ends[k]) for k in order]))


def _resolve(changes: pa.Table, name: str, as_of_lsn: int | None = None):
    """(the rows of the table named ``name`` — of the relation that bore it as of
    ``as_of_lsn``, all of them —, whether another relation held the name before it in
    these changes).

    A table is its relation (the ``relation_id`` its Relation messages carry), not its
    name: pgoutput sends no message for ``DROP TABLE`` or for a rename, so an archive
    in which ``t`` was dropped and created again, or swapped with a copy built beside it
    (``t_new`` renamed to ``t``: a full refresh), holds the rows of two relations named
    ``t``, and the server's ``t`` is only the last one. The table named ``name`` is the
    relation last changed under that name (by ``as_of_lsn``), unless it has been
    changed under another name since (then none is: an empty table); its rows are all
    of that relation's, under whatever name each was sent (a renamed table keeps its
    history). A relation renamed away shows it only by a change under its new name:
    until then it still holds the old one. openGauss rows carry no relation id: there
    the name is the table.

    Rows are selected once per relation version (few, by ``relation_version``), then
    with one vector ``is_in`` on the uint64 fingerprint instead of string comparisons."""
    schema, table = split_name(name)
    if not len(changes):
        return changes, False
    changes = _in_commit_order(_as_change_rows(changes))
    fp = changes.column("relation_version")
    uniq = pc.unique(fp)
    sch, tbl, rel = changes.column("schema"), changes.column("table"), changes.column("relation_id")
    first = {}        # fingerprint -> (its relation, named so), from its first change
    for u in uniq.to_pylist():
        if u is not None:
            i = pc.index(fp, pa.scalar(u, pa.uint64())).as_py()
            s_i, t_i, r_i = sch[i].as_py(), tbl[i].as_py(), rel[i].as_py()
            first[u] = (r_i if r_i is not None else (s_i, t_i), s_i == schema and t_i == table)
    fps = list(first)

    def row_versions():
        ids = pc.fill_null(pc.index_in(fp, value_set=pa.array(fps, pa.uint64())), -1).to_numpy(zero_copy_only=False)
        if as_of_lsn is not None:   # the changes committed after it do not count
            later = pc.fill_null(pc.greater(changes.column("commit_lsn"), pa.scalar(as_of_lsn, pa.uint64())), True)
            ids = np.where(later.to_numpy(zero_copy_only=False), -1, ids)
        return ids
    chosen, replaced = _holder([first[u] for u in fps], row_versions)
    mine = [fps[k] for k in chosen]
    if changes.column("op").null_count or fp.null_count:   # 'C' markers and unknown relations
        mask = pc.or_kleene(pc.and_(pc.is_null(fp), pc.and_(pc.equal(sch, schema), pc.equal(tbl, table))),
                            pc.is_in(fp, value_set=pa.array(mine, pa.uint64())))
        return changes.filter(pc.fill_null(mask, False)), replaced
    if len(mine) == len(uniq):          # every row is this table's: no copy
        return changes, replaced
    mask = pc.is_in(fp, value_set=pa.array(mine, pa.uint64())).to_numpy(zero_copy_only=False)
    return take_table(changes, np.flatnonzero(mask)), replaced


def _column_set_ids(rows: pa.Table):
    """(id per row, one column list per id): rows grouped by ``relation_version`` (a
    fingerprint of the Relation definition), so column lists are never compared."""
    fp = _one_array(rows.column("relation_version"))
    uniq = pc.unique(pc.drop_null(fp)) if fp.null_count != len(fp) else pa.array([], pa.uint64())
    ids = pc.fill_null(pc.index_in(fp, value_set=uniq), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    cols = rows.column("columns")
    reps = [cols[int(pc.index(fp, u).as_py())].as_py() for u in uniq]
    return ids, reps


def table_columns(changes: pa.Table, name: str, *, _rows: pa.Table | None = None) -> list[dict]:
    """The table's columns (name, type_oid, type_modifier, flags) over all its Relation
    versions in the changes, newest definition of each column winning, in the order of
    the newest version (columns dropped later keep their place at the end)."""
    rows = _rows if _rows is not None else _rows_of(changes, name)
    if not len(rows):
        return []
    reps = _column_set_ids(rows)[1]
    return merge_columns(reps, rows.column("columns")[len(rows) - 1].as_py() or [])


def _validity(arr: pa.Array) -> np.ndarray:
    """An array's validity as numpy bools, unpacked from its bitmap (``is_valid()`` then
    ``to_numpy`` builds a boolean Arrow array first: 15x slower, 0.15 ms on 200 k rows)."""
    bits = np.frombuffer(arr.buffers()[0], np.uint8)
    return np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].view(bool)


class Located(NamedTuple):
    """Where the values of one side's columns sit (:func:`_locate`)."""
    kinds: pa.Array
    data: pa.Array
    #: column -> index of each row's element (int64 array, or ``(offsets, k)``), -1 where
    #: the row has no value of the column's type (no image, no such column, or a value
    #: sent under another type: ``variants``)
    where: dict
    present: np.ndarray
    #: column -> {(type_oid, type_modifier): index}: the rows whose Relation version gave
    #: the column another type than ``cols`` (an ``ALTER COLUMN … TYPE`` in the archive)
    variants: dict

    def everywhere(self, name) -> np.ndarray:
        """Column ``name``'s index over all rows, whatever type each was sent under."""
        return _merged_index(self.where[name], self.variants.get(name, {}).values())


def _merged_index(index, others) -> np.ndarray:
    """``index`` with the elements of the indexes ``others`` (disjoint rows) put in."""
    at = _materialize(index)
    for idx in others:
        idx = _materialize(idx)
        at = np.where(idx >= 0, idx, at)
    return at


def _variant_index(variants: dict, name: str, t: tuple, n: int) -> np.ndarray:
    """The index of column ``name``'s values sent under type ``t`` (made, all -1, at first)."""
    of_name = variants.setdefault(name, {})
    if t not in of_name:
        of_name[t] = np.full(n, -1, dtype=np.int64)
    return of_name[t]


def _type_of(c: dict) -> tuple:
    return c["type_oid"], c["type_modifier"]


def _locate(tuples: pa.Array, pos, ids: np.ndarray, reps: list, cols: list[dict]) -> Located:
    """Where every column of ``cols`` sits in the flat tuple children of ``tuples`` (a
    list<struct<kind, data>> array), with ``present`` the rows that have an image.
    Row ``i`` is list ``pos[i]`` of ``tuples`` (``pos`` None: list ``i``); ``ids[i]``
    indexes ``reps``, the column list of its Relation version (-1: unknown). A value is
    read by the type its own Relation version gave the column: where that is not the
    type in ``cols`` (the newest), it is located in ``variants``, converted by its type
    and cast (:func:`_columns_out`). The converters read the values in place, so no
    column is gathered (a gather per column cost more than the conversion)."""
    flat = tuples.values          # the offsets below index it directly
    kinds_all = flat.field("kind")
    data_all = flat.field("data")
    offs_all = tuples.offsets.to_numpy()
    valid_all = _validity(tuples) if tuples.null_count else None
    if pos is None:
        n = len(tuples)
        offsets, lengths = offs_all[:-1], np.diff(offs_all)
        valid = valid_all if valid_all is not None else np.ones(n, bool)
    else:
        n = len(pos)
        offsets = offs_all[pos]
        lengths = offs_all[pos + 1]
        lengths -= offsets
        valid = valid_all[pos] if valid_all is not None else np.ones(n, bool)
    valid = valid & (ids >= 0)
    types = {c["name"]: _type_of(c) for c in cols}
    variants: dict = {}
    if len(reps) == 1 and bool(valid.all()) and bool((lengths >= len(reps[0] or ())).all()):
        # one definition, every row imaged: all columns share the row offsets
        base = offsets.astype(np.int64)
        out = {}
        for p, c in enumerate(reps[0] or ()):
            if c["name"] not in types:    # not asked for
                continue
            if types[c["name"]] == _type_of(c):
                out[c["name"]] = (base, p)
            else:
                variants[c["name"]] = {_type_of(c): (base, p)}
        for c in cols:
            if c["name"] not in out:
                out[c["name"]] = np.full(n, -1, dtype=np.int64)
        return Located(kinds_all, data_all, out, valid, variants)
    out = {c["name"]: np.full(n, -1, dtype=np.int64) for c in cols}
    for k, cl in enumerate(reps):
        rows_k = np.flatnonzero(ids == k)
        for p, c in enumerate(cl or ()):
            sel = rows_k[valid[rows_k] & (lengths[rows_k] > p)]
            name, t = c["name"], _type_of(c)
            if name not in out:       # not asked for
                continue
            at = out[name] if types[name] == t else _variant_index(variants, name, t, n)
            at[sel] = offsets[sel] + p
    return Located(kinds_all, data_all, out, valid, variants)


def _raw_fallback(kinds, data, index, err):
    """A column the catalog cannot type as a whole (e.g. an array column holding arrays
    of different dimensionality) stays raw (binary: the text or send form as sent) with
    ``__special`` = the conversion error, so nothing is lost."""
    if index is not None:
        kinds, data = _take_at(kinds, data, _materialize(index))
    data = data.cast(pa.binary()) if not pa.types.is_binary(data.type) else data
    raw = pc.if_else(pc.is_in(kinds, value_set=pa.array(["t", "b"])), data, pa.nulls(len(data), pa.binary()))
    return raw, pa.array([str(err)] * len(data), pa.string())


def _columns_out(triples: list, cols: list[dict], registry=None, variants=None):
    """``triples``: (kinds, data, index or None) per column of ``cols``; the indexed ones
    share one flat tuple child and are converted together (``convert_columns``), with
    the values ``variants`` (:class:`Located`) says were sent under another type."""
    variants = variants or {}
    results, earlier = [None] * len(cols), {}
    indexed = [j for j, t in enumerate(triples) if t[2] is not None]
    extra = [(j, t, idx) for j in indexed for t, idx in variants.get(cols[j]["name"], {}).items()]
    if indexed:
        kinds, data, _ = triples[indexed[0]]
        conv = convert_columns(kinds, data, [_type_of(cols[j]) for j in indexed] + [t for _, t, _ in extra],
                               registry, indexes=[triples[j][2] for j in indexed] + [idx for _, _, idx in extra])
        for j, r in zip(indexed, conv[:len(indexed)], strict=True):
            results[j] = r
        for (j, t, idx), r in zip(extra, conv[len(indexed):], strict=True):
            earlier.setdefault(j, []).append((t, idx, r))
    for j, (kinds, data, _) in enumerate(triples):
        if results[j] is None:
            try:
                results[j] = convert_column(kinds, data, cols[j]["type_oid"], cols[j]["type_modifier"], registry)
            except ConversionError as e:
                results[j] = e
    arrays, names = [], []
    for j, (c, (kinds, data, index), r) in enumerate(zip(cols, triples, results, strict=True)):
        if isinstance(r, ConversionError):
            if index is not None and j in earlier:   # every value raw, whatever its type
                index = _merged_index(index, [idx for _, idx, _ in earlier[j]])
            values, special = _raw_fallback(kinds, data, index, r)
        else:
            values, special = r.values, r.special
            if index is not None and j in earlier:
                values, special = with_earlier_types(values, special, kinds, data, c, earlier[j], registry)
        arrays.append(values)
        names.append(c["name"])
        if special is not None and special.null_count != len(special):
            arrays.append(special)
            names.append(c["name"] + "__special")
    return arrays, names


def _kind_bytes(kinds: pa.Array) -> np.ndarray:
    """The one-byte kinds ('n' 'u' 't' 'b') of a flat tuple child as a uint8 array."""
    if not len(kinds):
        return np.zeros(0, np.uint8)
    offs = np.frombuffer(kinds.buffers()[1], np.int32, count=kinds.offset + len(kinds) + 1)[kinds.offset:]
    data = np.frombuffer(kinds.buffers()[2], np.uint8)
    out = np.full(len(kinds), ord("n"), np.uint8)
    ok = (offs[1:] - offs[:-1]) == 1
    if kinds.null_count:
        ok &= kinds.is_valid().to_numpy(zero_copy_only=False)
    out[ok] = data[offs[:-1][ok]]
    return out


def _typed_changes(head: dict, sides: dict, cols: list[dict], n: int, registry) -> pa.Table:
    """The ``table_changes`` table from its commit columns ``head`` and, per side
    ('before'/'after'), the ``_locate`` result (or None: no row has that image)."""
    out = dict(head)
    names = [c["name"] for c in cols]
    typed = {}
    for side in ("after", "before"):
        loc = sides.get(side)
        if loc is None:
            continue
        kinds, data, where, present, variants = loc
        arrays, anames = _columns_out([(kinds, data, where[c["name"]]) for c in cols], cols, registry, variants)
        mask = None if present.all() else pa.array(~present)
        typed[side] = pa.StructArray.from_arrays(arrays, names=anames, mask=mask) if cols else \
            pa.nulls(n, pa.struct([]))
    struct_type = (typed.get("after") if "after" in typed else typed.get("before"))
    struct_type = struct_type.type if struct_type is not None else pa.struct([])
    for side in ("before", "after"):
        out[side] = typed[side] if side in typed else pa.nulls(n, struct_type)
    # unchanged-TOAST columns ('u') per row: few rows have them; one scan of the
    # after-tuples' kind bytes says whether any value is 'u' at all (rarely)
    unchanged = None
    if sides.get("after") is not None:
        kinds = sides["after"].kinds
        # kinds are one byte each (longer ones fail conversion): the data buffer holds them
        if len(kinds) and (np.frombuffer(kinds.buffers()[2], np.uint8) == ord("u")).any():
            kb = _kind_bytes(kinds)
            at = {nm: sides["after"].everywhere(nm) for nm in names}
            is_u = {nm: (at[nm] >= 0) & (kb[np.maximum(at[nm], 0)] == ord("u")) for nm in names}
            if "before" in typed:
                is_u = _fill_from_before(out, typed, sides["before"], is_u, n)
            flags = np.logical_or.reduce([is_u[nm] for nm in names]) if names else np.zeros(n, bool)
            unchanged = [None] * n
            for i in np.flatnonzero(flags):
                unchanged[i] = [nm for nm in names if is_u[nm][i]]
    out["unchanged"] = pa.array(unchanged, pa.list_(pa.string())) if unchanged is not None else \
        pa.nulls(n, pa.list_(pa.string()))
    return pa.table(out)


def _fill_from_before(out: dict, typed: dict, before_loc, is_u: dict, n: int) -> dict:
    """Unchanged-TOAST ('u') values of ``after`` that the old image of the same message
    holds: taken from it. Under REPLICA IDENTITY FULL PostgreSQL sends the old row with
    its TOAST values inline (checked on 15, 16 and 18: 'O' tuple 't', new tuple 'u'),
    so the change carries the value after all. Sets ``out["after"]``; returns ``is_u``
    without the values filled."""
    kb = _kind_bytes(before_loc.kinds)
    after, before = typed["after"], typed["before"]
    cols = [(f.name, after.field(f.name)) for f in after.type]
    pos = {name: i for i, (name, _) in enumerate(cols)}
    new_special = {}      # column -> its __special, where only the old image had one
    left = dict(is_u)
    for nm, u in is_u.items():
        if not u.any() or before.type.get_field_index(nm) < 0:
            continue
        at = before_loc.everywhere(nm)
        take = u & (at >= 0) & np.isin(kb[np.maximum(at, 0)], (ord("t"), ord("b")))
        if not take.any():
            continue
        try:
            value = before.field(nm).cast(cols[pos[nm]][1].type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):   # typed apart (arrays of other dims)
            continue
        mask = pa.array(take)
        cols[pos[nm]] = (nm, pc.if_else(mask, value, cols[pos[nm]][1]))
        sp = nm + "__special"
        b_sp = before.field(sp) if before.type.get_field_index(sp) >= 0 else pa.nulls(n, pa.string())
        if sp in pos:
            cols[pos[sp]] = (sp, pc.if_else(mask, b_sp, cols[pos[sp]][1]))
        elif b_sp.filter(mask).null_count != int(take.sum()):
            new_special[nm] = pc.if_else(mask, b_sp, pa.nulls(n, pa.string()))
        left[nm] = u & ~take
    arrays, names = [], []
    for name, arr in cols:
        arrays.append(arr)
        names.append(name)
        if name in new_special:
            arrays.append(new_special[name])
            names.append(name + "__special")
    mask = None if after.null_count == 0 else pc.invert(after.is_valid())
    out["after"] = pa.StructArray.from_arrays(arrays, names=names, mask=mask)
    return left


def table_changes(changes: pa.Table, name: str, *, registry=None) -> pa.Table:
    """The changes of one table (``"schema.table"``) with typed ``before``/``after``:
    of the relation that bears the name, under whatever name each change was sent
    (:func:`_resolve`)."""
    return typed_changes(_rows_of(changes, name), registry=registry)


def typed_changes(rows: pa.Table, *, registry=None, columns: list[dict] | None = None) -> pa.Table:
    """:func:`table_changes` of change rows that are all one table's (chosen already:
    Spark's ``table_changes`` over any DataFrame types each batch of them, by the
    ``columns`` of the whole table: a batch's own newest definition can be an earlier one)."""
    cols = columns if columns is not None else table_columns(rows, "", _rows=rows)
    n = len(rows)
    head = {c: rows.column(c) for c in _COMMIT_COLS if c in rows.column_names}
    ids, reps = _column_set_ids(rows) if n else (np.zeros(0, np.int64), [])
    sides = {}
    for side in ("after", "before"):
        col = _one_array(rows.column(side))
        if side == "after" or (n and col.null_count != n):   # no old images at all: all-null struct
            sides[side] = _locate(col, None, ids, reps, cols)
    return _typed_changes(head, sides, cols, n, registry)


def decode_table_changes(input, name: str, *, registry=None, **options) -> pa.Table:
    """``table_changes(decode_changes(input, **options), name)`` in one step, without the
    generic change rows: the decoder keeps only where each change's values are (its
    message row and Relation version) and the converters read them in place from the
    decoded messages. Same result, ~1.7x faster than the two steps (``bench/changes_bench.py``).
    One input in one call (no ``state`` to resume from: use :class:`ChangeDecoder` and
    :func:`table_changes` for chunked decoding)."""
    dec = LightChangeDecoder(registry=registry, **options)   # learns domains from Type messages
    light = dec.feed(input)
    schema, table = split_name(name)
    ver_all = _one_array(light.column("_ver")).to_numpy(zero_copy_only=False)
    # the relation that bears the name (_resolve's rule), by each row's Relation version
    mine = np.asarray(_holder([(d["relation_id"] if d["relation_id"] is not None else (d["schema"], d["table"]),
                                d["schema"] == schema and d["table"] == table) for d in dec.walk.versions],
                              lambda: ver_all)[0], dtype=np.int64)
    keep = (ver_all >= 0) if len(mine) == len(dec.walk.versions) else np.isin(ver_all, mine)
    rows = light if keep.all() else light.filter(pa.array(keep))
    n = len(rows)
    head = {c: rows.column(c) for c in _COMMIT_COLS if c in rows.column_names}
    if not n:
        return table_changes(_empty_changes(options), name, registry=registry)
    src = _one_array(rows.column("_src")).to_numpy(zero_copy_only=False)
    ver = ver_all[keep]
    # versions grouped by fingerprint, in order of first appearance, as table_changes does
    if ver.min() == ver.max():          # one Relation version (the common case): no sort
        uniq, first = ver[:1], np.zeros(1, np.int64)
    else:
        uniq, first = np.unique(ver, return_index=True)
    reps, rep_of_fp = [], {}
    ver_to_id = np.full(int(uniq.max()) + 1, -1, dtype=np.int64)
    for v in uniq[np.argsort(first, kind="stable")]:
        key = relation_fingerprint(dec.walk.versions[v])
        if key not in rep_of_fp:
            rep_of_fp[key] = len(reps)
            reps.append(dec.walk.versions[v]["columns"])
        ver_to_id[v] = rep_of_fp[key]
    ids = ver_to_id[ver]
    cols = merge_columns(reps, dec.walk.versions[int(ver[-1])]["columns"] or [])
    msgs = dec.last_batch
    pos = np.maximum(src, 0)
    ids = np.where(src >= 0, ids, -1)
    sides = {}
    for side, field in (("after", "new_tuple"), ("before", "old_tuple")):
        tuples = msgs.field(field)
        if side == "after" or tuples.null_count != len(tuples):
            loc = _locate(tuples, pos, ids, reps, cols)
            if side == "before" and not loc.present.any():
                continue
            sides[side] = loc
    return _typed_changes(head, sides, cols, n, registry)


def _empty_changes(options) -> pa.Table:
    return ChangeDecoder(**options).output_schema.empty_table()


def unknown_key_error(name: str, commit_lsn) -> str:
    """The refusal of an Update that names no old key on a table with no key column: its
    row cannot be found (PostgreSQL never sends one; an openGauss archive may, when its
    records never name the table's key). Shared with the Spark path."""
    return (f"{name}: an Update committed at {commit_lsn} carries no old key and no column of the table is a "
            "key, so the row it changed cannot be found; openGauss records name a key only in old tuples "
            f"(key changes, Deletes): declare it, decode_changes(..., keys={{'{name}': [...]}})")


NULL = ("n", None)


def _key(row: dict, keycols) -> tuple:
    """A row's key: its values of ``keycols``, a column the image lacks (added to the
    table after it was written) as NULL, which is what the server sends for it."""
    return tuple(row.get(k, NULL)[:2] for k in keycols)


def _unsaid(key: tuple) -> bool:
    """Whether a key holds a value no change said (unchanged TOAST, 'u'): the row's
    value there is unknown, so the key cannot name it exactly."""
    return any(v[0] == "u" for v in key)


def _gone(held: dict | None, before: dict, keycols) -> dict:
    """The image of a row a change removed: the one held (None: a row older than the
    changes), with the values of the key columns its old image sends over it (the
    server's, at that time; under FULL every column, TOASTed values inline; a key-only
    image's other columns are nulls it does not send)."""
    return {**(held or {}), **{k: v for k, v in before.items() if k in keycols and v[0] != "u"}}


class _Rows:
    """The rows a replay holds, keyed by the replica identity of the change being
    applied. Each change names its row by the key of its own Relation (primary key,
    index or, under FULL, the whole row), and a table's identity may change while the
    archive runs (``ALTER TABLE … REPLICA IDENTITY``): when a change's key columns are
    not the ones the rows are keyed by, every key held is re-made from the images
    (:meth:`rekey`), as a subscriber looks rows up by the key each change sends.

    ``store``: key → image; ``open_ver``: key → its current version (history);
    ``net`` (net_changes, or None): ``stamp`` key → last commit (lsn, ts), ``deleted``
    key → the image of a row the changes removed (its last image, else the old image
    that named it), ``src`` key → (key, key columns) of the row before these changes it
    descends from through key changes (None: inserted here), ``moved`` [(image, stamp)]:
    rows an Update moved off a net key (``keycols``, :func:`net_key`) that its own
    identity's key does not hold, ``truncated``. ``hides``: the identity in force does
    not hold every net key column (an Update may then move a row's net key unsaid)."""

    def __init__(self, net):
        self.keycols = None
        self.hides = False
        self.store: dict = {}
        self.vague: set = set()     # keys of store with an unsaid ('u') value: settle()
        self.open_ver: dict = {}
        self.net = net

    def rekey(self, keycols: tuple) -> None:
        if self.keycols is not None and keycols != self.keycols:
            live = {k: _key(row, keycols) for k, row in self.store.items()}
            self.store = {live[k]: row for k, row in self.store.items()}
            self.vague = {k for k in self.store if _unsaid(k)}
            self.open_ver = {live[k]: v for k, v in self.open_ver.items()}
            if self.net is not None:
                gone = {k: _key(row, keycols) for k, row in self.net["deleted"].items()}
                new_live = set(live.values())
                self.net["deleted"] = {gone[k]: row for k, row in self.net["deleted"].items()
                                       if gone[k] not in new_live}   # a live row of that key wins
                self.net["stamp"] = {live.get(k) or gone.get(k): s for k, s in self.net["stamp"].items()
                                     if k in live or k in gone}
                self.net["src"] = {live[k]: s for k, s in self.net["src"].items() if k in live}
        if keycols != self.keycols and self.net is not None:
            self.hides = not set(self.net["keycols"]) <= set(keycols)
        self.keycols = keycols

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
        if k in self.open_ver:
            self.open_ver[key] = self.open_ver.pop(k)
        if self.net is not None:
            for part in ("stamp", "src"):
                if k in self.net[part]:
                    self.net[part][key] = self.net[part].pop(k)


def _replay(rows: pa.Table, name: str, keep_history: bool, net: dict | None = None, cols: list | None = None):
    """Replay one table's changes (``rows``, :func:`_resolve`'s) on raw (kind, data)
    values, keyed by replica identity (:class:`_Rows`; ``net``: its ``net`` dict, filled).
    A value sent under another type than the column's in ``cols`` (the table's columns;
    an ``ALTER COLUMN … TYPE`` in the archive) is held as (kind, data, (type_oid,
    type_modifier)), and :func:`_typed_rows` reads it by that type."""
    held = _Rows(net)
    versions = []   # (key, row, start_lsn, start_ts, op) ; end filled when replaced
    if cols is None:
        cols = table_columns(rows, "", _rows=rows) if len(rows) else []
    newest = {c["name"]: _type_of(c) for c in cols}
    odd_of: dict = {}    # relation_version -> [(column, type)] of its columns typed otherwise
    canon = _canonical_keys(rows, cols)
    listed, listed_fp = None, object()   # the column names of the change before (None: none yet)

    def close(key, lsn, ts):
        if keep_history and key in held.open_ver:
            versions[held.open_ver.pop(key)][5:7] = [lsn, ts]

    for i, r in enumerate(rows.to_pylist()):
        op = r["op"]
        lsn, ts = r["commit_lsn"], r["commit_ts"]
        if op == "T":
            for key in list(held.store):
                close(key, lsn, ts)
            held.store.clear()
            if net is not None:
                net.update(truncated=(lsn, ts), stamp={}, deleted={}, src={}, moved=[])
            continue
        if op not in ("I", "U", "D"):
            continue
        rcols = r["columns"] or []
        names = [c["name"] for c in rcols]
        fp = r.get("relation_version")
        if rcols and (fp is None or fp != listed_fp):
            new = set(added_columns(listed, names)) if listed is not None and names != listed else ()
            if new:
                # a column added since the rows held were stored is not in them: where one
                # of its name was (dropped, then added again), that value is the dropped
                # column's. history keeps its versions' images as sent (new dicts here)
                for k, img in held.store.items():
                    if not new.isdisjoint(img):
                        held.store[k] = {c: v for c, v in img.items() if c not in new}
            listed, listed_fp = names, fp
        flagged = [c["name"] for c in rcols if c["flags"] & 1]
        keycols = tuple(flagged or names)
        held.rekey(keycols)
        store = held.store
        before = dict(zip(names, [(v["kind"], v["data"]) for v in r["before"]], strict=False)) \
            if r["before"] is not None else None
        after = dict(zip(names, [(v["kind"], v["data"]) for v in r["after"]], strict=False)) \
            if r["after"] is not None else None
        odd = odd_of.get(fp) if fp is not None else None
        if odd is None:
            odd = [(c["name"], _type_of(c)) for c in rcols if newest.get(c["name"], _type_of(c)) != _type_of(c)]
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
        if op == "I":
            key = _key(after, keycols)
            close(key, lsn, ts)
            store[key] = after
            if net is not None:
                net["src"][key] = None
        elif op == "U":
            # the old image ('K' key or 'O' whole row under FULL identity) names the row;
            # without one the key did not change
            if before is None and not flagged:
                raise ValueError(unknown_key_error(name, lsn))
            src = before if before is not None else after
            old_key = _key(src, keycols)
            held.settle(old_key)
            old = store.pop(old_key, None)
            new = dict(after)
            for k, v in after.items():
                if v[0] == "u":            # unchanged TOAST: the old image's value (FULL identity
                    # sends it inline), else carry the earlier value
                    b = (before or {}).get(k)
                    new[k] = b if b is not None and b[0] in ("t", "b") else (old or {}).get(k, v)
            new_key = _key(new, keycols)
            close(old_key, lsn, ts)
            close(new_key, lsn, ts)
            store[new_key] = new
            if _unsaid(new_key):
                held.vague.add(new_key)
            after = new
            key = new_key
            if net is not None:
                src = net["src"].pop(old_key) if old_key in net["src"] else (old_key, keycols)
                net["src"][new_key] = src
                if old_key != new_key:
                    net["deleted"][old_key] = _gone(old, before, keycols)
                    net["stamp"][old_key] = (lsn, ts)
                elif held.hides and old is not None and _key(old, net["keycols"]) != _key(new, net["keycols"]):
                    # the net key holds a column this identity's key does not (u under
                    # DEFAULT, before USING INDEX (u)): the row left that net key unsaid
                    net["moved"].append((old, (lsn, ts)))
        else:   # "D"
            key = _key(before, keycols)
            held.settle(key)
            old = store.pop(key, None)
            close(key, lsn, ts)
            if net is not None:
                net["deleted"][key] = _gone(old, before, keycols)
                net["stamp"][key] = (lsn, ts)
                net["src"].pop(key, None)
            continue
        if net is not None:
            net["deleted"].pop(key, None)
            net["stamp"][key] = (lsn, ts)
        if keep_history:
            held.open_ver[key] = len(versions)
            versions.append([key, after, op, lsn, ts, None, None])
    return held.store, versions


def _canonical_keys(rows: pa.Table, cols: list[dict]) -> dict:
    """For the columns that may name a row (key flagged, or every column of a version
    that flags none) and were sent under several types: each row's value as the text
    form of its newest type, per side (None where that does not hold it). The replay
    compares raw values, and an ``ALTER COLUMN id TYPE bigint`` changes them: in binary
    mode ``int4`` 2 is 4 bytes and ``int8`` 2 is 8, so the Update of a row inserted before
    the ``ALTER`` found no row and the snapshot held it twice; ``numeric`` ``5`` and
    ``5.00`` differ as text. Read by type, cast and written back as text, both are one key."""
    if not len(rows):
        return {}
    reps = _column_set_ids(rows)[1]
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
        struct = _one_array(typed.column(side))
        out[side] = {}
        for c in mine:
            values = struct.field(c["name"])
            texts = [text_form(v) for v in values.to_pylist()]
            # a text form the column's own parser does not read back as the value: not used
            try:
                back = convert_column(pa.array(["n" if t is None else "t" for t in texts], pa.string()),
                                      pa.array(texts, pa.binary()), *_type_of(c)).values
                same = pc.fill_null(pc.equal(back, values), False).to_numpy(zero_copy_only=False)
            except (ConversionError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                continue
            out[side][c["name"]] = [t if ok else None for t, ok in zip(texts, same, strict=True)]
    return out


def _typed_rows(rowdicts: list[dict], cols: list[dict], registry=None):
    """Columns ``cols`` of replayed images (column -> raw value), typed; a value held
    with its own type (:func:`_replay`) is read by it and cast."""
    if any(len(v) > 2 for r in rowdicts for v in r.values()):
        return _typed_rows_of_types(rowdicts, cols, registry)
    triples = []
    for c in cols:
        vals = [r.get(c["name"]) or ("n", None) for r in rowdicts]
        triples.append((pa.array([v[0] for v in vals], pa.string()), pa.array([v[1] for v in vals], pa.binary()),
                        None))
    return _columns_out(triples, cols, registry)


def _typed_rows_of_types(rowdicts: list[dict], cols: list[dict], registry=None):
    """:func:`_typed_rows` where some values were sent under an earlier type: every
    column's values in one flat child, indexed by type (:func:`_columns_out`)."""
    n = len(rowdicts)
    kinds, data, triples, variants = [], [], [], {}
    for c in cols:
        main = np.full(n, -1, dtype=np.int64)
        for i, r in enumerate(rowdicts):
            v = r.get(c["name"])
            if v is None:
                continue
            idx = _variant_index(variants, c["name"], v[2], n) if len(v) > 2 else main
            idx[i] = len(kinds)
            kinds.append(v[0])
            data.append(v[1])
        triples.append(main)
    k, d = pa.array(kinds, pa.string()), pa.array(data, pa.binary())
    return _columns_out([(k, d, main) for main in triples], cols, registry, variants)


def snapshot(changes: pa.Table, name: str, as_of_lsn: int | None = None, *, registry=None,
             missing: dict | None = None) -> pa.Table:
    """The table as of commit LSN ``as_of_lsn`` (inclusive; None = all changes): the
    columns of the Relation in force then (:func:`columns_in_force`). ``missing``:
    {column: value} that the server gave a column added to the table (``ADD COLUMN …
    DEFAULT``) in the rows older than it, which no change has sent since: pgoutput sends
    nothing for them, so they are null unless named here (:func:`missing_values`)."""
    rows = _rows_of(changes, name, as_of_lsn)
    cols = table_columns(changes, name, _rows=rows)
    fill = missing_values(missing, cols, registry).raw
    if as_of_lsn is not None and len(rows):
        rows = rows.filter(pc.fill_null(pc.less_equal(rows.column("commit_lsn"), pa.scalar(as_of_lsn, pa.uint64())),
                                        False))
    store, _ = _replay(rows, name, False, cols=cols)
    current = columns_in_force(rows)
    shown = cols if current is None else [c for c in cols if c["name"] in current]
    arrays, names = _typed_rows(_filled(store.values(), fill), shown, registry)
    return pa.Table.from_arrays(arrays, names=names) if names else pa.table({})


class Missing(NamedTuple):
    """:func:`missing_values`' result: ``raw`` {column: (kind, data)}, what the replay
    fills in; ``typed`` {column: the value read, a one-value Arrow array of the column's
    catalog type}, what Spark writes as a literal."""

    raw: dict
    typed: dict


def missing_values(missing: dict | None, cols: list[dict], registry=None) -> Missing:
    """``missing`` ({column: value}) as the values the replay fills in: each value as text (``str``, or a Python value written as its ``str``; a ``bool``
    column's as ``boolin`` reads it: ``True``, ``'true'``, ``'yes'``), read by the
    column's newest type (what an ``ADD COLUMN … DEFAULT 7`` gave the rows older than
    the column, ``attmissingval``). Raises ValueError for a column the table never had
    and for a value its type does not read, so no column is left raw by a typo."""
    out = Missing({}, {})
    if not missing:
        return out
    by_name = {c["name"]: c for c in cols}
    unknown = sorted(set(missing) - set(by_name))
    if unknown:
        raise ValueError(f"missing= names columns the table does not have: {', '.join(map(repr, unknown))}")
    for k, v in missing.items():
        if v is None:
            raise ValueError(f"missing={{{k!r}: None}}: a column added without a DEFAULT is null already")
        text = ("t" if v else "f") if isinstance(v, bool) else v if isinstance(v, str) else str(v)
        if by_name[k]["type_oid"] == BOOL_OID and not isinstance(v, bool):
            try:   # as boolin reads it ('true', 'yes', 'on'); pgoutput sends boolout's t/f
                text = "t" if bool_text(pa.array([text]))[0].as_py() else "f"
            except pa.ArrowInvalid as e:
                raise ValueError(f"missing={{{k!r}: {v!r}}}: {e}") from None
        try:
            got = convert_column(pa.array(["t"]), pa.array([text.encode()]), by_name[k]["type_oid"],
                                 by_name[k]["type_modifier"], registry)
        except ConversionError as e:
            raise ValueError(f"missing={{{k!r}: {v!r}}}: not a value of the column's type ({e})") from None
        if got.special is not None and got.special.null_count == 0:
            raise ValueError(f"missing={{{k!r}: {v!r}}}: a value the column's Arrow type does not hold "
                             f"({got.special[0].as_py()})")
        out.raw[k], out.typed[k] = ("t", text.encode()), got.values
    return out


def _filled(images, fill: dict) -> list:
    """Row images with the ``fill`` values (:func:`missing_values`' ``raw``) in the
    columns they lack: a column added after the image was sent (or dropped and added
    again since: :func:`_replay` took the dropped one's value out)."""
    if not fill:
        return list(images)
    return [img if fill.keys() <= img.keys() else {**fill, **img} for img in images]


def added_columns(before: list, after: list) -> list:
    """The names of Relation column list ``after`` that are columns added since list
    ``before`` (the same table's, the one in force before it). PostgreSQL keeps a
    table's columns in the order they were added and puts a new one last, and pgoutput
    sends no DDL, so ``after`` is the columns kept, in ``before``'s order, then those
    added: every name past the longest start of ``after`` that runs in ``before``'s
    order. A name ``before`` had among those was dropped and added again — its values
    from before are the dropped column's, not this one's (the server's rows not changed
    since hold null, or the ``DEFAULT``). A publication whose column list changed in the
    archive is read the same way (its Relation says nothing else)."""
    rest = iter(before)
    for i, name in enumerate(after):
        if name not in rest:      # consumes ``rest`` up to the name: ``after``'s start in order
            return list(after[i:])
    return []


def columns_in_force(rows: pa.Table) -> set | None:
    """The column names of the Relation in force after ``rows`` (one table's changes, in
    commit order): its last change's. A column dropped (``ALTER TABLE … DROP COLUMN``)
    is not in the server's table, so not in the snapshot; ``table_changes`` and
    ``history`` keep it, with the values sent while it was there. None: keep every
    column (openGauss rows, which carry no Relation, or no change)."""
    if not len(rows) or rows.column("relation_id").null_count == len(rows):
        return None
    lists = rows.column("columns")
    for i in range(len(rows) - 1, -1, -1):
        cols = lists[i].as_py()
        if cols is not None:
            return {c["name"] for c in cols}
    return None


def net_key(column_lists: list, newest: list) -> list:
    """The key net changes name rows by: the columns every replica identity in force over
    the changes holds (``column_lists``: their Relations' columns, a Truncate's too;
    FULL identity or no key: every column), in the order of ``newest``. The identity of a table that never
    changed it; across ``ALTER TABLE … REPLICA IDENTITY`` the columns each change's key
    named (a change under the narrower identity says nothing of the others: an Update of
    ``v`` under DEFAULT does not say the row's FULL key changed). None in common: the
    newest identity's. Shared with the Spark path."""
    def ident(cols):
        return [c["name"] for c in cols if c["flags"] & 1] or [c["name"] for c in cols]
    common = set(ident(newest))
    for cols in column_lists:
        common &= set(ident(cols))
    return [n for n in ident(newest) if n in common] or ident(newest)


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
      and created again, or swapped with a copy: :func:`_resolve`); delete every row of
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
    rows_of, replaced = _resolve(changes, name)
    # another relation bore the name before this one in these changes (dropped, or
    # renamed away): the target's rows are that relation's, so it is cleared first
    truncated = (rows_of.column("commit_lsn")[0].as_py(), rows_of.column("commit_ts")[0].as_py()) \
        if replaced and len(rows_of) else None
    cols = table_columns(changes, name, _rows=rows_of)
    fill = missing_values(missing, cols, registry).raw
    # every identity the table's changes were sent under, a Truncate's too (its Relation
    # is the identity in force then: a copy made under it is keyed by it), as Spark's
    # versions job counts them
    said = rows_of.filter(pc.is_valid(rows_of.column("columns"))) if len(rows_of) else rows_of
    newest = (said.column("columns")[len(said) - 1].as_py() or []) if len(said) else []
    keycols = net_key([c for c in _column_set_ids(said)[1] if c], newest) if newest else \
        [c["name"] for c in cols]
    net = {"stamp": {}, "deleted": {}, "truncated": truncated, "src": {}, "moved": [], "keycols": tuple(keycols)}
    relation = pc.max(rows_of.column("relation_id")).as_py() if len(rows_of) else None
    store, _ = _replay(rows_of, name, False, net, cols)

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
    gone += [(img, st) for img, st in net["moved"] if not _unsaid(ikey(img))]
    for img, stamp in gone:
        old = entries.get(ikey(img))
        if old is None or (old[1] == "delete" and (old[0][0] or 0) <= (stamp[0] or 0)):
            entries[ikey(img)] = (stamp, "delete", {c: img.get(c, NULL) for c in keycols}, None, [])
    stamps = [e[0] for e in entries.values()]
    ops = [e[1] for e in entries.values()]
    rows = [_filled([e[2]], fill)[0] if e[1] == "upsert" else e[2] for e in entries.values()]
    src = [e[3] for e in entries.values()]
    unchanged = [e[4] for e in entries.values()]
    if net["truncated"] is not None:
        rows, stamps, ops = [{}] + rows, [net["truncated"]] + stamps, ["truncate"] + ops
        unchanged, src = [[]] + unchanged, [None] + src
    order = sorted(range(len(rows)), key=lambda i: (ops[i] != "truncate", stamps[i][0] or 0))
    arrays, names = _typed_rows([rows[i] for i in order], cols, registry)
    from_arrays, from_names = _typed_rows([src[i] or {} for i in order],
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


def history(changes: pa.Table, name: str, *, registry=None) -> pa.Table:
    """Every version of every row (SCD type 2): typed columns, ``__OP`` (the change that
    made the version), ``__START_LSN``/``__START_AT`` (its commit) and
    ``__END_LSN``/``__END_AT`` (the commit that replaced or deleted it; null = current)."""
    rows = _rows_of(changes, name)
    cols = table_columns(changes, name, _rows=rows)
    _, versions = _replay(rows, name, True, cols=cols)
    arrays, names = _typed_rows([v[1] for v in versions], cols, registry)
    extra = {
        "__OP": pa.array([v[2] for v in versions], pa.string()),
        "__START_LSN": pa.array([v[3] for v in versions], pa.uint64()),
        "__START_AT": pa.array([v[4] for v in versions], TS),
        "__END_LSN": pa.array([v[5] for v in versions], pa.uint64()),
        "__END_AT": pa.array([v[6] for v in versions], TS),
    }
    return pa.Table.from_arrays(arrays + list(extra.values()), names=names + list(extra))
