"""One table's change rows on Spark, before the replay rules (:mod:`.tables`): what its
changes hold, the names its columns bear inside the plans, how its rows cross into a
Python worker and back, and how they are typed.

- What one table's changes hold, found by one small job (:func:`table_info`): which
  relation bears the name, its Relation versions in use (column lists, ordered by their
  last change), its truncates, whether an Update may have moved a row to a new key, and
  where each version's changes start and end (:class:`TableInfo`).
- Its column names inside the Spark plans of ``snapshot``, ``history`` and
  ``net_changes``, and the user's names restored at the end (:func:`to_inner`). Spark
  resolves names case-insensitively (``spark.sql.caseSensitive`` is false by default,
  and the user's session setting is left alone), so a reference to field ``Id`` of a
  row holding ``Id`` and ``ID`` is ambiguous; a name holding a backtick cannot be
  quoted in a column path; and a table column may bear the name of one of our own
  columns (``__OP``). Inside the plans the row struct's fields bear inner names, unique
  without regard to case and free of backticks (:func:`inner_names`: a name that needs
  none keeps its own), our own top-level columns names no field bears
  (:func:`own_name`); the results take the user's names by position at the end, as the
  single-process functions give them.
- How change rows cross from Spark into a Python ``mapInArrow`` and back, in the shapes
  Spark hands over the cheapest (:func:`to_python` on the Spark side, :func:`from_python`
  in the worker), and the uint64 columns that cross as int64 less 2^63 (:data:`SHIFTED`).
- Its rows typed: the Spark schema of its typed row (:func:`table_schema`, types from
  the type catalog) and the ``mapInArrow`` body that types each batch
  (:class:`TableMapper`, the single-process :func:`pgoutput_codec.tables.typed_changes`
  per batch, conformed to the Arrow types Spark exchanges).
- How many dimensions the arrays of its columns have, found by one job over its change
  rows before its typed schema is fixed (:func:`array_dims`). PostgreSQL does not record
  a column's dimensionality; one process types an array column as deep as its deepest
  value, and Spark, whose schema comes before the values, reads their first bytes first
  (:func:`pgoutput_codec.typecatalog.arrays.value_ndims`) to type it the same.
"""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import one_array, plain_lists
from ..idents import parse_name
from ..lake.deltatypes import widened_halves
from ..changes.relations import bearer, split_name
from ..schema import CHANGE_COLUMN_LISTS, CHANGE_SCHEMA
from ..tables import typed_changes
from ..tables.rows import column_lists, column_set_ids
from ..tables.typed import locate
from ..typecatalog import ConversionError, arrow_type, convert_column
from ..typecatalog.arrays import value_ndims
from ..typecatalog.columns import materialize, take_at
from ..typecatalog.companions import COMPANIONS, SRID, owner
from ..typecatalog.geometry import srid_column
from ..typecatalog.interval import interval_struct as catalog_interval_struct
from ..typecatalog.registry import resolve
from . import types as ST
from .changerows import pass2_of
from .modes import MalformedPayloadError
from .shipping import check_workers, physical_plan

__all__ = ["SHIFTED", "unshifted", "flip", "to_python", "from_python",
           "Inner", "inner_names", "to_inner", "own_name", "renamed_strings", "user_struct", "SPECIAL",
           "TableInfo", "table_info", "table_of", "pos", "rescanned_cheaply",
           "table_schema", "convert_values", "conform", "NOTED_BINARY", "interval_struct", "TableMapper", "TIME_TYPE", "END_OF_DAY",
           "array_dims", "ArrayDims"]


# --------------------------------------------------------------------------- crossing into Python and back

#: the list columns of change rows that are null on some rows (``before`` of an Insert,
#: ``after`` of a Delete, both of a Truncate)
_NULLABLE_LISTS = ("before", "after", "columns")
#: the row images among them: ``list<struct<kind, data>>``
_IMAGES = ("before", "after")


#: uint64 columns that Spark holds as decimal(20,0) and that cross into Python and back
#: as int64, less 2^63 (a decimal costs Spark more to convert than a long)
SHIFTED = ("lsn", "commit_lsn", "relation_version")
_TOP = Decimal(1 << 63)


def unshifted(name: str) -> Column:
    """A column :func:`to_python` shifted, as decimal(20,0) again."""
    return (F.col(name).cast(ST.LSN_TYPE) + F.lit(_TOP)).cast(ST.LSN_TYPE).alias(name)


def flip(arr: pa.Array) -> pa.Array:
    """int64 x - 2^63 ↔ uint64 x: the top bit flipped, nulls kept."""
    to = pa.uint64() if pa.types.is_int64(arr.type) else pa.int64()
    bits = arr.fill_null(0).to_numpy(zero_copy_only=False).view(np.uint64) ^ np.uint64(1 << 63)
    return pa.array(bits.view(to.to_pandas_dtype()), to, mask=arr.is_null().to_numpy(zero_copy_only=False)
                    if arr.null_count else None)


