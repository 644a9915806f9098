"""The Spark schema of change rows: what :func:`.changes.decode_changes` gives
(:func:`change_type`), the error columns PERMISSIVE adds, and what the change mappers
write before the last steps (:func:`mapper_schema`: the hidden sub-order and count
columns)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..schema import CHANGE_FIELDS, CHANGE_OPTIONAL
from . import types as ST
from .counts import COUNT_FIELDS
from .modes import FAILFAST, PERMISSIVE

__all__ = ["ERROR_FIELDS", "SUB", "LSN", "change_type", "drop_malformed", "mapper_schema"]

#: the hidden column of a row's place among the rows of its message (a Truncate's rows
#: share a ``seq``): the last sort key
SUB = "__sub"
#: the hidden column pass 2 gives the archive's lsn column
LSN = "__lsn"

#: the columns PERMISSIVE mode adds to change rows: the error text and the raw payload
ERROR_FIELDS = [T.StructField("error", T.StringType()), T.StructField(ST.CORRUPT_RECORD, T.BinaryType())]


def drop_malformed(out: DataFrame) -> DataFrame:
    """DROPMALFORMED: the PERMISSIVE rows less those in error and the two error columns."""
    return out.filter(F.col("error").isNull()).drop(*[f.name for f in ERROR_FIELDS])


def change_type(*, include_xids=True, include_timestamp=True, include_origin=True,
                mode: str = FAILFAST) -> T.StructType:
    """Spark schema of :func:`.changes.decode_changes` rows: ``schema.CHANGE_SCHEMA``
    (minus the optional columns switched off) + ``commit_rank``; PERMISSIVE adds ``error``
    and ``_corrupt_record``."""
    opts = dict(include_xids=include_xids, include_timestamp=include_timestamp, include_origin=include_origin)
    drop = {col for opt, col in CHANGE_OPTIONAL.items() if not opts[opt]}
    fields = [ST.spark_field(f) for f in CHANGE_FIELDS if f.name not in drop]
    fields.append(T.StructField("commit_rank", T.LongType()))
    if mode == PERMISSIVE:
        fields += ERROR_FIELDS
    return T.StructType(fields)


def mapper_schema(options: dict, mode: str, count_rows: bool = False) -> T.StructType:
    """What :class:`.mappers.ChangeMapper` writes: the change rows (``change_type`` under
    ``options``' include_*; with the error columns unless FAILFAST, DROPMALFORMED
    filtering them later), the sub-order of a Truncate's rows, and the count columns
    when asked."""
    out_type = change_type(include_xids=options.get("include_xids", True),
                           include_timestamp=options.get("include_timestamp", True),
                           include_origin=options.get("include_origin", True),
                           mode=PERMISSIVE if mode != FAILFAST else FAILFAST)
    return T.StructType(list(out_type.fields) + [T.StructField(SUB, T.LongType())]
                        + (COUNT_FIELDS if count_rows else []))
