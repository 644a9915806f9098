"""The control plan: any split and order of an archive decodes like the sequential decoder,
its walk in chunks equals one walk, a plan for a key range, the row filters on payload
heads, the commit-LSN window, errors and orphans."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pgoutput_codec import (
    Begin, Commit, Delete, Insert, Relation, RelationColumn, StreamCommit, StreamStart,
    StreamStop, encode_message,
)
from pgoutput_codec import BeginPrepare, Prepare, RollbackPrepared
from pgoutput_codec import decode_changes
from pgoutput_codec.errors import PgoutputDecodeError
from pgoutput_codec.tables import decode_table_changes, table_changes


from change_cases import REL, SETS, _keep_mask_matches_changes, _plan_for_keys_matches_the_whole_plan, _row_drops_match_keep_mask, archive, enc, in_xlogdata, row, streamed_with_aborted_subxact



# ---------------------------------------------------------------- parallel path

@pytest.mark.parametrize("version,option_set", SETS)
def test_plan_decodes_any_split_and_order_like_the_sequential_decoder(version, option_set):
    import numpy as np

    from pgoutput_codec.changes import ControlPlan, control_candidates, decode_changes_parallel
    arch = archive(version, option_set)
    want = decode_changes(arch)
    values = arch.column("data").combine_chunks()
    assert decode_changes_parallel(values, arch.column("seq"), arch.column("lsn"), splits=5).equals(want)
    keys = arch.column("seq").to_numpy()
    mask = control_candidates(values)
    assert mask.mean() < 0.6
    plan = pickle.loads(pickle.dumps(ControlPlan.build(values.filter(pa.array(mask)), keys[mask])))
    perm = np.random.default_rng(len(arch)).permutation(len(values))   # rows in no order at all
    lsn = arch.column("lsn").combine_chunks()
    parts = [plan.changes(values.take(pa.array(p)), keys[p], lsn.take(pa.array(p))) for p in np.array_split(perm, 3)]
    got = pa.concat_tables(parts)
    got = got.take(pc.sort_indices(got, sort_keys=[("commit_rank", "ascending"), ("seq", "ascending")]))
    assert got.drop_columns(["commit_rank"]).equals(want)


@pytest.mark.parametrize("version,option_set", SETS)
def test_the_plan_walks_its_control_rows_in_chunks_as_in_one(version, option_set, monkeypatch):
    """ControlPlan.build walks the control rows in chunks and lets go of each chunk's
    committed transactions, runs of plain transactions with array operations: chunks
    of 1, 2, 3, 5 and 7 rows and one chunk, plain runs of any length or of 2 or 64 rows at
    least taking the array walk, each way, give the plan of one Python walk — every
    segment's transaction and stream state, the commits and their facts, what is left
    open, the Relation and Type events, the checkpoint and the rows — from the start of
    the archive and resumed from a checkpoint halfway."""
    import numpy as np

    import pgoutput_codec.changes as P
    import pgoutput_codec.changes.chunks as W
    arch = archive(version, option_set)
    values = arch.column("data").combine_chunks()
    keys = arch.column("seq").to_numpy()
    mask = P.control_candidates(values)
    cv, ck = values.filter(pa.array(mask)), keys[mask]
    mid = P.ControlPlan.build(cv.slice(0, len(cv) // 2), ck[: len(cv) // 2]).checkpoint()
    later = ck >= mid.from_key
    for resume, v, k in ((None, cv, ck), (mid, cv.filter(pa.array(later)), ck[later])):
        monkeypatch.setattr(W, "VECTORIZED_WALK", False)
        want = P.ControlPlan.build(v, k, resume=resume)      # the Python walk, in one chunk
        for chunk, vectorized, run in ((10**9, True, 64), (10**9, True, 1), (1, True, 1), (2, True, 1),
                                       (7, True, 1), (7, False, 1), (3, True, 2), (5, True, 64)):
            monkeypatch.setattr(W, "WALK_CHUNK", chunk)
            monkeypatch.setattr(W, "VECTORIZED_WALK", vectorized)
            monkeypatch.setattr(W, "MIN_ARRAY_RUN", run)
            got = P.ControlPlan.build(v, k, resume=resume)
            for name in ("seg_slot", "seg_stream", "commit_slots", "ev_rel", "ev_key", "ev_ver"):
                assert np.array_equal(getattr(got, name), getattr(want, name)), (chunk, name)
            for name in ("commit_xid", "commit_lsn", "commit_ts", "commit_origin"):
                assert getattr(got, name).equals(getattr(want, name)), (chunk, name)
            assert got.open_transactions == want.open_transactions and got.live_slots == want.live_slots
            assert not {t["slot"] for t in got.open_transactions} & set(got.commit_slots.tolist())   # let go
            assert {i: a.tolist() for i, a in got.aborted.items()} == {i: a.tolist() for i, a in want.aborted.items()}
            assert got.type_events == want.type_events and got.checkpoint() == want.checkpoint(), chunk
            rows = keys >= (resume.from_key if resume else keys.min())
            assert got.changes(values.filter(pa.array(rows)), keys[rows]).equals(
                want.changes(values.filter(pa.array(rows)), keys[rows])), chunk
        monkeypatch.undo()


def test_a_streamed_transaction_among_plain_ones_costs_the_python_walk_its_own_rows(monkeypatch):
    """The plan cuts its walk where the rows stop being plain: 600 one-row transactions
    around a transaction streamed in two chunks (with a Relation inside a chunk) and one
    with an Origin give the Python walk only those rows and their short neighbours, and
    the plan of one Python walk."""
    import numpy as np

    import pgoutput_codec.changes as P
    import pgoutput_codec.changes.chunks as W
    from pgoutput_codec import Origin
    rel = Relation(relation_id=1, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1),))
    msgs, lsn = [rel], 1 << 32

    def plain(n):
        nonlocal lsn
        for _ in range(n):
            lsn += 64
            msgs.extend([Begin(final_lsn=lsn, commit_ts=lsn, xid=lsn % 10**6), Insert(relation_id=1, new_tuple=row(1)),
                         Commit(commit_lsn=lsn, end_lsn=lsn + 8, commit_ts=lsn)])
    plain(200)
    msgs.extend([StreamStart(xid=7, first_segment=True), rel, Insert(xid=7, relation_id=1, new_tuple=row(2)),
                 StreamStop()])
    plain(200)
    msgs.extend([StreamStart(xid=7, first_segment=False), Insert(xid=7, relation_id=1, new_tuple=row(3)),
                 StreamStop()])
    lsn += 64
    msgs.append(StreamCommit(xid=7, flags=0, commit_lsn=lsn, end_lsn=lsn + 8, commit_ts=lsn))
    lsn += 64
    msgs.extend([Begin(final_lsn=lsn, commit_ts=lsn, xid=8), Origin(origin_lsn=5, origin_name="up"),
                 Insert(relation_id=1, new_tuple=row(4)), Commit(commit_lsn=lsn, end_lsn=lsn + 8, commit_ts=lsn)])
    plain(200)
    values = pa.array([encode_message(m) for m in msgs], pa.binary())
    mask = P.control_candidates(values)
    cv, ck = values.filter(pa.array(mask)), np.flatnonzero(mask).astype(np.int64)
    walked = []
    real = W.python_walk
    monkeypatch.setattr(W, "python_walk", lambda dec, m, idx, *a: walked.append(len(idx)) or real(dec, m, idx, *a))
    got = P.ControlPlan.build(cv, ck)
    assert 0 < sum(walked) <= 12, walked   # S R E, S E c, the Origin transaction's B O C
    monkeypatch.setattr(W, "VECTORIZED_WALK", False)
    walked.clear()
    want = P.ControlPlan.build(cv, ck)
    assert sum(walked) == len(cv)
    for name in ("seg_slot", "seg_stream", "commit_slots", "ev_rel", "ev_key", "ev_ver"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    for name in ("commit_xid", "commit_lsn", "commit_ts", "commit_origin"):
        assert getattr(got, name).equals(getattr(want, name)), name
    assert got.commit_origin.null_count == len(got.commit_origin) - 1
    assert got.changes(values, np.arange(len(values))).equals(want.changes(values, np.arange(len(values))))
    assert len(got.changes(values, np.arange(len(values)))) == 603


@pytest.mark.parametrize("version,option_set", SETS)
def test_a_plan_for_a_key_range_is_the_whole_plan_there(version, option_set):
    """What a data-source partition carries (its key range's part of the plan) decodes
    its rows as the whole plan does, with ``tables``, a commit window and in 1-7 pieces."""
    import numpy as np
    arch = archive(version, option_set)
    values = arch.column("data").combine_chunks()
    keys = arch.column("seq").to_numpy()
    whole, sizes = _plan_for_keys_matches_the_whole_plan(values, keys, 7)
    # past what every piece holds (Relation versions, schema, options): about the plan once,
    # not 7 times
    fixed = len(pickle.dumps(whole.for_keys(int(keys.max()) + 1, int(keys.max()) + 1)))
    one = len(pickle.dumps(whole)) - fixed
    assert sum(sizes) - 7 * fixed < 1.5 * one, (sizes, fixed, one)
    _plan_for_keys_matches_the_whole_plan(values, keys, 3, tables="public.[a-m]*")
    lsns = np.unique(decode_changes(arch).column("commit_lsn").to_numpy(zero_copy_only=False))
    _plan_for_keys_matches_the_whole_plan(values, keys, 4, after_lsn=int(lsns[len(lsns) // 3]))
    _plan_for_keys_matches_the_whole_plan(values, keys * 7 - 100, 5)   # keys with gaps, below zero


def test_a_plan_for_a_key_range_keeps_aborts_and_prepares():
    import numpy as np
    msgs = enc([
        *streamed_with_aborted_subxact(),
        BeginPrepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=8, gid="g2"), REL,
        Insert(relation_id=16400, new_tuple=row(4, "rolled back")),
        Prepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=8, gid="g2"),
        RollbackPrepared(prepare_end_lsn=11, rollback_end_lsn=20, prepare_ts=1, rollback_ts=2, xid=8, gid="g2"),
        Begin(final_lsn=600, commit_ts=0, xid=9),
        Insert(relation_id=16400, new_tuple=row(5, "kept")),
        Commit(commit_lsn=600, end_lsn=601, commit_ts=0),
    ])
    values = pa.array(msgs, pa.binary())
    keys = np.arange(len(values)) * 3
    for pieces in range(1, len(values) + 1):
        whole, _ = _plan_for_keys_matches_the_whole_plan(values, keys, pieces)
    assert whole.aborted and len(whole.changes(values, keys)) > 0


@pytest.mark.parametrize("version,option_set", SETS)
def test_keep_mask_reads_the_heads_like_changes_reads_the_rows(version, option_set):
    """The Spark change rows are filtered on 35 payload bytes before any decoding: the
    filter must leave out exactly what the full decode would, on every real archive,
    with ``tables`` choosing (some tables out), and inside XLogData frames."""
    import numpy as np

    from pgoutput_codec.pgoutput.batch import message_tags
    from pgoutput_codec.changes import HEAD_BYTES
    arch = archive(version, option_set)
    values = arch.column("data").combine_chunks()
    keys = arch.column("seq").to_numpy()
    plan, dropped = _keep_mask_matches_changes(values, keys)
    picked, dropped_t = _keep_mask_matches_changes(values, keys, tables="public.[a-m]*")
    assert picked.drops_changes() and dropped_t > dropped
    # one table, as table_changes narrows a plan: every other table's rows left out
    v = plan.versions[-1]
    one = plan.for_table(v["schema"], v["table"])
    iud = np.isin(message_tags(values), list(b"IUD"))
    want = plan.changes(values.filter(pa.array(iud)), keys[iud])
    want = want.filter(pc.and_(pc.equal(want.column("schema"), v["schema"]), pc.equal(want.column("table"), v["table"])))
    keep = one.keep_mask(pc.binary_slice(values, 0, HEAD_BYTES), keys)
    assert 0 < len(want) and sorted(keys[iud & keep]) == sorted(want.column("seq").to_pylist())
    _row_drops_match_keep_mask(one, values, keys, keep)
    assert one.row_drops().relids          # the other tables, by relation id
    assert plan.for_table(v["schema"], v["table"] + "*").keep_mask(values, keys)[iud].sum() == 0
    wrapped = in_xlogdata(values, lambda i: i % 2)
    assert _keep_mask_matches_changes(wrapped, keys, tables="public.[a-m]*")[1] == dropped_t
    if not plan.drops_changes():   # nothing to judge: every row kept without reading
        assert plan.keep_mask(values, np.asarray(keys)).all()


@pytest.mark.parametrize("version,option_set", SETS)
def test_commit_window_gives_the_rows_a_commit_lsn_filter_gives(version, option_set):
    """after_lsn/until_lsn: the single-process decoder, the parallel plan (rows in any
    split) and the heads-only keep_mask give exactly the rows of the transactions
    committed in (after, until] — ranks those of the whole archive — and a window that
    starts mid-archive is a few key ranges, not one per transaction."""
    import numpy as np

    from pgoutput_codec.pgoutput.messages import format_lsn
    from pgoutput_codec.changes import ControlPlan, control_candidates, decode_changes_parallel
    arch = archive(version, option_set)
    full = decode_changes(arch)
    lsns = np.unique(full.column("commit_lsn").to_numpy(zero_copy_only=False))
    assert len(lsns) >= 3
    after, until = int(lsns[len(lsns) // 3]), int(lsns[2 * len(lsns) // 3])

    def between(t, a, u):
        c = t.column("commit_lsn")
        keep = pc.less_equal(c, pa.scalar(u, pa.uint64())) if u is not None else pc.is_valid(c)
        return t.filter(pc.and_(pc.greater(c, pa.scalar(a, pa.uint64())), keep) if a is not None else keep)

    values = arch.column("data").combine_chunks()
    keys = arch.column("seq").to_numpy()
    mask = control_candidates(values)
    whole = ControlPlan.build(values.filter(pa.array(mask)), keys[mask])
    ranks = whole.changes(values, keys)
    for a, u in ((after, until), (after, None), (None, until)):
        want = between(full, a, u)
        assert 0 < len(want) < len(full)
        got = decode_changes(arch, after_lsn=a, until_lsn=None if u is None else format_lsn(u))
        assert got.equals(want)
        name = "{}.{}".format(*want.select(["schema", "table"]).to_pylist()[-1].values())
        assert decode_table_changes(arch, name, after_lsn=a, until_lsn=u).equals(table_changes(want, name))
        assert decode_changes_parallel(values, arch.column("seq"), arch.column("lsn"), splits=3,
                                       after_lsn=a, until_lsn=u).equals(want)
        plan, dropped = _keep_mask_matches_changes(values, keys, after_lsn=a, until_lsn=u)
        narrowed = whole.between(a, u)
        out = narrowed.changes(values, keys, arch.column("lsn"))
        out = out.sort_by([("commit_rank", "ascending"), ("seq", "ascending")])   # stable: a Truncate's rows
        assert out.drop_columns(["commit_rank"]).equals(want)
        # ranks are the whole archive's: sorting by them gives the commit order
        assert set(out.column("commit_rank").to_pylist()) <= set(ranks.column("commit_rank").to_pylist())
        ranges = plan.dropped_key_ranges()
        if ranges is not None:
            assert len(ranges) <= 4, ranges
        elif not plan.aborted:
            raise AssertionError("a commit window over whole transactions must be key ranges")
        assert dropped > 0
    assert whole.between(after, None).between(None, until).window == (after, until)
    with pytest.raises(ValueError, match="before after_lsn"):
        decode_changes(arch, after_lsn=until, until_lsn=after)


def test_keep_mask_on_aborts_rollbacks_and_cut_archives():
    import numpy as np
    msgs = enc([
        *streamed_with_aborted_subxact(),
        BeginPrepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=8, gid="g2"), REL,
        Insert(relation_id=16400, new_tuple=row(4, "rolled back")),
        Prepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=8, gid="g2"),
        RollbackPrepared(prepare_end_lsn=11, rollback_end_lsn=20, prepare_ts=1, rollback_ts=2, xid=8, gid="g2"),
        Begin(final_lsn=30, commit_ts=0, xid=9),
        Delete(relation_id=16400, old_kind="K", old_tuple=row(1, None)),   # never committed: the archive ends
    ])
    values = pa.array(msgs, pa.binary())
    plan, dropped = _keep_mask_matches_changes(values, np.arange(len(values)) * 3)
    assert plan.drops_changes() and dropped == 3 and plan.dropped_key_ranges() is None   # an abort: per row
    # without the streamed part: the rolled-back prepare and the open transaction, by key
    rest = values.slice(10)
    keys = np.arange(len(rest)) * 3 + 1000
    plan, dropped = _keep_mask_matches_changes(rest, keys)
    # (before the first row, the prepared transaction up to its Prepare) and (the open one on)
    assert dropped == 2 and plan.dropped_key_ranges() == [(None, keys[3]), (keys[5], None)]
    assert plan.dropped_key_ranges(limit=1) is None


def test_plan_counts_errors_and_orphans():
    import numpy as np

    from pgoutput_codec.changes import ControlPlan, control_candidates
    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL, Insert(relation_id=16400, new_tuple=row(1, "x")),
                Commit(commit_lsn=1, end_lsn=2, commit_ts=0), Insert(relation_id=16400, new_tuple=row(2, "y"))])
    values = pa.array(msgs[:4] + [b"I\x00"] + msgs[4:], pa.binary())
    keys = np.arange(len(values))
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect")
    out = plan.changes(values, keys, errors="collect")
    assert len(out) == 1
    c = plan.last_counts
    assert c["rows_in"] == c["rows_decoded"] + c["rows_in_error"] == 6
    assert c["orphans"] == 1                       # the Insert after the Commit
    with pytest.raises(PgoutputDecodeError, match="seq 4"):
        plan.changes(values, keys, errors="raise")
