"""One SparkSession for the whole test session (JVM start-up is the expensive part).

local[2], loopback only, UI off, quiet logs, 2 shuffle partitions, small Arrow batches
(so a partition spans several batches and the stream state is carried between them).
Workers run this interpreter (PYSPARK_PYTHON) and import pgoutput_codec from the
repository (PYTHONPATH), so the in-place built extensions are the ones tested.
Skipped, with the reason shown, when PySpark or a Java runtime is missing.

PGOUTPUT_CODEC_SPARK_CLUSTER=1 (``make test-cluster``, the tests marked ``on_cluster``):
the session's master is a standalone cluster of two one-core workers, each its own
process (:class:`~pgoutput_codec.testing.sparkcluster.StandaloneCluster`); the package
reaches the executors only through ``ship`` (a packed environment in ``spark.archives``).
The workers cannot see the package's source tree nor the driver's temporary directory
(an empty mount over each, where the kernel allows it): what a task needs from the
driver must come through Spark. Test data (pytest's ``tmp_path``) stands for shared
storage and is seen by all.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
#: the shared test helpers (archive_model, identity_moves, change_cases …) import by name,
#: at module level too (a test's parameters may come from them)
TESTS = str(Path(ROOT) / "tests")
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
#: PGOUTPUT_CODEC_SPARK_CONNECT=1: the session is a Spark Connect client (``make test-connect``)
CONNECT = os.environ.get("PGOUTPUT_CODEC_SPARK_CONNECT") == "1"
#: PGOUTPUT_CODEC_SPARK_CLUSTER=1: the session runs on a standalone cluster (``make test-cluster``)
CLUSTER = os.environ.get("PGOUTPUT_CODEC_SPARK_CLUSTER") == "1"
#: The JVM of a test session: the client compiler only (C2 spends tens of CPU seconds
#: compiling Spark for the long runs of a server, which a test session never has) and one
#: GC thread (the 2-core CI machine runs two sessions at once). Measured on the rules
#: tests' first test, the JVM's warm-up: 34.6 -> 17.2 CPU s, 58 -> 34 s.
JVM_OPTIONS = "-Dlog4j2.level=ERROR -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: PySpark 4's local sessions (classic and Connect) run every query interpreted: the tests'
#: hundreds of distinct queries over a few rows each spent more on compiling their
#: generated code (Janino, then the JIT) than on running it (the rules tests after the
#: first: 31.3 -> 21.8 JVM CPU s, 76 -> 52 s). The PySpark 3.5 lane and the standalone cluster keep
#: Spark's defaults, so the generated code of the same queries runs there.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
#: Arrow batch size of the session: small, so that state carrying across batches is exercised
BATCH = 700


def _java():
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """The standalone cluster of the session (PGOUTPUT_CODEC_SPARK_CLUSTER=1), with
    ``driver_tmp``: the driver's temporary directory, which the workers cannot see."""
    if not CLUSTER:
        pytest.skip("runs on a standalone cluster (make test-cluster)")
    from pgoutput_codec.testing.sparkcluster import StandaloneCluster

    tmp_path_factory.getbasetemp()   # test data stay where the workers see them
    driver_tmp = Path(tempfile.mkdtemp(prefix="pgoutput-codec-driver-"))
    package = Path(ROOT) / "pgoutput_codec"
    with StandaloneCluster(workers=2, cores=1, memory="1g", hide=[package, driver_tmp]) as c:
        c.driver_tmp = driver_tmp
        before, tempfile.tempdir = tempfile.tempdir, str(driver_tmp)
        try:
            yield c
        finally:
            tempfile.tempdir = before
            shutil.rmtree(driver_tmp, ignore_errors=True)


@pytest.fixture
def driver_only(request, tmp_path):
    """A directory for what only the driver may read or write (a stream's checkpoint
    location): on the cluster, inside the driver's temporary directory, which the workers
    cannot see; elsewhere, in ``tmp_path``."""
    if CLUSTER:
        return Path(tempfile.mkdtemp(prefix="driver-only-", dir=request.getfixturevalue("cluster").driver_tmp))
    d = tmp_path / "driver-only"
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def spark(request):
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
    if CLUSTER:
        from pgoutput_codec.packenv import pack_environment
        from pgoutput_codec.spark.shipping import ship

        c = request.getfixturevalue("cluster")
        archive = pack_environment(c.base_dir / "environment.tar.gz")
        # both executors registered before the first job runs, so that every test sees two
        builder = ship(builder.master(c.url), archive).config("spark.local.dir", str(c.driver_tmp)) \
            .config("spark.executor.memory", "1g") \
            .config("spark.scheduler.minRegisteredResourcesRatio", "1.0") \
            .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "120s")
    elif CONNECT:   # a local Spark Connect server, and this process its client
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
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
    )
    import pyspark
    if not CLUSTER and int(pyspark.__version__.split(".")[0]) >= 4:
        for k, v in INTERPRETED.items():
            session = session.config(k, v)
    session = session.getOrCreate()
    if not CONNECT:
        session.sparkContext.setLogLevel("FATAL")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Every option set of one server, each as 5 Parquet files (change_corpus.py)."""
    from change_corpus import OPTION_SETS, VERSION, archive, write_files
    root = tmp_path_factory.mktemp("archives")
    return {o: write_files(archive(VERSION, o), root / o, 5) for o in OPTION_SETS}
