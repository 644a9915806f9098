"""The Arrow schema of decoded openGauss/GaussDB parallel-decoding records: the one place
it is written down (docs/protocol.md, openGauss).

``decode_batch`` returns a ``pyarrow.Table`` of :data:`RECORD_SCHEMA`, one row per record
(a batch expands to many rows; heartbeats are skipped and counted in the table's schema
metadata under :data:`HEARTBEATS_KEY`). The Cython builder (``_parse_out.pyx``) fills the
columns in this order; ``test_schema_matches_builder`` holds the two together.

Representation choices (and why):
- ``row`` is the index of the input row (frame/batch) the record came from, so a batch
  that expands to many rows can be joined back to its source.
- ``lsn``/``csn``/``first_lsn`` are ``uint64``; ``xid`` is ``uint64`` too, because
  openGauss TransactionIds are 64-bit (``pq_sendint64(out, change->xid)``).
- ``commit_time`` is the string as sent (``timestamptz_to_str`` output, server time zone):
  parsing it needs the server's DateStyle, so it is left to the change decoder.
- Column ``name`` is the identifier as sent: openGauss applies ``quote_identifier``, so a
  mixed-case column arrives as ``"Name"`` with its quotes; ``schema``/``table`` are sent
  unquoted in 'b' and 't' styles (the 'j' style's qualified name is split and unquoted).
- ``value`` is ``binary``: the type output function's text in the database encoding,
  which need not be UTF-8. Null for SQL NULL and for an unchanged TOAST datum
  (``unchanged_toast`` tells them apart; only the 't' style sends that marker).
- ``type_oid`` is set by the 'b' style, ``type_name`` (``format_type_be`` text) by 't'/'j'.
- ``error`` is null when the row decoded; otherwise it holds the ``PgoutputDecodeError``
  text (record type, byte offset from the start of the input row) and the other columns
  hold what was read before the problem (``row`` always, ``lsn``/``type`` when read).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "TUPLE_COLUMN", "TUPLE_TYPE", "RECORD_FIELDS", "RECORD_SCHEMA", "RECORD_STRUCT",
    "HEARTBEATS_KEY", "RECORD_TYPES",
]

TUPLE_COLUMN = pa.struct([
    pa.field("name", pa.string(), nullable=False),
    pa.field("type_oid", pa.uint32()),
    pa.field("type_name", pa.string()),
    pa.field("value", pa.binary()),
    pa.field("unchanged_toast", pa.bool_(), nullable=False),
])
TUPLE_TYPE = pa.list_(pa.field("item", TUPLE_COLUMN, nullable=False))

RECORD_FIELDS = [
    pa.field("row", pa.int64(), nullable=False),
    pa.field("lsn", pa.uint64()),
    pa.field("type", pa.string()),
    # Begin / Commit
    pa.field("csn", pa.uint64()),
    pa.field("first_lsn", pa.uint64()),
    pa.field("xid", pa.uint64()),
    pa.field("commit_time", pa.string()),
    pa.field("origin_id", pa.uint32()),
    pa.field("user_name", pa.string()),
    # Insert / Update / Delete
    pa.field("schema", pa.string()),
    pa.field("table", pa.string()),
    pa.field("new_tuple", TUPLE_TYPE),
    pa.field("old_tuple", TUPLE_TYPE),
    pa.field("error", pa.string()),
]

RECORD_STRUCT = pa.struct(RECORD_FIELDS)
RECORD_SCHEMA = pa.schema(RECORD_FIELDS)

#: schema metadata key of the number of heartbeat ('H') records skipped
HEARTBEATS_KEY = b"pgoutput_codec.heartbeats"

#: record type tag -> name used in error texts
RECORD_TYPES = {"B": "Begin", "C": "Commit", "I": "Insert", "U": "Update", "D": "Delete", "H": "Heartbeat"}
