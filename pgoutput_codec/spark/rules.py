"""The replay rules on Spark: each a function of the same name as its Arrow (single-process)
implementation in :mod:`pgoutput_codec.tables.rules`, which states the rule; the tests
hold the two to the same results (``tests/spark``, one parity test per rule, named
``test_<rule>_…``). Here rows are DataFrame events keyed by the replica identity
(``__key``), in commit position order (``__pos``, ``__sub``), built by
:mod:`.tables` (``snapshot``, ``history``, ``net_changes``), which applies these.

:func:`identity_key`, :func:`row_key`, :func:`unknown_key_error`, :func:`found_keys`
(a row named across replica identity changes), :func:`key_move`, :func:`carry_toast`
(unchanged TOAST values along a row's lineage), :func:`count_alike` (rows that may
repeat), :func:`same_copy`, :func:`base_for`, :func:`after_truncate`,
:func:`end_versions`, :func:`gone`, :func:`as_added` (columns added over the changes, by
their spans, :func:`column_spans`), :func:`columns_in_force`, :func:`missing_values`,
:func:`net_key`, :func:`warn_incomplete`.
"""

from __future__ import annotations

import warnings

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..changes.relations import merge_columns
from ..tables import rules as one
from ..typecatalog import arrow_type, with_type_names
from ..typecatalog.companions import owner
from . import types as ST
from .changerows import pass2_of
from .tablerows import END_OF_DAY, TableInfo, pos, table_of

__all__ = list(one.RULES) + ["earlier_identities", "row_keys", "column_spans", "added_cuts", "with_base",
                              "alike_ends"]


# --------------------------------------------------------------------------- keys

def row_key(side: str, keys: list):
    """A row's key: the struct of its image's (``side``: ``before``/``after``) values of
    the key columns ``keys`` (:func:`pgoutput_codec.tables.rules.row_key`)."""
    return F.struct(*[F.col(f"{side}.`{k}`").alias(k) for k in keys])


def identity_key(versions: list, info: TableInfo):
    """(key columns, earlier identities to look rows up by (:func:`found_keys`), the
    newest Relation's flagged columns): rows are keyed by the newest Relation's identity
    (:func:`pgoutput_codec.tables.rules.identity_key`). Where the identity changed and
    the columns every identity held are one of them (a primary key kept while FULL came
    and went), rows are keyed by those: every change's old image holds them, nothing to
    look up (and no unchanged TOAST value in a key)."""
    newest = versions[-1] if versions else []
    flagged = [c["name"] for c in newest if c["flags"] & 1]
    keycols = list(one.identity_key(newest))
    earlier = earlier_identities(info._replace(versions=versions), keycols)
    identities = row_keys(versions)
    common = set.intersection(*identities) if identities and earlier else set()
    if earlier and common and all(common <= {c["name"] for c in cols if c["flags"] & 1} for cols in versions) \
            and common in identities:
        keycols, earlier = [c for c in keycols if c in common] or sorted(common), {}
    return keycols, earlier, flagged


def unknown_key_error(name: str, new_key):
    """``new_key``, or, for an Update that names no old key (a table with no key column),
    the refusal :func:`pgoutput_codec.tables.rules.unknown_key_error` words, raised where
    it is met, at no extra job."""
    head, tail = one.unknown_key_error(name, "\0").split("\0")
    return F.when((F.col("op") == "U") & F.col("before").isNull(), F.raise_error(
        F.concat(F.lit(head), F.col("commit_lsn").cast("string"), F.lit(tail)))).otherwise(new_key)


def key_move(old_key, new_key, alike: bool):
    """Whether a change's event removes the row under its old key (a 'del' event beside
    its 'set'): an Update whose key changed
    (:func:`pgoutput_codec.tables.rules.key_move`), or, where rows may repeat
    (:func:`count_alike`), every Update."""
    return (F.col("op") == "U") if alike else ((F.col("op") == "U") & (old_key != new_key))


def net_key(versions: list, alike: bool) -> list:
    """The key net changes name rows by (:func:`pgoutput_codec.tables.rules.net_key`):
    rows alike (no key) by every column the table has now."""
    newest = versions[-1] if versions else []
    return [c["name"] for c in newest] if alike else one.net_key(versions, newest)


