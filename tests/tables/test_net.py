"""net_changes computed a column at a time (net_by_columns) equals the key-by-key replay
(net_by_replay) on every batch it takes, and leaves the others to the replay."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pgoutput_codec import (Begin, Commit, Delete, Insert, Relation, RelationColumn, Truncate, TupleColumn, Update,
                            encode_message)
from pgoutput_codec import decode_changes
from pgoutput_codec.tables import net_changes
from pgoutput_codec.tables.net import net_by_columns, net_by_replay
from pgoutput_codec.tables.rows import resolve, table_columns, table_registry
from change_cases import CORPUS, archive, registry_for, same_values

REL = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
               columns=(RelationColumn(1, "id", 23, -1), RelationColumn(1, "k", 25, -1), RelationColumn(0, "v", 25, -1),
                        RelationColumn(0, "n", 20, -1)))


def _in_key_order(t: pa.Table) -> pa.Table:
    keys = [f.name for f in t.schema.field("__UNCHANGED_FROM").type]
    ks = t.select(keys + ["__COMMIT_LSN", "__OP"]).to_pylist()
    return t.take(pa.array(sorted(range(len(ks)), key=lambda i: repr(list(ks[i].values()))), pa.int64()))


def _both(changes: pa.Table, name: str, registry=None):
    """(net_by_columns, net_by_replay) of the table, or (None, None) when the name passed
    between relations (the replay's alone)."""
    rows, replaced = resolve(changes, name)
    if replaced:
        return None, None
    cols = table_columns(changes, name, _rows=rows)
    registry = table_registry(rows, registry)
    return net_by_columns(rows, cols, registry), net_by_replay(rows, name, replaced, cols, registry)


def _same(fast: pa.Table, slow: pa.Table, what) -> None:
    assert fast.schema.equals(slow.schema), what
    # the same commits in the same order; within a commit, any order of keys
    assert fast.column("__COMMIT_LSN").equals(slow.column("__COMMIT_LSN")), what
    a, b = _in_key_order(fast), _in_key_order(slow)
    for c in a.column_names:
        assert same_values(a.column(c), b.column(c)), (what, c)


def test_every_real_archive_batch_it_takes_equals_the_replay():
    """Every table of every real-server archive, whole and from its middle commit on."""
    taken = 0
    for version, option_set in sorted({(r["server_version"], r["option_set"])
                                       for r in CORPUS.select(["server_version", "option_set"]).to_pylist()}):
        reg = registry_for(version)
        changes = decode_changes(archive(version, option_set), registry=reg)
        names = sorted({f"{s}.{t}" for s, t in zip(changes.column("schema").to_pylist(),
                                                  changes.column("table").to_pylist(), strict=True) if t})
        lsns = sorted(set(changes.column("commit_lsn").drop_null().to_pylist()))
        for cut in (0, lsns[len(lsns) // 2]):
            later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
            for name in names:
                fast, slow = _both(later, name, reg)
                if fast is not None:
                    _same(fast, slow, (version, option_set, cut, name))
                    taken += 1
    assert taken > 100


def _val(rng, unchanged_ok):
    r = rng.random()
    if r < 0.1:
        return TupleColumn("n", None)
    if r < 0.25 and unchanged_ok:
        return TupleColumn("u", None)
    return TupleColumn("t", f"v{rng.randrange(1000)}".encode())


def _session(seed: int, toast_after_change: bool):
    """Random plain batches of table t (two-column key, none changed): Inserts, Updates
    (unchanged TOAST v on rows the batch has not changed before; with
    ``toast_after_change``, on any), Deletes, Truncates, several per commit."""
    rng = random.Random(seed)
    msgs, lsn, live, touched = [], 100, set(), set()
    for xid in range(1, 30):
        msgs += [Begin(final_lsn=lsn, commit_ts=xid, xid=xid), REL]
        for _ in range(rng.randrange(1, 8)):
            r = rng.random()
            key = (rng.randrange(12), rng.choice("ab"))
            kv = (TupleColumn("t", str(key[0]).encode()), TupleColumn("t", key[1].encode()))
            if r < 0.03:
                msgs.append(Truncate(options=0, relation_ids=(16400,)))
                live.clear()
                continue
            n = TupleColumn("t", str(rng.randrange(-5, 5)).encode())
            if r < 0.25 and key in live:
                msgs.append(Delete(relation_id=16400, old_kind="K",
                                   old_tuple=kv + (TupleColumn("n", None), TupleColumn("n", None))))
                live.discard(key)
            elif key in live:
                u = toast_after_change or key not in touched
                msgs.append(Update(relation_id=16400, new_tuple=kv + (_val(rng, u), n)))
            else:
                msgs.append(Insert(relation_id=16400, new_tuple=kv + (_val(rng, False), n)))
                live.add(key)
            touched.add(key)
        msgs.append(Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=xid))
        lsn += 10
    data = [encode_message(m) for m in msgs]
    return decode_changes(pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())}))


