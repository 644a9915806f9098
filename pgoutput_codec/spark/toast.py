"""Unchanged TOAST values (sent as 'u': not in the message) carried from the last image
of the same row that sent them, along the row's lineage through key changes
(:func:`carry_toast`), as the single-process replay does."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["carry_toast"]


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

    def last(nm):
        return F.last(F.when((F.col("__ev") == "set") & sent(nm), F.struct(F.col(f"after.`{nm}`").alias("v"))),
                      ignorenulls=True).over(w)

    lasts = {nm: last(nm) for nm in names}
    rebuilt = F.struct(*[(F.when(sent(f.name), F.col(f"after.`{f.name}`")).otherwise(lasts[f.name]["v"])
                          if f.name in names else F.col(f"after.`{f.name}`")).alias(f.name) for f in cols.fields])
    if pending:
        still = F.filter(F.array(*[F.when(~sent(nm) & lasts[nm].isNull(), F.lit(nm)) for nm in names]),
                         lambda x: x.isNotNull()) if names else F.array().cast("array<string>")
        ev = ev.withColumn("__pending", F.when(F.col("__ev") == "set", still))
    return ev.withColumn("after", F.when(F.col("__ev") == "set", rebuilt))