def earlier_identities(info: TableInfo, keycols: list) -> dict:
    """The table's earlier replica identities whose changes do not carry the newest
    key: {key columns: [relation_version, ...]}. Rows are keyed by the newest Relation's
    key columns; a change sent under an identity whose old image holds them all (FULL,
    or a wider key) names its row's newest key itself, but one sent under a narrower or
    another key (DEFAULT before FULL, an index before another) names it only by that
    identity's columns (:func:`found_keys`). Empty when the identity never changed."""
    out: dict = {}
    for cols, fp in zip(info.versions, info.fingerprints or (), strict=False):
        keys = tuple(c["name"] for c in cols if c["flags"] & 1) or tuple(c["name"] for c in cols)
        if not set(keycols) <= set(keys):
            out.setdefault(keys, []).append(fp)
    return out


def row_keys(versions: list) -> list:
    """The key column sets of the table's identities that name a row by fewer columns
    than it has (a primary key or an index: unique, unlike a whole row under FULL)."""
    out = []
    for cols in versions:
        k = {c["name"] for c in cols if c["flags"] & 1}
        if k and len(k) < len(cols):
            out.append(k)
    return out


def found_keys(iud: DataFrame, earlier: dict, keycols: list, new_key, old_key, key_of):
    """(``iud`` with the lookups, ``__g{i}`` per key column; the old key to use; the new
    key to use): the newest key of the row each Update/Delete sent under an earlier
    identity names — that of the latest row image set before it (by commit position,
    seq) whose columns of that identity equal the change's old image (else, for an
    Update without one, its new image: the identity's columns did not change), as a
    subscriber finds a row by the key each change sends. One window per earlier
    identity over the table's row images and those changes, and a join back by
    position; only for a table whose identity changed (:func:`earlier_identities`). A
    row none names (older than these changes) keeps the key its old image gives.

    An image may leave a newest key column unsaid: stored out of line and not changed,
    it is sent as unchanged TOAST ('u'), and under an earlier identity whose key does
    not hold it no old image brings it (the newest identity's own changes send their
    old key then: PostgreSQL 15/16/18, tests/identity_moves.py). Such a value is the
    row's, as its image before said: each column is looked up on its own, the latest
    image before that said it. An Update that moved the row to another key of the
    earlier identity begins its row's images there: it holds a pointer (its position),
    and the value it found under its old key is filled in on the driver
    (:func:`_moved_values`; only such moves cross, one row each)."""
    key_t = iud.select(new_key.alias("k")).schema["k"].dataType
    unsaid = {k: F.array_contains(F.coalesce(F.col("unchanged"), F.array().cast("array<string>")), k)
              for k in keycols}
    any_unsaid = F.lit(False)
    for k in keycols:
        any_unsaid = any_unsaid | unsaid[k]
    val_t = {k: key_t[k].dataType for k in keycols}
    pos_t = iud.schema["__pos"].dataType

    def said(k, ptr=None):   # (v: the value, m: the position of a move that did not say it)
        return F.struct(F.col(f"after.`{k}`").alias("v") if ptr is None else F.lit(None).cast(val_t[k]).alias("v"),
                        (ptr if ptr is not None else F.lit(None).cast(pos_t)).alias("m"))

    found = None
    for keys, fps in earlier.items():
        under = F.col("relation_version").isin(*fps)
        moved = (F.col("op") == "U") & under & F.col("before").isNotNull() & \
            ~key_of("before", list(keys)).eqNullSafe(key_of("after", list(keys)))
        sets = iud.where(F.col("op").isin("I", "U", "R")).select(
            "__pos", key_of("after", list(keys)).alias("__pk"), F.lit(1).alias("__t"),
            *[F.when(~unsaid[k], said(k)).when(moved, said(k, F.col("__pos"))).alias(f"__n{i}")
              for i, k in enumerate(keycols)])
        asks = iud.where(F.col("op").isin("U", "D") & under).select(
            "__pos", F.when(F.col("before").isNotNull(), key_of("before", list(keys)))
            .otherwise(key_of("after", list(keys))).alias("__pk"), F.lit(0).alias("__t"),
            *[F.lit(None).cast(sets.schema[f"__n{i}"].dataType).alias(f"__n{i}") for i in range(len(keycols))])
        w = (Window.partitionBy("__pk").orderBy("__pos", "__t")
             .rowsBetween(Window.unboundedPreceding, -1))
        got = (sets.unionByName(asks)
               .select("*", *[F.last(f"__n{i}", ignorenulls=True).over(w).alias(f"__g{i}")
                              for i in range(len(keycols))])
               .where(F.col("__t") == 0)
               .select(F.col("__pos").alias("__fp"), *[f"__g{i}" for i in range(len(keycols))]))
        got = _moved_values(got, iud.where(moved & any_unsaid).select("__pos"), keycols)
        found = got if found is None else found.unionByName(got)
    iud = iud.join(found, F.col("__pos") == F.col("__fp"), "left").drop("__fp")
    whole = F.lit(True)
    for i in range(len(keycols)):
        whole = whole & F.col(f"__g{i}").isNotNull()
    f = F.when(whole, F.struct(*[F.col(f"__g{i}.v").alias(k) for i, k in enumerate(keycols)]))
    # the new image's unsaid key columns: the row's values, as found
    filled = F.struct(*[F.when(unsaid[k] & F.col(f"__g{i}").isNotNull(), F.col(f"__g{i}.v"))
                        .otherwise(F.col(f"after.`{k}`")).alias(k) for i, k in enumerate(keycols)])
    looked = F.lit(False)
    for i in range(len(keycols)):
        looked = looked | F.col(f"__g{i}").isNotNull()
    return iud, F.coalesce(f, old_key), F.when(looked, filled).otherwise(new_key)


