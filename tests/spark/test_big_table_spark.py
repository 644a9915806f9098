"""spark.mirror of a table of millions of rows on a driver of 512 MB whose results may not
pass 16 MB: the executors write the copy, the driver never holds its rows. Its own Spark
application (the driver's memory is fixed when its JVM starts), in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3_000_000

_RUN = """
import json, sys, warnings
warnings.simplefilter("ignore")
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("big-table")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "512m").config("spark.driver.maxResultSize", "16m")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("FATAL")
from pgoutput_codec.spark import decode_changes, mirror
changes = decode_changes(spark.read.parquet(sys.argv[1]), order_by="seq")
runs = mirror(changes, sys.argv[2])
print(json.dumps({"runs": [r._asdict() for r in runs],
                  "memory": spark.sparkContext.getConf().get("spark.driver.memory")}))
"""


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_a_table_of_millions_of_rows_on_a_driver_of_512_mb(tmp_path):
    from pgoutput_codec.lake import read_copy, table_path
    from pgoutput_codec.testing.archives import big_table_archive, write_archive

    archive = write_archive(big_table_archive(ROWS), tmp_path / "archive", files=8)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, "-c", _RUN, str(archive), str(tmp_path / "lake")], env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["memory"] == "512m"
    [run] = out["runs"]
    assert run["table"] == "public.t0000" and run["upserts"] == ROWS and run["version"] is not None
    copy = read_copy(table_path(tmp_path / "lake", "public.t0000"))
    assert len(copy) == ROWS and copy.column("id").to_numpy().sum() == ROWS * (ROWS - 1) // 2
    # more than the driver could have been handed: 16 MB of results, 512 MB of memory
    assert copy.nbytes > 16 << 20
