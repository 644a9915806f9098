"""A table's change rows with typed values: ``before``/``after`` as structs of the columns'
Arrow types (from ``typecatalog``), each value read by the type its Relation gave it."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import kind_bytes, one_array, validity
from ..changes.decoder import ChangeDecoder, LightChangeDecoder
from ..changes.relations import merge_columns, split_name
from ..typecatalog.retyped import with_earlier_types
from ..schema import relation_fingerprint
from ..typecatalog.columns import convert_column, convert_columns, materialize, take_at
from ..typecatalog.errors import ConversionError
from ..typecatalog.geometry import srid_column
from ..typecatalog.arrays import mixed_dims_note, value_ndims
from ..typecatalog.registry import resolve as resolve_type
from ..typecatalog.registry import with_type_names
from ..typecatalog.catalog import registry_of
from .rows import column_set_ids, holder, rows_of, table_columns

__all__ = ["table_changes", "typed_changes", "decode_table_changes", "Located", "locate", "columns_out", "type_of",
           "variant_index", "COMMIT_COLS"]

COMMIT_COLS = ["op", "seq", "lsn", "xid", "commit_lsn", "commit_ts", "origin"]


class Located(NamedTuple):
    """Where the values of one side's columns sit (:func:`locate`)."""
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
        return merged_index(self.where[name], self.variants.get(name, {}).values())


def merged_index(index, others) -> np.ndarray:
    """``index`` with the elements of the indexes ``others`` (disjoint rows) put in."""
    at = materialize(index)
    for idx in others:
        idx = materialize(idx)
        at = np.where(idx >= 0, idx, at)
    return at


def variant_index(variants: dict, name: str, t: tuple, n: int) -> np.ndarray:
    """The index of column ``name``'s values sent under type ``t`` (made, all -1, at first)."""
    of_name = variants.setdefault(name, {})
    if t not in of_name:
        of_name[t] = np.full(n, -1, dtype=np.int64)
    return of_name[t]


def type_of(c: dict) -> tuple:
    return c["type_oid"], c["type_modifier"]


def locate(tuples: pa.Array, pos, ids: np.ndarray, reps: list, cols: list[dict]) -> Located:
    """Where every column of ``cols`` sits in the flat tuple children of ``tuples`` (a
    list<struct<kind, data>> array), with ``present`` the rows that have an image.
    Row ``i`` is list ``pos[i]`` of ``tuples`` (``pos`` None: list ``i``); ``ids[i]``
    indexes ``reps``, the column list of its Relation version (-1: unknown). A value is
    read by the type its own Relation version gave the column: where that is not the
    type in ``cols`` (the newest), it is located in ``variants``, converted by its type
    and cast (:func:`columns_out`). The converters read the values in place, so no
    column is gathered (a gather per column cost more than the conversion)."""
    flat = tuples.values          # the offsets below index it directly
    kinds_all = flat.field("kind")
    data_all = flat.field("data")
    offs_all = tuples.offsets.to_numpy()
    valid_all = validity(tuples) if tuples.null_count else None
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
    types = {c["name"]: type_of(c) for c in cols}
    variants: dict = {}
    if len(reps) == 1 and bool(valid.all()) and bool((lengths >= len(reps[0] or ())).all()):
        # one definition, every row imaged: all columns share the row offsets
        base = offsets.astype(np.int64)
        out = {}
        for p, c in enumerate(reps[0] or ()):
            if c["name"] not in types:    # not asked for
                continue
            if types[c["name"]] == type_of(c):
                out[c["name"]] = (base, p)
            else:
                variants[c["name"]] = {type_of(c): (base, p)}
        for c in cols:
            if c["name"] not in out:
                out[c["name"]] = np.full(n, -1, dtype=np.int64)
        return Located(kinds_all, data_all, out, valid, variants)
    out = {c["name"]: np.full(n, -1, dtype=np.int64) for c in cols}
    for k, cl in enumerate(reps):
        rows_k = np.flatnonzero(ids == k)
        for p, c in enumerate(cl or ()):
            sel = rows_k[valid[rows_k] & (lengths[rows_k] > p)]
            name, t = c["name"], type_of(c)
            if name not in out:       # not asked for
                continue
            at = out[name] if types[name] == t else variant_index(variants, name, t, n)
            at[sel] = offsets[sel] + p
    return Located(kinds_all, data_all, out, valid, variants)