def _moved_values(got: DataFrame, moves: DataFrame, keycols: list) -> DataFrame:
    """``got`` (the lookups: ``__fp`` and per key column ``__g{i}``, a value or a pointer
    to a move) with every pointer replaced by the value the move found under its old key
    — itself perhaps a pointer to an earlier move: resolved in order on the driver. The
    moves that left a newest key column unsaid are few (a key change of the earlier
    identity on a row whose newest key is stored out of line); none: ``got`` as it is."""
    if not moves.take(1):   # a pass over the table's changes, without the window
        return got
    rows = got.join(moves, F.col("__fp") == F.col("__pos"), "left_semi").collect()
    rows.sort(key=lambda r: pos(r["__fp"]))
    value = {}   # (move position, column) -> its resolved value struct, or None: unknown
    for r in rows:
        p = pos(r["__fp"])
        for i in range(len(keycols)):
            g = r[f"__g{i}"]
            if g is not None and g["m"] is not None:
                g = value.get((pos(g["m"]), i))
            value[(p, i)] = g
    spark = got.sparkSession
    pos_t = got.schema["__fp"].dataType
    for i in range(len(keycols)):
        g_t = got.schema[f"__g{i}"].dataType
        res = spark.createDataFrame(
            [((p[0], p[1]), v) for (p, j), v in value.items() if j == i],
            T.StructType([T.StructField("__mp", pos_t), T.StructField("__mv", g_t)]))
        got = (got.join(F.broadcast(res), F.col(f"__g{i}.m") == F.col("__mp"), "left")
               .withColumn(f"__g{i}", F.when(F.col(f"__g{i}.m").isNotNull(), F.col("__mv"))
                           .otherwise(F.col(f"__g{i}")))
               .drop("__mp", "__mv"))
    return got


# --------------------------------------------------------------------------- values

