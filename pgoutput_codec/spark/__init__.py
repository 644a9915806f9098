"""Spark front end of pgoutput_codec (PySpark 3.5 and 4.x).

- :func:`from_pgoutput` — column function: binary payload → struct of the decoded message
  (SQL: ``pgoutput_decode(payload)`` after :func:`register`);
- :func:`decode_messages` — DataFrame → one column per message field (``mapInArrow``),
  or only the ``fields`` named (Spark never prunes a ``mapInArrow`` result), with
  FAILFAST / PERMISSIVE / DROPMALFORMED (:mod:`.modes`);
- :func:`from_opengauss` / :func:`opengauss_messages` — the same for openGauss frames
  (a frame expands to many records);
- :func:`read_archive` and, on PySpark >= 4.0, ``spark.read.format("pgoutput")``
  (:mod:`.datasource`) — archive files (Parquet, CSV/COPY exports) to decoded rows;
  ``spark.readStream.format("pgoutput")`` (:mod:`.streamsource`) — a lake that grows,
  each run giving what landed since, exactly once (offsets are checkpoints).

Modules, each importing only those before it: :mod:`.types` (Arrow → Spark types: the
one converter), :mod:`.modes` (parse modes), :mod:`.shipping` (a driver-side value to
the workers: a broadcast, or inside the query on Spark Connect, where every function
here also runs), :mod:`.environment` (the package itself, to executors that lack it),
:mod:`.batchcache` (one decode per Arrow batch for per-field UDFs),
:mod:`.rowfilter` (Spark's own tests on payload bytes), :mod:`.dataframes`,
:mod:`.orderkey` (arrival order); :mod:`.functions` (message column/DataFrame
functions); the change rows: :mod:`.counts`, :mod:`.changetype`, :mod:`.decoded` (what a
decoder knows about a DataFrame it returned), :mod:`.mappers` (the workers' bodies),
:mod:`.tableinfo`, :mod:`.pass2`, :mod:`.opengauss_changes`, :mod:`.changes`
(``decode_changes``); one table typed and rebuilt: :mod:`.crossing`, :mod:`.typedrows`,
:mod:`.identity`, :mod:`.toast`, :mod:`.spans`, :mod:`.tables`; :mod:`.transcode`;
archive files: :mod:`.archivefiles`, :mod:`.streamsource`, :mod:`.datasource`,
:mod:`.reading` (``read_archive``); :mod:`.sql` (``register``); :mod:`.mirror` (Delta
copies kept through :mod:`pgoutput_codec.lake`'s writer).

Which Spark mechanism, and why (details in :mod:`.functions`):

- ``from_pgoutput`` on PySpark >= 4.1: a struct of scalar ``arrow_udf`` calls, one per
  field, sharing one decode per Arrow batch: Spark evaluates only the fields a query
  reads (an aggregate over three fields of 5 M messages: 3.7 s; the whole struct from
  one UDF: 13.4 s; the bare transfer: 2.6-2.9 s, ``bench/spark_bench.py``).
- other column functions: iterator ``arrow_udf`` on PySpark >= 4.1 (Arrow in, Arrow out,
  the Cython decoder over the batch's buffers); iterator ``pandas_udf`` on 3.5/4.0, the
  only vectorized column UDF there (flat columns handed back as ``pd.ArrowDtype``, but
  Spark's pandas→Arrow converter walks the nested list<struct> columns row by row in
  Python).
- DataFrame functions: ``mapInArrow`` (3.3+): no pandas, can drop and expand rows, and
  is the cheapest way in: use ``decode_messages`` for bulk work.
- ``decode_changes`` on PySpark >= 4.1 (FAILFAST): one scalar ``arrow_udf`` per change
  field, like ``from_pgoutput``, with the rows chosen before decoding by Spark filters on
  the tag byte, order key, relation id and xid bytes (a 35-byte head UDF only where the
  plan is too long to say as a filter): a count decodes nothing. Elsewhere
  (PERMISSIVE, DROPMALFORMED, observation, 3.5/4.0) ``mapInArrow``, whose result
  crosses into Spark rows whole (see :mod:`.changes`).
- grouped ``applyInArrow`` and Arrow UDTFs are not used: nothing here needs a shuffle
  to one group, and a UDTF adds a lateral join where ``mapInArrow`` streams batches.

Every field of every row, measured (``tests/spark/bench_spark.py``: the real-server
corpus ×20 = 141 000 payloads, 93 MB, cached, local[2] on a shared 2-core machine, all
decoded columns to the noop sink, one warm-up run, best of 5, PySpark 4.3):

======================================  ==========
``decode_batch``, one process           82 ms
``decode_messages`` (mapInArrow)        672 ms
``from_pgoutput``, per-field arrow_udf  676 ms
``from_pgoutput``, pandas_udf           867 ms
one iterator arrow_udf for the struct   419 ms
select payload only                     60 ms
======================================  ==========

The decoder is a small part of the Spark time: the rest is moving the payload bytes
through Arrow IPC and turning nested Arrow into Spark rows on the JVM side. When every
field is read, the 43 per-field calls cost more per batch than one struct-valued UDF
(Python worker overhead per call and per column); when a query reads a few fields,
they cost far less. ``mapInArrow`` has no struct column to project and no per-row
pandas work. (On PySpark 3.5 the same harness measured ``decode_messages`` 1.95 s and
``from_pgoutput`` pandas_udf 3.66 s, in an earlier, slower state of the machine.)

Spark executors must be able to import ``pgoutput_codec``: install the wheel on the
nodes, or :func:`ship` it as a packed environment (:mod:`.environment`, docs/cluster.md).
"""

from .functions import (
    DEFAULT_KEEP,
    HAS_ARROW_UDF,
    decode_messages,
    from_opengauss,
    from_pgoutput,
    opengauss_messages,
)
from .environment import WorkerPythonError, ship
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, MalformedPayloadError
from .reading import read_archive
from .sql import register
from .types import CORRUPT_RECORD, LSN_TYPE, MESSAGE_TYPE, message_type, spark_type

__all__ = [
    "from_pgoutput", "decode_messages", "from_opengauss", "opengauss_messages", "read_archive",
    "register", "FAILFAST", "PERMISSIVE", "DROPMALFORMED", "MalformedPayloadError",
    "MESSAGE_TYPE", "message_type", "spark_type", "CORRUPT_RECORD", "LSN_TYPE",
    "DEFAULT_KEEP", "HAS_ARROW_UDF", "ship", "WorkerPythonError",
]

# public as well (README, docs/spark.md), though not in ``__all__``
from .changes import checkpoint_of, decode_changes, replayed_of  # noqa: E402,F401
from .opengauss_changes import opengauss_change_type, opengauss_decode_changes  # noqa: E402,F401
from .tables import history, net_changes, snapshot, table_changes  # noqa: E402,F401
from .transcode import transcode  # noqa: E402,F401
from .mirror import mirror  # noqa: E402,F401