def to_python(changes: DataFrame, names: list, shifted=()) -> list:
    """``names`` as the columns a ``mapInArrow`` over change rows reads (:func:`from_python`
    makes them change rows again), in the shapes Spark hands to Python the cheapest:

    - a nullable list column as an empty list where null, plus a ``__null_<name>`` flag.
      Spark 4 hands a null list to Python about ten times slower than an empty one
      (PySpark 3.5: as fast either way), and every Insert's ``before`` is one;
    - a row image (``list<struct<kind, data>>``) as its values (``list<binary>``) plus
      its kinds as one string, a letter a value (``__kinds_<name>``): cheaper apart than
      whole;
    - ``shifted`` (of :data:`SHIFTED`) as int64 less 2^63.

    Without them, ``table_changes`` over change rows read back from Parquet costs more
    than twice as much (its figure: docs/benchmarks.md)."""
    out = []
    for n in names:
        if n in shifted:
            out.append((F.col(n) - F.lit(_TOP)).cast("long").alias(n))
        elif n in _IMAGES:
            empty = F.array().cast(T.ArrayType(T.BinaryType()))
            out += [F.coalesce(F.col(n).getField("data"), empty).alias(n),
                    F.concat_ws("", F.col(n).getField("kind")).alias(f"__kinds_{n}"),
                    F.col(n).isNull().alias(f"__null_{n}")]
        elif n in _NULLABLE_LISTS:
            empty = F.array().cast(changes.schema[n].dataType)
            out += [F.coalesce(F.col(n), empty).alias(n), F.col(n).isNull().alias(f"__null_{n}")]
        else:
            out.append(n)
    return out


def from_python(t: pa.Table, name: str = "") -> pa.Table:
    """``t`` with the list columns :func:`to_python` flagged null again and the
    row images whole again (``name``: the table, for the error of a kind that is not one
    letter, which only a change row built elsewhere could carry)."""
    for n in _NULLABLE_LISTS:
        flag = f"__null_{n}"
        if flag not in t.column_names:
            continue
        nulls = one_array(t.column(flag))
        col = one_array(t.column(n))
        # a list's offsets may start past 0 (a slice): rebase them, Arrow takes no mask then
        offsets = ST.offsets(col)
        values = col.values.slice(offsets[0], offsets[-1] - offsets[0])
        offsets = offsets - offsets[0]
        kinds = f"__kinds_{n}"
        if kinds in t.column_names:
            values = _image_values(one_array(t.column(kinds)), offsets, values, t, n, name)
            t = t.drop([kinds])
        col = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=nulls if nulls.true_count else None)
        t = t.set_column(t.column_names.index(n), n, col).drop([flag])
    return t


def _image_values(kinds: pa.Array, offsets: np.ndarray, data: pa.Array, t: pa.Table, side: str, name: str):
    """The ``struct<kind, data>`` values of a row image from its kinds (a string per row, a
    letter per value: its offsets are the list's) and its ``data`` values."""
    ko = ST.offsets(kinds)
    if not np.array_equal(ko - ko[0], offsets):
        bad = int(np.flatnonzero((ko - ko[0]) != offsets)[0]) - 1
        seq = t.column("seq")[bad].as_py() if "seq" in t.column_names else None
        raise MalformedPayloadError(f"{name}: change row seq={seq}: its {side} image holds a kind that is "
                                    "not one letter (n, u, t, b)")
    letters = pa.Array.from_buffers(pa.string(), len(data), [
        None, pa.py_buffer(np.arange(ko[0], ko[0] + len(data) + 1, dtype=np.int32)), kinds.buffers()[2]])
    return pa.StructArray.from_arrays([letters, data], fields=list(CHANGE_SCHEMA.field(side).type.value_type))


# --------------------------------------------------------------------------- column names inside the plans

SPECIAL = "__special"


class Inner(NamedTuple):
    """A table's row struct under the user's names (``user``) and the inner name of each
    of its fields (``inner``: user name -> inner name; the same name where it needs no
    other)."""

    user: T.StructType
    inner: dict

    @property
    def renamed(self) -> bool:
        return any(k != v for k, v in self.inner.items())

    def outer(self, name: str) -> str:
        """The user's name of the field inner name ``name`` names."""
        return self._outer().get(name, name)

    def _outer(self) -> dict:
        return {v: k for k, v in self.inner.items()}

    def spans(self, spans: list | None) -> list | None:
        """:func:`.spans.column_spans`' spans under the inner names."""
        return None if spans is None else [([self.inner.get(n, n) for n in names], last) for names, last in spans]


def inner_names(names: list[str]) -> dict[str, str]:
    """Each field of a row struct (``names``, the user's) -> the name the plans refer to it
    by: its own when no other field bears it but for case and it holds no backtick; else
    (every field after the first of one name but for case, a name with a backtick) the
    name with backticks as ``_`` and ``~`` + 8 hex digits of its SHA-256, ``~`` more
    until no field bears it. A companion (``c__special``, ``c__srid``) follows column ``c``."""
    base = [n for n in names if owner(n, names) is None]
    taken = {n.lower() for n in names}
    seen: set = set()
    out = {}
    for n in base:
        if "`" not in n and n.lower() not in seen:
            out[n] = n
        else:
            m = n.replace("`", "_") + "~" + hashlib.sha256(n.encode()).hexdigest()[:8]
            while m.lower() in taken or any((m + s).lower() in taken for s in COMPANIONS):
                m += "~"
            taken.update((m.lower(), *((m + s).lower() for s in COMPANIONS)))
            out[n] = m
        seen.add(n.lower())
    for n in names:
        if n not in out:
            col = owner(n, names)
            out[n] = out[col] + n[len(col):]
    if len({v.lower() for v in out.values()}) < len(out):
        raise ValueError(f"columns {sorted(names)}: no names unique but for case for them in a Spark plan")
    return out


