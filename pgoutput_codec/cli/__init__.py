"""The ``pgoutput-codec`` command: capture, decode, transcode, inspect, bench.

- ``capture``: a live server's slot → a Parquet archive of rolling files (at-least-once,
  resumable; :mod:`.capture` holds the protocol with the slot and the archive's layout);
- ``decode``: an archive (Parquet file or directory, or a CSV/COPY export of
  ``pg_logical_slot_get_binary_changes``) → Parquet of decoded messages or change rows,
  locally (no Spark; :mod:`.decode`, and :mod:`.opengauss` for ``--source opengauss``);
- ``transcode``: an archive captured under another client encoding rewritten as UTF-8;
- ``inspect``: what an archive holds (message types, tables, LSN/xid ranges, protocol
  features, errors);
- ``bench``: the benchmarks of ``bench/`` and their tables.

Archives are read by :mod:`pgoutput_codec.archive`; :mod:`.main` holds the arguments and
runs the commands.

Every failure the user can cause (bad arguments, a missing, unreadable, non-archive or
corrupt file, a refused connection, a malformed payload under FAILFAST) ends as one line
on stderr and a non-zero exit status — never a traceback.
"""

from __future__ import annotations

from ..archive import ArchivePart, read_archive_parts
from .capture import capture
from .console import CliError
from .main import main

__all__ = ["main", "capture", "read_archive_parts", "ArchivePart", "CliError"]
