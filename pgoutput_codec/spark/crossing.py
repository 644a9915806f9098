"""How change rows cross from Spark into a Python ``mapInArrow`` and back, in the shapes
Spark hands over the cheapest (:func:`to_python` on the Spark side, :func:`from_python`
in the worker), and the uint64 columns that cross as int64 less 2^63 (:data:`SHIFTED`)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import one_array
from ..schema import CHANGE_SCHEMA
from . import types as ST
from .modes import MalformedPayloadError

__all__ = ["SHIFTED", "unshifted", "flip", "to_python", "from_python"]


#: the list columns of change rows that are null on some rows (``before`` of an Insert,
#: ``after`` of a Delete, both of a Truncate)
_NULLABLE_LISTS = ("before", "after", "columns")
#: the row images among them: ``list<struct<kind, data>>``
_IMAGES = ("before", "after")


#: uint64 columns that Spark holds as decimal(20,0) and that cross into Python and back
#: as int64, less 2^63 (a decimal costs Spark more to convert: 1 M rows of these three
#: through an identity mapInArrow, 0.55 s against 0.3 s over ``seq`` alone)
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
      Spark 4 hands a null list to Python at ~4.5 µs a row (1 M null ``before`` values:
      4.6–4.9 s, as many empty lists 0.43 s; PySpark 3.5: 0.26–0.32 s either way), and
      every Insert's ``before`` is one;
    - a row image (``list<struct<kind, data>>``) as its values (``list<binary>``) plus
      its kinds as one string, a letter a value (``__kinds_<name>``): 1 M ten-column
      ``after`` images cost 1.3 s apart against 1.8 s whole (``seq`` alone: 0.4 s);
    - ``shifted`` (of :data:`SHIFTED`) as int64 less 2^63.

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

