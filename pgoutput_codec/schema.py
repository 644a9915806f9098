"""The Arrow schema of decoded messages: the one place it is written down.

``decode_batch`` returns a ``StructArray`` of :data:`MESSAGE_STRUCT`; the Spark
functions derive their return types from it. Field order is the order the Cython
builder (``pgoutput/_batch.pyx``) fills them in: change one, change the other, and the test
``test_batch_schema_matches_builder`` holds them together.

Representation choices (and why):
- LSNs are ``uint64``, xids/OIDs ``uint32``: they are unsigned in PostgreSQL and a
  relation OID above 2^31 must stay positive.
- Timestamps are ``timestamp[us, UTC]``: the wire value (µs since 2000-01-01) plus
  946 684 800 000 000 µs, computed modulo 2^64 so even absurd values round-trip.
- Single-character codes (``type``, ``replica_identity``, ``old_kind``, tuple
  ``kind``) are strings of one character: readable in SQL and in pandas.
- Every field a message type does not have is null for that row; ``error`` is null
  when the row decoded and holds the ``PgoutputDecodeError`` text when it did not.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

__all__ = ["TUPLE_TYPE", "RELATION_COLUMNS_TYPE", "CHANGE_COLUMN", "CHANGE_COLUMNS_TYPE", "CHANGE_COLUMN_LISTS",
           "MESSAGE_FIELDS", "MESSAGE_STRUCT", "TS", "relation_fingerprint"]

TS = pa.timestamp("us", tz="UTC")

TUPLE_COLUMN = pa.struct([("kind", pa.string()), ("data", pa.binary())])
TUPLE_TYPE = pa.list_(TUPLE_COLUMN)

RELATION_COLUMN = pa.struct([
    ("flags", pa.uint8()),
    ("name", pa.string()),
    ("type_oid", pa.uint32()),
    ("type_modifier", pa.int32()),
])
RELATION_COLUMNS_TYPE = pa.list_(RELATION_COLUMN)
#: A change row's column: the Relation's, with the namespace and name the stream's Type
#: message gave its type (null for a built-in type: the server sends none). pgoutput names
#: a domain by its base type (a domain over int arrives as ``pg_catalog``/``int4``), so
#: the name is what types a domain's values when no catalog is at hand.
CHANGE_COLUMN = pa.struct([*RELATION_COLUMN, ("type_namespace", pa.string()), ("type_name", pa.string())])
#: The column list of a change row: a list view, so that the rows of one relation version
#: share one copy of its list (a 1,600-column relation's list is ~40 KB; copied into every
#: row, a few bytes of Truncate or Insert would cost that much each)
CHANGE_COLUMNS_TYPE = pa.list_view(CHANGE_COLUMN)
#: The same lists as plain lists: Spark's rows, and Parquet files read back, hold them so
CHANGE_COLUMN_LISTS = pa.list_(CHANGE_COLUMN)

MESSAGE_FIELDS = [
    pa.field("type", pa.string()),
    pa.field("error", pa.string()),
    # replication envelope ('w' XLogData / 'k' keepalive)
    pa.field("wal_start", pa.uint64()),
    pa.field("wal_end", pa.uint64()),
    pa.field("send_time", TS),
    pa.field("reply_requested", pa.bool_()),
    # transaction ids
    pa.field("xid", pa.uint32()),
    pa.field("subxid", pa.uint32()),
    # LSNs and times
    pa.field("final_lsn", pa.uint64()),
    pa.field("commit_lsn", pa.uint64()),
    pa.field("end_lsn", pa.uint64()),
    pa.field("commit_ts", TS),
    pa.field("flags", pa.uint8()),
    # Origin
    pa.field("origin_lsn", pa.uint64()),
    pa.field("origin_name", pa.string()),
    # Relation / Type
    pa.field("relation_id", pa.uint32()),
    pa.field("namespace", pa.string()),
    pa.field("relation_name", pa.string()),
    pa.field("replica_identity", pa.string()),
    pa.field("columns", RELATION_COLUMNS_TYPE),
    pa.field("type_oid", pa.uint32()),
    pa.field("type_name", pa.string()),
    # Insert / Update / Delete
    pa.field("old_kind", pa.string()),
    pa.field("old_tuple", TUPLE_TYPE),
    pa.field("new_tuple", TUPLE_TYPE),
    # Truncate
    pa.field("options", pa.uint8()),
    pa.field("relation_ids", pa.list_(pa.uint32())),
    # Logical message
    pa.field("lsn", pa.uint64()),
    pa.field("prefix", pa.string()),
    pa.field("content", pa.binary()),
    # Streaming
    pa.field("first_segment", pa.bool_()),
    pa.field("abort_lsn", pa.uint64()),
    pa.field("abort_ts", TS),
    # Two-phase
    pa.field("prepare_lsn", pa.uint64()),
    pa.field("prepare_ts", TS),
    pa.field("gid", pa.string()),
    pa.field("prepare_end_lsn", pa.uint64()),
    pa.field("rollback_end_lsn", pa.uint64()),
    pa.field("rollback_ts", TS),
]

MESSAGE_STRUCT = pa.struct(MESSAGE_FIELDS)


# ---------------------------------------------------------------------- change rows
# One row per row change (and one per truncated relation), in commit order, shaped
# after Debezium's envelope: ``op`` + ``before`` + ``after``. Values stay as sent
# (kind + bytes: lossless, 'u' unchanged TOAST distinct from NULL); the relation's
# columns at the time of the change travel with the row (a view of its version's one
# list), so a change is readable on its own and ``table_changes`` can type it. Mapping to Delta's change data feed:
# I → insert (after), U → update_preimage (before) + update_postimage (after),
# D → delete (before), T → no CDF equivalent (a truncate of the whole table).
CHANGE_FIELDS = [
    pa.field("op", pa.string()),               # 'I' 'U' 'D' 'T' ('C' = empty transaction marker)
    pa.field("seq", pa.int64()),               # arrival order of the message in the archive
    pa.field("lsn", pa.uint64()),              # the archive row's own lsn, when the input has one
    pa.field("xid", pa.uint32()),              # top-level transaction id
    pa.field("commit_lsn", pa.uint64()),
    pa.field("commit_ts", TS),
    pa.field("origin", pa.string()),           # replication origin name (Origin message)
    pa.field("schema", pa.string()),
    pa.field("table", pa.string()),
    pa.field("relation_id", pa.uint32()),
    pa.field("columns", CHANGE_COLUMNS_TYPE),  # flags & 1 = replica identity key column
    # 64-bit fingerprint of the Relation definition the row was decoded with (schema, table,
    # identity, columns): equal definitions give equal values in any decoder, so consumers
    # group rows by schema version without comparing column lists
    pa.field("relation_version", pa.uint64()),
    pa.field("before_kind", pa.string()),      # 'K' key only, 'O' whole old row, null
    pa.field("before", TUPLE_TYPE),
    pa.field("after", TUPLE_TYPE),
    pa.field("truncate_options", pa.uint8()),  # 1 CASCADE, 2 RESTART IDENTITY
]

CHANGE_SCHEMA = pa.schema(CHANGE_FIELDS)

#: Columns dropped from change rows by include_xids / include_timestamp / include_origin = False.
CHANGE_OPTIONAL = {"include_xids": "xid", "include_timestamp": "commit_ts", "include_origin": "origin"}


def relation_fingerprint(rel: dict) -> int:
    """64-bit content hash of a Relation definition (the ``relation_version`` column)."""
    cols = ";".join(f"{c['name']}\x00{c['type_oid']}\x00{c['type_modifier']}\x00{c['flags']}"
                    for c in rel["columns"] or ())
    text = f"{rel['schema']}\x01{rel['table']}\x01{rel['relation_id']}\x01{rel['replica_identity']}\x01{cols}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
