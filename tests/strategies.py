"""Hypothesis strategies: one per message type, with wire-range values (docs/protocol.md)."""

from __future__ import annotations

from hypothesis import strategies as st

from pgoutput_codec.pgoutput.messages import (
    Begin, BeginPrepare, Commit, CommitPrepared, Delete, Insert, LogicalMessage, Origin,
    PrimaryKeepalive, Prepare, Relation, RelationColumn, RollbackPrepared, StreamAbort,
    StreamCommit, StreamPrepare, StreamStart, StreamStop, Truncate, TupleColumn, Type,
    Update, XLogData,
)

u8 = st.integers(0, 0xFF)
u32 = st.one_of(st.integers(0, 0xFFFFFFFF), st.sampled_from([0, 2**31 - 1, 2**31, 2**32 - 1]))
i32 = st.integers(-(2**31), 2**31 - 1)
u64 = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 2**63 - 1, 2**63, 2**64 - 1]))
i64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-(2**63), -1, 0, 2**63 - 1]))
xid_opt = st.none() | u32
#: names: any str without NUL that encodes to UTF-8 (no lone surrogates)
names = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)
small_bytes = st.binary(max_size=20)

tuple_column = st.one_of(
    st.just(TupleColumn("n", None)),
    st.just(TupleColumn("u", None)),
    st.builds(TupleColumn, st.just("t"), small_bytes),
    st.builds(TupleColumn, st.just("b"), small_bytes),
)
tuple_data = st.lists(tuple_column, max_size=6).map(tuple)
relation_column = st.builds(RelationColumn, u8, names, u32, i32)

begin = st.builds(Begin, final_lsn=u64, commit_ts=i64, xid=u32)
commit = st.builds(Commit, flags=u8, commit_lsn=u64, end_lsn=u64, commit_ts=i64)
origin = st.builds(Origin, origin_lsn=u64, origin_name=names)
relation = st.builds(Relation, xid=xid_opt, relation_id=u32, namespace=names, relation_name=names,
                     replica_identity=st.sampled_from("dnfi"),
                     columns=st.lists(relation_column, max_size=5).map(tuple))
type_ = st.builds(Type, xid=xid_opt, type_oid=u32, namespace=names, type_name=names)
insert = st.builds(Insert, xid=xid_opt, relation_id=u32, new_tuple=tuple_data)
update = st.one_of(
    st.builds(Update, xid=xid_opt, relation_id=u32, new_tuple=tuple_data),
    st.builds(Update, xid=xid_opt, relation_id=u32, old_kind=st.sampled_from("KO"), old_tuple=tuple_data,
              new_tuple=tuple_data),
)
delete = st.builds(Delete, xid=xid_opt, relation_id=u32, old_kind=st.sampled_from("KO"), old_tuple=tuple_data)
truncate = st.builds(Truncate, xid=xid_opt, options=u8, relation_ids=st.lists(u32, max_size=5).map(tuple))
logical_message = st.builds(LogicalMessage, xid=xid_opt, flags=u8, lsn=u64, prefix=names, content=small_bytes)
stream_start = st.builds(StreamStart, xid=u32, first_segment=st.booleans())
stream_stop = st.just(StreamStop())
stream_commit = st.builds(StreamCommit, xid=u32, flags=u8, commit_lsn=u64, end_lsn=u64, commit_ts=i64)
stream_abort = st.one_of(
    st.builds(StreamAbort, xid=u32, subxid=u32),
    st.builds(StreamAbort, xid=u32, subxid=u32, abort_lsn=u64, abort_ts=i64),
)
begin_prepare = st.builds(BeginPrepare, prepare_lsn=u64, end_lsn=u64, prepare_ts=i64, xid=u32, gid=names)
prepare = st.builds(Prepare, flags=u8, prepare_lsn=u64, end_lsn=u64, prepare_ts=i64, xid=u32, gid=names)
commit_prepared = st.builds(CommitPrepared, flags=u8, commit_lsn=u64, end_lsn=u64, commit_ts=i64, xid=u32,
                            gid=names)
rollback_prepared = st.builds(RollbackPrepared, flags=u8, prepare_end_lsn=u64, rollback_end_lsn=u64,
                              prepare_ts=i64, rollback_ts=i64, xid=u32, gid=names)
stream_prepare = st.builds(StreamPrepare, flags=u8, prepare_lsn=u64, end_lsn=u64, prepare_ts=i64, xid=u32,
                           gid=names)

#: tag -> strategy for each of the 19 pgoutput messages
PGOUTPUT = {
    "B": begin, "C": commit, "O": origin, "R": relation, "Y": type_, "I": insert, "U": update,
    "D": delete, "T": truncate, "M": logical_message, "S": stream_start, "E": stream_stop,
    "c": stream_commit, "A": stream_abort, "b": begin_prepare, "P": prepare, "K": commit_prepared,
    "r": rollback_prepared, "p": stream_prepare,
}
pgoutput_message = st.one_of(*PGOUTPUT.values())
xlogdata = st.builds(XLogData, wal_start=u64, wal_end=u64, send_time=i64, payload=pgoutput_message)
keepalive = st.builds(PrimaryKeepalive, wal_end=u64, send_time=i64, reply_requested=st.booleans())

ALL = {**PGOUTPUT, "w": xlogdata, "k": keepalive}
any_message = st.one_of(*ALL.values())


def stream_hint(msg):
    """The ``in_stream`` that decodes ``msg`` back: whether it carries a streaming xid."""
    inner = msg.payload if isinstance(msg, XLogData) else msg
    if inner.type in "RYIUDTM":
        return inner.xid is not None
    return None


@st.composite
def mutated(draw, seeds, inserts: bytes):
    """One of ``seeds`` (bytes) with up to three bytes deleted, inserted (one of ``inserts``)
    or overwritten: malformed values near well-formed ones, for a converter and its twin."""
    raw = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 3))):
        op, pos = draw(st.integers(0, 2)), draw(st.integers(0, len(raw)))
        if op == 0 and raw:
            del raw[min(pos, len(raw) - 1)]
        elif op == 1:
            raw.insert(pos, draw(st.sampled_from(inserts)))
        elif raw:
            raw[min(pos, len(raw) - 1)] = draw(st.integers(0, 255))
    return bytes(raw)
