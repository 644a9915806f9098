"""Small helpers over Spark DataFrames that the change functions share: a DataFrame
collected to the driver as one Arrow table, a column by its exact name, and the
physical plan Spark runs, as text (classic or Spark Connect)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from . import types as ST
from .shipping import is_connect

__all__ = ["collect_arrow", "col", "physical_plan"]


def collect_arrow(df: DataFrame) -> pa.Table:
    """``df``'s rows on the driver as one Arrow table (its Spark schema's, when empty)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()   # PySpark 3.5
    if batches:
        return pa.Table.from_batches(batches)
    return ST.arrow_schema_for(df.schema).empty_table()


def col(name: str) -> Column:
    """The column named ``name`` exactly (dots and other characters quoted)."""
    return F.col(f"`{name}`")


def physical_plan(df: DataFrame) -> str:
    """The physical plan Spark runs for ``df``, as text (classic or Spark Connect)."""
    if is_connect(df.sparkSession):
        return df._explain_string(mode="simple")
    return df._jdf.queryExecution().executedPlan().toString()
