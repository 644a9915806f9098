"""Archives a real consumer leaves behind: transactions received twice, files out of order.

A walsender sends a slot's transactions from the position its consumer last confirmed.
A consumer that archived transactions and stopped before confirming them receives them
again when it reconnects: an at-least-once archive. ``pg_logical_slot_peek_binary_changes``
reads a slot without confirming, so a peek then a get of the same slot is exactly that:
the same transactions, byte for byte, twice. Two gets are two decoding sessions, each
with its own Relation messages: files of an archive a job could list in either order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pgoutput_codec import ArchiveOrderError, decode_changes
from pgoutput_codec.changes import decode_changes_parallel

OPTIONS = ["proto_version", "1", "publication_names", "replay_pub"]


def _read(conn, fn: str) -> list:
    rows = conn.execute(f"SELECT lsn::text, xid::text::int8, data FROM pg_logical_slot_{fn}_binary_changes("
                        "'replay_slot', NULL, NULL, VARIADIC %s::text[])", (OPTIONS,)).fetchall()
    return [(lsn, xid, bytes(data)) for lsn, xid, data in rows]


def _archive(*parts) -> pa.Table:
    rows = [r for p in parts for r in p]
    return pa.table({"seq": pa.array(range(len(rows)), pa.int64()), "lsn": [r[0] for r in rows],
                     "xid": pa.array([r[1] for r in rows], pa.int64()),
                     "data": pa.array([r[2] for r in rows], pa.binary())})


@pytest.fixture(scope="module")
def sessions(pg_server):
    """(peeked, got, later): a peek of three transactions, a get of those three and two
    more (one updating a key), and a second get of two more."""
    with pg_server.connect() as conn:
        conn.execute("CREATE TABLE replay_t (id int PRIMARY KEY, v text)")
        conn.execute("CREATE PUBLICATION replay_pub FOR TABLE replay_t")
        conn.execute("SELECT pg_create_logical_replication_slot('replay_slot', 'pgoutput')")
        try:
            for i in range(3):
                conn.execute("INSERT INTO replay_t VALUES (%s, %s)", (i, f"v{i}"))
            peeked = _read(conn, "peek")
            conn.execute("UPDATE replay_t SET id = 10 WHERE id = 0")
            conn.execute("INSERT INTO replay_t VALUES (3, 'v3')")
            got = _read(conn, "get")
            conn.execute("DELETE FROM replay_t WHERE id = 1")
            conn.execute("UPDATE replay_t SET v = 'w2' WHERE id = 2")
            later = _read(conn, "get")
            final = sorted(conn.execute("SELECT id, v FROM replay_t").fetchall())
        finally:
            conn.execute("SELECT pg_drop_replication_slot('replay_slot')")
    return peeked, got, later, final


def _commits(part) -> int:
    return sum(1 for _, _, d in part if d[:1] == b"C")


def test_transactions_received_again_are_given_once(sessions):
    """The archive of the peek, the get and the second get gives each transaction once,
    in every decoder: the replays are dropped, counted and named (xid, commit LSN and
    seq of their Commit), and the rows equal those of the archive without them."""
    peeked, got, later, final = sessions
    assert _commits(peeked) == 3 and _commits(got) == 5 and _commits(later) == 2
    assert got[:len(peeked)] == peeked   # the server sent the same bytes again
    replayed = _archive(peeked, got, later)
    clean = decode_changes(_archive(got, later))
    out = decode_changes(replayed)
    want = clean.drop_columns(["seq"])
    assert out.drop_columns(["seq"]).equals(want)
    # the first receipt is given, the second dropped: rows of the replayed transactions keep
    # their place in the peek, the others move by the peek's length
    n = len(peeked)
    assert out.column("seq").to_pylist() == [s if s < n else s + n for s in clean.column("seq").to_pylist()]
    # the parallel plan, over the rows split in any order
    par = decode_changes_parallel(replayed.column("data"), replayed.column("seq"), replayed.column("lsn"), splits=3)
    assert par.drop_columns(["seq"]).select(want.column_names).equals(want)
    from pgoutput_codec import ChangeDecoder
    dec = ChangeDecoder()
    dec.feed(replayed.column("data"), seq=replayed.column("seq"))
    assert dec.counts["replayed_transactions"] == 3
    commit_seqs = [i for i, (_, _, d) in enumerate(got[:len(peeked)]) if d[:1] == b"C"]
    assert [r["seq"] for r in dec.replayed] == [len(peeked) + i for i in commit_seqs]
    assert [r["xid"] for r in dec.replayed] == sorted({x for _, x, d in peeked if d[:1] == b"B"})
    # split anywhere: through state/from_state, and into runs resumed from checkpoints
    for cut in range(1, len(replayed), 3):
        first = ChangeDecoder()
        head = first.feed(replayed.slice(0, cut))
        second = ChangeDecoder.from_state(first.state)
        assert pa.concat_tables([head, second.feed(replayed.slice(cut))]).equals(out), cut
        assert second.counts["replayed_transactions"] == 3 and second.replayed == dec.replayed, cut
    from pgoutput_codec.changes import checkpoint_after
    # (8: the third transaction open at the cut; the next run holds its commit, then the
    # replays of the two before it, which committed in the run before: not out of order)
    for cuts in ([5, 13, 30], [8, len(peeked) + 10], [len(peeked) + 2, len(peeked) + 11],
                 list(range(4, len(replayed), 4))):
        cp, runs = None, []
        for cut in [*cuts, len(replayed)]:
            seq = replayed.column("seq").to_numpy()
            run = replayed.filter(pa.array((seq >= (cp.from_key if cp else 0)) & (seq < cut)))
            runs.append(decode_changes(run, resume=cp))
            cp = checkpoint_after(run.column("data"), run.column("seq"), resume=cp)
        assert pa.concat_tables(runs).equals(out), cuts
    # applied, the changes give the server's table
    from pgoutput_codec import snapshot
    snap = snapshot(out, "public.replay_t")
    assert sorted(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist(), strict=True)) == final
    # kept (replays="keep"): three transactions more, as before this check existed
    kept = decode_changes(replayed, replays="keep")
    assert len(kept) == len(out) + sum(1 for _, _, d in peeked if d[:1] == b"I")


def test_an_archive_out_of_order_is_refused(sessions):
    """The two gets listed the wrong way round (each decodable on its own: a session
    sends its Relations): the first commit of the earlier session comes after commits
    with higher LSNs and repeats none. Refused, naming that commit's seq and both LSNs,
    in both error modes and in the parallel plan — never rows in a wrong commit order."""
    _, got, later, _ = sessions
    swapped = _archive(later, got)
    first_c = len(later) + next(i for i, (_, _, d) in enumerate(got) if d[:1] == b"C")
    for errors in ("raise", "collect"):
        with pytest.raises(ArchiveOrderError, match=f"seq {first_c}: 'C' commit at LSN") as e:
            decode_changes(swapped, errors=errors)
        assert e.value.seq == first_c and e.value.commit_lsn < e.value.previous_lsn
    with pytest.raises(ArchiveOrderError):
        decode_changes_parallel(swapped.column("data"), swapped.column("seq"), splits=2)
    # replays="keep" trusts the order given (an archive across a timeline switch)
    assert len(decode_changes(swapped, replays="keep")) == len(decode_changes(_archive(got, later)))
    # the right order decodes
    assert np.all(np.diff(decode_changes(_archive(got, later)).column("commit_lsn").to_numpy()) >= 0)
