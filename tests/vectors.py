"""Hex vectors written by hand from docs/protocol.md (not produced by the encoder).

Each vector: the payload as spaced hex (one group per wire field), the message object
it decodes to, and the ``in_stream`` to decode it with (True for the streamed variants
of R/Y/I/U/D/T/M, False for their plain variants, None for the other messages).

Constants used below:
  LSN 0/16B3748  = 00000000 016B3748     LSN 0/16B3778 = 00000000 016B3778
  ts             = 0002C8E4 5A3B1C40  (0x0002C8E45A3B1C40 µs since 2000-01-01)
  "public" 7075626C6963  "users" 7573657273  "id" 6964  "name" 6E616D65
  "origin1" 6F726967696E31  "mood" 6D6F6F64  "pfx" 706678  "gid1" 67696431
  "café" 636166C3A9
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from pgoutput_codec.pgoutput.messages import (
    Begin, BeginPrepare, Commit, CommitPrepared, Delete, Insert, LogicalMessage, Origin,
    PrimaryKeepalive, Prepare, Relation, RelationColumn, RollbackPrepared, StreamAbort,
    StreamCommit, StreamPrepare, StreamStart, StreamStop, Truncate, TupleColumn, Type,
    Update, XLogData,
)

LSN1 = 0x16B3748
LSN2 = 0x16B3778
TS = 0x0002C8E45A3B1C40

N = TupleColumn("n", None)
U = TupleColumn("u", None)


def t(data: bytes) -> TupleColumn:
    return TupleColumn("t", data)


def b(data: bytes) -> TupleColumn:
    return TupleColumn("b", data)


class Vector(NamedTuple):
    name: str
    hex: str
    message: object
    in_stream: Optional[bool] = None

    @property
    def data(self) -> bytes:
        return bytes.fromhex(self.hex)


VECTORS = [
    # --- transaction boundaries
    Vector("begin", "42 00000000016B3748 0002C8E45A3B1C40 000002E7",
           Begin(final_lsn=LSN1, commit_ts=TS, xid=743)),
    Vector("begin_high_values", "42 FFFFFFFF00000010 FFFFFFFFFFFFFFFF 80000001",
           Begin(final_lsn=0xFFFFFFFF00000010, commit_ts=-1, xid=0x80000001)),
    Vector("begin_lsn_above_2_63", "42 8000000000000000 8000000000000000 FFFFFFFF",
           Begin(final_lsn=2**63, commit_ts=-(2**63), xid=2**32 - 1)),
    Vector("commit", "43 00 00000000016B3748 00000000016B3778 0002C8E45A3B1C40",
           Commit(flags=0, commit_lsn=LSN1, end_lsn=LSN2, commit_ts=TS)),
    Vector("origin", "4F 000000000A000000 6F726967696E31 00",
           Origin(origin_lsn=0x0A000000, origin_name="origin1")),
    Vector("origin_utf8", "4F 0000000000000001 636166C3A9 00",
           Origin(origin_lsn=1, origin_name="café")),
    # --- Relation / Type
    Vector("relation",
           "52 00004000 7075626C6963 00 7573657273 00 64 0002"
           " 01 6964 00 00000017 FFFFFFFF"
           " 00 6E616D65 00 00000413 00000044",
           Relation(relation_id=16384, namespace="public", relation_name="users", replica_identity="d",
                    columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "name", 1043, 68))),
           False),
    Vector("relation_oid_above_2_31_pg_catalog_full",
           "52 80000000 00 74626C 00 66 0001 01 61 00 00000019 FFFFFFFF",
           Relation(relation_id=0x80000000, namespace="", relation_name="tbl", replica_identity="f",
                    columns=(RelationColumn(1, "a", 25, -1),)),
           False),
    Vector("relation_no_columns_nothing", "52 FFFFFFFF 7075626C6963 00 74626C 00 6E 0000",
           Relation(relation_id=0xFFFFFFFF, namespace="public", relation_name="tbl", replica_identity="n",
                    columns=()),
           False),
    Vector("relation_streamed",
           "52 000004D2 00004001 7075626C6963 00 7432 00 69 0001 01 6B 00 00000014 FFFFFFFF",
           Relation(xid=1234, relation_id=16385, namespace="public", relation_name="t2", replica_identity="i",
                    columns=(RelationColumn(1, "k", 20, -1),)),
           True),
    Vector("type", "59 00004100 7075626C6963 00 6D6F6F64 00",
           Type(type_oid=16640, namespace="public", type_name="mood"), False),
    Vector("type_streamed", "59 FFFFFFFE 00004100 7075626C6963 00 6D6F6F64 00",
           Type(xid=0xFFFFFFFE, type_oid=16640, namespace="public", type_name="mood"), True),
    # --- DML
    Vector("insert_text_null_unchanged", "49 00004000 4E 0003 74 00000002 3432 6E 75",
           Insert(relation_id=16384, new_tuple=(t(b"42"), N, U)), False),
    Vector("insert_binary_and_empty_text", "49 00004000 4E 0002 62 00000004 0000002A 74 00000000",
           Insert(relation_id=16384, new_tuple=(b(b"\x00\x00\x00\x2a"), t(b""))), False),
    Vector("insert_streamed", "49 000004D2 00004000 4E 0001 74 00000001 78",
           Insert(xid=1234, relation_id=16384, new_tuple=(t(b"x"),)), True),
    Vector("insert_relid_above_2_31_no_columns", "49 FFFFFFF0 4E 0000",
           Insert(relation_id=0xFFFFFFF0, new_tuple=()), False),
    Vector("insert_streamed_xid_above_2_31", "49 80000002 00004000 4E 0001 6E",
           Insert(xid=0x80000002, relation_id=16384, new_tuple=(N,)), True),
    Vector("update_no_old", "55 00004000 4E 0002 74 00000001 31 74 00000003 616263",
           Update(relation_id=16384, new_tuple=(t(b"1"), t(b"abc"))), False),
    Vector("update_key", "55 00004000 4B 0002 74 00000001 31 6E 4E 0002 74 00000001 32 75",
           Update(relation_id=16384, old_kind="K", old_tuple=(t(b"1"), N), new_tuple=(t(b"2"), U)), False),
    Vector("update_old",
           "55 00004000 4F 0002 74 00000001 31 74 00000001 61 4E 0002 74 00000001 31 74 00000001 62",
           Update(relation_id=16384, old_kind="O", old_tuple=(t(b"1"), t(b"a")),
                  new_tuple=(t(b"1"), t(b"b"))), False),
    Vector("update_streamed_old", "55 00000309 00004000 4F 0001 6E 4E 0001 62 00000001 FF",
           Update(xid=777, relation_id=16384, old_kind="O", old_tuple=(N,), new_tuple=(b(b"\xff"),)), True),
    Vector("delete_key", "44 00004000 4B 0002 74 00000001 31 6E",
           Delete(relation_id=16384, old_kind="K", old_tuple=(t(b"1"), N)), False),
    Vector("delete_old", "44 00004000 4F 0001 62 00000002 CAFE",
           Delete(relation_id=16384, old_kind="O", old_tuple=(b(b"\xca\xfe"),)), False),
    Vector("delete_streamed", "44 00000309 00004000 4B 0001 74 00000001 37",
           Delete(xid=777, relation_id=16384, old_kind="K", old_tuple=(t(b"7"),)), True),
    Vector("truncate", "54 00000002 01 00004000 80000001",
           Truncate(options=1, relation_ids=(16384, 0x80000001)), False),
    Vector("truncate_streamed", "54 00000064 00000001 03 00004000",
           Truncate(xid=100, options=3, relation_ids=(16384,)), True),
    Vector("message_transactional", "4D 01 00000000016B3748 706678 00 00000003 010203",
           LogicalMessage(flags=1, lsn=LSN1, prefix="pfx", content=b"\x01\x02\x03"), False),
    Vector("message_streamed_empty", "4D 00000309 00 00000000016B3748 70 00 00000000",
           LogicalMessage(xid=777, flags=0, lsn=LSN1, prefix="p", content=b""), True),
    # --- streaming (v2+)
    Vector("stream_start_first", "53 00000309 01", StreamStart(xid=777, first_segment=True)),
    Vector("stream_start_next", "53 8000030A 00", StreamStart(xid=0x8000030A, first_segment=False)),
    Vector("stream_stop", "45", StreamStop()),
    Vector("stream_commit", "63 00000309 00 00000000016B3748 00000000016B3778 0002C8E45A3B1C40",
           StreamCommit(xid=777, flags=0, commit_lsn=LSN1, end_lsn=LSN2, commit_ts=TS)),
    Vector("stream_abort", "41 00000309 0000030A", StreamAbort(xid=777, subxid=778)),
    Vector("stream_abort_parallel", "41 00000309 00000309 00000000016B3748 0002C8E45A3B1C40",
           StreamAbort(xid=777, subxid=777, abort_lsn=LSN1, abort_ts=TS)),
    # --- two-phase (v3+)
    Vector("begin_prepare",
           "62 00000000016B3748 00000000016B3778 0002C8E45A3B1C40 000002E7 67696431 00",
           BeginPrepare(prepare_lsn=LSN1, end_lsn=LSN2, prepare_ts=TS, xid=743, gid="gid1")),
    Vector("prepare",
           "50 00 00000000016B3748 00000000016B3778 0002C8E45A3B1C40 000002E7 67696431 00",
           Prepare(flags=0, prepare_lsn=LSN1, end_lsn=LSN2, prepare_ts=TS, xid=743, gid="gid1")),
    Vector("commit_prepared",
           "4B 00 00000000016B3748 00000000016B3778 0002C8E45A3B1C40 000002E7 67696431 00",
           CommitPrepared(flags=0, commit_lsn=LSN1, end_lsn=LSN2, commit_ts=TS, xid=743, gid="gid1")),
    Vector("rollback_prepared",
           "72 00 00000000016B3748 00000000016B3778 0002C8E45A3B1C40 0002C8E45A3B1C41 000002E7 67696431 00",
           RollbackPrepared(flags=0, prepare_end_lsn=LSN1, rollback_end_lsn=LSN2, prepare_ts=TS,
                            rollback_ts=TS + 1, xid=743, gid="gid1")),
    Vector("stream_prepare",
           "70 00 00000000016B3748 00000000016B3778 0002C8E45A3B1C40 00000309 00",
           StreamPrepare(flags=0, prepare_lsn=LSN1, end_lsn=LSN2, prepare_ts=TS, xid=777, gid="")),
    # --- replication envelope (§2)
    Vector("xlogdata_insert",
           "77 00000000016B3748 00000000016B3748 0002C8E45A3B1C40 49 00004000 4E 0001 74 00000001 31",
           XLogData(wal_start=LSN1, wal_end=LSN1, send_time=TS,
                    payload=Insert(relation_id=16384, new_tuple=(t(b"1"),))), False),
    Vector("xlogdata_streamed_delete",
           "77 0000000000000000 0000000000000000 0000000000000000 44 00000309 00004000 4B 0001 6E",
           XLogData(wal_start=0, wal_end=0, send_time=0,
                    payload=Delete(xid=777, relation_id=16384, old_kind="K", old_tuple=(N,))), True),
    Vector("xlogdata_rollback_prepared_tag_r",
           "77 00000000016B3748 00000000016B3778 0002C8E45A3B1C40"
           " 72 01 00000000016B3748 00000000016B3778 0000000000000001 0000000000000002 00000001 78 00",
           XLogData(wal_start=LSN1, wal_end=LSN2, send_time=TS,
                    payload=RollbackPrepared(flags=1, prepare_end_lsn=LSN1, rollback_end_lsn=LSN2,
                                             prepare_ts=1, rollback_ts=2, xid=1, gid="x"))),
    Vector("keepalive_reply", "6B 00000000016B3778 0002C8E45A3B1C40 01",
           PrimaryKeepalive(wal_end=LSN2, send_time=TS, reply_requested=True)),
    Vector("keepalive_no_reply", "6B FFFFFFFFFFFFFFFF 0000000000000000 00",
           PrimaryKeepalive(wal_end=2**64 - 1, send_time=0, reply_requested=False)),
]

BY_NAME = {v.name: v for v in VECTORS}
assert len(BY_NAME) == len(VECTORS), "duplicate vector names"

#: Vectors whose reading with the other streaming state fails (checked by hand), so
#: ``in_stream=None`` must find the same message.
UNAMBIGUOUS = [
    "insert_text_null_unchanged",  # with xid: marker byte would be 0x00
    "insert_streamed",             # without xid: marker byte would be 0x00
    "update_key",                  # with xid: marker byte would be 0x00
    "delete_streamed",             # without xid: marker byte would be 0x00
    "truncate",                    # with xid: nrels 0x01000040 > bytes left
]

