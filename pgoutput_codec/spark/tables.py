"""One table of a change DataFrame, typed and rebuilt: ``table_changes``, ``snapshot``,
``history``, ``net_changes`` — the single-process :mod:`pgoutput_codec.tables` on Spark.

:func:`table_changes` types ``before``/``after`` with the type catalog, under one Spark
schema computed on the driver from every Relation version of the table (one small job,
:func:`_table_info`). Over a DataFrame straight from :func:`.changes.decode_changes`
(FAILFAST, no observation, not cached) the table is chosen before decoding — Spark drops
the other tables' rows by their relation id bytes (:mod:`.rowfilter`) — and its rows are
typed in the Python step that decodes them (``_Pass2.typed``); over any other DataFrame,
by a ``mapInArrow`` over its change rows (:class:`_TableMapper`, the single-process
:func:`pgoutput_codec.tables.table_changes` per batch).

:func:`snapshot`, :func:`history` and :func:`net_changes` are DataFrame operations on
those rows (windows over the replica-identity key; unchanged TOAST values follow a row
through key changes, :func:`_lineage`); see their docstrings for what is carried and
what is not.
"""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..retyped import retyped_names
from ..schema import CHANGE_SCHEMA
from ..tables import added_columns, bearer, missing_values, net_key, unknown_key_error
from ..typecatalog import ConversionError, arrow_type, convert_column
from . import types as ST
from .changes import _attached, _TableInfo, physical_plan
from .modes import MalformedPayloadError

__all__ = ["table_changes", "snapshot", "history", "net_changes", "table_schema", "convert_values"]


def _split_name(name: str):
    schema, _, table = name.partition(".") if "." in name else ("public", ".", name)
    return schema.strip('"'), table.strip('"')