def own_name(name: str, fields) -> str:
    """``name`` (one of our own top-level columns), or ``_`` + it as often as needed to
    bear a name no field of ``fields`` bears, without regard to case (Spark's)."""
    taken = {f.lower() for f in fields}
    while name.lower() in taken:
        name = "_" + name
    return name


def renamed_strings(col: Column, mapping: dict) -> Column:
    """An array of column names, each renamed by ``mapping`` (the others as they are)."""
    pairs = [(k, v) for k, v in mapping.items() if k != v]
    if not pairs:
        return col

    def one(x):
        out = None
        for k, v in pairs:
            out = (F.when(x == F.lit(k), F.lit(v)) if out is None else out.when(x == F.lit(k), F.lit(v)))
        return out.otherwise(x)
    return F.transform(col, one)


def user_struct(col: Column, inner_type: T.StructType, names) -> Column:
    """A struct column of ``inner_type`` with its fields named ``names`` (by position: a
    cast from one struct to another renames)."""
    return col.cast(T.StructType([T.StructField(n, f.dataType, f.nullable)
                                  for n, f in zip(names, inner_type.fields, strict=True)]))


def to_inner(tc: DataFrame) -> tuple[DataFrame, Inner]:
    """``table_changes``' rows with ``before``/``after`` under the inner names and
    ``unchanged`` naming them so; and the :class:`Inner` of the row struct."""
    user = tc.schema["after"].dataType
    inner = inner_names(user.names)
    names = Inner(user, inner)
    if not names.renamed:
        return tc, names
    target = [inner[n] for n in user.names]
    return (tc.withColumn("before", user_struct(F.col("before"), user, target))
            .withColumn("after", user_struct(F.col("after"), user, target))
            .withColumn("unchanged", renamed_strings(F.col("unchanged"), inner))), names


# --------------------------------------------------------------------------- what one table's changes hold

class TableInfo(NamedTuple):
    """What :func:`table_info`'s job finds about one table."""

    versions: list       # the Relation versions in use: column lists, ordered by their last change
    truncates: list      # (rank, seq, commit_lsn, commit_ts), in order
    sends_old: bool      # some Update sends its old key or row ('K'/'O'): it may move a row to a new key
    deletes: bool        # some Delete is given: with sends_old, whether any row leaves its key
    fingerprints: list = []   # each version's relation_version (its definition's fingerprint)
    relation_id: int | None = None   # the relation that bears the name (relations.bearer; None: by name)
    replaced: bool = False    # another relation bore the name before it
    found: bool = True        # some relation bears it (False: renamed away, none does)
    # each version's first and last change (rank, seq), as ``versions``: rank None where the
    # key alone orders commits (GivenHeads.serial); as of the cut asked for, ``upto``:
    # (column list, fingerprint, first, last change) of the versions used up to it (change
    # rows read back)
    firsts: list = []
    lasts: list = []
    upto: list | None = None
    copied: bool = False      # some change is a copied row ('R'): the archive holds the table's start


def table_of(changes: DataFrame, name) -> tuple[str, str]:
    """The (schema, table) ``name`` names (:func:`~pgoutput_codec.changes.relations.split_name`):
    an unquoted name with several dots is resolved against the tables ``changes`` hold
    that it may name, in one small job (none for any other name)."""
    cands = parse_name(name)
    if len(cands) == 1:
        return cands[0]
    which = F.lit(False)
    for s, t in cands:
        which = which | ((F.col("schema") == F.lit(s)) & (F.col("table") == F.lit(t)))
    found = changes.where(which).select("schema", "table").distinct().collect()
    return split_name(name, {(r["schema"], r["table"]) for r in found})


