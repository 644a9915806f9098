"""Random archives (archive_model) give what the model committed and rebuild its tables."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgoutput_codec import ChangeDecoder, decode_changes
from pgoutput_codec.tables import decode_table_changes, history, net_changes, snapshot, table_changes


from change_cases import _apply_net, _keep_mask_matches_changes, _model_archive, _norm, _plan_for_keys_matches_the_whole_plan, _resumed_runs, _rows, _seq_op



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_random_archives_give_what_the_model_committed(seed):
    """Random sessions (plain, interleaved streamed, two-phase and stream-prepared
    transactions; aborted subtransactions; Relations redefined; Truncates; Origins;
    Logical Messages): the sequential decoder (vectorized and not), the parallel plan
    over rows in any order and split, its key-range parts, the heads-only filters and
    runs resumed from checkpoints all give exactly the changes the model committed, in
    commit order — an oracle no decoder computed (tests/archive_model.py)."""
    import numpy as np

    from pgoutput_codec.changes import decode_changes_parallel
    values, expected = _model_archive(seed)
    keys = np.arange(len(values), dtype=np.int64) * 3 + 11
    table = pa.table({"data": values, "seq": pa.array(keys)})
    want = decode_changes(table)
    assert _seq_op(want) == [(int(keys[s]), op) for s, op in expected]
    try:
        ChangeDecoder._VECTORIZED = False
        assert decode_changes(table).equals(want)
    finally:
        ChangeDecoder._VECTORIZED = True
    r = np.random.default_rng(seed)
    cuts = np.sort(r.choice(len(values), size=int(r.integers(1, 6)), replace=False))
    dec, pieces = ChangeDecoder(), []    # fed in pieces, its state carried through a pickle
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(values)], strict=True):
        pieces.append(dec.feed(table.slice(a, b - a)))
        dec = ChangeDecoder.from_state(pickle.loads(pickle.dumps(dec.state)))
    assert pa.concat_tables(pieces).equals(want)
    perm = r.permutation(len(values))
    got = decode_changes_parallel(values.take(pa.array(perm)), keys[perm], splits=int(r.integers(1, 6)))
    assert got.equals(want)
    _plan_for_keys_matches_the_whole_plan(values, keys, int(r.integers(1, 9)))
    _keep_mask_matches_changes(values, keys)
    cuts = sorted(r.choice(keys, size=int(r.integers(1, 5)), replace=False).tolist()) + [int(keys[-1]) + 1]
    runs, _, _, _ = _resumed_runs(values, keys, None, cuts)
    assert runs.equals(want)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_random_archives_rebuild_the_model_tables(seed):
    """Random sessions over two tables kept consistent (row locks, key changes,
    unchanged TOAST, REPLICA IDENTITY FULL, Truncates, aborted subtransactions, rolled
    back prepares; every other seed, identities flipping between DEFAULT and FULL; every
    third, a column retyped; half of them, a column dropped and added again):
    snapshot is the model's table, as of any commit too; history's versions alive at a
    commit are the table then; net_changes after a commit, applied to the table then,
    give the final table; decode_table_changes equals table_changes."""
    import archive_model
    import numpy as np
    model = archive_model.TableSession(seed, flips=seed % 2 == 1, retypes=seed % 3 == 0, readds=seed % 4 < 2)
    payloads, _ = model.build(finish=seed % 2 == 0)
    values = pa.array(payloads, pa.binary())
    changes = decode_changes(values)
    r = np.random.default_rng(seed)
    cuts = [model.states[int(i)] for i in r.choice(len(model.states), size=min(3, len(model.states)), replace=False)]
    for rid, (tname, _) in model.TABLES.items():
        name = f"public.{tname}"
        final = _norm(model.rows(model.committed, rid))
        if not (changes.column("table").to_pylist().count(tname)):
            assert final == []
            continue
        # (a column dropped and added again shows with the table's next change: not before)
        assert model.unseen(rid) or _norm(_rows(snapshot(changes, name))) == final
        assert decode_table_changes(values, name).equals(table_changes(changes, name))
        hist = _rows(history(changes, name))
        for lsn, tables in cuts:
            then = snapshot(changes, name, as_of_lsn=lsn)
            assert model.unseen(rid, lsn) or _norm(_rows(then)) == _norm(model.rows(tables, rid)), lsn
            alive = model.alive(hist, lsn, rid)
            assert _norm(alive) == _norm(model.rows(tables, rid)), lsn
            later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(lsn, pa.uint64())))
            if len(later.filter(pc.equal(later.column("table"), tname))) and not model.unseen(rid):
                keycols = model.key_columns(rid, later)
                if set(keycols) & {c for at, c, _ in model.dropped[rid] if at >= lsn}:
                    continue   # a MERGE on a column dropped and added again in the batch: no key
                copy = model.table(tables, rid, copied_at=lsn)   # the columns added again after it added
                assert _apply_net(copy, net_changes(later, name), keycols) == final, lsn