def _value_spark_type(t: pa.DataType) -> T.DataType:
    """Spark type of a typed column value (Arrow type from the type catalog)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(_value_spark_type(t.value_type))
    if pa.types.is_date32(t):
        return T.DateType()
    if pa.types.is_time64(t):
        return T.LongType()    # µs since midnight: Spark has no portable time-of-day type
    if pa.types.is_interval(t):
        return T.StructType([T.StructField("months", T.IntegerType()), T.StructField("days", T.IntegerType()),
                             T.StructField("microseconds", T.LongType())])
    if pa.types.is_decimal(t) and t.precision > 38:
        return T.StringType()
    try:
        return ST.spark_type(t)
    except TypeError:
        return T.StringType()


def _can_be_special(t: pa.DataType) -> bool:
    """Columns that get a ``<name>__special`` companion (infinity/NaN, unconvertible values)."""
    return not (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_boolean(t)
                or pa.types.is_integer(t))


def _conform(arr: pa.Array, t: pa.DataType, target: pa.DataType) -> pa.Array:
    """A typed value array (catalog type ``t``) as the Arrow type Spark wants (``target``)."""
    arr = ST.one_array(arr)
    if pa.types.is_time64(arr.type):
        arr = arr.cast(pa.int64())
    elif pa.types.is_interval(arr.type):
        arr = _interval_struct(arr, target)
    elif pa.types.is_list(arr.type) and pa.types.is_list(target):
        inner = _conform(arr.values, t.value_type if pa.types.is_list(t) else arr.type.value_type,
                         target.value_type)
        arr = pa.ListArray.from_arrays(arr.offsets, inner, mask=arr.is_null())
    if not arr.type.equals(target):
        arr = arr.cast(target)
    return arr


#: Arrow's month_day_nano interval, one value: int32 months, int32 days, int64 nanoseconds
_MDN = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanoseconds", "<i8")])


def _interval_struct(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Intervals as Spark's struct (months, days, microseconds), read from the value
    buffer (no Python object per value); microseconds floored, as PostgreSQL's interval
    holds them (the catalog's nanoseconds are microseconds × 1000)."""
    if not len(arr):
        return pa.array([], target)
    rec = np.frombuffer(arr.buffers()[1], _MDN, count=arr.offset + len(arr))[arr.offset:]
    return pa.StructArray.from_arrays(
        [pa.array(rec["months"]), pa.array(rec["days"]), pa.array(rec["nanoseconds"] // 1000)],
        fields=list(target), mask=arr.is_null() if arr.null_count else None)


def _of_table(changes: DataFrame, name: str, info: _TableInfo | None = None) -> DataFrame:
    """The change rows of the table named ``name``: those of the relation that bears the
    name (``info``'s, :func:`_table_info`; without it, rows under the name). Spark would
    push a filter on the rows below the field UDFs of ``decode_changes`` (impl "fields"),
    into a Python node of its own: every payload sent and decoded twice. So for a
    DataFrame straight from ``decode_changes`` (and not cached) the table is chosen
    before decoding instead (``ControlPlan.for_table``: Spark drops the other tables'
    rows by their relation id bytes, so they never cross into Python)."""
    schema, table = _split_name(name)
    fields = _fields_of(changes)
    if fields is not None:
        return fields.of_table(schema, table)
    if info is not None and not info.found:
        return changes.where(F.lit(False))
    if info is not None and info.relation_id is not None:
        return changes.where(F.col("relation_id") == F.lit(info.relation_id))
    return changes.where((F.col("schema") == schema) & (F.col("table") == table))


def _fields_of(changes: DataFrame):
    """The ``_FieldChanges`` a DataFrame comes straight from (None: another DataFrame, or
    cached: then its rows are read as they are)."""
    return _pass2_of(changes, "_pgoutput_fields")


def _pass2_of(changes: DataFrame, name: str | None = None):
    """The :class:`_Pass2` attached as ``name`` (default: either form's) to a DataFrame
    straight from ``decode_changes`` (None: another DataFrame, or cached: then its rows
    are read as they are)."""
    if name is None:
        return _pass2_of(changes, "_pgoutput_fields") or _pass2_of(changes, "_pgoutput_map")
    pass2 = _attached(changes, name)
    return None if pass2 is None or getattr(changes, "is_cached", False) else pass2


def _table_info(changes: DataFrame, name: str, as_of_lsn=None) -> _TableInfo:
    """One small job: which relation bears the name (as of ``as_of_lsn``; the rule of
    :func:`pgoutput_codec.tables.bearer`), and over all its changes its Relation
    versions in use, its truncates, and whether an Update may have changed a key
    (:class:`_TableInfo`). Over a DataFrame straight from ``decode_changes`` (FAILFAST,
    no observation) nothing is decoded: ``_Pass2.table_info`` reads the payload heads
    (1 M rows, warm, alternating in one session: 2.8–2.9 s against 3.1–3.4 s reading
    the decoded ``relation_version``, 3.6 s reading the column lists: handing each row
    to Python costs Spark more than decoding it). Over any other DataFrame, its decoded
    rows: every version's facts, the bearer's kept on the driver; where reading them
    again is a scan (:func:`_rescanned_cheaply`), the column lists in a second job, from
    each version's first row (:func:`_columns_apart`)."""
    pass2 = _pass2_of(changes)
    if pass2 is not None:
        return pass2.table_info(*_split_name(name), as_of_lsn)
    schema, table = _split_name(name)
    rank = "commit_rank" if "commit_rank" in changes.columns else "commit_lsn"
    pos = F.struct(F.col(rank).alias("r"), F.col("seq").alias("s"))
    by = pos if as_of_lsn is None else F.when(F.col("commit_lsn") <= F.lit(int(as_of_lsn)).cast(ST.LSN_TYPE), pos)
    apart = _rescanned_cheaply(changes)
    rows = (changes.groupBy("relation_version")
            .agg(F.first("relation_id", ignorenulls=True).alias("relation_id"),
                 F.first("schema", ignorenulls=True).alias("schema"), F.first("table", ignorenulls=True).alias("table"),
                 F.max(pos).alias("last"), F.max(by).alias("last_by"), F.min(pos).alias("first"),
                 F.min(by).alias("first_by"),
                 F.min("seq").alias("first_seq") if apart else F.first("columns", ignorenulls=True).alias("columns"),
                 F.collect_list(F.when(F.col("op") == "T", F.struct(pos.alias("pos"), "commit_lsn", "commit_ts")))
                 .alias("truncates"),
                 F.max((F.col("op") == "U") & F.col("before").isNotNull()).alias("old"),
                 F.max(F.col("op") == "D").alias("dels"))
            .collect())
    # openGauss rows carry no relation id: there the name is the table
    chosen, replaced = bearer([(r["relation_id"] if r["relation_id"] is not None else (r["schema"], r["table"]),
                                r["schema"] == schema and r["table"] == table) for r in rows],
                              [None if r["last_by"] is None else _pos(r["last_by"]) for r in rows])
    rows = sorted((rows[k] for k in chosen), key=lambda r: _pos(r["last"]))
    cols = _columns_apart(changes, {r["relation_version"]: r["first_seq"] for r in rows}) if apart \
        else [r["columns"] for r in rows]
    lists = [None if c_ is None else [c.asDict() for c in c_] for c_ in cols]
    kept = [(r, c_) for r, c_ in zip(rows, lists, strict=True) if c_ is not None]
    truncs = sorted((t["pos"]["r"], t["pos"]["s"], t["commit_lsn"], t["commit_ts"])
                    for r in rows for t in r["truncates"])
    upto = None
    if as_of_lsn is not None:   # the versions used up to the cut, by their last change there
        used = sorted((k for k in kept if k[0]["last_by"] is not None), key=lambda k: _pos(k[0]["last_by"]))
        upto = [(c_, r["relation_version"], _pos(r["first_by"]), _pos(r["last_by"])) for r, c_ in used]
    return _TableInfo([c_ for _, c_ in kept], truncs, any(r["old"] for r in rows), any(r["dels"] for r in rows),
                      [r["relation_version"] for r, _ in kept], rows[0]["relation_id"] if rows else None, replaced,
                      bool(rows), [_pos(r["first"]) for r, _ in kept], [_pos(r["last"]) for r, _ in kept], upto)


def _pos(p) -> tuple:
    """A (rank, seq) struct as a tuple."""
    return p["r"], p["s"]


#: physical plan nodes that run Python: a DataFrame whose rows come through one is costly
#: to compute again (decoding, typing)
_PYTHON_NODES = re.compile(r"Python|InPandas|InArrow|ArrowEval|BatchEval")


def _rescanned_cheaply(changes: DataFrame) -> bool:
    """Whether reading ``changes`` once more costs a scan, not a computation: cached, or
    files (a lake table) with no Python step and no shuffle in between. Then
    :func:`_table_info` reads the column lists apart (:func:`_columns_apart`)."""
    if getattr(changes, "is_cached", False):
        return True
    plan = physical_plan(changes)
    return "Exchange" not in plan and not _PYTHON_NODES.search(plan)


def _columns_apart(changes: DataFrame, first_seq: dict) -> list:
    """Each version's column list (``first_seq``: {relation_version: its smallest ``seq``}),
    read from those rows alone, in a job of its own. Reading every row's list in the
    versions job cost Spark 0.6–0.9 s of its 1.4 s on 1 M change rows in Parquet; the
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


def _merge_columns(versions: list) -> list:
    """Like ``tables.table_columns``: newest definition of each column wins, the newest
    version's order first, columns dropped later at the end."""
    seen, order = {}, []
    for cols in versions:
        for c in cols:
            seen[c["name"]] = c
            if c["name"] not in order:
                order.append(c["name"])
    if versions:
        newest = [c["name"] for c in versions[-1]]
        order = newest + [n for n in order if n not in newest]
    return [seen[n] for n in order]


def table_schema(cols: list, registry=None, retyped=frozenset()):
    """(Spark struct of a typed row, [(column, catalog Arrow type, has __special)]). A
    column the table's versions gave several types (``retyped``) has a ``__special``: a
    value of an earlier type the column's cannot hold is null with a note
    (:func:`pgoutput_codec.retyped.with_earlier_types`)."""
    fields, plan = [], []
    for c in cols:
        at = arrow_type(c["type_oid"], c["type_modifier"], registry)
        sp = _can_be_special(at) or c["name"] in retyped
        fields.append(T.StructField(c["name"], _value_spark_type(at)))
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


_TC_PASS = ["op", "seq", "lsn", "xid", "commit_lsn", "commit_ts", "origin", "commit_rank", "before_kind",
            "relation_version"]


class _TableMapper:
    """Picklable ``mapInArrow`` body: one table's change rows typed (``out_schema``).
    ``versions`` ({relation_version: column list}, the table's, from :func:`_table_info`):
    the rows come without their ``columns``, which are put back by ``relation_version``
    (a fingerprint of the definition, what the typing groups rows by): handing each
    row's column list to Python cost Spark 1.3 s of 4.4 s on 1 M rows."""

    def __init__(self, name, out_schema, colplan, registry, versions=None, shifted=()):
        self.name, self.out_schema = name, out_schema
        self.colplan, self.registry = colplan, registry
        # the table's columns: each batch is typed by them (its own newest column list can
        # be an earlier definition: values of another type are cast to the table's)
        self.columns = [{"name": name, "type_oid": oid, "type_modifier": typmod, "flags": 0}
                        for name, _, _, oid, typmod in colplan]
        self.shifted = shifted   # the columns that cross as int64 less 2^63 (_SHIFTED)
        self.versions = None
        if versions:
            fps = sorted(versions)
            self.versions = (np.array(fps, dtype=np.uint64),
                             pa.array([versions[f] for f in fps], CHANGE_SCHEMA.field("columns").type))

    def _columns(self, fp) -> pa.Array:
        """The column list of each row's ``relation_version`` (null where that is)."""
        keys, lists = self.versions
        fp = ST.one_array(fp).cast(pa.uint64())
        v = fp.fill_null(0).to_numpy(zero_copy_only=False)
        at = np.minimum(np.searchsorted(keys, v), len(keys) - 1)
        given = ~np.asarray(fp.is_null())
        unknown = given & (keys[at] != v)
        if unknown.any():   # the versions job saw every version: never
            raise MalformedPayloadError(f"{self.name}: relation_version {int(v[unknown][0])} "
                                        "is not among the table's versions")
        return lists.take(pa.array(at, mask=~given))

    def __call__(self, batches):
        from ..tables import typed_changes
        target = ST.arrow_schema_for(self.out_schema)
        for b in batches:
            t = _from_python(pa.Table.from_batches([b]), self.name)
            for c in self.shifted:
                t = t.set_column(t.column_names.index(c), c, _flip(ST.one_array(t.column(c))))
            if self.versions is not None and "columns" not in t.column_names:
                t = t.append_column("columns", self._columns(t.column("relation_version")))
            n = len(t)
            # the typing reads these alone; the other columns go out as they came
            cast = {f.name: t.column(f.name).cast(f.type) for f in CHANGE_SCHEMA if f.name in _TYPED_FROM}
            typed = typed_changes(pa.table(cast), registry=self.registry, columns=self.columns) if n else None
            out = []
            for f in target:
                if f.name in ("before", "after"):
                    out.append(self._side(ST.one_array(typed.column(f.name)) if n else None, f.type, n,
                                          lambda name, side=f.name, tbl=t: _raw_values(tbl, side, name)))
                elif f.name == "unchanged":
                    out.append(ST.one_array(typed.column("unchanged")).cast(f.type) if n
                               else pa.nulls(0, f.type))
                elif f.name in self.shifted:
                    out.append(_flip(ST.one_array(t.column(f.name))))
                else:
                    out.append(ST.to_spark_arrow(ST.one_array(t.column(f.name)), f.type))
            yield pa.RecordBatch.from_arrays(out, schema=target)

    def _side(self, struct, target: pa.DataType, n: int, raw_of):
        if n == 0:
            return pa.nulls(0, target)
        present = struct.type
        arrays = []
        for name, at, sp, oid, typmod in self.colplan:
            tgt = target.field(name).type
            special = None
            if present.get_field_index(name) >= 0:
                v = struct.field(name)
                if not v.type.equals(at):
                    # the catalog could not type this column as a whole in this batch (e.g.
                    # arrays of different dimensionality), or the batch's newest column list
                    # gave it another type than the table's: value by value, what does not
                    # fit the column's type is null with the reason in __special (the
                    # batch's own __special then speaks of the other type)
                    v, special = convert_values(*raw_of(name), oid, typmod, self.registry, at)
                elif present.get_field_index(name + "__special") >= 0:
                    special = struct.field(name + "__special")
                v = _conform(v, at, tgt)
            else:
                v = pa.nulls(n, tgt)
            arrays.append(v)
            if sp:
                arrays.append(special if special is not None else pa.nulls(n, pa.string()))
            elif special is not None and special.null_count != len(special):
                raise MalformedPayloadError(f"{self.name}.{name}: {special.drop_null()[0].as_py()}")
        return pa.StructArray.from_arrays(arrays, fields=list(target), mask=struct.is_null())


def table_changes(changes: DataFrame, name: str, *, registry=None, _info=None, _until_lsn=None) -> DataFrame:
    """The changes of one table (``"schema.table"``) with ``before``/``after`` as structs
    of typed Spark columns (types from the type catalog over every Relation version of
    the table in ``changes``: ``DecimalType(p,s)``, ``TimestampType``, ``DateType``,
    ``ArrayType`` …; ``time`` as µs since midnight, ``interval`` as a
    (months, days, microseconds) struct, numerics beyond 38 digits as strings), plus
    ``<column>__special`` for types that can hold infinity/NaN, and ``unchanged`` (columns
    sent as unchanged TOAST). Keeps ``commit_rank``, ``before_kind``, ``relation_version``.
    Runs one small job to list the table's Relation versions. Arrays are typed one level
    deep (PostgreSQL does not record a column's dimensionality): a deeper array value
    is null with the reason in ``__special``. The table is the relation that bears the
    name (see :func:`pgoutput_codec.tables.table_changes`), its changes under any name.
    (``_until_lsn``: ``snapshot``'s ``as_of_lsn``, so that later transactions are not
    decoded; it filters as well; ``_info``: :func:`_table_info`'s, when known.)"""
    schema, table = _split_name(name)
    if _info is None:
        _info = _table_info(changes, name, _until_lsn)
    cols = _merge_columns(_info.versions)
    row_type, colplan = table_schema(cols, registry, retyped_names(_info.versions))
    keep = [c for c in _TC_PASS if c in changes.columns]
    out_fields = [changes.schema[c] for c in keep]
    out_fields += [T.StructField("before", row_type), T.StructField("after", row_type),
                   T.StructField("unchanged", T.ArrayType(T.StringType()))]
    out_schema = T.StructType(out_fields)
    pass2 = _pass2_of(changes)
    if pass2 is not None:   # typed where the rows are decoded: no change rows in between
        return pass2.typed(schema, table, _TableMapper(f"{schema}.{table}", out_schema, colplan, registry), _until_lsn)
    # the column lists go back by relation_version when the versions job gave them all
    by_version = dict(zip((int(f) for f in _info.fingerprints), _info.versions, strict=True)) \
        if "relation_version" in keep and len(_info.fingerprints or ()) == len(_info.versions) \
        and None not in _info.fingerprints else None
    need = sorted(set(keep) | {"before", "after"} | ({"columns"} if by_version is None else set()))
    shifted = tuple(c for c in _SHIFTED if c in need and changes.schema[c].dataType == ST.LSN_TYPE)
    crossing = T.StructType([T.StructField(f.name, T.LongType()) if f.name in shifted else f for f in out_fields])
    mapper = _TableMapper(f"{schema}.{table}", crossing, colplan, registry, by_version, shifted)
    return (_of_table(changes, name, _info).select(*_to_python(changes, need, shifted))
            .mapInArrow(mapper, crossing)
            .select(*[_unshifted(c) if c in shifted else c for c in crossing.names]))


#: the list columns of change rows that are null on some rows (``before`` of an Insert,
#: ``after`` of a Delete, both of a Truncate)
_NULLABLE_LISTS = ("before", "after", "columns")
#: the row images among them: ``list<struct<kind, data>>``
_IMAGES = ("before", "after")


#: the columns of change rows the typing reads (:func:`pgoutput_codec.tables.typed_changes`)
_TYPED_FROM = ("columns", "relation_version", "before", "after")
#: uint64 columns that Spark holds as decimal(20,0) and that cross into Python and back
#: as int64, less 2^63 (a decimal costs Spark more to convert: 1 M rows of these three
#: through an identity mapInArrow, 0.55 s against 0.3 s over ``seq`` alone)
_SHIFTED = ("lsn", "commit_lsn", "relation_version")
_TOP = Decimal(1 << 63)


def _unshifted(name: str) -> Column:
    """A column :func:`_to_python` shifted, as decimal(20,0) again."""
    return (F.col(name).cast(ST.LSN_TYPE) + F.lit(_TOP)).cast(ST.LSN_TYPE).alias(name)


def _flip(arr: pa.Array) -> pa.Array:
    """int64 x - 2^63 ↔ uint64 x: the top bit flipped, nulls kept."""
    to = pa.uint64() if pa.types.is_int64(arr.type) else pa.int64()
    bits = arr.fill_null(0).to_numpy(zero_copy_only=False).view(np.uint64) ^ np.uint64(1 << 63)
    return pa.array(bits.view(to.to_pandas_dtype()), to, mask=arr.is_null().to_numpy(zero_copy_only=False)
                    if arr.null_count else None)


def _to_python(changes: DataFrame, names: list, shifted=()) -> list:
    """``names`` as the columns a ``mapInArrow`` over change rows reads (:func:`_from_python`
    makes them change rows again), in the shapes Spark hands to Python the cheapest:

    - a nullable list column as an empty list where null, plus a ``__null_<name>`` flag.
      Spark 4 hands a null list to Python at ~4.5 µs a row (1 M null ``before`` values:
      4.6–4.9 s, as many empty lists 0.43 s; PySpark 3.5: 0.26–0.32 s either way), and
      every Insert's ``before`` is one;
    - a row image (``list<struct<kind, data>>``) as its values (``list<binary>``) plus
      its kinds as one string, a letter a value (``__kinds_<name>``): 1 M ten-column
      ``after`` images cost 1.3 s apart against 1.8 s whole (``seq`` alone: 0.4 s);
    - ``shifted`` (of :data:`_SHIFTED`) as int64 less 2^63.

    Over 1 M change rows read back from Parquet ``table_changes`` + count took 10.6 s
    with none of these, 5.0–6.0 s with the first, 4.0 s with all three."""
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


def _from_python(t: pa.Table, name: str = "") -> pa.Table:
    """``t`` with the list columns :func:`_to_python` flagged null again and the
    row images whole again (``name``: the table, for the error of a kind that is not one
    letter, which only a change row built elsewhere could carry)."""
    for n in _NULLABLE_LISTS:
        flag = f"__null_{n}"
        if flag not in t.column_names:
            continue
        nulls = ST.one_array(t.column(flag))
        col = ST.one_array(t.column(n))
        # a list's offsets may start past 0 (a slice): rebase them, Arrow takes no mask then
        offsets = ST.offsets(col)
        values = col.values.slice(offsets[0], offsets[-1] - offsets[0])
        offsets = offsets - offsets[0]
        kinds = f"__kinds_{n}"
        if kinds in t.column_names:
            values = _image_values(ST.one_array(t.column(kinds)), offsets, values, t, n, name)
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


# --------------------------------------------------------------------------- snapshot / history

def _events(changes: DataFrame, name: str, as_of_lsn, registry):
    """One row per (key, event): 'set' (I, U: the row image) or 'del' (D, the old key of a
    key-changing U), ordered by (commit position, seq, sub); plus the truncates (driver-side
    list), the names of the columns that may be sent unchanged, the row struct type and
    whether an Update may have changed a key (``_TableInfo.sends_old``), and the
    :class:`_TableInfo`. ``ev`` is None when the table has no row change here (no columns to build a key from:
    Spark 3.5 refuses an empty struct column)."""
    info = _table_info(changes, name, as_of_lsn)
    versions, truncs, sends_old, deletes = info.versions, info.truncates, info.sends_old, info.deletes
    if not versions:
        return None, truncs, [], T.StructType([]), False, [], info
    tc = table_changes(changes, name, registry=registry, _info=info, _until_lsn=as_of_lsn)
    if as_of_lsn is not None:
        truncs = [t for t in truncs if t[2] is not None and t[2] <= as_of_lsn]
        tc = tc.where(F.col("commit_lsn") <= F.lit(int(as_of_lsn)).cast(ST.LSN_TYPE))
    cols = tc.schema["after"].dataType
    names = [f.name for f in cols.fields if not f.name.endswith("__special") or f.name[:-9] not in cols.names]
    newest = versions[-1] if versions else []
    flagged = [c["name"] for c in newest if c["flags"] & 1]
    keycols = flagged or [c["name"] for c in newest]
    earlier = _earlier_identities(info, keycols)
    row_keys = _row_keys(versions)
    common = set.intersection(*row_keys) if row_keys and earlier else set()
    if earlier and common and all(common <= {c["name"] for c in cols if c["flags"] & 1} for cols in versions) \
            and common in row_keys:
        # the identity changed, and the columns every identity held are one of them (a
        # primary key kept while FULL came and went): rows keyed by those, every change's
        # old image holds them, nothing to look up (and no unchanged TOAST value in a key)
        keycols, earlier = [c for c in keycols if c in common] or sorted(common), {}
    rank = "commit_rank" if "commit_rank" in tc.columns else "commit_lsn"
    pos = F.struct(F.col(rank).alias("r"), F.col("seq").alias("s"))

    def key_of(side, keys=keycols):
        return F.struct(*[F.col(f"{side}.`{k}`").alias(k) for k in keys])

    old_key = F.when(F.col("before").isNotNull(), key_of("before")).otherwise(key_of("after"))
    new_key = key_of("after")
    if not flagged:
        # no key column: an Update naming no old key cannot be matched to its row
        # (tables.unknown_key_error); refused where it is met, at no extra job
        head, tail = unknown_key_error(name, "\0").split("\0")
        new_key = F.when((F.col("op") == "U") & F.col("before").isNull(), F.raise_error(
            F.concat(F.lit(head), F.col("commit_lsn").cast("string"), F.lit(tail)))).otherwise(new_key)
    iud = tc.withColumn("__pos", pos).where(F.col("op").isin("I", "U", "D"))
    if earlier:
        iud, old_key, new_key = _found_keys(iud, earlier, keycols, new_key, old_key, key_of)
        sends_old = True   # under an earlier identity an Update may move a row's newest key unsaid
    elif not (deletes or sends_old):
        # no Delete and no key change (known from the heads): every change sets its row
        ev = iud.select(new_key.alias("__key"), F.lit(1).alias("__sub"), F.lit("set").alias("__ev"), "op",
                        "__pos", "commit_lsn", "commit_ts", "after", "unchanged", old_key.alias("__from"))
        return ev, truncs, names, cols, sends_old, net_key(versions, newest), info
    # else each change gives its one or two events in one pass over the table's changes
    # (a union of a 'set' and a 'del' query decodes every payload twice: snapshot + count
    # of 1 M rows with Deletes, per-field, 9.7 s against 16.3 s): an array of the events'
    # small parts, exploded;
    # the row image stays a column of the change
    set_ev = F.when(F.col("op").isin("I", "U"), F.struct(
        new_key.alias("k"), F.lit(1).alias("sub"), F.lit("set").alias("ev"), old_key.alias("from")))
    del_ev = F.when((F.col("op") == "D") | ((F.col("op") == "U") & (old_key != new_key)), F.struct(
        old_key.alias("k"), F.lit(0).alias("sub"), F.lit("del").alias("ev"), old_key.alias("from")))
    is_set = F.col("__e.ev") == "set"
    ev = (iud.select("op", "__pos", "commit_lsn", "commit_ts", "after", "unchanged",
                     F.explode(F.array(set_ev, del_ev)).alias("__e"))
          .where(F.col("__e").isNotNull())
          .select(F.col("__e.k").alias("__key"), F.col("__e.sub").alias("__sub"), F.col("__e.ev").alias("__ev"),
                  "op", "__pos", "commit_lsn", "commit_ts", F.when(is_set, F.col("after")).alias("after"),
                  F.when(is_set, F.col("unchanged")).alias("unchanged"),
                  F.when(is_set, F.col("__e.from")).alias("__from")))
    return ev, truncs, names, cols, sends_old, net_key(versions, newest), info


def _earlier_identities(info: _TableInfo, keycols: list) -> dict:
    """The table's earlier replica identities whose changes do not carry the newest
    key: {key columns: [relation_version, ...]}. Rows are keyed by the newest Relation's
    key columns; a change sent under an identity whose old image holds them all (FULL,
    or a wider key) names its row's newest key itself, but one sent under a narrower or
    another key (DEFAULT before FULL, an index before another) names it only by that
    identity's columns (:func:`_found_keys`). Empty when the identity never changed."""
    out: dict = {}
    for cols, fp in zip(info.versions, info.fingerprints or (), strict=False):
        keys = tuple(c["name"] for c in cols if c["flags"] & 1) or tuple(c["name"] for c in cols)
        if not set(keycols) <= set(keys):
            out.setdefault(keys, []).append(fp)
    return out


def _row_keys(versions: list) -> list:
    """The key column sets of the table's identities that name a row by fewer columns
    than it has (a primary key or an index: unique, unlike a whole row under FULL)."""
    out = []
    for cols in versions:
        k = {c["name"] for c in cols if c["flags"] & 1}
        if k and len(k) < len(cols):
            out.append(k)
    return out


def _found_keys(iud: DataFrame, earlier: dict, keycols: list, new_key, old_key, key_of):
    """(``iud`` with the lookups, ``__g{i}`` per key column; the old key to use; the new
    key to use): the newest key of the row each Update/Delete sent under an earlier
    identity names — that of the latest row image set before it (by commit position,
    seq) whose columns of that identity equal the change's old image (else, for an
    Update without one, its new image: the identity's columns did not change), as a
    subscriber finds a row by the key each change sends. One window per earlier
    identity over the table's row images and those changes, and a join back by
    position; only for a table whose identity changed (:func:`_earlier_identities`). A
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
        sets = iud.where(F.col("op").isin("I", "U")).select(
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
    rows.sort(key=lambda r: _pos(r["__fp"]))
    value = {}   # (move position, column) -> its resolved value struct, or None: unknown
    for r in rows:
        p = _pos(r["__fp"])
        for i in range(len(keycols)):
            g = r[f"__g{i}"]
            if g is not None and g["m"] is not None:
                g = value.get((_pos(g["m"]), i))
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


def _lineage(ev: DataFrame, sends_old: bool) -> DataFrame:
    """``ev`` with ``__lin``: the row each event's image descends from, through
    key-changing updates — (key, position of its Insert), or (key, null) for a row older
    than these changes. Unchanged TOAST values flow along it, not along one key.

    Only needed where an event that leaves a value unchanged sits on a key some update
    moved a row to. No Update sent an old key or row (``sends_old`` false, read from the
    payload heads by ``_table_info``'s job): no key changed, and nothing more is read.
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
        if r["op"] == "I":
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


def _carry_toast(ev: DataFrame, names: list, cols: T.StructType, sends_old: bool,
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


def _after_truncate(ev: DataFrame, truncs: list) -> DataFrame:
    if not truncs:
        return ev
    r, q = truncs[-1][:2]
    return ev.where(F.col("__pos") > F.struct(F.lit(r).alias("r"), F.lit(q).alias("s")))


def snapshot(changes: DataFrame, name: str, as_of_lsn: int | None = None, *, registry=None,
             missing: dict | None = None) -> DataFrame:
    """The table as of commit LSN ``as_of_lsn`` (inclusive; None: every change), rebuilt
    with DataFrame operations: changes after the table's last Truncate, grouped by
    replica-identity key (the newest Relation's key columns; FULL identity or no key:
    every column; a change sent under an earlier identity is resolved to it,
    :func:`_found_keys`), last change by (commit position, seq) wins, deletes and key-changing
    updates remove the old key, unchanged TOAST values carried (see ``_carry_toast``).
    Columns: the typed columns (and ``__special`` companions) of :func:`table_changes`
    that the Relation in force at the cut lists (a column dropped is not the table's).
    ``missing``: {column: value} the server gave a column added with a ``DEFAULT`` in the
    rows older than it (:func:`pgoutput_codec.tables.snapshot`)."""
    ev, truncs, names, cols, sends_old, _, info = _events(changes, name, as_of_lsn, registry)
    if ev is None:
        return changes.sparkSession.createDataFrame([], cols)
    ev = _carry_toast(_after_truncate(ev, truncs), names, cols, sends_old)
    w = Window.partitionBy("__key").orderBy(F.col("__pos").desc(), F.col("__sub").desc())
    last = ev.withColumn("__n", F.row_number().over(w)).where((F.col("__n") == 1) & (F.col("__ev") == "set"))
    spans = _column_spans(changes, name, as_of_lsn, info)
    out = _as_added(last, cols, spans, _fill_values(missing, cols, info, registry)).select("after.*")
    if spans is None:
        return out
    keep = set(spans[-1][0])
    return out.select(*[f"`{c}`" for c in out.columns
                        if (c[:-9] if c.endswith("__special") and c[:-9] in cols.names else c) in keep])


def _column_spans(changes: DataFrame, name: str, as_of_lsn, info: _TableInfo) -> list | None:
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
        pass2 = _pass2_of(changes)
        if pass2 is not None:
            cut = pass2._table_info(*pass2._narrowed(*_split_name(name), as_of_lsn))
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
    rows = changes.where((F.col("relation_id") == F.lit(info.relation_id)) & F.col("op").isin("I", "U", "D"))
    if as_of_lsn is not None:
        rows = rows.where(F.col("commit_lsn") <= F.lit(int(as_of_lsn)).cast(ST.LSN_TYPE))
    pos = F.struct(F.col(rank).alias("r"), F.col("seq").alias("s"))
    w = Window.orderBy("__p")
    turns = (rows.select(pos.alias("__p"), "relation_version")
             .withColumn("__was", F.lag("relation_version").over(w)).withColumn("__before", F.lag("__p").over(w))
             .where(F.col("__was").isNull() | (F.col("__was") != F.col("relation_version")))
             .orderBy("__p").collect())
    out = []
    for t in turns:
        names = list(by_fp[int(t["relation_version"])])
        if out and out[-1][0] != names:
            out[-1] = (out[-1][0], _pos(t["__before"]))
            out.append((names, None))
        elif not out:
            out.append((names, None))
    return out


def _fill_values(missing: dict | None, cols: T.StructType, info: _TableInfo, registry) -> dict:
    """``missing`` (:func:`pgoutput_codec.tables.missing_values`, checked the same way) as
    Spark literals of the row struct's fields."""
    if not missing:
        return {}
    if info.relation_id is None and info.versions:
        # openGauss rows carry no Relation: where a column was added is not known here
        raise ValueError("missing= needs pgoutput change rows in Spark (openGauss rows name no column list)")
    table = _merge_columns(info.versions)
    by_name = {c["name"]: c for c in table}
    out = {}
    for nm, v in missing_values(missing, table, registry).typed.items():
        c, ft = by_name[nm], cols[nm].dataType
        at = arrow_type(c["type_oid"], c["type_modifier"], registry)
        v = v.cast(at)
        if pa.types.is_time64(at):          # as the typed rows hold it: µs since midnight
            lit = F.lit(v.cast(pa.int64())[0].as_py())
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


def _as_added(ev: DataFrame, cols: T.StructType, spans: list | None, fill: dict | None = None) -> DataFrame:
    """``ev`` with each column added to the table (``tables.added_columns``) as the rows
    sent before it hold it: a column dropped and added again by its name is a new one,
    null in the rows not changed since, as in the single-process replay; ``fill``
    (:func:`_fill_values`) gives a column added with a ``DEFAULT`` its value there.
    ``spans``: :func:`_column_spans`'; a column is added past the last change of the
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
        was = fill[nm] if nm == f.name and nm in fill else F.lit(None).cast(f.dataType)
        return (F.when(before(cut[nm]), was).otherwise(v) if nm in cut else v).alias(f.name)
    return ev.withColumn("after", F.when(F.col("after").isNotNull(), F.struct(*[field(f) for f in cols.fields])))


def net_changes(changes: DataFrame, name: str, *, registry=None, missing: dict | None = None) -> DataFrame:
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
    :func:`pgoutput_codec.tables.net_changes`)."""
    ev, truncs, names, cols, sends_old, keycols, info = _events(changes, name, None, registry)
    relation = F.lit(info.relation_id).cast(T.LongType()).alias("__RELATION_ID")
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
    ev = _carry_toast(_after_truncate(ev, truncs), names, cols, sends_old, pending=True)
    ev = _as_added(ev, cols, _column_spans(changes, name, None, info), _fill_values(missing, cols, info, registry))

    def net_of(key):   # rows are keyed by the newest identity; net changes by keycols (net_key), within it
        return F.struct(*[F.col(f"{key}.`{k}`").alias(k) for k in keycols])
    # per key its last event; a row held wins over a wider key gone at the same position
    w = Window.partitionBy(net_of("__key")).orderBy(F.col("__pos").desc(), F.col("__sub").desc())
    last = ev.withColumn("__n", F.row_number().over(w)).where(F.col("__n") == 1)
    is_set = F.col("__ev") == "set"
    image = F.when(is_set, F.col("after")).otherwise(F.struct(*[
        (F.col(f"__key.`{f.name}`") if f.name in keycols else F.lit(None).cast(f.dataType)).alias(f.name)
        for f in cols.fields]))
    pending = F.when(is_set, F.coalesce(F.col("__pending"), F.array().cast("array<string>"))) \
        .otherwise(F.array().cast("array<string>"))
    moved = F.col("__lin.p").isNull() & ~net_of("__lin.k").eqNullSafe(net_of("__key"))
    out = last.select(image.alias("__img"), F.when(is_set, "upsert").otherwise("delete").alias("__OP"),
                      pending.alias("__UNCHANGED"),
                      F.when((F.size(pending) > 0) & moved, net_of("__lin.k")).alias("__UNCHANGED_FROM"),
                      F.col("commit_lsn").alias("__COMMIT_LSN"), F.col("commit_ts").alias("__COMMIT_AT"), "__pos")
    out = out.select("__img.*", "__OP", "__UNCHANGED", "__UNCHANGED_FROM", "__COMMIT_LSN", "__COMMIT_AT", relation,
                     "__pos")
    if truncs or replaced:
        r, q, lsn, ts = (truncs or replaced)[-1]
        row = {f.name: None for f in out.schema.fields} | {
            "__OP": "truncate", "__UNCHANGED": [], "__COMMIT_LSN": lsn, "__COMMIT_AT": ts,
            "__RELATION_ID": info.relation_id, "__pos": (r, q)}
        out = out.unionByName(changes.sparkSession.createDataFrame([row], out.schema))
    first = F.when(F.col("__OP") == "truncate", 0).otherwise(1)
    return out.orderBy(first, "__pos").drop("__pos")


def history(changes: DataFrame, name: str, *, registry=None) -> DataFrame:
    """Every version of every row (SCD type 2): the typed columns, ``__OP`` (the change
    that made the version), ``__START_LSN``/``__START_AT`` (its commit) and
    ``__END_LSN``/``__END_AT`` (the commit of the next change of the same key, or of the
    next Truncate, whichever comes first; null: current)."""
    ev, ts, names, cols, sends_old, _, _ = _events(changes, name, None, registry)
    if ev is None:
        return changes.sparkSession.createDataFrame([], T.StructType([   # no row change: no version
            T.StructField("__OP", T.StringType()), T.StructField("__START_LSN", ST.LSN_TYPE),
            T.StructField("__START_AT", T.TimestampType()), T.StructField("__END_LSN", ST.LSN_TYPE),
            T.StructField("__END_AT", T.TimestampType())]))
    ev = _carry_toast(ev, names, cols, sends_old)
    w = Window.partitionBy("__key").orderBy("__pos", "__sub")
    nxt = ev.withColumn("__next", F.lead(F.struct("__pos", "commit_lsn", "commit_ts")).over(w))
    end_lsn, end_at = F.col("__next.commit_lsn"), F.col("__next.commit_ts")
    if ts:
        lit_t = F.array(*[F.struct(F.lit(r).alias("r"), F.lit(s).alias("s"),
                                   F.lit(lsn).cast(ST.LSN_TYPE).alias("lsn"), F.lit(at).alias("at"))
                          for r, s, lsn, at in ts])
        after_start = F.filter(lit_t, lambda x: F.struct(x["r"].alias("r"), x["s"].alias("s")) > F.col("__pos"))
        # get, not element_at: under ANSI (Spark 4's default) element_at raises on the empty
        # array a version has when no Truncate follows it
        first_t = F.get(after_start, F.lit(0))
        before_next = first_t.isNotNull() & (F.col("__next").isNull()
                                             | (F.struct(first_t["r"].alias("r"), first_t["s"].alias("s"))
                                                < F.col("__next.__pos")))
        end_lsn = F.when(before_next, first_t["lsn"]).otherwise(end_lsn)
        end_at = F.when(before_next, first_t["at"]).otherwise(end_at)
    out = nxt.where(F.col("__ev") == "set").select(
        "after.*", F.col("op").alias("__OP"), F.col("commit_lsn").alias("__START_LSN"),
        F.col("commit_ts").alias("__START_AT"), end_lsn.alias("__END_LSN"), end_at.alias("__END_AT"))
    return out
