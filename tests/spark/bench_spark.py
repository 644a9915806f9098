"""Cost of the Spark mechanisms around the same Cython decoder (not a test).

    PYTHONPATH=. .venv/bin/python tests/spark/bench_spark.py [copies]
    PYTHONPATH=. .venv-spark35/bin/python tests/spark/bench_spark.py [copies]

The real-server corpus repeated ``copies`` times, cached in Spark, 2 partitions; each
variant writes every decoded column to the ``noop`` sink (each run once to warm up, then best of 5).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])

import pyspark  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from pgoutput_codec import decode_batch  # noqa: E402
from pgoutput_codec.spark import HAS_ARROW_UDF, decode_messages, from_pgoutput  # noqa: E402
from pgoutput_codec.spark.messages import pgoutput_udf  # noqa: E402


def best(f, n=5):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    copies = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    corpus = pq.read_table(ROOT / "tests" / "data" / "corpus.parquet").select(["seq", "lsn", "xid", "data"])
    table = pa.concat_tables([corpus] * copies)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("FATAL")
    df = spark.createDataFrame(table.to_pandas()).repartition(2).cache()
    n = df.count()
    print(f"PySpark {pyspark.__version__}: {n} payloads, {sum(len(b) for b in table.column('data').to_pylist())} bytes")
    t = best(lambda: decode_batch(table.column("data")))
    print(f"  decode_batch, one process      {t * 1000:8.1f} ms  ({n / t / 1e6:.2f} M rows/s)")
    variants = {"decode_messages (mapInArrow)": lambda: decode_messages(df, mode="PERMISSIVE")}
    for impl in (["arrow", "pandas"] if HAS_ARROW_UDF else ["pandas"]):
        variants[f"from_pgoutput ({impl}_udf)"] = (
            lambda impl=impl: df.select(from_pgoutput("data", mode="PERMISSIVE", impl=impl).alias("m")).select("m.*"))
    if HAS_ARROW_UDF:   # the whole struct from one iterator UDF (SQL pgoutput_decode), for comparison
        whole = pgoutput_udf(mode="PERMISSIVE", impl="arrow")
        variants["one struct UDF (arrow_udf iter)"] = lambda: df.select(whole("data").alias("m")).select("m.*")
    variants["baseline: select data (no decode)"] = lambda: df.select("data")
    for make in variants.values():   # warm-up: the JVM compiles each plan's code on first runs
        make().write.format("noop").mode("overwrite").save()
    for name, make in variants.items():
        t = best(lambda make=make: make().write.format("noop").mode("overwrite").save())
        print(f"  {name:32s} {t * 1000:8.1f} ms  ({n / t / 1e3:.0f} k rows/s)")
    spark.stop()


if __name__ == "__main__":
    main()
