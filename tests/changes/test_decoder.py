"""ChangeDecoder on real-server bytes: snapshots equal the servers' final tables, text and
binary give the same changes, chunked decoding with saved state equals decoding in one go,
spilling, and the array path for plain transactions against the general walk."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from pgoutput_codec import (
    Begin, Commit, Delete, Insert, Relation, StreamCommit, StreamStart,
    StreamStop, Truncate,
)
from pgoutput_codec import decode_batch
from pgoutput_codec import ChangeDecoder, decode_changes
from pgoutput_codec.tables import decode_table_changes, snapshot, table_changes


from change_cases import REL, REL2, SETS, STREAM_SETS, TABLES, TRUTH, archive, enc, known_gap, registry_for, row, same_values, server_table, streamed_with_aborted_subxact



@pytest.mark.parametrize("version,option_set", SETS)
def test_snapshot_equals_server_tables(version, option_set):
    reg = registry_for(version)
    changes = decode_changes(archive(version, option_set), registry=reg)
    checked = 0
    for t in TABLES:
        if t["server_version"] != version or t["is_partition"]:
            continue   # partitions are published through their root
        name = f'{t["schema"]}.{t["table"]}'
        got = snapshot(changes, name, registry=reg)
        want = server_table(t, reg)
        assert len(got) == len(want), name
        if not len(want):
            continue
        key = want.column_names[0]
        got, want = got.sort_by(key), want.sort_by(key)
        gen = dict(zip(t["column_names"], t["column_generated"], strict=True))
        for col in want.column_names:
            if gen.get(col) == "s" and int(version.split(".")[0]) < 18:
                assert col not in got.column_names   # stored generated columns: PG18 only
                continue
            if known_gap(version, option_set, col, t):
                continue
            assert col in got.column_names, (name, col)
            assert same_values(got.column(col), want.column(col)), (name, col)
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("version", sorted(TRUTH))
def test_text_and_binary_give_the_same_table_changes(version):
    reg = registry_for(version)
    text = decode_changes(archive(version, "v1_text"), registry=reg)
    binary = decode_changes(archive(version, "v1_binary_messages"), registry=reg)
    for t in TABLES:
        if t["server_version"] != version or t["is_partition"]:
            continue
        name = f'{t["schema"]}.{t["table"]}'
        a, b = table_changes(text, name, registry=reg), table_changes(binary, name, registry=reg)
        assert len(a) == len(b)
        assert a.column("op").equals(b.column("op"))
        for side in ("before", "after"):
            sa, sb = a.column(side).combine_chunks(), b.column(side).combine_chunks()
            for f in sa.type:
                if known_gap(version, "v1_binary_messages", f.name, t):
                    continue
                assert same_values(pa.chunked_array([sa.field(f.name)]), pa.chunked_array([sb.field(f.name)])), \
                    (name, side, f.name)


@pytest.mark.parametrize("version,option_set", SETS)
def test_every_option_set_gives_the_same_changes(version, option_set):
    """Streaming, two-phase and aborts must not change what committed: the change rows
    (op, table, values as text-or-binary) match the plain protocol-1 text run in count
    and per table/op."""
    base = decode_changes(archive(version, "v1_text"))
    got = decode_changes(archive(version, option_set))
    key = lambda t: sorted(zip(t.column("schema").to_pylist(), t.column("table").to_pylist(),  # noqa: E731
                               t.column("op").to_pylist(), strict=True))
    assert key(got) == key(base)


@pytest.mark.parametrize("version,option_set,chunk",
                         [(v, o, c) for v, o in STREAM_SETS for c in (7, 64)]
                         + [("16.14", "v4_2pc_parallel_origin", 1)])   # every row its own chunk: slow, once
def test_chunked_with_state_equals_one_go(version, option_set, chunk):
    arch = archive(version, option_set)
    whole = decode_changes(arch)
    dec = ChangeDecoder()
    pieces = []
    for start in range(0, len(arch), chunk):
        pieces.append(dec.feed(arch.slice(start, chunk)))
        dec = ChangeDecoder.from_state(pickle.loads(pickle.dumps(dec.state)))   # resume elsewhere
    got = pa.concat_tables(pieces)
    assert got.equals(whole)


@pytest.mark.parametrize("version,option_set", STREAM_SETS[:2] + [("16.14", "v4_2pc_parallel_origin")])
def test_one_feed_decodes_in_parts_as_in_one(version, option_set, monkeypatch):
    """feed() decodes a long input in parts of FEED_ROWS rows (the walk's dicts of
    control messages live for one part): parts of 1, 5 and 64 rows give the rows, the
    errors and the counts of one part."""
    import pgoutput_codec.changes.decoder as C
    arch = archive(version, option_set)
    want = ChangeDecoder(errors="collect")
    whole = want.feed(arch)
    for rows in (1, 5, 64):
        monkeypatch.setattr(C, "FEED_ROWS", rows)
        dec = ChangeDecoder(errors="collect")
        assert dec.feed(arch).equals(whole), rows
        assert (dec.counts, dec.errors, dec.state) == (want.counts, want.errors, want.state)


def test_interleaved_transactions_keep_arrival_order_not_lsn():
    arch = archive("16.14", "v1_text")
    lsns = [int(x.split("/")[0], 16) << 32 | int(x.split("/")[1], 16) for x in arch.column("lsn").to_pylist()]
    assert any(b < a for a, b in zip(lsns, lsns[1:], strict=False)), "corpus has interleaving"
    changes = decode_changes(arch)
    commit = changes.column("commit_lsn").to_pylist()
    assert commit == sorted(commit)   # commit order
    ident = list(zip(changes.column("seq").to_pylist(), changes.column("relation_id").to_pylist(), strict=True))
    assert len(set(ident)) == len(ident)   # a Truncate of n tables is n rows of one seq


def test_spill_to_disk_gives_the_same_result(tmp_path):
    arch = archive("16.14", "v2_streaming")
    whole = decode_changes(arch)
    dec = ChangeDecoder(max_txn_in_memory_mb=0, spill_dir=str(tmp_path))
    pieces = [dec.feed(arch.slice(s, 50)) for s in range(0, len(arch), 50)]
    assert pa.concat_tables(pieces).equals(whole)
    assert not list(tmp_path.iterdir())   # spill files are removed once committed


def test_a_spilled_transaction_comes_back_a_held_piece_at_a_time(tmp_path):
    """feed_parts gives a committed transaction that spilled one held piece at a time
    (its rows of each fed chunk), then the rest of the chunk; together, feed's rows."""
    arch = archive("16.14", "v2_streaming")
    whole = decode_changes(arch)
    dec = ChangeDecoder(max_txn_in_memory_mb=0, spill_dir=str(tmp_path))
    parts = [list(dec.feed_parts(arch.slice(s, 50))) for s in range(0, len(arch), 50)]
    flat = [t for p in parts for t in p if len(t)]
    assert pa.concat_tables(flat).equals(whole)
    assert max(len(p) for p in parts) > 2            # a chunk gave a spilled transaction in pieces
    assert max(len(t) for t in flat) <= 50
    assert not list(tmp_path.iterdir())


