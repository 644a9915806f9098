"""The arrival-order key of an archive's rows: one int64 column, from the ``order_by``
column(s) or, without them, from the files' order and each row's place in its file
(the ordering contract: :mod:`.changes`)."""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .dataframes import col, physical_plan

__all__ = ["order_key", "FILE_BITS"]

#: the bits of the row index in a default order key: ``file_rank << FILE_BITS | row_index``
FILE_BITS = 40


def order_key(df: DataFrame, order_by) -> Column:
    """An int64 column of arrival order (see :mod:`.changes`: the ordering contract)."""
    if order_by is None:
        return _default_order(df)
    cols = [order_by] if isinstance(order_by, str) else list(order_by)
    for c in cols:
        dt = df.schema[c].dataType
        if not isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)) or \
                (isinstance(dt, T.DecimalType) and dt.scale):
            raise TypeError(f"order_by column {c!r} must be integral, not {dt.simpleString()}")
    if len(cols) == 1:
        return col(cols[0]).cast("long")
    aggs = []
    for c in cols:
        aggs += [F.min(col(c)).cast("decimal(38,0)"), F.max(col(c)).cast("decimal(38,0)")]
    row = df.agg(*aggs).first()
    key, bits = None, 0
    for k in reversed(range(len(cols))):
        lo, hi = int(row[2 * k] or 0), int(row[2 * k + 1] or 0)
        width = max(1, (hi - lo).bit_length())
        part = (col(cols[k]).cast("decimal(38,0)") - F.lit(lo)).cast("long")
        part = F.shiftleft(part, bits) if bits else part
        key = part if key is None else key.bitwiseOR(part)
        bits += width
    if bits > 63:
        raise ValueError(f"order_by {cols}: the columns' ranges need {bits} bits, more than an int64 holds; "
                         "add one integral arrival-order column (capture writes `seq`)")
    return key


def _default_order(df: DataFrame) -> Column:
    try:
        meta = df.select(F.col("_metadata.file_path").alias("f"), F.col("_metadata.row_index").alias("r"))
        _ = meta.schema   # resolves now: AnalysisException without row-index metadata
        files = sorted(r.f for r in meta.select("f").distinct().collect())
        rank = F.create_map(*[x for i, p in enumerate(files) for x in (F.lit(p), F.lit(i))])
        return F.shiftleft(F.element_at(rank, F.col("_metadata.file_path")).cast("long"), FILE_BITS) \
            .bitwiseOR(F.col("_metadata.row_index").cast("long"))
    except AnalysisException:
        pass
    # No row-index metadata: input_file_name() order, then the row's place in its partition,
    # which means something only when the rows come straight from the file scan.
    plan = physical_plan(df)
    if "Exchange" in plan or not df.inputFiles():
        raise ValueError("order_by=None needs the archive's file order: pass the DataFrame of "
                         "spark.read.parquet(...) itself (no repartition, join or union before), or give "
                         "order_by (the archive's arrival-order column, e.g. seq)")
    files = sorted(r.f for r in df.select(F.input_file_name().alias("f")).distinct().collect())
    rank = F.create_map(*[x for i, p in enumerate(files) for x in (F.lit(p), F.lit(i))])
    mid = F.monotonically_increasing_id()
    pid = F.shiftright(mid, 33)
    within = mid.bitwiseAND(F.lit((1 << 33) - 1))
    return (F.shiftleft(F.element_at(rank, F.input_file_name()).cast("long"), FILE_BITS)
            .bitwiseOR(F.shiftleft(pid, 28)).bitwiseOR(within))
