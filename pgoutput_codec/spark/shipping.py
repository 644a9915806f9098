"""How a value built on the driver (a control plan) reaches the Python workers.

Classic Spark: a broadcast, sent once to each executor and read there as ``.value``.
Spark Connect has neither SparkContext nor broadcast (the client holds no JVM). Carried
inside the UDFs that read it, the plan would travel once per UDF (``decode_changes``
makes one per change field: 16 copies, 66 bytes per transaction each) and within the
server's message limit (``spark.connect.grpc.maxInboundMessageSize``, 128 MiB): about
120 000 transactions. So on Connect it is pickled once into a file that the session
adds as an artifact (``addArtifacts(file=True)``, streamed in chunks, no size limit),
and each worker process loads it once, by name, when first read (:class:`Shipped`).
The Python data sources build their plan in the process that plans the read and carry
it in the partitions (:class:`Held`), each only its own key range's part
(``ControlPlan.for_keys``): Spark pickles the reader into every task and each partition
into its own, so a plan in the reader, or whole in every partition, would be shipped and
unpickled once per task. Either way the workers read ``.value``.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import uuid
from collections import OrderedDict

__all__ = ["Held", "Shipped", "is_connect", "to_workers"]

#: plans a worker process keeps loaded (a reused worker serves query after query)
_KEEP = 4
_LOADED: OrderedDict = OrderedDict()


class Held:
    """A value carried as it is, read like a broadcast (``.value``)."""

    def __init__(self, value):
        self.value = value


class Shipped:
    """A value in a Spark Connect file artifact (``name``), loaded once per worker
    process when first read."""

    def __init__(self, name: str):
        self.name = name

    @property
    def value(self):
        v = _LOADED.get(self.name)
        if v is None:
            # here, not at the top: read on the workers; a Spark Connect client alone
            # (pyspark-client) has no SparkFiles
            from pyspark import SparkFiles
            with open(SparkFiles.get(self.name), "rb") as f:
                v = pickle.load(f)
            _LOADED[self.name] = v
            while len(_LOADED) > _KEEP:
                _LOADED.popitem(last=False)
        else:
            _LOADED.move_to_end(self.name)
        return v


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (``SparkSession.builder.remote``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def to_workers(spark, value):
    """``value`` for the workers: a broadcast, or on Spark Connect :class:`Shipped`."""
    if not is_connect(spark):
        return spark.sparkContext.broadcast(value)
    name = f"pgoutput-codec-{uuid.uuid4().hex}.pkl"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        spark.addArtifacts(path, file=True)
    return Shipped(name)