def test_spill_files_go_with_the_decoder_however_the_run_ends(tmp_path):
    """A transaction still open at the end of the input keeps its rows in spill files;
    they are removed by close(), at the end of a with block (also when it raises), and
    when the decoder is collected, and the state taken before holds those rows."""
    import gc
    msgs = enc(streamed_with_aborted_subxact())
    cut = 5                                     # after the first Stream Stop: txn 100 open

    def open_spills(d):
        assert not len(d.feed(msgs[:cut]))
        assert d.open_transactions and list(tmp_path.iterdir())
        return d

    dec = open_spills(ChangeDecoder(max_txn_in_memory_mb=0, spill_dir=str(tmp_path)))
    state = dec.state
    dec.close()
    assert not list(tmp_path.iterdir())
    assert ChangeDecoder.from_state(state).feed(msgs[cut:]).equals(decode_changes(msgs))
    with pytest.raises(RuntimeError):
        with ChangeDecoder(max_txn_in_memory_mb=0, spill_dir=str(tmp_path)) as d:
            open_spills(d)
            raise RuntimeError("a failed run")
    assert not list(tmp_path.iterdir())
    open_spills(ChangeDecoder(max_txn_in_memory_mb=0, spill_dir=str(tmp_path)))
    gc.collect()
    assert not list(tmp_path.iterdir())


