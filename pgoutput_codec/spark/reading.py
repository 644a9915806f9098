"""``read_archive``: archive files through Spark's own Parquet/CSV readers (splits,
pushdown, any Hadoop filesystem), decoded as messages (:func:`.functions.decode_messages`)
or change rows (:func:`.changes.decode_changes`); on PySpark 3.5 as on 4.x."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .changes import decode_changes
from .functions import decode_messages
from .modes import FAILFAST

__all__ = ["read_archive"]


def read_archive(spark, path, *, format: str = "parquet", payload: str = "data", output: str = "messages",
                 keep=None, mode: str = FAILFAST, envelope: str = "auto", in_stream=None,
                 observation=None, header: bool = True, sep: str = ",", **change_options) -> DataFrame:
    """Read archive files (layouts: :mod:`pgoutput_codec.archive`) and decode them: the
    same rows as ``spark.read.format("pgoutput")`` (PySpark >= 4.0), through Spark's own
    Parquet/CSV readers, so it works on 3.5. ``keep`` defaults to every non-payload
    column. ``output``: "messages" (``decode_messages``) or "changes"
    (``decode_changes`` with its default ordering; ``change_options`` go to it:
    ``order_by``, ``tables``, ``replays``…)."""
    if output not in ("messages", "changes"):
        raise ValueError(f"output must be 'messages' or 'changes', got {output!r}")
    if change_options and output != "changes":
        raise ValueError(f"{sorted(change_options)}: options of output='changes'")
    if format == "parquet":
        df = spark.read.parquet(*([path] if isinstance(path, str) else path))
        hex_text = False
    elif format == "csv":
        df = (spark.read.option("header", header).option("sep", sep).option("escape", '"')
              .option("inferSchema", False).csv(path))
        hex_text = True
    else:
        raise ValueError(f"format must be 'parquet' or 'csv', got {format!r}")
    if payload not in df.columns:
        raise ValueError(f"payload column {payload!r} not in the archive (columns: {df.columns})")
    if output == "changes":
        if hex_text:  # bytea hex text → binary on the JVM; bad text → null → an error row
            df = df.withColumn(payload, F.unhex(F.regexp_replace(F.col(f"`{payload}`"), r"^\\?\\x", "")))
        return decode_changes(df, payload=payload, mode=mode, envelope=envelope, observation=observation,
                              **change_options)
    if keep is None:
        keep = [c for c in df.columns if c != payload]
    return decode_messages(df, payload=payload, keep=keep, mode=mode, envelope=envelope,
                           in_stream=in_stream, observation=observation,
                           payload_format="hex" if hex_text else "binary")