def table_info(changes: DataFrame, name: str, as_of_lsn=None) -> TableInfo:
    """One small job: which relation bears the name (as of ``as_of_lsn``; the rule of
    :func:`pgoutput_codec.changes.relations.bearer`), and over all its changes its Relation
    versions in use, its truncates, and whether an Update may have changed a key
    (:class:`TableInfo`). Over a DataFrame straight from ``decode_changes`` (FAILFAST,
    no observation) nothing is decoded: ``Pass2.table_info`` reads the payload heads
    (faster than reading the decoded ``relation_version`` or the column lists: handing
    each row to Python costs Spark more than decoding it). Over any other DataFrame, its decoded
    rows: every version's facts, the bearer's kept on the driver; where reading them
    again is a scan (:func:`rescanned_cheaply`), the column lists in a second job, from
    each version's first row (:func:`_columns_apart`)."""
    check_workers(changes.sparkSession)
    pass2 = pass2_of(changes)
    if pass2 is not None:
        return pass2.table_info(*table_of(changes, name), as_of_lsn)
    schema, table = table_of(changes, name)
    rank = "commit_rank" if "commit_rank" in changes.columns else "commit_lsn"
    at = F.struct(F.col(rank).alias("r"), F.col("seq").alias("s"))
    by = at if as_of_lsn is None else F.when(F.col("commit_lsn") <= F.lit(int(as_of_lsn)).cast(ST.LSN_TYPE), at)
    apart = rescanned_cheaply(changes)
    rows = (changes.groupBy("relation_version")
            .agg(F.first("relation_id", ignorenulls=True).alias("relation_id"),
                 F.first("schema", ignorenulls=True).alias("schema"), F.first("table", ignorenulls=True).alias("table"),
                 F.max(at).alias("last"), F.max(by).alias("last_by"), F.min(at).alias("first"),
                 F.min(by).alias("first_by"),
                 F.min("seq").alias("first_seq") if apart else F.first("columns", ignorenulls=True).alias("columns"),
                 F.collect_list(F.when(F.col("op") == "T", F.struct(at.alias("pos"), "commit_lsn", "commit_ts")))
                 .alias("truncates"),
                 F.max((F.col("op") == "U") & F.col("before").isNotNull()).alias("old"),
                 F.max(F.col("op") == "D").alias("dels"), F.max(F.col("op") == "R").alias("copied"))
            .collect())
    # openGauss rows carry no relation id: there the name is the table
    chosen, replaced = bearer([(r["relation_id"] if r["relation_id"] is not None else (r["schema"], r["table"]),
                                r["schema"] == schema and r["table"] == table) for r in rows],
                              [None if r["last_by"] is None else pos(r["last_by"]) for r in rows])
    rows = sorted((rows[k] for k in chosen), key=lambda r: pos(r["last"]))
    cols = _columns_apart(changes, {r["relation_version"]: r["first_seq"] for r in rows}) if apart \
        else [r["columns"] for r in rows]
    lists = [None if c_ is None else [c.asDict() for c in c_] for c_ in cols]
    kept = [(r, c_) for r, c_ in zip(rows, lists, strict=True) if c_ is not None]
    truncs = sorted((t["pos"]["r"], t["pos"]["s"], t["commit_lsn"], t["commit_ts"])
                    for r in rows for t in r["truncates"])
    upto = None
    if as_of_lsn is not None:   # the versions used up to the cut, by their last change there
        used = sorted((k for k in kept if k[0]["last_by"] is not None), key=lambda k: pos(k[0]["last_by"]))
        upto = [(c_, r["relation_version"], pos(r["first_by"]), pos(r["last_by"])) for r, c_ in used]
    return TableInfo([c_ for _, c_ in kept], truncs, any(r["old"] for r in rows), any(r["dels"] for r in rows),
                      [r["relation_version"] for r, _ in kept], rows[0]["relation_id"] if rows else None, replaced,
                      bool(rows), [pos(r["first"]) for r, _ in kept], [pos(r["last"]) for r, _ in kept], upto,
                      any(r["copied"] for r in rows))


def pos(p) -> tuple:
    """A (rank, seq) struct as a tuple."""
    return p["r"], p["s"]


#: physical plan nodes that run Python: a DataFrame whose rows come through one is costly
#: to compute again (decoding, typing)
_PYTHON_NODES = re.compile(r"Python|InPandas|InArrow|ArrowEval|BatchEval")


def rescanned_cheaply(changes: DataFrame) -> bool:
    """Whether reading ``changes`` once more costs a scan, not a computation: cached, or
    files (a lake table) with no Python step and no shuffle in between. Then
    :func:`table_info` reads the column lists apart (:func:`_columns_apart`)."""
    if getattr(changes, "is_cached", False):
        return True
    plan = physical_plan(changes)
    return "Exchange" not in plan and not _PYTHON_NODES.search(plan)


def _columns_apart(changes: DataFrame, first_seq: dict) -> list:
    """Each version's column list (``first_seq``: {relation_version: its smallest ``seq``}),
    read from those rows alone, in a job of its own. Reading every row's list in the
    versions job was most of its cost on change rows in Parquet; the
    filter on ``seq`` lets the Parquet reader skip the row groups by their statistics.
    A version whose first row carries no list (not one of ours) is looked for in all its rows."""
    def lists(where) -> dict:
        return {r[0]: r[1] for r in changes.where(where).groupBy("relation_version")
                .agg(F.first("columns", ignorenulls=True)).collect()}

    def of(versions) -> Column:
        rv, known = F.col("relation_version"), [v for v in versions if v is not None]
        at = rv.isin(known) if known else F.lit(False)
        return at | rv.isNull() if None in versions else at

    seqs = [s for s in first_seq.values() if s is not None]
    found = lists(of(first_seq) & F.col("seq").isin(seqs)) if seqs else {}
    missing = [v for v in first_seq if found.get(v) is None]
    if missing:
        found.update(lists(of(missing)))
    return [found.get(v) for v in first_seq]