def test_the_decoder_budget_spills_the_largest_open_transactions_first(tmp_path):
    """Three streamed transactions open at once (1.2 MB, 80 KB and 600 KB of values),
    none past its own limit: past the decoder's 1 MB budget the largest spills, the
    others stay in memory, and the result is that of a decoder with no budget."""
    def txn(xid, n):
        return [StreamStart(xid=xid, first_segment=True),
                Relation(xid=xid, relation_id=REL.relation_id, namespace="public", relation_name="t",
                         replica_identity="d", columns=REL.columns),
                *[Insert(xid=xid, relation_id=16400, new_tuple=row(i, "x" * 4000)) for i in range(n)],
                StreamStop()]
    opened = enc(txn(100, 300) + txn(101, 20) + txn(102, 150))
    commits = enc([StreamCommit(xid=x, flags=0, commit_lsn=500 + x, end_lsn=510 + x, commit_ts=1)
                   for x in (100, 101, 102)])
    dec = ChangeDecoder(max_memory_mb=1, spill_dir=str(tmp_path))
    assert not len(dec.feed(opened))
    in_memory = {t.xid: sum(len(p) for p in t.pending if not isinstance(p, str)) for t in dec.walk.txns.values()}
    assert in_memory == {100: 0, 101: 20, 102: 150}
    assert len(list(tmp_path.iterdir())) == 1
    assert sum(t.pending_bytes for t in dec.walk.txns.values()) <= 1 << 20
    got = dec.feed(commits)
    assert got.equals(ChangeDecoder(max_memory_mb=10**6).feed(opened + commits))
    assert not list(tmp_path.iterdir())


def test_validity_read_from_the_bitmap_of_sliced_arrays():
    """arrays.validity (the bitmap unpacked, where tables.typed.locate reads which rows
    have an image) equals Arrow's is_valid, on arrays sliced at offsets inside a byte."""
    from pgoutput_codec.arrays import list_lengths
    from pgoutput_codec.arrays import validity as _validity
    arr = pa.array([None if i % 3 == 0 or i % 7 == 2 else [i] for i in range(53)], pa.list_(pa.int64()))
    for off, n in ((0, 53), (1, 20), (5, 43), (13, 1), (50, 3), (9, 0)):
        part = arr.slice(off, n)
        assert _validity(part).tolist() == part.is_valid().to_pylist(), (off, n)
        assert list_lengths(part).tolist() == [-1 if v is None else len(v) for v in part.to_pylist()]


def test_rows_at_reads_the_fields_asked_for():
    """changes.rows_at (Relation, Type and Truncate rows as dicts of the fields the walk
    reads): the values take() gives, and the tags read as a view of the type column
    equal the gathered ones (an error row among them: gathered)."""
    import numpy as np

    from pgoutput_codec.changes.rows import DEFINITION_FIELDS, rows_at, tag_codes
    msgs = decode_batch(enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL, REL2,
                             Insert(relation_id=16400, new_tuple=row(1, "a")),
                             Truncate(options=1, relation_ids=(16400, 16401)),
                             Commit(commit_lsn=1, end_lsn=2, commit_ts=0)] * 5))
    for idx in (np.array([1, 2, 4]), np.arange(1, 30, 2), np.array([], np.int64)):
        assert rows_at(msgs, idx, DEFINITION_FIELDS) == [{f: m[f] for f in DEFINITION_FIELDS}
                                                         for m in msgs.take(pa.array(idx, pa.int64())).to_pylist()]
    types = msgs.field("type")
    assert tag_codes(types).tolist() == [ord(t) for t in types.to_pylist()]
    assert tag_codes(types.slice(7, 9)).tolist() == [ord(t) for t in types.slice(7, 9).to_pylist()]
    bad = decode_batch(enc([REL]) + [b"Z"] + enc([REL2]))
    assert tag_codes(bad.field("type")).tolist() == [ord("R"), 0, ord("R")]


@pytest.mark.parametrize("version,option_set", SETS)
def test_vectorized_plain_transactions_equal_the_general_walk(version, option_set, monkeypatch):
    """Chunks of plain transactions take a vectorized path; in chunks of 30 rows the
    archives have some that qualify and some that do not — all must equal the general
    walk."""
    arc = archive(version, option_set)
    reg = registry_for(version)

    # chunks of 30 rows, and chunks cut after every Commit (no transaction open at a start)
    tags = decode_batch(arc.column("data")).field("type").to_pylist()
    after_c = [i + 1 for i, t in enumerate(tags) if t == "C"]
    cuts = [sorted(set(range(0, len(arc), 30))), [0] + after_c]

    def run(**kw):
        parts, paths = [], []
        for starts in cuts:
            dec = ChangeDecoder(registry=reg, **kw)
            for a, b in zip(starts, starts[1:] + [len(arc)], strict=True):
                parts.append(dec.feed(arc.slice(a, b - a)))
                paths.append(dec._last_path)
        return pa.concat_tables(parts), paths

    fast, paths = run()
    monkeypatch.setattr(ChangeDecoder, "_VECTORIZED", False)
    slow, _ = run()
    assert fast.equals(slow)
    assert "general" in paths
    monkeypatch.setattr(ChangeDecoder, "_VECTORIZED", True)
    if "plain" not in paths:
        pytest.skip("no chunk of plain transactions in this archive")


