"""Spark front end of pgoutput_codec (PySpark 3.5 and 4.x): the decoders of one process
on Spark DataFrames, in parallel, for pgoutput payloads and openGauss frames.

- :func:`from_pgoutput` / :func:`from_opengauss` — column functions: a binary payload →
  the decoded message (or an openGauss frame's records); SQL names after :func:`register`;
- :func:`decode_messages` — DataFrame → one column per message field (``mapInArrow``),
  FAILFAST / PERMISSIVE / DROPMALFORMED; ``source="opengauss"`` for frames;
- :func:`decode_changes` — an archive DataFrame → its committed row changes, correct
  across partitions and files; :func:`table_changes`, :func:`snapshot`,
  :func:`history`, :func:`net_changes` over them; :func:`mirror` keeps Delta copies;
- :func:`read_archive`, ``spark.read.format("pgoutput")`` and
  ``spark.readStream.format("pgoutput")`` — archive files to decoded rows;
- :func:`transcode` — an archive captured under another client encoding, as UTF-8.

Functions that read either wire format take ``source="pgoutput"`` (default) or
``"opengauss"``, as ``pgoutput_codec.decode_changes`` does in one process; the
``opengauss_*`` names are the same functions with that source. Executors must be able
to import ``pgoutput_codec``: install the wheel on the nodes, or :func:`ship` it as a
packed environment (docs/cluster.md). The modules and what each holds: docs/DESIGN.md;
the figures: docs/benchmarks.md.
"""

from .messages import (
    DEFAULT_KEEP,
    HAS_ARROW_UDF,
    decode_messages,
    from_opengauss,
    from_pgoutput,
    opengauss_messages,
)
from .shipping import WorkerPythonError, ship
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, MalformedPayloadError
from .sources import read_archive, register
from .types import CORRUPT_RECORD, LSN_TYPE, MESSAGE_TYPE, message_type, spark_type

__all__ = [
    "from_pgoutput", "decode_messages", "from_opengauss", "opengauss_messages", "read_archive",
    "register", "FAILFAST", "PERMISSIVE", "DROPMALFORMED", "MalformedPayloadError",
    "MESSAGE_TYPE", "message_type", "spark_type", "CORRUPT_RECORD", "LSN_TYPE",
    "DEFAULT_KEEP", "HAS_ARROW_UDF", "ship", "WorkerPythonError",
]

# public as well (README, docs/spark.md), though not in ``__all__``
from .changes import checkpoint_of, decode_changes, opengauss_decode_changes, replayed_of  # noqa: E402,F401
from .changerows import change_type, opengauss_change_type  # noqa: E402,F401
from .tables import history, net_changes, snapshot, table_changes  # noqa: E402,F401
from .transcode import transcode  # noqa: E402,F401
from .mirror import mirror  # noqa: E402,F401
from .snapshots import write_snapshots  # noqa: E402,F401
