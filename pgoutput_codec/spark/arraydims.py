"""How many dimensions the arrays of a table's columns have, found by one job over its
change rows before its typed schema is fixed. PostgreSQL does not record a column's
dimensionality; one process types an array column as deep as its deepest value, and
Spark, whose schema comes before the values, reads their first bytes first
(:func:`pgoutput_codec.typecatalog.arrays.value_ndims`) to type it the same."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..arrays import one_array
from ..tables.typed import locate
from ..tables.rows import column_lists, column_set_ids
from ..typecatalog.arrays import value_ndims
from ..typecatalog.columns import materialize, take_at
from ..typecatalog.registry import resolve
from . import types as ST
from .crossing import SHIFTED, flip, from_python, to_python

__all__ = ["array_dims", "ArrayDims"]

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