# --------------------------------------------------------------------------- typed rows

#: Spark's time of day (PySpark 4.1 and later); before it, and over Spark Connect (whose
#: server refuses to send a TIME to its client: UNSUPPORTED_TIME_TYPE, Spark 4.3), a
#: ``time`` is µs since midnight (LongType)
TIME_TYPE = T.TimeType(6) if hasattr(T, "TimeType") else None
#: PostgreSQL's last time of day, 24:00:00, in µs: Spark's times end before it
END_OF_DAY = 86_400_000_000


def _value_spark_type(t: pa.DataType, time_type) -> T.DataType:
    """Spark type of a typed column value (Arrow type from the type catalog), at any depth
    of lists, structs (composites, ranges) and maps."""
    if isinstance(t, pa.BaseExtensionType):
        return _value_spark_type(t.storage_type, time_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(_value_spark_type(t.value_type, time_type))
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, _value_spark_type(f.type, time_type),
                                           metadata=ST.field_metadata(f.type)) for f in t])
    if pa.types.is_map(t):
        return T.MapType(_value_spark_type(t.key_type, time_type), _value_spark_type(t.item_type, time_type))
    if pa.types.is_date32(t):
        return T.DateType()
    if pa.types.is_time64(t):
        return time_type if time_type is not None else T.LongType()
    if pa.types.is_interval(t):
        return T.StructType([T.StructField("months", T.IntegerType()), T.StructField("days", T.IntegerType()),
                             T.StructField("microseconds", T.LongType())])
    if pa.types.is_decimal(t) and t.precision > 38:
        return T.StringType()
    try:
        return ST.spark_type(t)
    except TypeError:
        return T.StringType()


#: converters whose binary values may carry a note (a geometry whose SRID contradicts its
#: column's typmod, an array element's SRID: ``srid=3857``): their columns have a ``__special``
NOTED_BINARY = frozenset({"geometry", "geography"})


def _can_be_special(t: pa.DataType) -> bool:
    """Columns that get a ``<name>__special`` companion (infinity/NaN, unconvertible values;
    a value nested in a composite or range names its part there: ``attr=infinity``)."""
    return not (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_boolean(t)
                or pa.types.is_integer(t))


def conform(arr: pa.Array, t: pa.DataType, target: pa.DataType) -> pa.Array:
    """A typed value array (catalog type ``t``) as the Arrow type Spark wants (``target``),
    level by level through lists, structs and maps (Arrow's own kernels, no Python per
    value): times and intervals as :func:`_value_spark_type` says, an enum's dictionary
    as its labels, float16 as float32, an extension array as its storage."""
    arr = plain_lists(one_array(arr))
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if pa.types.is_time64(arr.type) and pa.types.is_time64(target):
        # 24:00:00 is past Spark's last time of day: null (its __special says so: end_of_day)
        arr = pc.if_else(pc.equal(arr.cast(pa.int64()), END_OF_DAY), pa.scalar(None, arr.type), arr)
    elif pa.types.is_time64(arr.type):
        arr = arr.cast(pa.int64())
    elif pa.types.is_interval(arr.type):
        arr = interval_struct(arr, target)
    elif pa.types.is_float16(arr.type):
        arr = widened_halves(arr)
    elif pa.types.is_list(arr.type) and pa.types.is_list(target):
        offsets, (values,) = _from_zero(arr, arr.values)
        arr = pa.ListArray.from_arrays(offsets, conform(values, arr.type.value_type, target.value_type), type=target,
                                       mask=arr.is_null() if arr.null_count else None)
    elif pa.types.is_struct(arr.type) and pa.types.is_struct(target) and not arr.type.equals(target):
        fields = [conform(arr.field(i), arr.type.field(i).type, target.field(i).type)
                  for i in range(arr.type.num_fields)]
        arr = pa.StructArray.from_arrays(fields, fields=list(target), mask=arr.is_null() if arr.null_count else None)
    elif pa.types.is_map(arr.type) and pa.types.is_map(target) and not arr.type.equals(target):
        offsets, (keys, items) = _from_zero(arr, arr.keys, arr.items)
        arr = pa.MapArray.from_arrays(offsets, conform(keys, arr.type.key_type, target.key_type),
                                      conform(items, arr.type.item_type, target.item_type), type=target,
                                      mask=arr.is_null() if arr.null_count else None)
    if not arr.type.equals(target):
        arr = arr.cast(target)
    return arr


def _from_zero(arr: pa.Array, *children: pa.Array):
    """A list or map array's offsets from 0 and its ``children`` cut to them (Arrow takes
    no null mask with offsets that start past 0: a slice's)."""
    offsets = ST.offsets(arr)
    lo, hi = int(offsets[0]), int(offsets[-1])
    return pa.array(offsets - lo, pa.int32()), [c.slice(lo, hi - lo) for c in children]


def _holds_time(t: pa.DataType) -> bool:
    while pa.types.is_list(t):
        t = t.value_type
    return pa.types.is_time64(t)