def _lineage(ev: DataFrame, sends_old: bool) -> DataFrame:
    """``ev`` with ``__lin``: the row each event's image descends from, through
    key-changing updates — (key, position of its Insert), or (key, null) for a row older
    than these changes. Unchanged TOAST values flow along it, not along one key.

    Only needed where an event that leaves a value unchanged sits on a key some update
    moved a row to. No Update sent an old key or row (``sends_old`` false, read from the
    payload heads by ``table_info``'s job): no key changed, and nothing more is read.
    Else a Spark job checks (one more pass over the table's changes); when it finds
    such an event, the events of the keys moves touch are walked in order on the
    driver, as the single-process replay does, and their lineage joined back.
    Otherwise the key is the lineage."""
    own = F.struct(F.col("__key").alias("k"), F.lit(None).cast(ev.schema["__pos"].dataType).alias("p"))
    if not sends_old:
        return ev.withColumn("__lin", own)
    moves = ev.where((F.col("__ev") == "set") & (F.col("op") == "U") & ~F.col("__from").eqNullSafe(F.col("__key")))
    targets = moves.select(F.col("__key").alias("__t"), F.col("__pos").alias("__tp"))
    toasted = ev.where((F.col("__ev") == "set") & (F.size(F.coalesce(F.col("unchanged"), F.array())) > 0))
    hit = toasted.join(targets, F.col("__key").eqNullSafe(F.col("__t")) & (F.col("__tp") <= F.col("__pos")),
                       "left_semi")
    if not hit.take(1):
        return ev.withColumn("__lin", own)
    keys = (moves.select(F.col("__from").alias("__k")).union(moves.select(F.col("__key").alias("__k")))
            .distinct())
    touched = (ev.join(F.broadcast(keys), F.col("__key").eqNullSafe(F.col("__k")), "left_semi")
               .select("__key", "__pos", "__sub", "__ev", "op", "__from").collect())
    touched.sort(key=lambda r: (r["__pos"]["r"], r["__pos"]["s"], r["__sub"]))
    cur, out = {}, []   # repr(key) -> lineage (reprs: keys may hold lists or NaN)
    for r in touched:
        key, hk = r["__key"], repr(r["__key"])
        if r["__ev"] == "del":
            if r["op"] == "D":
                cur.pop(hk, None)
            continue                      # a key change's 'del' half: its 'set' half moves the row
        if r["op"] in ("I", "R"):      # a row inserted, or copied whole
            lin = (key, r["__pos"])
        elif repr(r["__from"]) != hk:
            lin = cur.pop(repr(r["__from"]), (r["__from"], None))
        else:
            lin = cur.get(hk, (key, None))
        cur[hk] = lin
        out.append((key, r["__pos"], r["__sub"], {"k": lin[0], "p": lin[1]}))
    key_t, pos_t = ev.schema["__key"].dataType, ev.schema["__pos"].dataType
    labels = ev.sparkSession.createDataFrame(out, T.StructType([
        T.StructField("__lk", key_t), T.StructField("__lpos", pos_t), T.StructField("__lsub", T.IntegerType()),
        T.StructField("__l", T.StructType([T.StructField("k", key_t), T.StructField("p", pos_t)]))]))
    cond = (F.col("__key").eqNullSafe(F.col("__lk")) & (F.col("__pos") == F.col("__lpos"))
            & (F.col("__sub") == F.col("__lsub")))
    return (ev.join(F.broadcast(labels), cond, "left").withColumn("__lin", F.coalesce(F.col("__l"), own))
            .drop("__lk", "__lpos", "__lsub", "__l"))


def carry_toast(ev: DataFrame, names: list, cols: T.StructType, sends_old: bool,
                 pending: bool = False) -> DataFrame:
    """Unchanged-TOAST values ('u': not in the message) carried from the last image of
    the same row that sent them — the same key, or across key changes the row's
    lineage (:func:`_lineage`), as the single-process replay does. ``pending``: add
    ``__pending``, the columns still unchanged (no image in these changes sent them)."""
    ev = _lineage(ev, sends_old)
    w = (Window.partitionBy("__lin").orderBy("__pos", "__sub")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))

    def sent(nm):
        return ~F.coalesce(F.array_contains(F.col("unchanged"), nm), F.lit(False))

    def last(nm, field):
        return F.last(F.when((F.col("__ev") == "set") & sent(nm), F.struct(F.col(f"after.`{field}`").alias("v"))),
                      ignorenulls=True).over(w)

    lasts = {nm: last(nm, nm) for nm in names}

    def carried(f):
        # a companion (a geometry's __srid) comes with its column's value
        nm = f.name if f.name in names else owner(f.name, names)
        if nm is None:
            return F.col(f"after.`{f.name}`")
        was = lasts[nm] if nm == f.name else last(nm, f.name)
        return F.when(sent(nm), F.col(f"after.`{f.name}`")).otherwise(was["v"])
    rebuilt = F.struct(*[carried(f).alias(f.name) for f in cols.fields])
    if pending:
        still = F.filter(F.array(*[F.when(~sent(nm) & lasts[nm].isNull(), F.lit(nm)) for nm in names]),
                         lambda x: x.isNotNull()) if names else F.array().cast("array<string>")
        ev = ev.withColumn("__pending", F.when(F.col("__ev") == "set", still))
    return ev.withColumn("after", F.when(F.col("__ev") == "set", rebuilt))


def gone(cols: T.StructType, keycols: list):
    """The image of a row an event removed ('del'): its key columns (``__key``) set, the
    others null in their own types (Spark 4 casts nothing to TIME) — the row held is not
    looked up (:func:`pgoutput_codec.tables.rules.gone`: a key-only old image's other
    columns are nulls it does not send; a row never seen is its key alone); a 'set'
    event's image, its ``after``."""
    return F.when(F.col("__ev") == "set", F.col("after")).otherwise(F.struct(*[
        (F.col(f"__key.`{f.name}`") if f.name in keycols else F.when(F.lit(False), F.col(f"after.`{f.name}`")))
        .alias(f.name)
        for f in cols.fields]))


