"""Rows keyed by the newest replica identity when the identity changed over a table's
changes: which earlier identities' changes do not carry the newest key
(:func:`earlier_identities`), and the newest key of the row each such change names,
looked up among the row images before it (:func:`found_keys`)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .tablerows import TableInfo, pos

__all__ = ["earlier_identities", "row_keys", "found_keys"]


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

