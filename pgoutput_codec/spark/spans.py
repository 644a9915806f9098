"""Columns added to a table over its changes: the spans of its column lists in commit
order (:func:`column_spans`), and each added column as the rows sent before it hold it
(:func:`as_added`): null, or the value an ``ADD COLUMN … DEFAULT`` gave them
(:func:`fill_values`)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..relations import merge_columns
from ..tables import added_columns, missing_values
from ..typecatalog import arrow_type, with_type_names
from .tablerows import END_OF_DAY
from . import types as ST
from .changerows import pass2_of
from .tablerows import TableInfo, pos, table_of

__all__ = ["column_spans", "fill_values", "as_added"]


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


def fill_values(missing: dict | None, cols: T.StructType, info: TableInfo, registry) -> dict:
    """``missing`` (:func:`pgoutput_codec.tables.missing_values`, checked the same way) as
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
    for nm, v in missing_values(missing, table, registry).typed.items():
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


def as_added(ev: DataFrame, cols: T.StructType, spans: list | None, fill: dict | None = None) -> DataFrame:
    """``ev`` with each column added to the table (``tables.added_columns``) as the rows
    sent before it hold it: a column dropped and added again by its name is a new one,
    null in the rows not changed since, as in the single-process replay; ``fill``
    (:func:`fill_values`) gives a column added with a ``DEFAULT`` its value there.
    ``spans``: :func:`column_spans`'; a column is added past the last change of the
    span before the one that lists it."""
    fill = fill or {}
    if not spans:
        return ev
    cut, seen = {}, set()
    for (before, last), (after, _) in zip(spans, spans[1:], strict=False):
        seen.update(before)
        for c in added_columns(before, after):
            if (c in seen or c in fill) and c in cols.names:
                cut[c] = last
    if not cut:
        return ev
    rank = ev.schema["__pos"].dataType["r"].dataType

    def before(last):
        r, s = last
        if r is None:   # the order key orders the commits
            return F.col("__pos.s") <= F.lit(s)
        return F.col("__pos") <= F.struct(F.lit(r).cast(rank).alias("r"), F.lit(s).cast(T.LongType()).alias("s"))

    def field(f):
        nm = f.name[:-9] if f.name.endswith("__special") and f.name[:-9] in cut else f.name
        v = F.col(f"after.`{f.name}`")
        # a null of the field's own type, not a cast: Spark 4 casts nothing to TIME
        was = fill[nm] if nm == f.name and nm in fill else F.when(F.lit(False), v)
        return (F.when(before(cut[nm]), was).otherwise(v) if nm in cut else v).alias(f.name)
    return ev.withColumn("after", F.when(F.col("after").isNotNull(), F.struct(*[field(f) for f in cols.fields])))