def same_copy(ev: DataFrame, info: TableInfo) -> DataFrame:
    """A copied row equal to the row its key holds (a copy taken again) makes no new
    version, as in one process: its event is dropped from the history. Only where some
    row is copied. A table with no key keeps them: a copied row adds a row alike."""
    if not info.copied or one.alike_rows(info.versions):
        return ev
    w = Window.partitionBy("__key").orderBy("__pos", "__sub")
    prev = F.lag(F.struct(F.col("__ev").alias("e"), F.col("after").alias("a"))).over(w)
    same = (F.col("op") == "R") & (F.col("__ev") == "set") & (F.col("__prev.e") == "set") & \
        F.col("__prev.a").eqNullSafe(F.col("after"))
    return ev.withColumn("__prev", prev).where(~F.coalesce(same, F.lit(False))).drop("__prev")


# --------------------------------------------------------------------------- rows alike

def count_alike(ev: DataFrame) -> DataFrame:
    """Per key of a table whose rows may repeat (:func:`pgoutput_codec.tables.rules.alike_rows`:
    the key is the whole row), its events counted in order — a 'set' adds a row, a 'del'
    removes one: ``__total`` (added less removed), ``__low`` (the lowest the running
    count went, 0 at most: removals of rows older than these changes, which no row held
    here answers, so that ``__total - __low`` rows are held at the end), ``__set``
    (the last image set: ``after``, ``__pos``, ``__pending`` where ``ev`` has it) and
    ``__last`` (the last event: ``commit_lsn``, ``commit_ts``, ``__pos``)."""
    is_set = F.col("__ev") == "set"
    w = (Window.partitionBy("__key").orderBy("__pos", "__sub")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    at = F.struct(F.col("__pos").alias("p"), F.col("__sub").alias("q"))
    image = F.struct("after", "__pos", *(["__pending"] if "__pending" in ev.columns else []))
    return (ev.withColumn("__x", F.when(is_set, 1).otherwise(-1))
            .withColumn("__s", F.sum("__x").over(w))
            .groupBy("__key")
            .agg(F.sum("__x").alias("__total"), F.least(F.min("__s"), F.lit(0)).alias("__low"),
                 F.max_by(image, F.when(is_set, at)).alias("__set"),
                 F.max_by(F.struct("commit_lsn", "commit_ts", "__pos"), at).alias("__last")))


def alike_ends(ev: DataFrame, lit_t) -> DataFrame:
    """``ev`` with ``__next`` (``__pos``, ``commit_lsn``, ``commit_ts``: the event that
    ended each 'set' event's row, or null) for a table whose rows may repeat: a removal
    ends one of the rows alike held, the oldest, as the single-process history does —
    the n-th row set under a key (since the last Truncate, ``lit_t``) is ended by the
    n-th removal that found a row held (a running count that does not go below 0)."""
    is_set = F.col("__ev") == "set"
    epoch = F.size(F.filter(lit_t, lambda t: F.struct(t["r"].alias("r"), t["s"].alias("s")) < F.col("__pos"))) \
        if lit_t is not None else F.lit(0)
    w = Window.partitionBy("__key", "__epoch").orderBy("__pos", "__sub")
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    run = (ev.withColumn("__epoch", epoch).withColumn("__x", F.when(is_set, 1).otherwise(-1))
           .withColumn("__s", F.sum("__x").over(upto))
           .withColumn("__m0", F.least(F.coalesce(F.min("__s").over(before), F.lit(0)), F.lit(0)))
           .withColumn("__m", F.least(F.min("__s").over(upto), F.lit(0)))
           .withColumn("__n", F.when(is_set, F.sum(F.when(is_set, 1).otherwise(0)).over(upto))
                       .when(F.col("__s") >= F.col("__m0"),
                             F.sum(F.when(is_set, 0).otherwise(1)).over(upto) + F.col("__m"))))
    ends = run.where(~is_set & F.col("__n").isNotNull()).select(
        F.col("__key").alias("__ek"), F.col("__epoch").alias("__ee"), F.col("__n").alias("__en"),
        F.struct("__pos", "commit_lsn", "commit_ts").alias("__next"))
    cond = (F.col("__key").eqNullSafe(F.col("__ek")) & (F.col("__epoch") == F.col("__ee"))
            & (F.col("__n") == F.col("__en")) & is_set)
    return (run.join(ends, cond, "left")
            .drop("__ek", "__ee", "__en", "__epoch", "__x", "__s", "__m0", "__m", "__n"))


# --------------------------------------------------------------------------- bases, truncates, versions

def base_for(changes: DataFrame, name: str, base, base_lsn):
    """(the base's rows as a DataFrame, its LSN) of table ``name``, or None: ``base`` a
    DataFrame, a Parquet path, or a mapping of them by table name; ``base_lsn`` an LSN
    or a mapping of them (as in one process, :mod:`pgoutput_codec.tables.base`)."""
    rows, lsn = one.pick_base(base, base_lsn, name)
    if rows is None:
        return None
    if isinstance(rows, str):
        rows = changes.sparkSession.read.parquet(rows)
    if not isinstance(rows, DataFrame):
        raise TypeError(f"base of {name}: a DataFrame or a Parquet path, not {type(rows).__name__}")
    return rows, lsn


def with_base(ev: DataFrame, base, cols: T.StructType, keycols: list, inner, name: str) -> DataFrame:
    """``ev`` with a 'set' event ('R') of each base row before every change."""
    if base is None:
        return ev
    rows, lsn = base
    have = {inner.inner.get(c, c): c for c in rows.columns}
    missing = [k for k in keycols if k not in have]
    if missing:
        raise ValueError(f"base of {name} lacks key column(s) {[inner.outer(k) for k in missing]}")
    after = F.struct(*[(F.col(f"`{have[f.name]}`").cast(f.dataType) if f.name in have
                        else F.lit(None).cast(f.dataType)).alias(f.name) for f in cols.fields])
    key = F.struct(*[F.col(f"after.`{k}`").alias(k) for k in keycols])
    pos_t = ev.schema["__pos"].dataType
    first = F.struct(*[F.lit(-1).cast(f.dataType).alias(f.name) if f.name == "r" else
                       F.lit(-(1 << 63)).cast(f.dataType).alias(f.name) for f in pos_t.fields])
    out = rows.select(after.alias("after")).select(
        key.alias("__key"), F.lit(1).alias("__sub"), F.lit("set").alias("__ev"), F.lit("R").alias("op"),
        first.alias("__pos"), F.lit(int(lsn)).cast(ST.LSN_TYPE).alias("commit_lsn"),
        F.lit(None).cast(ev.schema["commit_ts"].dataType).alias("commit_ts"), "after",
        F.lit(None).cast(ev.schema["unchanged"].dataType).alias("unchanged"), key.alias("__from"))
    return out.select(*[F.col(f"`{c}`").cast(ev.schema[c].dataType).alias(c) for c in ev.columns]).unionByName(ev)


def after_truncate(ev: DataFrame, truncs: list) -> DataFrame:
    """``ev`` with only the events after the last Truncate (``truncs``, in order): a
    Truncate empties the table (:func:`pgoutput_codec.tables.rules.after_truncate`)."""
    if not truncs:
        return ev
    r, q = truncs[-1][:2]
    return ev.where(F.col("__pos") > F.struct(F.lit(r).alias("r"), F.lit(q).alias("s")))


def end_versions(ev: DataFrame, truncs: list, alike: bool) -> DataFrame:
    """``ev`` with ``__end`` (``lsn``, ``at``): the commit that ended each 'set' event's
    version — the next event of its key, or the next Truncate, whichever comes first;
    null: current (:func:`pgoutput_codec.tables.rules.end_versions`). Of rows alike
    (``alike``), a removal ends the oldest held (:func:`alike_ends`)."""
    lit_t = F.array(*[F.struct(F.lit(r).alias("r"), F.lit(s).alias("s"),
                               F.lit(lsn).cast(ST.LSN_TYPE).alias("lsn"), F.lit(at).alias("at"))
                      for r, s, lsn, at in truncs]) if truncs else None
    if alike:
        nxt = alike_ends(ev, lit_t)
    else:
        w = Window.partitionBy("__key").orderBy("__pos", "__sub")
        nxt = ev.withColumn("__next", F.lead(F.struct("__pos", "commit_lsn", "commit_ts")).over(w))
    end_lsn, end_at = F.col("__next.commit_lsn"), F.col("__next.commit_ts")
    if truncs:
        after_start = F.filter(lit_t, lambda x: F.struct(x["r"].alias("r"), x["s"].alias("s")) > F.col("__pos"))
        # get, not element_at: under ANSI (Spark 4's default) element_at raises on the empty
        # array a version has when no Truncate follows it
        first_t = F.get(after_start, F.lit(0))
        before_next = first_t.isNotNull() & (F.col("__next").isNull()
                                             | (F.struct(first_t["r"].alias("r"), first_t["s"].alias("s"))
                                                < F.col("__next.__pos")))
        end_lsn = F.when(before_next, first_t["lsn"]).otherwise(end_lsn)
        end_at = F.when(before_next, first_t["at"]).otherwise(end_at)
    return nxt.withColumn("__end", F.struct(end_lsn.alias("lsn"), end_at.alias("at")))


# --------------------------------------------------------------------------- columns

def column_spans(changes: DataFrame, name: str, as_of_lsn, info: TableInfo) -> list | None:
    """The table's column lists as its changes up to the cut were sent under them, in
    commit order: [(names, the last change under them: (rank, seq); rank None where the
    order key orders commits)], the same list sent again (retyped, another identity) one
    span. The last is in force at the cut (``tables.columns_in_force``: a column dropped
    is not in the server's table, so not in the snapshot). None: one list (or openGauss
    rows: no Relation). Over a DataFrame straight from ``decode_changes``, a cut costs one
    more small job (the payload heads up to it), only for a table whose versions list
    different columns; so does a table whose lists come back after another (a column
    dropped and added again twice: spans no first and last change can tell apart)."""
    if info.relation_id is None or len({tuple(c["name"] for c in v) for v in info.versions}) <= 1:
        return None
    if as_of_lsn is None:
        got = list(zip(info.versions, info.fingerprints, info.firsts, info.lasts, strict=True))
    else:
        pass2 = pass2_of(changes)
        if pass2 is not None:
            cut = pass2.cut_info(*table_of(changes, name), as_of_lsn)
            got = list(zip(cut.versions, cut.fingerprints, cut.firsts, cut.lasts, strict=True))
        else:
            got = info.upto or []
    if not got:
        return None
    key = (lambda p: p[1]) if any(p[0] is None for _, _, f, l_ in got for p in (f, l_)) else (lambda p: p)
    lists = {}
    for cols, _, first, last in got:
        names = tuple(c["name"] for c in cols)
        f0, l0 = lists.get(names, (first, last))
        lists[names] = (min(f0, first, key=key), max(l0, last, key=key))
    spans = sorted(lists.items(), key=lambda kv: key(kv[1][0]))
    if all(key(a[1][1]) < key(b[1][0]) for a, b in zip(spans, spans[1:], strict=False)):
        return [(list(names), last) for names, (_, last) in spans]
    # a list that came back after another: the spans from the rows in commit order
    by_fp = {int(fp): tuple(c["name"] for c in cols) for cols, fp, _, _ in got}
    rank = "commit_rank" if "commit_rank" in changes.columns else "commit_lsn"
    rows = changes.where((F.col("relation_id") == F.lit(info.relation_id)) & F.col("op").isin("I", "U", "D", "R"))
    if as_of_lsn is not None:
        rows = rows.where(F.col("commit_lsn") <= F.lit(int(as_of_lsn)).cast(ST.LSN_TYPE))
    at = F.struct(F.col(rank).alias("r"), F.col("seq").alias("s"))
    w = Window.orderBy("__p")
    turns = (rows.select(at.alias("__p"), "relation_version")
             .withColumn("__was", F.lag("relation_version").over(w)).withColumn("__before", F.lag("__p").over(w))
             .where(F.col("__was").isNull() | (F.col("__was") != F.col("relation_version")))
             .orderBy("__p").collect())
    out = []
    for t in turns:
        names = list(by_fp[int(t["relation_version"])])
        if out and out[-1][0] != names:
            out[-1] = (out[-1][0], pos(t["__before"]))
            out.append((names, None))
        elif not out:
            out.append((names, None))
    return out


def missing_values(missing: dict | None, cols: T.StructType, info: TableInfo, registry) -> dict:
    """``missing`` (:func:`pgoutput_codec.tables.rules.missing_values`, checked the same way) as
    Spark literals of the row struct's fields."""
    if not missing:
        return {}
    if info.relation_id is None and info.versions:
        # openGauss rows carry no Relation: where a column was added is not known here
        raise ValueError("missing= needs pgoutput change rows in Spark (openGauss rows name no column list)")
    table = merge_columns(info.versions, info.versions[-1] if info.versions else None)
    by_name = {c["name"]: c for c in table}
    registry = with_type_names(registry, info.versions)
    out = {}
    for nm, v in one.missing_values(missing, table, registry).typed.items():
        c, ft = by_name[nm], cols[nm].dataType
        at = arrow_type(c["type_oid"], c["type_modifier"], registry)
        v = v.cast(at)
        if pa.types.is_time64(at) and isinstance(ft, T.LongType):   # as the typed rows hold it: µs since midnight
            lit = F.lit(v.cast(pa.int64())[0].as_py())
        elif pa.types.is_time64(at):
            us = v.cast(pa.int64())[0].as_py()
            lit = F.lit(None if us in (None, END_OF_DAY) else v[0].as_py()).cast(ft)
        elif pa.types.is_interval(at):
            m = v[0].as_py()
            lit = F.struct(F.lit(m.months).alias("months"), F.lit(m.days).alias("days"),
                           F.lit(m.nanoseconds // 1000).alias("microseconds"))
        elif isinstance(ft, T.StringType):
            lit = F.lit(str(v[0].as_py()) if not pa.types.is_string(at) else v[0].as_py())
        elif isinstance(ft, T.ArrayType):
            raise ValueError(f"missing={{{nm!r}: …}}: an array column's value is not given to Spark's "
                             "snapshot (the single-process one takes it)")
        else:
            lit = F.lit(v[0].as_py())
        out[nm] = lit.cast(ft)
    return out


def added_cuts(spans: list | None, names, fill=()) -> dict:
    """{column: the last change (rank, seq) before the span that lists it again}: the
    columns added to the table (:func:`pgoutput_codec.tables.rules.added_columns`) that
    rows sent before them hold otherwise — a column dropped and added again by its name,
    or one ``fill`` (:func:`missing_values`) names — among ``names``."""
    cut, seen = {}, set()
    for (before, last), (after, _) in zip(spans or (), (spans or [])[1:], strict=False):
        seen.update(before)
        for c in one.added_columns(before, after):
            if (c in seen or c in fill) and c in names:
                cut[c] = last
    return cut


def as_added(ev: DataFrame, cols: T.StructType, spans: list | None, fill: dict | None = None,
             side: str = "after", to: str | None = None) -> DataFrame:
    """``ev`` with each column added to the table (:func:`added_cuts`) as the rows sent
    before it hold it: a column dropped and added again by its name is a new one, null
    in the rows not changed since, as in the single-process replay; ``fill``
    (:func:`missing_values`) gives a column added with a ``DEFAULT`` its value there.
    ``spans``: :func:`column_spans`'; a column is added past the last change of the span
    before the one that lists it. ``side``: the image read (``after``, ``before``),
    ``to``: the column written (``side`` itself by default)."""
    fill = fill or {}
    cut = added_cuts(spans, cols.names, fill)
    if not cut:
        return ev
    rank = ev.schema["__pos"].dataType["r"].dataType

    def before(last):
        r, s = last
        if r is None:   # the order key orders the commits
            return F.col("__pos.s") <= F.lit(s)
        return F.col("__pos") <= F.struct(F.lit(r).cast(rank).alias("r"), F.lit(s).cast(T.LongType()).alias("s"))

    def field(f):
        nm = owner(f.name, cut) or f.name
        v = F.col(f"{side}.`{f.name}`")
        # a null of the field's own type, not a cast: Spark 4 casts nothing to TIME
        was = fill[nm] if nm == f.name and nm in fill else F.when(F.lit(False), v)
        return (F.when(before(cut[nm]), was).otherwise(v) if nm in cut else v).alias(f.name)
    return ev.withColumn(to or side, F.when(F.col(side).isNotNull(), F.struct(*[field(f) for f in cols.fields])))


def columns_in_force(out: DataFrame, cols: T.StructType, spans: list | None) -> DataFrame:
    """``out`` (the snapshot's columns, with their ``__special`` companions) with only the
    columns of the Relation in force at the cut: the last of ``spans``
    (:func:`column_spans`; :func:`pgoutput_codec.tables.rules.columns_in_force`: a column
    dropped is not in the server's table). None: every column."""
    if spans is None:
        return out
    keep = set(spans[-1][0])
    return out.select(*[f"`{c}`" for c in out.columns
                        if (owner(c, cols.names) or c) in keep])


# --------------------------------------------------------------------------- completeness

def warn_incomplete(info: TableInfo, truncs: list, name: str, base) -> None:
    """:class:`~pgoutput_codec.tables.IncompleteTableWarning` when the table's rows from
    before capture are nowhere: no copied row, no Truncate, no base (known from the
    table's facts job: no job of its own)."""
    if base is None and info.versions and not info.copied and not truncs:
        warnings.warn(one.IncompleteTableWarning(name), stacklevel=3)
