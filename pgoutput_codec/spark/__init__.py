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
  vectorized column UDF there. Measured on this machine (local[2], 20 000 corpus
  payloads ×10, warm session; see tests/spark/bench_udf.py): see
  ``docs``/the commit message for the numbers — arrow_udf is the cheaper one because
  Spark's pandas→Arrow converter walks the nested list<struct> columns row by row.
- DataFrame functions: ``mapInArrow`` (3.3+): no pandas, can drop and expand rows.
- grouped ``applyInArrow`` and Arrow UDTFs are not used: nothing here needs a shuffle
  to one group, and a UDTF adds a lateral join where ``mapInArrow`` streams batches.

Spark workers must be able to import ``pgoutput_codec`` (install the wheel on the
cluster, or ``spark.submit.pyFiles`` / ``PYTHONPATH`` with the built extensions).
"""

from .functions import (DEFAULT_KEEP, HAS_ARROW_UDF, decode_messages, from_opengauss, from_pgoutput,
                        opengauss_messages, read_archive, register)
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, MalformedPayloadError
from .types import CORRUPT_RECORD, LSN_TYPE, MESSAGE_TYPE, message_type, spark_type

__all__ = [
    "from_pgoutput", "decode_messages", "from_opengauss", "opengauss_messages", "read_archive",
    "register", "FAILFAST", "PERMISSIVE", "DROPMALFORMED", "MalformedPayloadError",
    "MESSAGE_TYPE", "message_type", "spark_type", "CORRUPT_RECORD", "LSN_TYPE",
    "DEFAULT_KEEP", "HAS_ARROW_UDF",
]
