"""How a value built on the driver (a control plan) reaches the Python workers.

Classic Spark: a broadcast, sent once to each executor and read there as ``.value``.
Spark Connect has neither SparkContext nor broadcast (the client holds no JVM): the
value is pickled into the UDF that reads it and travels with the query, within the
Connect server's message limit (``spark.connect.grpc.maxInboundMessageSize``, 128 MiB
by default). The Python data sources build their plan where it is read and hold it the
same way. Either way the workers read ``.value``.
"""

from __future__ import annotations

__all__ = ["Held", "is_connect", "ship"]


class Held:
    """A value carried as it is, read like a broadcast (``.value``)."""

    def __init__(self, value):
        self.value = value


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (``SparkSession.builder.remote``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def ship(spark, value):
    """``value`` for the workers: a broadcast, or on Spark Connect :class:`Held`."""
    if is_connect(spark):
        return Held(value)
    return spark.sparkContext.broadcast(value)
