"""``register``: the SQL names of the decoders in a Spark session — the column functions
as SQL functions and, on PySpark >= 4.0, the ``pgoutput`` data source."""

from __future__ import annotations

from .datasource import HAS_DATASOURCE, PgoutputDataSource
from .environment import check_workers
from .functions import opengauss_udf, pgoutput_udf
from .modes import PERMISSIVE

__all__ = ["register"]


def register(spark) -> None:
    """Register for SQL: ``pgoutput_decode(payload)`` (FAILFAST),
    ``pgoutput_decode_permissive(payload)``, ``opengauss_decode(payload)`` ('b' style,
    array of records), and, on PySpark >= 4.0, the ``pgoutput`` data source."""
    check_workers(spark)
    spark.udf.register("pgoutput_decode", pgoutput_udf())
    spark.udf.register("pgoutput_decode_permissive", pgoutput_udf(mode=PERMISSIVE))
    spark.udf.register("opengauss_decode", opengauss_udf())
    if HAS_DATASOURCE:
        spark.dataSource.register(PgoutputDataSource)
