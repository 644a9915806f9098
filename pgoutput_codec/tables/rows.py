"""Which change rows are a table's: the relation that bears its name (as of a commit LSN), its
rows in commit order, and its columns over all its Relation versions."""

from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._native.gather import split_at, take_table
from ..arrays import one_array, plain_lists
from ..idents import parse_name, qualified_name
from ..selection import table_selected
from ..changes.relations import bearer, merge_columns, one_bearer, split_name
from ..typecatalog import registry_of, with_type_names
from ..schema import CHANGE_COLUMN, CHANGE_COLUMN_LISTS, CHANGE_SCHEMA

__all__ = ["resolve", "table_of", "rows_of", "in_commit_order", "as_change_rows", "column_lists", "holder", "column_set_ids",
           "table_columns", "table_registry", "relations_named", "split_tables"]


def holder(versions: list, row_versions):
    """Which relation holds a name (:func:`resolve`): ``versions`` is one
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


#: schemas :func:`as_change_rows` found holding its types (the last few seen)
_AS_GIVEN: collections.deque = collections.deque(maxlen=8)


def as_change_rows(changes: pa.Table) -> pa.Table:
    """Change rows with ``schema.CHANGE_SCHEMA``'s types, as given when they have them.
    Spark's change rows written to Parquet and read back here hold them as Spark types:
    the uint64 columns (``lsn``, ``commit_lsn``, ``relation_version``) as decimal(20,0),
    uint32 as int64, uint8 as int16, ``commit_ts`` as naive nanoseconds (INT96, UTC)
    — the same values, cast back (checked: a value out of range raises, never wraps).
    ``xid`` passes as given: openGauss's are 64-bit (``OPENGAUSS_CHANGE_SCHEMA``) and
    the table functions only carry it. So do other columns (``commit_rank``,
    PERMISSIVE's ``error``), and ``columns`` as a list or a list view."""
    # (a copy of the deque: a mirror's threads may add to it meanwhile)
    if any(changes.schema.equals(s) for s in tuple(_AS_GIVEN)):
        return changes
    want = {f.name: f.type for f in CHANGE_SCHEMA if f.name != "xid"}
    if "columns" in changes.column_names and not changes.schema.field("columns").type.equals(want["columns"]):
        # column lists as plain lists (Spark's, or read back from Parquet): both read the
        # same, and pyarrow casts no list to a list view
        at = changes.schema.get_field_index("columns")
        changes = changes.set_column(at, "columns", column_lists(changes.column("columns")))
        want["columns"] = CHANGE_COLUMN_LISTS
    fields = [pa.field(f.name, want.get(f.name, f.type)) for f in changes.schema]
    if all(f.type.equals(changes.schema.field(i).type) for i, f in enumerate(fields)):
        _AS_GIVEN.append(changes.schema)     # (called a table at a time, this check is most of the call)
        return changes
    try:
        return changes.cast(pa.schema(fields, metadata=changes.schema.metadata))   # (an archive's type catalog)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ValueError(f"these are not change rows (schema.CHANGE_SCHEMA, or Spark's decode_changes rows): {e}") \
            from None


def column_lists(arr) -> pa.Array:
    """Change rows' column lists as plain lists of every field of ``schema.CHANGE_COLUMN``
    (a list view's, Spark's); the type names null where the lists were written without them."""
    arr = plain_lists(arr)
    st = arr.type.value_type
    if all(st.get_field_index(f.name) >= 0 for f in CHANGE_COLUMN):
        return arr
    values = arr.values
    fields = [values.field(f.name) if st.get_field_index(f.name) >= 0 else pa.nulls(len(values), f.type)
              for f in CHANGE_COLUMN]
    struct = pa.StructArray.from_arrays(fields, names=[f.name for f in CHANGE_COLUMN],
                                        mask=pc.invert(values.is_valid()) if values.null_count else None)
    return pa.ListArray.from_arrays(arr.offsets, struct, mask=pc.invert(arr.is_valid()) if arr.null_count else None)


def in_commit_order(changes: pa.Table) -> pa.Table:
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
            r, s = one_array(rank).to_numpy(), one_array(seq).to_numpy()
            if np.any((r[1:] < r[:-1]) | ((r[1:] == r[:-1]) & (s[1:] < s[:-1]))):
                return take_table(changes, np.lexsort((s, r)))
            return changes
    cl = changes.column("commit_lsn")
    if cl.null_count or len(cl) < 2:
        return changes
    c = one_array(cl).to_numpy()
    cuts = np.flatnonzero(c[1:] < c[:-1]) + 1
    if not len(cuts):
        return changes
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(c)]])
    order = np.argsort(c[starts], kind="stable")
    if np.any(c[starts[order[1:]]] <= c[ends[order[:-1]] - 1]):   # ranges overlap
        return changes
    return take_table(changes, np.concatenate([np.arange(starts[k], ends[k]) for k in order]))


