"""One table's change rows typed: the Spark schema of its typed row (:func:`table_schema`,
types from the type catalog) and the ``mapInArrow`` body that types each batch
(:class:`TableMapper`, the single-process :func:`pgoutput_codec.tables.typed_changes`
per batch, conformed to the Arrow types Spark exchanges)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from ..arrays import one_array, plain_lists
from ..schema import CHANGE_COLUMN_LISTS, CHANGE_SCHEMA
from ..tables import typed_changes
from ..tables.rows import column_lists
from ..typecatalog import ConversionError, arrow_type, convert_column
from ..typecatalog.interval import interval_struct as catalog_interval_struct
from . import types as ST
from .crossing import flip, from_python
from .modes import MalformedPayloadError

__all__ = ["table_schema", "convert_values", "conform", "interval_struct", "TableMapper", "TIME_TYPE", "END_OF_DAY"]

#: Spark's time of day (PySpark 4.1 and later); before it, and over Spark Connect (whose
#: server refuses to send a TIME to its client: UNSUPPORTED_TIME_TYPE, Spark 4.3), a
#: ``time`` is µs since midnight (LongType)
TIME_TYPE = T.TimeType(6) if hasattr(T, "TimeType") else None
#: PostgreSQL's last time of day, 24:00:00, in µs: Spark's times end before it
END_OF_DAY = 86_400_000_000


def _value_spark_type(t: pa.DataType, time_type) -> T.DataType:
    """Spark type of a typed column value (Arrow type from the type catalog)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(_value_spark_type(t.value_type, time_type))
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


def _can_be_special(t: pa.DataType) -> bool:
    """Columns that get a ``<name>__special`` companion (infinity/NaN, unconvertible values)."""
    return not (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_boolean(t)
                or pa.types.is_integer(t))


def conform(arr: pa.Array, t: pa.DataType, target: pa.DataType) -> pa.Array:
    """A typed value array (catalog type ``t``) as the Arrow type Spark wants (``target``)."""
    arr = one_array(arr)
    if pa.types.is_time64(arr.type) and pa.types.is_time64(target):
        # 24:00:00 is past Spark's last time of day: null (its __special says so: end_of_day)
        arr = pc.if_else(pc.equal(arr.cast(pa.int64()), END_OF_DAY), pa.scalar(None, arr.type), arr)
    elif pa.types.is_time64(arr.type):
        arr = arr.cast(pa.int64())
    elif pa.types.is_interval(arr.type):
        arr = interval_struct(arr, target)
    elif pa.types.is_list(arr.type) and pa.types.is_list(target):
        inner = conform(arr.values, t.value_type if pa.types.is_list(t) else arr.type.value_type,
                         target.value_type)
        arr = pa.ListArray.from_arrays(arr.offsets, inner, mask=arr.is_null())
    if not arr.type.equals(target):
        arr = arr.cast(target)
    return arr


def _holds_time(t: pa.DataType) -> bool:
    while pa.types.is_list(t):
        t = t.value_type
    return pa.types.is_time64(t)


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
    (:func:`pgoutput_codec.retyped.with_earlier_types`). ``ndims``: the number of
    dimensions of array columns' values (:func:`.arraydims.array_dims`); one whose
    values differ (a set of them) is binary, each value as sent, as one process keeps it.
    ``time_type``: a ``time``'s Spark type (None: µs since midnight, LongType)."""
    fields, plan = [], []
    ndims = ndims or {}
    for c in cols:
        d = ndims.get(c["name"], 1)
        mixed = isinstance(d, frozenset)
        at = pa.binary() if mixed else arrow_type(c["type_oid"], c["type_modifier"], registry, ndim=d)
        sp = _can_be_special(at) or c["name"] in retyped or mixed
        fields.append(T.StructField(c["name"], _value_spark_type(at, time_type)))
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
    ``versions`` ({relation_version: column list}, the table's, from :func:`.tableinfo.table_info`):
    the rows come without their ``columns``, which are put back by ``relation_version``
    (a fingerprint of the definition, what the typing groups rows by): handing each
    row's column list to Python cost Spark 1.3 s of 4.4 s on 1 M rows."""

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
            special = None
            if present.get_field_index(name) >= 0 and name in self.mixed:
                # arrays of several numbers of dimensions: every value as sent, as one process keeps them
                kinds, data = raw_of(name)
                v = pc.if_else(pc.is_in(kinds, value_set=pa.array(["t", "b"])), data, pa.nulls(n, pa.binary()))
                special = pa.array([self.mixed[name]] * n, pa.string())
            elif present.get_field_index(name) >= 0:
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
                if _holds_time(at) and _holds_time(tgt):
                    special = end_of_day(v, special)
                v = conform(v, at, tgt)
            else:
                v = pa.nulls(n, tgt)
            arrays.append(v)
            if sp:
                arrays.append(special if special is not None else pa.nulls(n, pa.string()))
            elif special is not None and special.null_count != len(special):
                raise MalformedPayloadError(f"{self.name}.{name}: {special.drop_null()[0].as_py()}")
        return pa.StructArray.from_arrays(arrays, fields=list(target), mask=struct.is_null())

