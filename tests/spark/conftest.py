"""One local SparkSession for the whole test session (JVM start-up is the expensive part).

local[2], loopback only, UI off, quiet logs, 2 shuffle partitions, small Arrow batches
(so a partition spans several batches and the stream state is carried between them).
Workers run this interpreter (PYSPARK_PYTHON) and import pgoutput_codec from the
repository (PYTHONPATH), so the in-place built extensions are the ones tested.
Skipped, with the reason shown, when PySpark or a Java runtime is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
#: the shared test helpers (archive_model, identity_moves, test_changes …) import by name,
#: at module level too (a test's parameters may come from them)
TESTS = str(Path(ROOT) / "tests")
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
#: PGOUTPUT_CODEC_SPARK_CONNECT=1: the session is a Spark Connect client (``make test-connect``)
CONNECT = os.environ.get("PGOUTPUT_CODEC_SPARK_CONNECT") == "1"
#: Arrow batch size of the session: small, so that state carrying across batches is exercised
BATCH = 700


def _java():
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="PySpark is not installed (pip install '.[spark]')")
    if not _java():
        pytest.skip("no Java runtime (java not on PATH and JAVA_HOME unset): the Spark tests need a JVM")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if CONNECT:   # a local Spark Connect server, and this process its client
        pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect] (grpcio, zstandard, ...)")
        builder = builder.remote("local[2]")
    else:
        builder = builder.master("local[2]")
    session = (
        builder
        .appName("pgoutput_codec-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH))
        .config("spark.driver.memory", "768m")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .getOrCreate()
    )
    if not CONNECT:
        session.sparkContext.setLogLevel("FATAL")
    yield session
    session.stop()