def raw_fallback(kinds, data, index, err):
    """A column the catalog cannot type as a whole (e.g. an array column holding arrays
    of different dimensionality) stays raw (binary: the text or send form as sent) with
    ``__special`` = the conversion error, so nothing is lost."""
    if index is not None:
        kinds, data = take_at(kinds, data, materialize(index))
    data = data.cast(pa.binary()) if not pa.types.is_binary(data.type) else data
    raw = pc.if_else(pc.is_in(kinds, value_set=pa.array(["t", "b"])), data, pa.nulls(len(data), pa.binary()))
    return raw, pa.array([str(err)] * len(data), pa.string())


def dims_note(kinds, data, index, c: dict, registry) -> str | None:
    """Why an array column stays raw when its values have different numbers of
    dimensions (:func:`pgoutput_codec.typecatalog.arrays.mixed_dims_note`, the words
    Spark's typing uses too); None when that is not why."""
    if resolve_type(c["type_oid"], c["type_modifier"], registry).conv != "array":
        return None
    if index is not None:
        kinds, data = take_at(kinds, data, materialize(index))
    dims = set(value_ndims(kinds, data).tolist()) - {-1, 0}
    return mixed_dims_note(dims) if len(dims) > 1 else None


def columns_out(triples: list, cols: list[dict], registry=None, variants=None, workers: int = 1):
    """``triples``: (kinds, data, index or None) per column of ``cols``; the indexed ones
    share one flat tuple child and are converted together (``convert_columns``, on
    ``workers`` threads), with the values ``variants`` (:class:`Located`) says were sent
    under another type."""
    variants = variants or {}
    results, earlier = [None] * len(cols), {}
    indexed = [j for j, t in enumerate(triples) if t[2] is not None]
    extra = [(j, t, idx) for j in indexed for t, idx in variants.get(cols[j]["name"], {}).items()]
    if indexed:
        kinds, data, _ = triples[indexed[0]]
        conv = convert_columns(kinds, data, [type_of(cols[j]) for j in indexed] + [t for _, t, _ in extra],
                               registry, indexes=[triples[j][2] for j in indexed] + [idx for _, _, idx in extra],
                               workers=workers)
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
        if isinstance(results[j], ConversionError) and results[j].index is not None and j not in earlier:
            # a value the converter refused: null with its reason, the others typed
            try:
                index = triples[j][2]
                results[j] = convert_column(kinds, data, cols[j]["type_oid"], cols[j]["type_modifier"], registry,
                                            index=None if index is None else materialize(index), refuse=True)
            except ConversionError as e:
                results[j] = e
    arrays, names = [], []
    for j, (c, (kinds, data, index), r) in enumerate(zip(cols, triples, results, strict=True)):
        srid = None
        if isinstance(r, ConversionError):
            if index is not None and j in earlier:   # every value raw, whatever its type
                index = merged_index(index, [idx for _, idx, _ in earlier[j]])
            values, special = raw_fallback(kinds, data, index, dims_note(kinds, data, index, c, registry) or r)
        else:
            values, special, srid = r.values, r.special, r.srid
            if index is not None and j in earlier:
                values, special = with_earlier_types(values, special, kinds, data, c, earlier[j], registry)
        arrays.append(values)
        names.append(c["name"])
        rt = resolve_type(c["type_oid"], c["type_modifier"], registry)
        if srid_column(rt.conv, rt.typmod):    # by the type, as the schema is known before the data
            arrays.append(srid if srid is not None and len(srid) == len(values) else pa.nulls(len(values), pa.int32()))
            names.append(c["name"] + "__srid")
        if special is not None and special.null_count != len(special):
            arrays.append(special)
            names.append(c["name"] + "__special")
    return arrays, names


def typed_sides(head: dict, sides: dict, cols: list[dict], n: int, registry, workers: int = 1) -> pa.Table:
    """The ``table_changes`` table from its commit columns ``head`` and, per side
    ('before'/'after'), the ``locate`` result (or None: no row has that image);
    ``workers``: threads converting the columns."""
    out = dict(head)
    names = [c["name"] for c in cols]
    typed = {}
    for side in ("after", "before"):
        loc = sides.get(side)
        if loc is None:
            continue
        kinds, data, where, present, variants = loc
        arrays, anames = columns_out([(kinds, data, where[c["name"]]) for c in cols], cols, registry, variants,
                                     workers)
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
            kb = kind_bytes(kinds)
            at = {nm: sides["after"].everywhere(nm) for nm in names}
            is_u = {nm: (at[nm] >= 0) & (kb[np.maximum(at[nm], 0)] == ord("u")) for nm in names}
            if "before" in typed:
                is_u = fill_from_before(out, typed, sides["before"], is_u, n)
            flags = np.logical_or.reduce([is_u[nm] for nm in names]) if names else np.zeros(n, bool)
            unchanged = [None] * n
            for i in np.flatnonzero(flags):
                unchanged[i] = [nm for nm in names if is_u[nm][i]]
    out["unchanged"] = pa.array(unchanged, pa.list_(pa.string())) if unchanged is not None else \
        pa.nulls(n, pa.list_(pa.string()))
    return pa.table(out)


