"""Spark front end of pgoutput_codec (PySpark 3.5 and 4.x).

- :func:`from_pgoutput` — column function: binary payload → struct of the decoded message
  (SQL: ``pgoutput_decode(payload)`` after :func:`register`);
- :func:`decode_messages` — DataFrame → one column per message field (``mapInArrow``),
  with FAILFAST / PERMISSIVE / DROPMALFORMED (:mod:`.modes`);
- :func:`from_opengauss` / :func:`opengauss_messages` — the same for openGauss frames
  (a frame expands to many records);
- :func:`read_archive` and, on PySpark >= 4.0, ``spark.read.format("pgoutput")``
  (:mod:`.datasource`) — archive files (Parquet, CSV/COPY exports) to decoded rows.

Modules: :mod:`.types` (Arrow → Spark types: the one converter), :mod:`.modes` (parse
modes), :mod:`.functions` (column/DataFrame functions, SQL registration),
:mod:`.archive` (archive layouts, bytea hex), :mod:`.datasource` (Python data source).

Which Spark mechanism, and why (details in :mod:`.functions`):
- column functions: iterator ``arrow_udf`` on PySpark >= 4.1 (Arrow in, Arrow out, the
  Cython decoder over the batch's buffers); iterator ``pandas_udf`` on 3.5/4.0, the only
  vectorized column UDF there (flat columns handed back as ``pd.ArrowDtype``, but Spark's
  pandas→Arrow converter walks the nested list<struct> columns row by row in Python).
- DataFrame functions: ``mapInArrow`` (3.3+): no pandas, can drop and expand rows, and
  is the cheapest way in: use ``decode_messages`` for bulk work.
- grouped ``applyInArrow`` and Arrow UDTFs are not used: nothing here needs a shuffle
  to one group, and a UDTF adds a lateral join where ``mapInArrow`` streams batches.

Measured (``tests/spark/bench_spark.py``: the real-server corpus ×20 = 141 000 payloads,
93 MB, cached, local[2] on a shared 2-core machine, all decoded columns to the noop sink,
best of 3):

=============================  ==============  ==============
                               PySpark 4.3     PySpark 3.5
=============================  ==============  ==============
``decode_batch``, one process  48 ms           54 ms
``decode_messages``            1.55 s          1.95 s
``from_pgoutput`` arrow_udf    2.35 s          (none)
``from_pgoutput`` pandas_udf   2.89 s          3.66 s
select payload only            0.11 s          0.10 s
=============================  ==============  ==============

The decoder is ~3 % of the Spark time: the rest is moving ~2× the payload bytes through
Arrow IPC and turning nested Arrow into Spark rows on the JVM side. arrow_udf beats
pandas_udf by the pandas round trip of the nested columns; ``mapInArrow`` beats both
(no struct column to project, no per-row pandas work).

Spark workers must be able to import ``pgoutput_codec`` (install the wheel on the
cluster, or ``spark.submit.pyFiles`` / ``PYTHONPATH`` with the built extensions).
"""

from .functions import (
                        DEFAULT_KEEP,
                        HAS_ARROW_UDF,
                        decode_messages,
                        from_opengauss,
                        from_pgoutput,
                        opengauss_messages,
                        read_archive,
                        register,
)
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, MalformedPayloadError
from .types import CORRUPT_RECORD, LSN_TYPE, MESSAGE_TYPE, message_type, spark_type

__all__ = [
    "from_pgoutput", "decode_messages", "from_opengauss", "opengauss_messages", "read_archive",
    "register", "FAILFAST", "PERMISSIVE", "DROPMALFORMED", "MalformedPayloadError",
    "MESSAGE_TYPE", "message_type", "spark_type", "CORRUPT_RECORD", "LSN_TYPE",
    "DEFAULT_KEEP", "HAS_ARROW_UDF",
]
from .changes import decode_changes, history, snapshot, table_changes  # noqa: E402,F401
from .opengauss_changes import opengauss_change_type, opengauss_decode_changes  # noqa: E402,F401