@pytest.mark.parametrize("seed", range(40))
def test_plain_random_batches_equal_the_replay(seed):
    """A plain batch — one Relation, a key, no key changed, unchanged TOAST only in a
    key's one change — is taken a column at a time and equals the replay, from any
    commit on; unchanged TOAST after an earlier change of its key is left to the
    replay (it carries the earlier value)."""
    changes = _session(seed, toast_after_change=False)
    lsns = sorted(set(changes.column("commit_lsn").to_pylist()))
    for cut in (0, lsns[len(lsns) // 3], lsns[2 * len(lsns) // 3]):
        later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
        fast, slow = _both(later, "public.t")
        assert fast is not None, (seed, cut)
        _same(fast, slow, (seed, cut))
        assert net_changes(later, "public.t").equals(fast)
    carried = _session(seed, toast_after_change=True)
    fast, slow = _both(carried, "public.t")
    assert (fast is None) == _carries(carried), seed
    if fast is not None:
        _same(fast, slow, seed)
    else:
        assert net_changes(carried, "public.t").equals(slow)


def _carries(changes: pa.Table) -> bool:
    """Whether a change after the last Truncate sent an unchanged TOAST value of a key
    that another change after it also changed (the net row needs the value one of them said)."""
    rows = changes.to_pylist()
    cut = max([i for i, r in enumerate(rows) if r["op"] == "T"], default=-1)
    rows = [r for r in rows[cut + 1:] if r["op"] in ("I", "U", "D")]
    key = [tuple(v["data"] for v in (r["after"] or r["before"])[:2]) for r in rows]
    return any(any(v["kind"] == "u" for v in r["after"] or ()) and key.count(key[i]) > 1 for i, r in enumerate(rows))


def test_net_changes_of_rows_alike_as_a_column_came_back():
    """REPLICA IDENTITY FULL (rows named by the whole row), ``b`` dropped and added again,
    then a Delete of a row written before the drop: the rows written before it hold the
    new ``b`` as null (the dropped column's value is not its), in the snapshot and in the
    net changes, whose upserts and deletes of rows alike applied to an empty copy give
    the snapshot."""
    def rel(*cols):
        return Relation(relation_id=16670, namespace="public", relation_name="fd", replica_identity="f",
                        columns=tuple(RelationColumn(1, n, o, -1) for n, o in cols))

    def tup(*vals):
        return tuple(TupleColumn("n", None) if v is None else TupleColumn("t", str(v).encode()) for v in vals)

    def ins(*v):
        return Insert(relation_id=16670, new_tuple=tup(*v))
    i, a, b = ("id", 23), ("a", 25), ("b", 25)
    msgs = []
    for x, body in enumerate([[rel(i, a, b), ins(1, "x", "y"), ins(2, "z", "w")], [rel(i, a), ins(4, "s")],
                              [rel(i, a, b), ins(3, "q", "r")],
                              [Delete(relation_id=16670, old_kind="O", old_tuple=tup(1, "x", None))]], 1):
        msgs += [Begin(final_lsn=10 * x, commit_ts=x, xid=x), *body,
                 Commit(commit_lsn=10 * x, end_lsn=10 * x + 1, commit_ts=x)]
    changes = decode_changes(pa.table({"data": pa.array([encode_message(m) for m in msgs], pa.binary())}))
    from pgoutput_codec.tables import snapshot
    want = sorted((r["id"], r["a"], r["b"]) for r in snapshot(changes, "public.fd").to_pylist())
    assert want == [(2, "z", None), (3, "q", "r"), (4, "s", None)]
    held = []
    for r in net_changes(changes, "public.fd").to_pylist():
        if r["__OP"] == "upsert":
            held.append((r["id"], r["a"], r["b"]))
        else:
            held.remove((r["id"], r["a"], r["b"]))
    assert sorted(held) == want
