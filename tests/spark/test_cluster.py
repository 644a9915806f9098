"""The package on executors that do not have it: what reaches them, and what does not.

On the standalone cluster (``make test-cluster``): the executors import pgoutput_codec
from the environment ``ship`` packed, unpacked in their own working directories, and
see nothing of the driver's files. Elsewhere: ``ship`` on a builder, and on Spark
Connect, where the archive is a session artifact.
"""

from __future__ import annotations

import os
import sys

import pytest
from conftest import CLUSTER, CONNECT

pytest.importorskip("pyspark")
from pgoutput_codec.packenv import ENV_NAME, pack_environment  # noqa: E402
from pgoutput_codec.spark.environment import PYTHON_CONF, ship  # noqa: E402


def _where(driver_paths):
    """A mapInPandas body: where each task's Python and pgoutput_codec come from, and
    what it sees of ``driver_paths``."""
    def where(batches):
        import os
        import sys

        import pgoutput_codec
        for b in batches:
            yield b.assign(package=pgoutput_codec.__file__, python=sys.executable, cwd=os.getcwd(),
                           seen=";".join(f"{p}={len(os.listdir(p)) if os.path.isdir(p) else -1}"
                                         for p in driver_paths))
    return where


def _tasks(spark, driver_paths=()):
    schema = "id long, package string, python string, cwd string, seen string"
    return spark.range(0, 8, numPartitions=4).mapInPandas(_where(list(driver_paths)), schema).collect()


@pytest.mark.on_cluster
def test_executors_import_the_package_shipped_to_their_own_directories(spark, cluster):
    rows = _tasks(spark)
    work = [str(d) for d in cluster.work_dirs()]
    dirs = set()
    for r in rows:
        # <worker dir>/work/<app>/<executor>/environment/...: each executor's own copy
        assert any(r.cwd.startswith(w + os.sep) for w in work), r
        env = os.path.join(r.cwd, ENV_NAME)
        assert r.python == os.path.join(env, "bin", "python")
        assert r.package.startswith(os.path.join(env, "lib") + os.sep), r
        dirs.add(r.cwd)
    assert len(dirs) == 2, "two executors, one per worker"


@pytest.mark.on_cluster
def test_nothing_of_the_driver_s_reaches_a_task(spark, cluster, tmp_path):
    if not cluster.isolated:
        pytest.skip("this kernel gives no unprivileged mount namespaces: the workers see the driver's files")
    package = os.path.dirname(sys.modules["pgoutput_codec"].__file__)
    (cluster.driver_tmp / "only-the-driver").write_text("x")
    (tmp_path / "shared").write_text("x")
    for r in _tasks(spark, [package, str(cluster.driver_tmp), str(tmp_path)]):
        seen = dict(kv.rsplit("=", 1) for kv in r.seen.split(";"))
        assert seen[package] == "0" and seen[str(cluster.driver_tmp)] == "0", r
        assert seen[str(tmp_path)] == "1", "test data stand for shared storage"


@pytest.mark.skipif(CLUSTER or CONNECT, reason="the builder of a classic session")
def test_ship_configures_a_builder_and_refuses_a_session(spark, tmp_path):
    from pyspark.sql import SparkSession

    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    b = ship(SparkSession.builder.config("spark.archives", "/x/other.zip#other"), archive)
    assert b._options["spark.archives"] == f"/x/other.zip#other,{archive}#{ENV_NAME}"
    assert b._options[PYTHON_CONF] == f"./{ENV_NAME}/bin/python"
    with pytest.raises(TypeError, match="builder"):
        ship(spark, archive)
    with pytest.raises(TypeError, match="artifact"):
        ship(SparkSession.builder.remote("sc://127.0.0.1:1"), archive)


@pytest.mark.skipif(not CONNECT, reason="a Spark Connect session (make test-connect)")
def test_ship_adds_the_environment_as_a_session_artifact(spark, tmp_path):
    """The tasks' Python is the artifact's. The package alone is packed (runtime=()), and a
    plain Python UDF needs nothing else: the session copies its artifacts into every
    streaming query it starts, so a full environment here would slow the tests after."""
    from pyspark.sql import functions as F

    ship(spark, pack_environment(tmp_path / "env.tar.gz", runtime=()))
    try:
        where = F.udf(lambda _: __import__("sys").executable, "string", useArrow=False)
        pythons = {r[0] for r in spark.range(0, 4, numPartitions=2).select(where("id")).collect()}
        assert pythons and all(p.endswith(os.path.join("", ENV_NAME, "bin", "python")) for p in pythons), pythons
    finally:
        spark.conf.unset(PYTHON_CONF)
