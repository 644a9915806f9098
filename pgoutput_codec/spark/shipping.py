"""What crosses between the driver, Spark and the Python workers: the package itself
(:func:`ship`, :func:`check_workers`), a value built on the driver (:func:`to_workers`),
a small DataFrame made on the driver (:func:`local_frame`), and a DataFrame's rows or
physical plan brought back to the driver.

The package on executors that do not have it: its compiled extensions reach them inside
a packed environment (:func:`pgoutput_codec.packenv.pack_environment`) that Spark unpacks
in each executor's working directory, and the executors' Python is the one in it. That
is Spark's own way (``spark.archives`` on a classic session, an archive artifact on
Spark Connect), so it works on standalone, YARN and Kubernetes alike: docs/cluster.md.
:func:`check_workers`: on a local master, whether the Python workers' interpreter
imports the package, asked on the driver before the first job.

A value built on the driver (a control plan): on classic Spark a broadcast, sent once to
each executor and read there as ``.value``. Spark Connect has neither SparkContext nor
broadcast (the client holds no JVM). Carried inside the UDFs that read it, the plan would
travel once per UDF (``decode_changes`` makes one per change field: 16 copies, 66 bytes
per transaction each) and within the server's message limit
(``spark.connect.grpc.maxInboundMessageSize``, 128 MiB): about 120 000 transactions. So
on Connect it is pickled once into a file that the session adds as an artifact
(``addArtifacts(file=True)``, streamed in chunks, no size limit), and each worker process
loads it once, by name, when first read (:class:`Shipped`). The Python data sources build
their plan in the process that plans the read and carry it in the partitions
(:class:`Held`), each only its own key range's part (``ControlPlan.for_keys``): Spark
pickles the reader into every task and each partition into its own, so a plan in the
reader, or whole in every partition, would be shipped and unpickled once per task.
Either way the workers read ``.value``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import uuid
import weakref
from collections import OrderedDict

import pyarrow as pa
import pyspark
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import PgoutputCodecError
from ..packenv import ENV_NAME, pack_environment
from . import types as ST

__all__ = ["Held", "Shipped", "is_connect", "to_workers", "collect_arrow", "local_frame", "col", "physical_plan",
           "ship", "check_workers", "WorkerPythonError", "EXECUTOR_PYTHON", "PYTHON_CONF"]


# --------------------------------------------------------------------------- a value built on the driver

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


# --------------------------------------------------------------------------- DataFrames back on the driver

def collect_arrow(df: DataFrame) -> pa.Table:
    """``df``'s rows on the driver as one Arrow table (its Spark schema's, when empty)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()   # PySpark 3.5
    if batches:
        return pa.Table.from_batches(batches)
    return ST.arrow_schema_for(df.schema).empty_table()


def local_frame(spark, rows: list, schema: T.StructType) -> DataFrame:
    """A DataFrame of ``rows`` (tuples in ``schema``'s order) made on the driver. From
    PySpark 4 on, built as Arrow: Spark plans it as a local table scan, and the job that
    feeds a broadcast of it starts no Python worker; a list of rows on PySpark 3.5 is an
    RDD of pickled rows, which its first use reads through Python workers in a job."""
    if _ARROW_FRAMES:
        target = ST.arrow_schema_for(schema)
        cols = list(zip(*rows, strict=True)) if rows else [()] * len(target)
        table = pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(cols, target, strict=True)], schema=target)
        return spark.createDataFrame(table, schema)
    return spark.createDataFrame(rows, schema)


#: PySpark's createDataFrame takes an Arrow table (4.0 on)
_ARROW_FRAMES = int(pyspark.__version__.split(".")[0]) >= 4


def col(name: str) -> Column:
    """The column named ``name`` exactly (dots and other characters quoted)."""
    return F.col(f"`{name}`")


def physical_plan(df: DataFrame) -> str:
    """The physical plan Spark runs for ``df``, as text (classic or Spark Connect)."""
    if is_connect(df.sparkSession):
        return df._explain_string(mode="simple")
    return df._jdf.queryExecution().executedPlan().toString()


# --------------------------------------------------------------------------- the package on the workers

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


class WorkerPythonError(PgoutputCodecError, RuntimeError):
    """Spark's Python workers run an interpreter that cannot import pgoutput_codec."""


#: (interpreter, PYTHONPATH, working directory) -> why it cannot import the package, or None
_PROBED: dict = {}
#: the probe: what unpickling a function of the package on a worker imports first
_PROBE = "import pgoutput_codec"
#: a probe slower than this is given up on: not known to fail, the job will tell
PROBE_TIMEOUT = 15
#: the sessions (or, for a call without one, SparkContexts) whose workers passed, in the
#: environment they passed in: (id, PYSPARK_PYTHON, PYSPARK_DRIVER_PYTHON, working
#: directory) -> a weak reference to the session, which tells an id taken again apart
_PASSED: dict = {}


