"""The package on executors that do not have it: what reaches them, and what does not.

On the standalone cluster (``make test-cluster``): the executors import pgoutput_codec
from the environment ``ship`` packed, unpacked in their own working directories, and
see nothing of the driver's files. Elsewhere: ``ship`` on a builder, and on Spark
Connect, where the archive is a session artifact; on a local master, workers whose
interpreter lacks the package are named before a job.
"""

from __future__ import annotations

import os
import sys

import pytest
from conftest import CLUSTER, CONNECT

pytest.importorskip("pyspark")
from pgoutput_codec.packenv import ENV_NAME, pack_environment  # noqa: E402
from pgoutput_codec.spark.shipping import PYTHON_CONF, ship  # noqa: E402


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


_README_WITHOUT_THE_VENV = '''
import json, sys
from pyspark.sql import SparkSession
from pgoutput_codec.data import sample_archive_path
from pgoutput_codec.spark import decode_changes, snapshot

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("FATAL")

def readme():
    archive = spark.read.parquet(sample_archive_path())
    changes = decode_changes(archive, order_by="seq")
    changes.groupBy("table", "op").count().orderBy("table", "op").show()
    return snapshot(changes, "public.customers").count()

try:
    readme()
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}), flush=True)
    spark.conf.set("spark.sql.execution.pyspark.python", sys.executable)   # the fix the message gives
    print(json.dumps({"rows": readme()}), flush=True)
else:
    print(json.dumps({"error": None}), flush=True)
'''


@pytest.mark.skipif(CLUSTER or CONNECT, reason="a classic session on a local master, in its own process")
# the check's 3.5 path (the same SparkContext fields) runs in every test of that lane; this one
# needs the package installed in the driver's venv, where the 3.5 lane has it on PYTHONPATH only
@pytest.mark.same_code_on_spark35
def test_workers_that_cannot_import_the_package_are_named_before_a_job(tmp_path):
    """The README's example run as ``.venv/bin/python example.py`` without the venv on the
    ``PATH``: PySpark's workers run ``python3`` from the ``PATH``, another interpreter,
    which cannot import the package. The first of our functions says so in one line, with
    the fix, before any job fails deep in a Java stack trace; the fix it gives works."""
    import json
    import shutil
    import subprocess

    java = shutil.which("java") or os.path.join(os.environ.get("JAVA_HOME", "/nonexistent"), "bin", "java")
    if not os.path.exists(java):
        pytest.skip("no Java runtime: the Spark tests need a JVM")
    other = tmp_path / "other"   # a bare interpreter of the same version: no pyarrow, no pgoutput_codec
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", PYTHON_CONF)}
    env["PATH"] = os.pathsep.join([str(other / "bin"), os.path.dirname(java), env.get("PATH", "")])
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    script = tmp_path / "example.py"
    script.write_text(_README_WITHOUT_THE_VENV)
    r = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert r.returncode == 0 and lines, (r.stdout[-3000:], r.stderr[-3000:])
    first = lines[0]
    assert first["error"] == "WorkerPythonError", (first, r.stderr[-3000:])
    message = first["message"]
    assert "\n" not in message
    assert str(other / "bin" / "python3") in message and "cannot import pgoutput_codec" in message, message
    assert f"PYSPARK_PYTHON={sys.executable}" in message and "ship(" in message, message
    assert "at org.apache.spark" not in r.stderr and "PythonException" not in r.stderr, r.stderr[-3000:]
    assert lines[1] == {"rows": 38}


@pytest.mark.skipif(CLUSTER or CONNECT, reason="a classic session on a local master")
@pytest.mark.same_code_on_spark35      # (that lane imports the package from PYTHONPATH, which this test clears)
def test_the_worker_check_asks_again_until_it_passes_then_no_more(spark, tmp_path, monkeypatch):
    """Every Spark function of the package runs the check first (``table_info`` once per
    table of a mirror): once a session's workers pass, a call costs next to nothing. One
    that fails is asked again on the next call, so that the fix the error gives
    (``spark.conf.set``) lets that call through."""
    import subprocess

    from pgoutput_codec.spark import shipping

    base = getattr(sys, "_base_executable", None) or sys.executable
    bare = tmp_path / "bare"       # no pyarrow, no pgoutput_codec
    subprocess.run([base, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    fixed = tmp_path / "python"    # another path to this interpreter: it is probed, and imports the package
    fixed.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    fixed.chmod(0o755)
    probed = []

    def probe(path, exe, env):
        probed.append(path)
        return real_probe(path, exe, env)
    real_probe = shipping._probe
    monkeypatch.setattr(shipping, "_probe", probe)
    # the workers' path has the working directory and PYTHONPATH on it: neither may hold the package here
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)

    session = spark.newSession()   # one no call of the other tests has checked
    session.conf.set(PYTHON_CONF, str(bare / "bin" / "python"))
    for _ in range(2):
        with pytest.raises(shipping.WorkerPythonError, match="cannot import pgoutput_codec"):
            shipping.check_workers(session)
    assert probed == [str(bare / "bin" / "python")], "one probe per interpreter"
    session.conf.set(PYTHON_CONF, str(fixed))
    shipping.check_workers(session)
    assert probed[1:] == [str(fixed)]

    def asked(spark):
        raise AssertionError("a session that passed was asked again")
    monkeypatch.setattr(shipping, "_check", asked)
    for _ in range(3):          # (asking again would read the JVM's settings: round trips)
        shipping.check_workers(session)
    assert len(probed) == 2
