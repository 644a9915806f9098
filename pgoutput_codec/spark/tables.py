"""One table of a change DataFrame, typed and rebuilt: ``table_changes``, ``snapshot``,
``history``, ``net_changes`` — the single-process :mod:`pgoutput_codec.tables` on Spark.

:func:`table_changes` types ``before``/``after`` with the type catalog, under one Spark
schema computed on the driver from every Relation version of the table (one small job,
:func:`.tablerows.table_info`). Over a DataFrame straight from :func:`.changes.decode_changes`
(FAILFAST, no observation, not cached) the table is chosen before decoding — Spark drops
the other tables' rows by their relation id bytes (:mod:`.archiverows`) — and its rows are
typed in the Python step that decodes them (:meth:`.changes.Pass2.typed`); over any other
DataFrame, by a ``mapInArrow`` over its change rows (:class:`.tablerows.TableMapper`, the
single-process :func:`pgoutput_codec.tables.table_changes` per batch).

:func:`snapshot`, :func:`history` and :func:`net_changes` are DataFrame operations on
those rows (windows over the replica-identity key), applying the replay rules of
:mod:`.rules` (unchanged TOAST values following a row through key changes, a row keyed
across replica identity changes, columns added, rows alike …), each the Spark twin of the
rule of the same name in :mod:`pgoutput_codec.tables.rules`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..changes.relations import merge_columns
from ..typecatalog.retyped import retyped_names
from ..tables import history_names
from ..tables.replay import HISTORY_COLUMNS
from ..tables.rules import KNOWN, alike_rows
from ..typecatalog import with_type_names
from ..typecatalog.arrays import mixed_dims_note
from ..typecatalog.companions import owner
from . import types as ST
from .catalogs import spark_registry
from .tablerows import Inner, own_name, renamed_strings, to_inner, user_struct
from .tablerows import SHIFTED, to_python, unshifted
from .changerows import pass2_of
from .rules import (added_cuts, after_truncate, as_added, base_for, carry_toast, column_spans, columns_in_force,
                    count_alike, end_versions, found_keys, gone, identity_key, key_move, missing_values, net_key,
                    row_key, same_copy, unknown_key_error, warn_incomplete, with_base)
from .tablerows import TableInfo, table_info, table_of
from .tablerows import array_dims
from .shipping import is_connect
from .tablerows import TIME_TYPE, TableMapper, table_schema

__all__ = ["table_changes", "snapshot", "history", "net_changes", "NET_COLUMNS", "with_field_metadata"]

#: net changes' own columns, last, in their order (a table's column may bear one of their names)
NET_COLUMNS = ("__OP", "__UNCHANGED", "__UNCHANGED_FROM", "__COMMIT_LSN", "__COMMIT_AT", "__RELATION_ID")


_TC_PASS = ["op", "seq", "lsn", "xid", "commit_lsn", "commit_ts", "origin", "commit_rank", "before_kind",
            "relation_version"]


def _of_table(changes: DataFrame, name: str, info: TableInfo | None = None) -> DataFrame:
    """The decoded change rows of the table named ``name``: those of the relation that
    bears the name (``info``'s, :func:`.tablerows.table_info`; without it, rows under the
    name)."""
    if info is not None and not info.found:
        return changes.where(F.lit(False))
    if info is not None and info.relation_id is not None:
        return changes.where(F.col("relation_id") == F.lit(info.relation_id))
    schema, table = table_of(changes, name)
    return changes.where((F.col("schema") == schema) & (F.col("table") == table))


def table_changes(changes: DataFrame, name: str, *, registry=None) -> DataFrame:
    """The changes of one table (``"schema.table"``) with ``before``/``after`` as structs
    of typed Spark columns (types from the type catalog over every Relation version of
    the table in ``changes``: ``DecimalType(p,s)``, ``TimestampType``, ``DateType``,
    ``ArrayType`` …; ``time`` as ``TimeType`` (PySpark 3.5, Connect: µs since midnight), ``interval`` as a
    (months, days, microseconds) struct, numerics beyond 38 digits as strings), plus
    ``<column>__special`` for types that can hold infinity/NaN, and ``unchanged`` (columns
    sent as unchanged TOAST). Keeps ``commit_rank``, ``before_kind``, ``relation_version``.
    Runs one small job to list the table's Relation versions, and one over its rows
    when it has an array column: arrays are typed as deep as the column's values
    (PostgreSQL does not record a column's dimensionality), a column whose values have
    several numbers of dimensions is binary, as sent (as in one process). The table is the relation that bears the
    name (see :func:`pgoutput_codec.tables.table_changes`), its changes under any name.
    ``registry``: over the archive's type catalog, which ``changes`` carry or the files
    behind them hold (:func:`.catalogs.spark_registry`; it wins OID by OID)."""
    return _table_changes(changes, name, spark_registry(changes, registry))


def _table_changes(changes: DataFrame, name: str, registry=None, info: TableInfo | None = None,
                   until_lsn=None) -> DataFrame:
    """:func:`table_changes`; ``info``: :func:`.tablerows.table_info`'s, when known;
    ``until_lsn``: ``snapshot``'s ``as_of_lsn``, so that later transactions are not
    decoded (it filters as well)."""
    schema, table = table_of(changes, name)
    if info is None:
        info = table_info(changes, name, until_lsn)
    cols = merge_columns(info.versions, info.versions[-1] if info.versions else None)
    registry = with_type_names(registry, info.versions)
    rows = _of_table(changes, name, info)
    if until_lsn is not None:
        rows = rows.where(F.col("commit_lsn") <= F.lit(int(until_lsn)).cast(ST.LSN_TYPE))
    ndims = array_dims(changes, rows, name, cols, registry)
    mixed = {c: mixed_dims_note(d) for c, d in ndims.items() if isinstance(d, frozenset)}
    time_type = None if is_connect(changes.sparkSession) else TIME_TYPE
    row_type, colplan = table_schema(cols, registry, retyped_names(info.versions), ndims, time_type)
    keep = [c for c in _TC_PASS if c in changes.columns]
    out_fields = [changes.schema[c] for c in keep]
    out_fields += [T.StructField("before", row_type), T.StructField("after", row_type),
                   T.StructField("unchanged", T.ArrayType(T.StringType()))]
    out_schema = T.StructType(out_fields)
    pass2 = pass2_of(changes)
    if pass2 is not None:   # typed where the rows are decoded: no change rows in between
        return pass2.typed(schema, table, TableMapper(f"{schema}.{table}", out_schema, colplan, registry,
                                                      mixed=mixed), until_lsn)
    # the column lists go back by relation_version when the versions job gave them all
    by_version = dict(zip((int(f) for f in info.fingerprints), info.versions, strict=True)) \
        if "relation_version" in keep and len(info.fingerprints or ()) == len(info.versions) \
        and None not in info.fingerprints else None
    need = sorted(set(keep) | {"before", "after"} | ({"columns"} if by_version is None else set()))
    shifted = tuple(c for c in SHIFTED if c in need and changes.schema[c].dataType == ST.LSN_TYPE)
    crossing = T.StructType([T.StructField(f.name, T.LongType()) if f.name in shifted else f for f in out_fields])
    mapper = TableMapper(f"{schema}.{table}", crossing, colplan, registry, by_version, shifted, mixed)
    return (rows.select(*to_python(changes, need, shifted))
            .mapInArrow(mapper, crossing)
            .select(*[unshifted(c) if c in shifted else c for c in crossing.names]))


# --------------------------------------------------------------------------- snapshot / history

def _events(changes: DataFrame, name: str, as_of_lsn, registry, base=None):
    """One row per (key, event): 'set' (I, R, U: the row image) or 'del' (D, the old key of a
    key-changing U; of every U where rows may repeat, :func:`.rules.count_alike`: it removes one of
    them), ordered by (commit position, seq, sub); plus the truncates (driver-side
    list), the names of the columns that may be sent unchanged, the row struct type and
    whether an Update may have changed a key (``TableInfo.sends_old``), the
    :class:`TableInfo` and the :class:`.tablerows.Inner` names: the row struct's fields,
    the names, the key and ``unchanged`` are under the inner names
    (:func:`.tablerows.to_inner`; ``info`` under the user's). ``ev`` is None when the
    table has no row change here (no columns to build a key from: Spark 3.5 refuses an
    empty struct column). ``base``: (its rows, their LSN) — (:func:`.rules.base_for`): 'set'
    events before every change ('R'), the changes at or below its LSN left out."""
    info = table_info(changes, name, as_of_lsn)
    truncs, sends_old, deletes = info.truncates, info.sends_old, info.deletes
    if base is not None:
        truncs = [t for t in truncs if t[2] is not None and t[2] > base[1]]
        if as_of_lsn is not None and as_of_lsn < base[1]:
            raise ValueError(f"{name}: the base is as of {base[1]}, after as_of_lsn {as_of_lsn}: a base cannot "
                             "say what the table held before it")
    if not info.versions:
        if base is not None:
            raise ValueError(f"{name}: no change of the table in these changes: its base is all there is of it")
        return None, truncs, [], T.StructType([]), False, [], info, Inner(T.StructType([]), {})
    tc = _table_changes(changes, name, registry, info, as_of_lsn)
    if as_of_lsn is not None:
        truncs = [t for t in truncs if t[2] is not None and t[2] <= as_of_lsn]
        tc = tc.where(F.col("commit_lsn") <= F.lit(int(as_of_lsn)).cast(ST.LSN_TYPE))
    if base is not None:
        tc = tc.where(F.col("commit_lsn") > F.lit(int(base[1])).cast(ST.LSN_TYPE))
    tc, inner = to_inner(tc)
    versions = [[{**c, "name": inner.inner.get(c["name"], c["name"])} for c in v] for v in info.versions]
    cols = tc.schema["after"].dataType
    names = [f.name for f in cols.fields if owner(f.name, cols.names) is None]
    alike = alike_rows(versions)
    netkey = net_key(versions, alike)
    keycols, earlier, flagged = identity_key(versions, info)
    rank = "commit_rank" if "commit_rank" in tc.columns else "commit_lsn"
    pos = F.struct(F.col(rank).alias("r"), F.col("seq").alias("s"))

    iud = tc.withColumn("__pos", pos).where(F.col("op").isin("I", "U", "D", "R"))
    keyed = {}       # the image a key is read from, where it is not the image as sent
    if any(k not in {c["name"] for c in v} for v in versions for k in keycols):
        # a key column some Relation lacks: one dropped and added again is a new column,
        # so the images sent before it name their rows without the dropped one's value
        spans = inner.spans(column_spans(changes, name, as_of_lsn, info))
        if set(added_cuts(spans, cols.names)) & set(keycols):
            keyed = {"after": "__ka", "before": "__kb"}
            iud = as_added(as_added(iud, cols, spans, to="__ka"), cols, spans, side="before", to="__kb")

    def key_of(side, keys=keycols):
        return row_key(keyed.get(side, side), keys)

    old_key = F.when(F.col("before").isNotNull(), key_of("before")).otherwise(key_of("after"))
    new_key = key_of("after")
    if not flagged:   # no key column: an Update naming no old key cannot be matched to its row
        new_key = unknown_key_error(name, new_key)
    if earlier:
        iud, old_key, new_key = found_keys(iud, earlier, keycols, new_key, old_key, key_of)
        sends_old = True   # under an earlier identity an Update may move a row's newest key unsaid
    elif not (deletes or sends_old):
        # no Delete and no key change (known from the heads): every change sets its row
        ev = iud.select(new_key.alias("__key"), F.lit(1).alias("__sub"), F.lit("set").alias("__ev"), "op",
                        "__pos", "commit_lsn", "commit_ts", "after", "unchanged", old_key.alias("__from"))
        ev = with_base(ev, base, cols, keycols, inner, name)
        return ev, truncs, names, cols, sends_old, netkey, info, inner
    # else each change gives its one or two events in one pass over the table's changes
    # (a union of a 'set' and a 'del' query decodes every payload twice: snapshot + count
    # of 1 M rows with Deletes, per-field, 9.7 s against 16.3 s): an array of the events'
    # small parts, exploded;
    # the row image stays a column of the change
    set_ev = F.when(F.col("op").isin("I", "U", "R"), F.struct(
        new_key.alias("k"), F.lit(1).alias("sub"), F.lit("set").alias("ev"), old_key.alias("from")))
    del_ev = F.when((F.col("op") == "D") | key_move(old_key, new_key, alike), F.struct(
        old_key.alias("k"), F.lit(0).alias("sub"), F.lit("del").alias("ev"), old_key.alias("from")))
    is_set = F.col("__e.ev") == "set"
    ev = (iud.select("op", "__pos", "commit_lsn", "commit_ts", "after", "unchanged",
                     F.explode(F.array(set_ev, del_ev)).alias("__e"))
          .where(F.col("__e").isNotNull())
          .select(F.col("__e.k").alias("__key"), F.col("__e.sub").alias("__sub"), F.col("__e.ev").alias("__ev"),
                  "op", "__pos", "commit_lsn", "commit_ts", F.when(is_set, F.col("after")).alias("after"),
                  F.when(is_set, F.col("unchanged")).alias("unchanged"),
                  F.when(is_set, F.col("__e.from")).alias("__from")))
    ev = with_base(ev, base, cols, keycols, inner, name)
    return ev, truncs, names, cols, sends_old, netkey, info, inner


def snapshot(changes: DataFrame, name: str, as_of_lsn: int | None = None, *, registry=None,
             missing: dict | None = None, base=None, base_lsn=None) -> DataFrame:
    """The table as of commit LSN ``as_of_lsn`` (inclusive; None: every change), rebuilt
    with DataFrame operations: changes after the table's last Truncate, grouped by
    replica-identity key (the newest Relation's key columns; FULL identity or no key:
    every column; a change sent under an earlier identity is resolved to it,
    :func:`.rules.found_keys`), last change by (commit position, seq) wins, deletes and key-changing
    updates remove the old key, unchanged TOAST values carried (see ``carry_toast``); a
    table with no key, whose rows may repeat, holds as many rows alike as were added and
    not removed (:func:`.rules.count_alike`).
    Columns: the typed columns (and ``__special`` companions) of :func:`table_changes`
    that the Relation in force at the cut lists (a column dropped is not the table's).
    ``missing``: {column: value} the server gave a column added with a ``DEFAULT`` in the
    rows older than it (:func:`pgoutput_codec.tables.snapshot`). ``base``/``base_lsn``:
    the table's rows as of an LSN (a DataFrame, a Parquet path, or a mapping of them by
    table name; :func:`pgoutput_codec.tables.snapshot`), as copied rows then. A table
    with no copied row, no Truncate and no base warns (``IncompleteTableWarning``)."""
    b = base_for(changes, name, base, base_lsn)
    registry = spark_registry(changes, registry)
    ev, truncs, names, cols, sends_old, _, info, inner = _events(changes, name, as_of_lsn, registry, b)
    if base is not KNOWN:
        warn_incomplete(info, truncs, name, b)
    if ev is None:
        return changes.sparkSession.createDataFrame([], cols)
    ev = carry_toast(after_truncate(ev, truncs), names, cols, sends_old)
    if alike_rows(info.versions):
        # as many rows alike as were added and not removed (a removal of none held: none)
        per = count_alike(ev)
        held = F.col("__total") - F.col("__low")
        last = per.where(held > 0).select(F.col("__set.after").alias("after"), F.col("__set.__pos").alias("__pos"),
                                          F.explode(F.array_repeat(F.lit(1), held.cast("int"))).alias("__r"))
    else:
        w = Window.partitionBy("__key").orderBy(F.col("__pos").desc(), F.col("__sub").desc())
        last = ev.withColumn("__n", F.row_number().over(w)).where((F.col("__n") == 1) & (F.col("__ev") == "set"))
    spans = inner.spans(column_spans(changes, name, as_of_lsn, info))
    fill = {inner.inner[k]: v for k, v in missing_values(missing, inner.user, info, registry).items()}
    out = columns_in_force(as_added(last, cols, spans, fill).select("after.*"), cols, spans)
    return with_field_metadata(out.toDF(*[inner.outer(c) for c in out.columns]) if inner.renamed else out, inner.user)



def net_changes(changes: DataFrame, name: str, *, registry=None, missing: dict | None = None, base=None,
                base_lsn=None) -> DataFrame:
    """One row per key these changes touched, as the single-process
    :func:`pgoutput_codec.tables.net_changes`: ``__OP`` "upsert" (the key's last image,
    ``__UNCHANGED`` the columns whose unchanged TOAST value these changes never carried —
    the target keeps them, from the row of key ``__UNCHANGED_FROM`` when a key change
    moved the row), "delete" (the key columns set) and, first, "truncate" (empty the
    target; also when another relation bore the name before this one in these changes);
    ``__COMMIT_LSN``/``__COMMIT_AT`` of the key's last change, in commit order;
    ``__RELATION_ID``, the relation the rows are of. What an incremental run (``decode_changes(resume=)``) MERGEs into a copy of the table:
    ``truncate`` → delete every row; ``delete`` → delete when matched; ``upsert`` →
    update when matched (keeping the ``__UNCHANGED`` columns) or insert. The key: the
    replica identity's columns, or those every identity over the changes held
    (:func:`pgoutput_codec.tables.net_key`, and its one limit, in
    :func:`pgoutput_codec.tables.net_changes`). The control columns are the last six
    (a table's own column may bear one of their names); the table's columns bear the
    names one process gives them, ``Id`` beside ``ID`` too (:func:`.tablerows.inner_names`). A table
    with no key gives counts, as one process does: a row per row added or removed.
    ``base``/``base_lsn``: as for :func:`snapshot`; its rows are upserts at its LSN."""
    b = base_for(changes, name, base, base_lsn)
    registry = spark_registry(changes, registry)
    ev, truncs, names, cols, sends_old, keycols, info, inner = _events(changes, name, None, registry, b)
    if base is not KNOWN:
        warn_incomplete(info, truncs, name, b)
    # our own columns beside the table's (which may bear their names): named apart
    # here, given their names by position at the end
    own = {c: own_name(c, cols.names) for c in (*NET_COLUMNS, "__pos")}
    relation = F.lit(info.relation_id).cast(T.LongType()).alias(own["__RELATION_ID"])
    if ev is None:   # no row change: a truncate at most, and no columns to give
        extra = T.StructType([T.StructField("__OP", T.StringType()),
                              T.StructField("__UNCHANGED", T.ArrayType(T.StringType())),
                              T.StructField("__COMMIT_LSN", ST.LSN_TYPE),
                              T.StructField("__COMMIT_AT", T.TimestampType()),
                              T.StructField("__RELATION_ID", T.LongType())])
        rows = [("truncate", [], truncs[-1][2], truncs[-1][3], info.relation_id)] if truncs else []
        return changes.sparkSession.createDataFrame(rows, extra)
    if info.replaced and not truncs:
        # another relation bore the name before this one in these changes (dropped, or
        # renamed away): the target held that relation's rows, so it is cleared first,
        # at this relation's first change (one small job, only then)
        first = ev.agg(F.min(F.struct("__pos", "commit_lsn", "commit_ts")).alias("f")).collect()[0]["f"]
        replaced = [(first["__pos"]["r"], first["__pos"]["s"], first["commit_lsn"], first["commit_ts"])]
    else:
        replaced = []
    ev = carry_toast(after_truncate(ev, truncs), names, cols, sends_old, pending=True)
    fill = {inner.inner[k]: v for k, v in missing_values(missing, inner.user, info, registry).items()}
    ev = as_added(ev, cols, inner.spans(column_spans(changes, name, None, info)), fill)

    def net_of(key):   # rows are keyed by the newest identity; net changes by keycols (net_key), within it
        return F.struct(*[F.col(f"{key}.`{k}`").alias(k) for k in keycols])
    if alike_rows(info.versions):
        # rows alike counted: as many upserts as a row was added more times than
        # removed, or deletes as it was removed more, at its last change
        per = count_alike(ev).where(F.col("__total") != 0)
        more = F.col("__total") > 0
        last = per.select(
            "__key", F.when(more, "set").otherwise("del").alias("__ev"),
            F.when(more, F.col("__set.after")).alias("after"), F.when(more, F.col("__set.__pending")).alias("__pending"),
            F.struct(F.col("__key").alias("k"), F.lit(None).cast(ev.schema["__pos"].dataType).alias("p")).alias("__lin"),
            F.col("__last.commit_lsn").alias("commit_lsn"), F.col("__last.commit_ts").alias("commit_ts"),
            F.col("__last.__pos").alias("__pos"),
            F.explode(F.array_repeat(F.lit(1), F.abs(F.col("__total")).cast("int"))).alias("__r"))
    else:
        # per key its last event; a row held wins over a wider key gone at the same position
        w = Window.partitionBy(net_of("__key")).orderBy(F.col("__pos").desc(), F.col("__sub").desc())
        last = ev.withColumn("__n", F.row_number().over(w)).where(F.col("__n") == 1)
    is_set = F.col("__ev") == "set"
    image = gone(cols, keycols)
    pending = F.when(is_set, F.coalesce(F.col("__pending"), F.array().cast("array<string>"))) \
        .otherwise(F.array().cast("array<string>"))
    moved = F.col("__lin.p").isNull() & ~net_of("__lin.k").eqNullSafe(net_of("__key"))
    op, unchanged, moved_from, lsn_, at_, pos_ = (own[c] for c in (*NET_COLUMNS[:5], "__pos"))
    out = last.select(image.alias("__img"), F.when(is_set, "upsert").otherwise("delete").alias(op),
                      pending.alias(unchanged),
                      F.when((F.size(pending) > 0) & moved, net_of("__lin.k")).alias(moved_from),
                      F.col("commit_lsn").alias(lsn_), F.col("commit_ts").alias(at_), F.col("__pos").alias(pos_))
    out = out.select("__img.*", op, unchanged, moved_from, lsn_, at_, relation, pos_)
    if truncs or replaced:
        r, q, lsn, ts = (truncs or replaced)[-1]
        row = {f.name: None for f in out.schema.fields} | {
            op: "truncate", unchanged: [], lsn_: lsn, at_: ts, own["__RELATION_ID"]: info.relation_id,
            pos_: (r, q)}
        out = out.unionByName(changes.sparkSession.createDataFrame([row], out.schema))
    first = F.when(F.col(op) == "truncate", 0).otherwise(1)
    out = out.orderBy(first, pos_).drop(pos_)
    if inner.renamed:   # the key struct and the unchanged lists under the user's names
        key_t = out.schema[moved_from].dataType
        out = out.select(*[f"`{c}`" for c in cols.names], op,
                         renamed_strings(F.col(unchanged), {v: k for k, v in inner.inner.items()}).alias(unchanged),
                         user_struct(F.col(moved_from), key_t, [inner.outer(f.name) for f in key_t.fields])
                         .alias(moved_from), lsn_, at_, own["__RELATION_ID"])
    return with_field_metadata(out.toDF(*[inner.outer(c) for c in cols.names], *NET_COLUMNS), inner.user,
                               len(NET_COLUMNS))


def history(changes: DataFrame, name: str, *, registry=None, base=None, base_lsn=None) -> DataFrame:
    """Every version of every row (SCD type 2): the typed columns, ``__OP`` (the change
    that made the version), ``__START_LSN``/``__START_AT`` (its commit) and
    ``__END_LSN``/``__END_AT`` (the commit of the next change of the same key, or of the
    next Truncate, whichever comes first; null: current; of rows alike in a table with
    no key, a removal ends the oldest held, :func:`.rules.alike_ends`). A table column bearing one of
    these names keeps it, and ours is named apart, as one process names it
    (:func:`pgoutput_codec.tables.history_names`). ``base``/``base_lsn``: as for
    :func:`snapshot`; a version of each base row from its LSN (``__START_AT`` null)."""
    b = base_for(changes, name, base, base_lsn)
    registry = spark_registry(changes, registry)
    ev, ts, names, cols, sends_old, _, info, inner = _events(changes, name, None, registry, b)
    if base is not KNOWN:
        warn_incomplete(info, ts, name, b)
    if ev is None:
        return changes.sparkSession.createDataFrame([], T.StructType([   # no row change: no version
            T.StructField("__OP", T.StringType()), T.StructField("__START_LSN", ST.LSN_TYPE),
            T.StructField("__START_AT", T.TimestampType()), T.StructField("__END_LSN", ST.LSN_TYPE),
            T.StructField("__END_AT", T.TimestampType())]))
    ev = same_copy(carry_toast(ev, names, cols, sends_old), info)
    nxt = end_versions(ev, ts, alike_rows(info.versions))
    end_lsn, end_at = F.col("__end.lsn"), F.col("__end.at")
    own = [own_name(c, cols.names) for c in HISTORY_COLUMNS]
    out = nxt.where(F.col("__ev") == "set").select(
        "after.*", *[c.alias(o) for c, o in zip((F.col("op"), F.col("commit_lsn"), F.col("commit_ts"), end_lsn, end_at),
                                                own, strict=True)])
    data = [inner.outer(c) for c in cols.names]
    # the table's columns under the user's names, ours as the single-process history names them
    return with_field_metadata(out.toDF(*data, *history_names(data)), inner.user, len(HISTORY_COLUMNS))


def with_field_metadata(out: DataFrame, row: T.StructType, own: int = 0) -> DataFrame:
    """``out`` with the metadata of the fields of ``row`` (the typed row, user names) on
    its columns of the same names (a geometry's CRS), which the rebuilding steps
    (windows, structs made again) do not keep; ``own``: how many of its last columns are
    ours, not the table's. ``out`` itself when no field has any."""
    meta = {f.name: f.metadata for f in row.fields if f.metadata}
    names = out.columns
    data = len(names) - own
    if not any(c in meta for c in names[:data]):
        return out
    # by position: a table's column may bear the name of one of ours (net changes' __OP)
    at = out.toDF(*[f"_{i}" for i in range(len(names))])
    return at.select(*[F.col(f"_{i}").alias(c, metadata=meta.get(c, {}) if i < data else {})
                       for i, c in enumerate(names)])