def check_workers(spark=None) -> None:
    """Raise :class:`WorkerPythonError` when ``spark`` (default: the active session) runs
    on a local master and its Python workers' interpreter cannot import pgoutput_codec.

    PySpark starts its workers with ``spark.sql.execution.pyspark.python`` when set, else
    ``PYSPARK_PYTHON`` as it was when the SparkContext started, else ``python3`` from the
    ``PATH``: a script run as ``.venv/bin/python app.py`` without the venv on the ``PATH``
    has workers in another interpreter. Their functions refer to this package by name, so
    unpickling them fails before any code of ours runs there, deep in a Java stack trace;
    this says why in one line, with the fix. On a local master the workers run on this
    machine with this process's environment: one probe (that interpreter importing the
    package, under a second; given up on after ``PROBE_TIMEOUT`` seconds) tells, once per
    interpreter, none when it is this one. A cluster's executors (``ship``, the nodes'
    install) and a Spark Connect server run their own Python, which the driver does not
    see: no check there.

    Every Spark function of the package runs this first, so a session that passed is not
    asked again (its settings live in the JVM, each read a round trip) while
    ``PYSPARK_PYTHON``, ``PYSPARK_DRIVER_PYTHON`` and the working directory stay as they
    were: an interpreter set with ``spark.conf.set`` after that goes unchecked. A session
    that fails is asked again on every call, so the fix the error gives takes at once."""
    owner = spark if spark is not None else _active_context()
    if owner is not None:
        key = (id(owner), os.environ.get("PYSPARK_PYTHON"), os.environ.get("PYSPARK_DRIVER_PYTHON"), os.getcwd())
        ref = _PASSED.get(key)
        if ref is not None and ref() is owner:
            return
    if _check(spark) and owner is not None:
        for k in [k for k, r in _PASSED.items() if r() is None]:
            del _PASSED[k]
        try:
            _PASSED[key] = weakref.ref(owner)
        except TypeError:       # (no weak references to it: asked on every call)
            pass


def _active_context():
    """The SparkContext of a call without a session, read without a round trip to the JVM
    (the active session is not: several); None when there is none or a Spark Connect
    session may be the active one (a local Connect server has a context here too)."""
    try:
        from pyspark.sql.utils import is_remote
    except ImportError:
        return None
    if is_remote():
        return None
    from pyspark import SparkContext
    return SparkContext._active_spark_context


def _check(spark) -> bool:
    """Raise :class:`WorkerPythonError` as :func:`check_workers` says; False when there
    is no session to check (one may come later)."""
    if spark is None:
        from pyspark.sql import SparkSession
        spark = SparkSession.getActiveSession()
        if spark is None:
            return False
    if is_connect(spark):
        return True
    sc = spark.sparkContext
    if not str(sc.master).startswith("local"):
        return True
    conf = spark.conf.get(PYTHON_CONF, None)
    exe = conf or sc.pythonExec
    if conf:
        source = PYTHON_CONF
    elif os.environ.get("PYSPARK_PYTHON") == exe:
        source = "PYSPARK_PYTHON"
    elif os.sep not in exe:
        source = f"{exe} on the PATH: PYSPARK_PYTHON was unset when the session started"
    else:
        source = "PYSPARK_PYTHON when the session started"
    if os.sep in exe and not os.path.isabs(exe):
        return True   # relative to the executors' directory (ship's ./environment/bin/python)
    env = {**os.environ, **dict(sc.environment)}
    includes = list(getattr(sc, "_python_includes", None) or ())   # addPyFile, --py-files: on the workers' path
    if includes:
        from pyspark import SparkFiles
        root = SparkFiles.getRootDirectory()
        env["PYTHONPATH"] = os.pathsep.join([*(os.path.join(root, f) for f in includes),
                                             *filter(None, [env.get("PYTHONPATH")])])
    path = exe if os.sep in exe else shutil.which(exe, path=env.get("PATH"))
    if path is not None and os.path.abspath(path) == os.path.abspath(sys.executable):
        return True
    key = (path or exe, env.get("PYTHONPATH"), os.getcwd())
    if key not in _PROBED:
        _PROBED[key] = _probe(path, exe, env)
    why = _PROBED[key]
    if why is not None:
        raise WorkerPythonError(
            f"Spark's Python workers run {path or exe} ({source}), which cannot import pgoutput_codec ({why}): "
            f"set PYSPARK_PYTHON={sys.executable} before the session starts, or "
            f"spark.conf.set('{PYTHON_CONF}', '{sys.executable}'), or ship the package with "
            f"pgoutput_codec.spark.ship(builder) (docs/cluster.md)")
    return True


def _probe(path, exe, env):
    """Why ``path`` cannot import the package (the last line of its error), or None."""
    if path is None:
        return f"{exe} is not on the PATH"
    try:
        # the working directory is on the workers' sys.path too (python -m pyspark.daemon)
        r = subprocess.run([path, "-c", _PROBE], env=env, cwd=os.getcwd(), capture_output=True, text=True,
                           timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None          # slow, not known to fail: the job will tell
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror}"
    if r.returncode == 0:
        return None
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {r.returncode}"
