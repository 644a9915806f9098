"""Row counts for an ``observation`` of the change decoders: each output batch of ``n``
rows gets one more row, null but for the batch's input-row counts in two hidden columns;
:func:`observe_counts` sums them into the observation and drops those rows again."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import one_array

__all__ = ["COUNT_FIELDS", "with_count_row", "observe_counts"]

_ROWS_IN, _ROWS_ERR = "__rows_in", "__rows_err"

#: the hidden columns of the count rows
COUNT_FIELDS = [T.StructField(_ROWS_IN, T.LongType()), T.StructField(_ROWS_ERR, T.LongType())]


def with_count_row(cols: dict, n: int, rows_in: int, rows_in_error: int) -> dict:
    """``cols`` (name -> array of ``n`` rows) plus the count row."""
    cols = {k: pa.concat_arrays([one_array(v), pa.nulls(1, one_array(v).type)]) for k, v in cols.items()}
    cols[_ROWS_IN] = pa.array([None] * n + [rows_in], pa.int64())
    cols[_ROWS_ERR] = pa.array([None] * n + [rows_in_error], pa.int64())
    return cols


def observe_counts(out: DataFrame, observation) -> DataFrame:
    """``rows_in``, ``rows_decoded``, ``rows_in_error`` into ``observation`` (rows in =
    rows decoded + rows in error); the count rows dropped. Call after any sort: the sort's
    sampling job would run the metrics a second time."""
    out = out.observe(observation, F.coalesce(F.sum(_ROWS_IN), F.lit(0)).alias("rows_in"),
                      (F.coalesce(F.sum(_ROWS_IN), F.lit(0)) - F.coalesce(F.sum(_ROWS_ERR), F.lit(0)))
                      .alias("rows_decoded"),
                      F.coalesce(F.sum(_ROWS_ERR), F.lit(0)).alias("rows_in_error"))
    return out.filter(F.col(_ROWS_IN).isNull()).drop(_ROWS_IN, _ROWS_ERR)