def fill_from_before(out: dict, typed: dict, before_loc, is_u: dict, n: int) -> dict:
    """Unchanged-TOAST ('u') values of ``after`` that the old image of the same message
    holds: taken from it. Under REPLICA IDENTITY FULL PostgreSQL sends the old row with
    its TOAST values inline (checked on 15, 16 and 18: 'O' tuple 't', new tuple 'u'),
    so the change carries the value after all. Sets ``out["after"]``; returns ``is_u``
    without the values filled."""
    kb = kind_bytes(before_loc.kinds)
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
        sr = nm + "__srid"    # by the column's type: on both sides alike
        if sr in pos and before.type.get_field_index(sr) >= 0:
            cols[pos[sr]] = (sr, pc.if_else(mask, before.field(sr), cols[pos[sr]][1]))
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
    (:func:`resolve`)."""
    return typed_changes(rows_of(changes, name), registry=registry)


def typed_changes(rows: pa.Table, *, registry=None, columns: list[dict] | None = None) -> pa.Table:
    """:func:`table_changes` of change rows that are all one table's (chosen already:
    Spark's ``table_changes`` over any DataFrame types each batch of them, by the
    ``columns`` of the whole table: a batch's own newest definition can be an earlier one)."""
    cols = columns if columns is not None else table_columns(rows, "", _rows=rows)
    n = len(rows)
    head = {c: rows.column(c) for c in COMMIT_COLS if c in rows.column_names}
    ids, reps = column_set_ids(rows) if n else (np.zeros(0, np.int64), [])
    registry = with_type_names(registry_of(rows, registry), [cols, *reps])
    sides = {}
    for side in ("after", "before"):
        col = one_array(rows.column(side))
        if side == "after" or (n and col.null_count != n):   # no old images at all: all-null struct
            sides[side] = locate(col, None, ids, reps, cols)
    return typed_sides(head, sides, cols, n, registry)


def decode_table_changes(input, name: str, *, registry=None, **options) -> pa.Table:
    """``table_changes(decode_changes(input, **options), name)`` in one step, without the
    generic change rows: the decoder keeps only where each change's values are (its
    message row and Relation version) and the converters read them in place from the
    decoded messages. Same result, faster than the two steps (docs/benchmarks.md).
    One input in one call (no ``state`` to resume from: use :class:`ChangeDecoder` and
    :func:`table_changes` for chunked decoding). ``workers`` (an option): threads
    decoding the messages and converting the columns (None, the default: one per core);
    the transactions are followed in this thread."""
    registry = registry_of(input, registry)      # (an archive table's catalog)
    dec = LightChangeDecoder(registry=registry, **options)   # learns domains from Type messages
    light = dec.feed(input)
    schema, table = split_name(name, {(d["schema"], d["table"]) for d in dec.walk.versions})
    ver_all = one_array(light.column("_ver")).to_numpy(zero_copy_only=False)
    # the relation that bears the name (resolve's rule), by each row's Relation version
    mine = np.asarray(holder([(d["relation_id"] if d["relation_id"] is not None else (d["schema"], d["table"]),
                                d["schema"] == schema and d["table"] == table) for d in dec.walk.versions],
                              lambda: ver_all)[0], dtype=np.int64)
    keep = (ver_all >= 0) if len(mine) == len(dec.walk.versions) else np.isin(ver_all, mine)
    rows = light if keep.all() else light.filter(pa.array(keep))
    n = len(rows)
    head = {c: rows.column(c) for c in COMMIT_COLS if c in rows.column_names}
    if not n:
        return table_changes(empty_changes(options), name, registry=registry)
    src = one_array(rows.column("_src")).to_numpy(zero_copy_only=False)
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
    registry = with_type_names(registry, reps)
    msgs = dec.last_batch
    pos = np.maximum(src, 0)
    ids = np.where(src >= 0, ids, -1)
    sides = {}
    for side, field in (("after", "new_tuple"), ("before", "old_tuple")):
        tuples = msgs.field(field)
        if side == "after" or tuples.null_count != len(tuples):
            loc = locate(tuples, pos, ids, reps, cols)
            if side == "before" and not loc.present.any():
                continue
            sides[side] = loc
    return typed_sides(head, sides, cols, n, registry, dec.workers)


def empty_changes(options) -> pa.Table:
    return ChangeDecoder(**options).output_schema.empty_table()