def table_of(changes: pa.Table, name) -> tuple[str, str]:
    """The (schema, table) ``name`` names (:func:`~pgoutput_codec.changes.relations.split_name`),
    an unquoted name with several dots resolved against the tables ``changes`` hold."""
    if len(parse_name(name)) == 1:
        return parse_name(name)[0]
    named = changes.filter(pc.is_valid(changes.column("table"))).select(["schema", "table"])
    pairs = named.group_by(["schema", "table"], use_threads=False).aggregate([]) if len(named) else named
    return split_name(name, set(zip(pairs.column("schema").to_pylist(), pairs.column("table").to_pylist(),
                                    strict=True)))


def resolve(changes: pa.Table, name: str, as_of_lsn: int | None = None):
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
    schema, table = table_of(changes, name)
    if not len(changes):
        return changes, False
    changes = in_commit_order(as_change_rows(changes))
    fp = changes.column("relation_version")
    sch, tbl, rel = changes.column("schema"), changes.column("table"), changes.column("relation_id")
    first = {}        # fingerprint -> (its relation, named so), from its first change
    _, values, at = _fingerprint_ids(fp)
    for u, i in zip(values, at.tolist(), strict=True):
        s_i, t_i, r_i = sch[i].as_py(), tbl[i].as_py(), rel[i].as_py()
        first[u] = (r_i if r_i is not None else (s_i, t_i), s_i == schema and t_i == table)
    fps = list(first)

    def row_versions():
        ids = pc.fill_null(pc.index_in(fp, value_set=pa.array(fps, pa.uint64())), -1).to_numpy(zero_copy_only=False)
        if as_of_lsn is not None:   # the changes committed after it do not count
            later = pc.fill_null(pc.greater(changes.column("commit_lsn"), pa.scalar(as_of_lsn, pa.uint64())), True)
            ids = np.where(later.to_numpy(zero_copy_only=False), -1, ids)
        return ids
    chosen, replaced = holder([first[u] for u in fps], row_versions)
    mine = [fps[k] for k in chosen]
    if changes.column("op").null_count or fp.null_count:   # 'C' markers and unknown relations
        mask = pc.or_kleene(pc.and_(pc.is_null(fp), pc.and_(pc.equal(sch, schema), pc.equal(tbl, table))),
                            pc.is_in(fp, value_set=pa.array(mine, pa.uint64())))
        return changes.filter(pc.fill_null(mask, False)), replaced
    if len(mine) == len(first) and not fp.null_count:          # every row is this table's: no copy
        return changes, replaced
    mask = pc.is_in(fp, value_set=pa.array(mine, pa.uint64())).to_numpy(zero_copy_only=False)
    return take_table(changes, np.flatnonzero(mask)), replaced


def _fingerprint_ids(fp) -> tuple:
    """(each row's index into the distinct non-null values of ``fp`` (uint64
    fingerprints), -1 for a null; those values; the row each first appears at), the
    values numbered in the order first met. With no null, by NumPy (a table at a time,
    Arrow's calls cost more than the work)."""
    fp = one_array(fp)
    if not fp.null_count:
        values, first, ids = np.unique(fp.to_numpy(), return_index=True, return_inverse=True)
        order = np.argsort(first)
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        return rank[ids.reshape(-1)], values[order].tolist(), first[order]
    enc = pc.dictionary_encode(fp)       # (a null stays null: -1 here)
    ids = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    seen, first = np.unique(ids, return_index=True)
    return ids, enc.dictionary.to_pylist(), first[seen >= 0]


def rows_of(changes: pa.Table, name: str, as_of_lsn: int | None = None) -> pa.Table:
    """The rows of the table named ``name`` (as of ``as_of_lsn``): see :func:`resolve`."""
    return resolve(changes, name, as_of_lsn)[0]


def column_set_ids(rows: pa.Table):
    """(id per row, one column list per id): rows grouped by ``relation_version`` (a
    fingerprint of the Relation definition), so column lists are never compared."""
    ids, _, first = _fingerprint_ids(rows.column("relation_version"))
    cols = rows.column("columns")
    return ids, [cols[int(i)].as_py() for i in first]


def table_registry(rows: pa.Table, registry=None, *, sets=None):
    """The registry ``rows`` are typed with: the archive catalog they carry under
    ``registry`` (:func:`~pgoutput_codec.typecatalog.registry_of`), taught the Type
    messages their column lists carry (:func:`pgoutput_codec.typecatalog.with_type_names`;
    ``sets``: their :func:`column_set_ids`, when known)."""
    registry = registry_of(rows, registry)
    return with_type_names(registry, (sets if sets is not None else column_set_ids(rows))[1]) if len(rows) \
        else registry


