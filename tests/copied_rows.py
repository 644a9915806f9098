"""Archives of copied rows (the Inserts of a COPY transaction, Begin xid 0: change rows of
op 'R') and of the changes without them, with a base standing for the copy. Shared by the
single-process (tests/tables/test_copied_rows.py) and Spark tests of copied rows."""

from __future__ import annotations

import pyarrow as pa

from pgoutput_codec import Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn, Update, encode_message

T = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
             columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))
U = Relation(relation_id=16401, namespace="public", relation_name="u", replica_identity="d",
             columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))


def row(i, v):
    return (TupleColumn("t", str(i).encode()), TupleColumn("t", v.encode()) if v is not None else TupleColumn("n", None))


def ins(rel, i, v):
    return Insert(relation_id=rel.relation_id, new_tuple=row(i, v))


def upd(rel, i, v):
    return Update(relation_id=rel.relation_id, new_tuple=row(i, v))


def dele(rel, i):
    return Delete(relation_id=rel.relation_id, old_kind="K", old_tuple=(TupleColumn("t", str(i).encode()),
                                                                        TupleColumn("n", None)))


def txn(xid, lsn, *msgs):
    return [Begin(final_lsn=lsn, commit_ts=lsn * 1000, xid=xid), *msgs,
            Commit(commit_lsn=lsn, end_lsn=lsn + 8, commit_ts=lsn * 1000)]


def as_archive(msgs) -> pa.Table:
    data = [encode_message(m) for m in msgs]
    lsns, lsn = [], 0
    for m in msgs:          # each row's lsn: its transaction's commit LSN, as a copy's are
        lsn = getattr(m, "final_lsn", None) or lsn
        lsns.append(f"0/{lsn:X}")
    return pa.table({"seq": pa.array(range(len(data)), pa.int64()), "lsn": pa.array(lsns, pa.string()),
                     "data": pa.array(data, pa.binary())})


def copy_archive() -> pa.Table:
    """Table t copied whole at 0x100 (ids 1..4), changed by a server transaction, then a
    chunk of it copied again while the stream runs (id 2 as it is then, id 6 new), then
    changed again; table u is never copied."""
    msgs = txn(0, 0x100, T, *[ins(T, i, f"c{i}") for i in range(1, 5)])
    msgs += txn(700, 0x200, T, upd(T, 2, "u2"), dele(T, 3), ins(T, 5, "n5"), U, ins(U, 1, "x"))
    msgs += txn(0, 0x300, T, ins(T, 2, "u2"), ins(T, 6, "c6"))
    msgs += txn(701, 0x400, T, upd(T, 6, "u6"), upd(U, 1, "y"))
    return as_archive(msgs)


WANT_OPS = ["R", "R", "R", "R", "U", "D", "I", "I", "R", "R", "U", "U"]
WANT_T = [{"id": 1, "v": "c1"}, {"id": 2, "v": "u2"}, {"id": 4, "v": "c4"}, {"id": 5, "v": "n5"},
          {"id": 6, "v": "u6"}]


def uncopied_archive() -> pa.Table:
    """copy_archive's changes without its copies, and an Update of base row 4 that
    leaves v unchanged (TOAST: its value is not in the message)."""
    msgs = txn(700, 0x200, T, upd(T, 2, "u2"), dele(T, 3), ins(T, 5, "n5"), U, ins(U, 1, "x"))
    msgs += txn(701, 0x400, T, ins(T, 6, "c6"), upd(T, 6, "u6"))
    msgs += txn(702, 0x500, T, Update(relation_id=T.relation_id, new_tuple=(TupleColumn("t", b"4"),
                                                                           TupleColumn("u", None))))
    return as_archive(msgs)


BASE = pa.table({"id": pa.array([1, 2, 3, 4], pa.int32()), "v": ["c1", "c2", "c3", "c4"]})