def test_vectorized_path_is_taken_and_equal_on_plain_transactions(monkeypatch):
    msgs = [REL]
    for t in range(50):
        msgs += [Begin(final_lsn=100 + t, commit_ts=t, xid=10 + t)]
        msgs += [Insert(relation_id=16400, new_tuple=row(t * 10 + k, f"v{k}")) for k in range(3)]
        if t % 7 == 3:
            msgs += [Delete(relation_id=16400, old_kind="K", old_tuple=row(t * 10, None))]
        if t % 11 == 5:
            msgs += [Truncate(options=0, relation_ids=(16400,))]
        msgs += [Commit(commit_lsn=100 + t, end_lsn=101 + t, commit_ts=t)]
    arc = enc(msgs)
    dec = ChangeDecoder()
    fast = dec.feed(arc)
    assert dec._last_path == "plain"
    monkeypatch.setattr(ChangeDecoder, "_VECTORIZED", False)
    slow = ChangeDecoder().feed(arc)
    assert fast.equals(slow)
    assert len(fast) == 150 + 7 + 5
    assert fast.column("xid").to_pylist()[:3] == [10, 10, 10]
    monkeypatch.setattr(ChangeDecoder, "_VECTORIZED", True)
    for opts in ({}, {"include_xids": False}, {"tables": "public.u"}):
        want = table_changes(decode_changes(arc, **opts), "public.t")
        got = decode_table_changes(arc, "public.t", **opts)
        assert got.equals(want), opts


def test_commit_rank_with_far_apart_transaction_slots():
    """A transaction open since long ago (a small slot) commits next to recent ones (large
    slots): the rank lookup must not allocate a table spanning the whole slot range."""
    dec = ChangeDecoder()
    dec.feed(enc([REL, Begin(final_lsn=1, commit_ts=0, xid=7), Insert(relation_id=16400, new_tuple=row(1, "a"))]))
    dec.walk.next_slot = 5_000_000          # as after millions of transactions
    out = dec.feed(enc([Insert(relation_id=16400, new_tuple=row(2, "b")),
                        Commit(commit_lsn=9, end_lsn=10, commit_ts=0),
                        Begin(final_lsn=11, commit_ts=0, xid=8), Insert(relation_id=16400, new_tuple=row(3, "c")),
                        Commit(commit_lsn=11, end_lsn=12, commit_ts=0)]))
    assert out.column("xid").to_pylist() == [7, 7, 8]
    assert out.column("commit_lsn").to_pylist() == [9, 9, 11]


@pytest.mark.parametrize("version,option_set,chunk", [("16.14", "v1_text", 7), ("16.14", "v2_streaming", 500)])
def test_committed_rows_of_a_cut_chunk_are_given_as_they_are(version, option_set, chunk, monkeypatch):
    """Feeds cut inside transactions give the rows of one feed. A chunk's committed rows
    that are one run (a transaction open at its end) are given as a slice of the
    chunk's rows; those an open transaction's rows sit among (streamed, interleaved) are
    taken apart; both as one feed gives them."""
    import pgoutput_codec.changes.decoder as C
    arch = archive(version, option_set)
    whole = decode_changes(arch)
    runs = []
    real = C.take_rising

    def seen(table, idx):
        if len(idx):
            runs.append(bool(idx[-1] - idx[0] + 1 == len(idx)))
        return real(table, idx)
    monkeypatch.setattr(C, "take_rising", seen)
    dec = ChangeDecoder()
    got = pa.concat_tables([dec.feed(arch.slice(a, chunk)) for a in range(0, len(arch), chunk)])
    assert got.equals(whole)
    assert True in runs
    if "stream" in option_set:
        assert False in runs