def table_columns(changes: pa.Table, name: str, *, _rows: pa.Table | None = None, _sets=None) -> list[dict]:
    """The table's columns (name, type_oid, type_modifier, flags) over all its Relation
    versions in the changes, newest definition of each column winning, in the order of
    the newest version (columns dropped later keep their place at the end)."""
    rows = _rows if _rows is not None else rows_of(changes, name)
    if not len(rows):
        return []
    reps = (_sets if _sets is not None else column_set_ids(rows))[1]
    return merge_columns(reps, rows.column("columns")[len(rows) - 1].as_py() or [])


def relations_named(triples, patterns=None) -> dict:
    """{qualified table name: the relations whose change rows its table may hold}, from the
    distinct (relation_id, schema, table) of change rows that name a table (``triples``),
    for the names ``patterns`` selects (:func:`~pgoutput_codec.selection.parse_table_list`;
    None: all). A name's relations are every relation ever sent under it (None: rows with no
    relation id, openGauss's, which are the name's own): its bearer is one of them, and
    :func:`resolve` over their rows alone picks the same bearer and the same rows as over
    every table's. So the rows of many tables are split once, each name's group holding a
    relation renamed across names in each, and each table is rebuilt from its group alone
    (:func:`split_tables` in one process, Spark's many-table pass on executors)."""
    out: dict = {}
    for rel, schema, table in triples:
        if table is None or not table_selected(patterns, schema, table):
            continue
        out.setdefault(qualified_name(schema, table), set()).add(rel)
    return {k: frozenset(v) for k, v in sorted(out.items())}


def _codes(values) -> tuple[np.ndarray, pa.Array]:
    """(each value's index into the distinct values, the distinct values in the order
    first met), null one of them: one hash pass (Arrow's dictionary_encode)."""
    enc = pc.dictionary_encode(one_array(values), null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary


def _triples(changes: pa.Table):
    """(the distinct (relation_id, schema, table) of the rows, each row's index into
    them), by hash passes over the columns: not a Python tuple a row, and not Arrow's
    group_by, whose module loads pyarrow.dataset on its first call in a process."""
    r, rd = _codes(changes.column("relation_id"))
    s, sd = _codes(changes.column("schema"))
    t, td = _codes(changes.column("table"))
    st, std = _codes(pa.array(s * len(td) + t))     # (codes of codes: each below the rows)
    row, kd = _codes(pa.array(r * len(std) + st))
    k = kd.to_numpy()
    pair = std.to_numpy()[k % len(std)]
    triples = zip(rd.take(pa.array(k // len(std))).to_pylist(), sd.take(pa.array(pair // len(td))).to_pylist(),
                  td.take(pa.array(pair % len(td))).to_pylist(), strict=True)
    return list(triples), row


def split_tables(changes: pa.Table, patterns=None) -> dict:
    """{qualified table name: its group of change rows} (:func:`relations_named`), in
    the rows' order. The rows are copied once, in group order (one stable sort of a
    group number per row), and each group is a slice of that copy; a group holding a
    relation that is in other groups too (renamed across names) takes its own rows."""
    if not len(changes):
        return {}
    n = len(changes)
    triples, row = _triples(changes)
    groups = relations_named(triples, patterns)
    if not groups:
        return {}
    number = {name: k for k, name in enumerate(groups)}
    holders: dict = {}          # relation id -> the groups holding it
    for k, members in enumerate(groups.values()):
        for r in members:
            if r is not None:
                holders.setdefault(r, []).append(k)
    shared = {k for ks in holders.values() if len(ks) > 1 for k in ks}
    # the groups of each distinct triple: a relation's rows go to every group holding it
    # (under any name); rows with no relation id to their own name's group
    of = [holders.get(r, ()) if r is not None else
          ([number[qualified_name(s, t)]] if t is not None and qualified_name(s, t) in number else [])
          for r, s, t in triples]
    # the group each row is sliced into (-1: none, or a group taking its own rows)
    key = np.array([ks[0] if len(ks) == 1 and ks[0] not in shared else -1 for ks in of], np.int64)[row]
    out, names = {}, list(groups)
    held = np.flatnonzero(key >= 0)
    if len(held):
        order = held[np.argsort(key[held], kind="stable")]
        bounds = np.searchsorted(key[order], np.arange(len(groups) + 1))
        sizes = np.diff(bounds)
        if sizes.max() == n:        # one table's rows are all the rows: as they are
            out[names[int(sizes.argmax())]] = changes
        else:
            filled = np.flatnonzero(sizes)        # the groups sliced from the copy
            at = np.append(bounds[filled], bounds[filled[-1] + 1])
            for k, part in zip(filled.tolist(), split_at(take_table(changes, order), at), strict=True):
                out[names[k]] = part
    for k in sorted(shared):
        at = np.flatnonzero(np.isin(row, [j for j, ks in enumerate(of) if k in ks]))
        out[names[k]] = take_table(changes, at) if len(at) != n else changes
    return {name: out[name] for name in groups if name in out}