def _nests_time(t: pa.DataType) -> bool:
    """Whether a struct (a composite, a range) somewhere in ``t`` holds a time of day."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _nests_time(t.value_type)
    if pa.types.is_struct(t):
        return any(pa.types.is_time64(f.type) or _nests_time(f.type) for f in t)
    return False


def _end_of_day_at(arr: pa.Array) -> dict:
    """{index: note} of the values of ``arr`` holding PostgreSQL's end of day somewhere:
    ``24:00:00`` itself, ``attr=…`` in a struct's field, ``k=…`` in a list's element k
    (as nested notes name their parts). Python runs over the hits alone."""
    t = arr.type
    if pa.types.is_time64(t):
        hits = pc.fill_null(pc.equal(arr.cast(pa.int64()), END_OF_DAY), False).to_numpy(zero_copy_only=False)
        return {int(i): "24:00:00" for i in np.flatnonzero(hits)}
    out: dict = {}
    if pa.types.is_struct(t):
        for i, f in enumerate(t):
            for j, note in _end_of_day_at(arr.field(i)).items():
                if arr[j].is_valid:
                    out[j] = f"{out[j]};{f.name}={note}" if j in out else f"{f.name}={note}"
    elif pa.types.is_list(t):
        offsets, (values,) = _from_zero(arr, arr.values)
        bounds = offsets.to_numpy()
        for e, note in sorted(_end_of_day_at(values).items()):
            r = int(np.searchsorted(bounds, e, side="right")) - 1
            if arr[r].is_valid:
                mark = f"{e - bounds[r]}={note}"
                out[r] = f"{out[r]};{mark}" if r in out else mark
    return out


def nested_end_of_day(v: pa.Array, special: pa.Array | None) -> pa.Array | None:
    """``special`` with each value's times of ``24:00:00`` inside composites and ranges
    named by their place (``at=24:00:00``, ``lower=24:00:00``, ``1=at=24:00:00`` in an
    array's element 1), which :func:`conform` makes null for Spark."""
    hits = _end_of_day_at(one_array(v))
    if not hits:
        return special
    notes = special.to_pylist() if special is not None else [None] * len(v)
    for i, note in hits.items():
        notes[i] = note if notes[i] is None else f"{notes[i]};{note}"
    return pa.array(notes, pa.string())


def end_of_day(v: pa.Array, special: pa.Array | None) -> pa.Array | None:
    """``special`` with ``24:00:00`` named where a time (or an array's element, by its
    flat index as array markers are: ``1=24:00:00``) is PostgreSQL's end of day, which
    :func:`conform` makes null for Spark."""
    flat, rows = one_array(v), None
    while pa.types.is_list(flat.type):
        parents = pc.list_parent_indices(flat).to_numpy()
        rows = parents if rows is None else rows[parents]
        flat = flat.flatten()
    hits = np.flatnonzero(pc.fill_null(pc.equal(flat.cast(pa.int64()), END_OF_DAY), False).to_numpy(zero_copy_only=False))
    if not len(hits):
        return special
    notes = special.to_pylist() if special is not None else [None] * len(v)
    if rows is None:
        for i in hits:
            notes[i] = "24:00:00"
    else:
        first = {}
        for h in hits:     # flat index within its row: elements before it in the row
            r = int(rows[h])
            first.setdefault(r, int(np.searchsorted(rows, r)))
            mark = f"{h - first[r]}=24:00:00"
            notes[r] = mark if notes[r] is None else f"{notes[r]};{mark}"
    return pa.array(notes, pa.string())


def interval_struct(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Intervals as Spark's struct (months, days, microseconds): ``typecatalog``'s."""
    out = catalog_interval_struct(arr)
    return out if out.type.equals(target) else out.cast(target)


def table_schema(cols: list, registry=None, retyped=frozenset(), ndims=None, time_type=TIME_TYPE):
    """(Spark struct of a typed row, [(column, catalog Arrow type, has __special)]). A
    column the table's versions gave several types (``retyped``) has a ``__special``: a
    value of an earlier type the column's cannot hold is null with a note
    (:func:`pgoutput_codec.typecatalog.retyped.with_earlier_types`). ``ndims``: the number of
    dimensions of array columns' values (:func:`.tablerows.array_dims`); one whose
    values differ (a set of them) is binary, each value as sent, as one process keeps it.
    ``time_type``: a ``time``'s Spark type (None: µs since midnight, LongType)."""
    fields, plan = [], []
    ndims = ndims or {}
    for c in cols:
        d = ndims.get(c["name"], 1)
        mixed = isinstance(d, frozenset)
        at = pa.binary() if mixed else arrow_type(c["type_oid"], c["type_modifier"], registry, ndim=d)
        rt = resolve(c["type_oid"], c["type_modifier"], registry)
        sp = _can_be_special(at) or c["name"] in retyped or mixed or rt.conv in NOTED_BINARY
        fields.append(T.StructField(c["name"], _value_spark_type(at, time_type), metadata=ST.field_metadata(at)))
        if not mixed and srid_column(rt.conv, rt.typmod):   # a geometry's SRIDs, where its typmod fixes none
            fields.append(T.StructField(c["name"] + SRID, T.IntegerType()))
        if sp:
            fields.append(T.StructField(c["name"] + "__special", T.StringType()))
        plan.append((c["name"], at, sp, c["type_oid"], c["type_modifier"]))
    return T.StructType(fields), plan


def convert_values(kinds, data, type_oid, type_modifier, registry, at: pa.DataType):
    """Values of one column converted one by one to ``at`` (arrays: ``ndim`` of ``at``):
    (values, special) where a value that does not convert is null and ``special`` says why."""
    ndim = 0
    t = at
    while pa.types.is_list(t):
        ndim, t = ndim + 1, t.value_type
    values, special = [], []
    for k, d in zip(kinds.to_pylist(), data.to_pylist(), strict=True):
        try:
            r = convert_column(pa.array([k or "n"], pa.string()), pa.array([d], pa.binary()), type_oid,
                               type_modifier, registry, ndim=ndim or None)
            v = r.values.cast(at)
            values.append(v)
            special.append(r.special[0].as_py() if r.special is not None else None)
        except (ConversionError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            values.append(pa.nulls(1, at))
            special.append(str(e))
    return pa.concat_arrays(values) if values else pa.nulls(0, at), pa.array(special, pa.string())


def _raw_values(t: pa.Table, side: str, name: str):
    """(kinds, data) of column ``name`` on ``side`` of each change row, by its Relation version."""
    kinds, data = [], []
    for cols, tup in zip(t.column("columns").to_pylist(), t.column(side).to_pylist(), strict=True):
        pos = next((i for i, c in enumerate(cols or ()) if c["name"] == name), None)
        if tup is None or pos is None or pos >= len(tup):
            kinds.append(None)
            data.append(None)
        else:
            kinds.append(tup[pos]["kind"])
            data.append(tup[pos]["data"])
    return pa.array(kinds, pa.string()), pa.array(data, pa.binary())


#: the columns of change rows the typing reads (:func:`pgoutput_codec.tables.typed_changes`)
_TYPED_FROM = ("columns", "relation_version", "before", "after")


class TableMapper:
    """Picklable ``mapInArrow`` body: one table's change rows typed (``out_schema``).
    ``versions`` ({relation_version: column list}, the table's, from :func:`.tablerows.table_info`):
    the rows come without their ``columns``, which are put back by ``relation_version``
    (a fingerprint of the definition, what the typing groups rows by): handing each
    row's column list to Python was a large part of the typing's cost."""

    def __init__(self, name, out_schema, colplan, registry, versions=None, shifted=(), mixed=None):
        self.name, self.out_schema = name, out_schema
        self.colplan, self.registry = colplan, registry
        self.mixed = mixed or {}     # column -> note: arrays of several numbers of dimensions
        # the table's columns: each batch is typed by them (its own newest column list can
        # be an earlier definition: values of another type are cast to the table's)
        self.columns = [{"name": name, "type_oid": oid, "type_modifier": typmod, "flags": 0}
                        for name, _, _, oid, typmod in colplan]
        self.shifted = shifted   # the columns that cross as int64 less 2^63 (SHIFTED)
        self.versions = None
        if versions:
            fps = sorted(versions)
            self.versions = (np.array(fps, dtype=np.uint64),
                             pa.array([versions[f] for f in fps], CHANGE_COLUMN_LISTS))

    def _columns(self, fp) -> pa.Array:
        """The column list of each row's ``relation_version`` (null where that is)."""
        keys, lists = self.versions
        fp = one_array(fp).cast(pa.uint64())
        v = fp.fill_null(0).to_numpy(zero_copy_only=False)
        at = np.minimum(np.searchsorted(keys, v), len(keys) - 1)
        given = ~np.asarray(fp.is_null())
        unknown = given & (keys[at] != v)
        if unknown.any():   # the versions job saw every version: never
            raise MalformedPayloadError(f"{self.name}: relation_version {int(v[unknown][0])} "
                                        "is not among the table's versions")
        return lists.take(pa.array(at, mask=~given))

    def __call__(self, batches):
        target = ST.arrow_schema_for(self.out_schema)
        for b in batches:
            t = from_python(pa.Table.from_batches([b]), self.name)
            for c in self.shifted:
                t = t.set_column(t.column_names.index(c), c, flip(one_array(t.column(c))))
            if self.versions is not None and "columns" not in t.column_names:
                t = t.append_column("columns", self._columns(t.column("relation_version")))
            n = len(t)
            # the typing reads these alone; the other columns go out as they came
            # (column lists as plain lists: Spark's rows hold them so, and typing reads either)
            cast = {f.name: column_lists(t.column(f.name)).cast(CHANGE_COLUMN_LISTS) if f.name == "columns"
                    else plain_lists(t.column(f.name)).cast(f.type)
                    for f in CHANGE_SCHEMA if f.name in _TYPED_FROM}
            typed = typed_changes(pa.table(cast), registry=self.registry, columns=self.columns) if n else None
            out = []
            for f in target:
                if f.name in ("before", "after"):
                    out.append(self._side(one_array(typed.column(f.name)) if n else None, f.type, n,
                                          lambda name, side=f.name, tbl=t: _raw_values(tbl, side, name)))
                elif f.name == "unchanged":
                    out.append(one_array(typed.column("unchanged")).cast(f.type) if n
                               else pa.nulls(0, f.type))
                elif f.name in self.shifted:
                    out.append(flip(one_array(t.column(f.name))))
                else:
                    out.append(ST.to_spark_arrow(one_array(t.column(f.name)), f.type))
            yield pa.RecordBatch.from_arrays(out, schema=target)

    def _side(self, struct, target: pa.DataType, n: int, raw_of):
        if n == 0:
            return pa.nulls(0, target)
        present = struct.type
        arrays = []
        for name, at, sp, oid, typmod in self.colplan:
            tgt = target.field(name).type
            special, srid = None, None
            if present.get_field_index(name) >= 0 and name in self.mixed:
                # arrays of several numbers of dimensions: every value as sent, as one process keeps them
                kinds, data = raw_of(name)
                v = pc.if_else(pc.is_in(kinds, value_set=pa.array(["t", "b"])), data, pa.nulls(n, pa.binary()))
                special = pa.array([self.mixed[name]] * n, pa.string())
            elif present.get_field_index(name) >= 0:
                v = struct.field(name)
                if present.get_field_index(name + SRID) >= 0 and v.type.equals(at):
                    srid = struct.field(name + SRID)
                if not v.type.equals(at):
                    # the catalog could not type this column as a whole in this batch (e.g.
                    # arrays of different dimensionality), or the batch's newest column list
                    # gave it another type than the table's: value by value, what does not
                    # fit the column's type is null with the reason in __special (the
                    # batch's own __special then speaks of the other type)
                    v, special = convert_values(*raw_of(name), oid, typmod, self.registry, at)
                elif present.get_field_index(name + "__special") >= 0:
                    special = struct.field(name + "__special")
                if _holds_time(at) and _holds_time(tgt):
                    special = end_of_day(v, special)
                elif _nests_time(at) and _nests_time(tgt):
                    special = nested_end_of_day(v, special)
                v = conform(v, at, tgt)
            else:
                v = pa.nulls(n, tgt)
            arrays.append(v)
            if target.get_field_index(name + SRID) >= 0:
                arrays.append(srid if srid is not None else pa.nulls(n, pa.int32()))
            if sp:
                arrays.append(special if special is not None else pa.nulls(n, pa.string()))
            elif special is not None and special.null_count != len(special):
                raise MalformedPayloadError(f"{self.name}.{name}: {special.drop_null()[0].as_py()}")
        return pa.StructArray.from_arrays(arrays, fields=list(target), mask=struct.is_null())


# --------------------------------------------------------------------------- array dimensions

_SCHEMA = T.StructType([T.StructField("column", T.StringType()), T.StructField("ndim", T.IntegerType())])


class ArrayDims:
    """Picklable ``mapInArrow`` body: the (column, number of dimensions) pairs of the array
    values of ``cols`` in each batch of change rows (empty arrays say nothing)."""

    def __init__(self, name: str, cols: list, shifted=()):
        self.name, self.cols, self.shifted = name, cols, shifted

    def __call__(self, batches):
        target = ST.arrow_schema_for(_SCHEMA)
        for b in batches:
            t = from_python(pa.Table.from_batches([b]), self.name)
            for c in self.shifted:
                t = t.set_column(t.column_names.index(c), c, flip(one_array(t.column(c))))
            t = t.set_column(t.column_names.index("columns"), "columns", column_lists(t.column("columns")))
            ids, reps = column_set_ids(t)
            seen = set()
            for side in ("after", "before"):
                loc = locate(one_array(t.column(side)), None, ids, reps, self.cols)
                for c in self.cols:
                    kinds, data = take_at(loc.kinds, loc.data, materialize(loc.everywhere(c["name"])))
                    seen.update((c["name"], int(d)) for d in np.unique(value_ndims(kinds, data)) if d > 0)
            yield pa.RecordBatch.from_arrays([pa.array([c for c, _ in sorted(seen)], pa.string()),
                                              pa.array([d for _, d in sorted(seen)], pa.int32())], schema=target)


def array_dims(changes: DataFrame, rows: DataFrame, name: str, cols: list, registry) -> dict:
    """{column: its arrays' number of dimensions, or the set of them where they differ} of the array columns
    of ``cols`` over ``rows`` (the table's change rows of ``changes``), by one job; {} and
    no job when the table has no array column. A column with no array of one dimension or
    more (all null or empty) is not named: one level deep, as one process types it."""
    arrays = [c for c in cols if resolve(c["type_oid"], c["type_modifier"], registry).conv == "array"]
    if not arrays:
        return {}
    need = ["relation_version", "columns", "before", "after"]
    shifted = tuple(c for c in SHIFTED if c in need and changes.schema[c].dataType == ST.LSN_TYPE)
    found: dict = {}
    for r in rows.select(*to_python(changes, need, shifted)).mapInArrow(
            ArrayDims(name, arrays, shifted), _SCHEMA).distinct().collect():
        found.setdefault(r["column"], set()).add(r["ndim"])
    return {c: (next(iter(d)) if len(d) == 1 else frozenset(d)) for c, d in found.items()}
