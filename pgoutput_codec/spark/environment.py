"""pgoutput_codec on executors that do not have it: :func:`ship`.

The package's compiled extensions reach the executors inside a packed environment
(:func:`pgoutput_codec.packenv.pack_environment`) that Spark unpacks in each executor's
working directory, and the executors' Python is the one in it. That is Spark's own way
(``spark.archives`` on a classic session, an archive artifact on Spark Connect), so it
works on standalone, YARN and Kubernetes alike: docs/cluster.md.
"""

from __future__ import annotations

import os
import sys

from ..packenv import ENV_NAME, pack_environment
from .shipping import is_connect

__all__ = ["ship", "EXECUTOR_PYTHON", "PYTHON_CONF"]

#: the executors' Python, relative to their working directory
EXECUTOR_PYTHON = f"./{ENV_NAME}/bin/python"
#: the SQL setting that names the executors' Python (a runtime setting: Spark Connect too)
PYTHON_CONF = "spark.sql.execution.pyspark.python"


def ship(target, archive=None, *, python_prefix=None):
    """``target`` set up so that its executors import pgoutput_codec from a packed
    environment, and returned.

    ``target``: a ``SparkSession.Builder`` (classic Spark: the executors' Python is fixed
    when the session starts), or a Spark Connect session (the archive becomes a session
    artifact). ``archive``: an archive built ahead of time (``pgoutput-codec pack``; a
    local path, or a URL the cluster reads, such as ``hdfs://``); default: built here,
    or found from an earlier call (:func:`~pgoutput_codec.packenv.pack_environment`, with
    ``python_prefix``).

    The executors' Python is set by ``spark.sql.execution.pyspark.python`` (a path inside
    the unpacked archive), which Spark reads for every Python UDF, Arrow map and data
    source read on the executors. The Python processes the driver starts itself (a
    Python data source plans its read in one) keep the driver's interpreter: on a
    classic session ``PYSPARK_PYTHON``, when unset, is set to it in this process's
    environment (PySpark's own default is whatever ``python3`` is on the ``PATH``).
    """
    path = str(archive) if archive is not None else str(pack_environment(python_prefix=python_prefix))
    if "://" not in path:
        path = os.path.abspath(path)
    spec = f"{path}#{ENV_NAME}"
    if is_connect(target):
        target.addArtifacts(spec, archive=True)
        target.conf.set(PYTHON_CONF, EXECUTOR_PYTHON)
        return target
    if not hasattr(target, "config") or hasattr(target, "sparkContext"):
        raise TypeError("ship() takes SparkSession.builder (a classic session's executors are started "
                        "with it) or a Spark Connect session")
    if _builder_option(target, "spark.remote"):
        raise TypeError("a Spark Connect session takes its environment as an artifact: "
                        "ship(SparkSession.builder.remote(url).getOrCreate())")
    before = _builder_option(target, "spark.archives")
    target = target.config("spark.archives", f"{before},{spec}" if before else spec)
    target = target.config(PYTHON_CONF, EXECUTOR_PYTHON)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return target


def _builder_option(builder, key):
    # the Builder keeps its options in a dict and has no getter for them
    options = getattr(builder, "_options", None) or {}
    return options.get(key)
