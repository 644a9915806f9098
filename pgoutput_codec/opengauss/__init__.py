"""openGauss/GaussDB parallel logical decoding output (docs/protocol.md, openGauss).

- :func:`decode_batch` — an Arrow column of frames (one batch, or one record with
  sending-batch=0, per input row) to a ``pyarrow.Table`` of :data:`schema.RECORD_SCHEMA`
  with one row per record; 'b' runs in the compiled ``_parse`` module, 't'/'j' in
  :mod:`.text`. Skipped heartbeats: ``table.schema.metadata[HEARTBEATS_KEY]``.
- :func:`decode_frame` / :func:`decode_record` — one frame/record to Python objects,
  raising ``PgoutputDecodeError`` at the first problem.
- :mod:`.encode` — the inverse, for tests and benchmarks.
"""

from __future__ import annotations

from .batch import STYLES, decode_batch, decode_frame, decode_record, heartbeats, record_positions
from .messages import Column, Frame, Record
from .schema import HEARTBEATS_KEY, RECORD_SCHEMA

__all__ = ["decode_batch", "decode_frame", "decode_record", "Column", "Record", "Frame",
           "RECORD_SCHEMA", "HEARTBEATS_KEY", "heartbeats", "record_positions", "STYLES"]
