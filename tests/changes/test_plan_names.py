"""Which relation bears a table's name, as the plan and the rows see it: renames, tables
replaced, Relations in transactions committing later or outside any, row drops and the
heads given."""

from __future__ import annotations


import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pgoutput_codec import (
    Begin, Commit, Insert, encode_message,
)
from pgoutput_codec import decode_changes


from change_cases import REL, _given_by_heads, _keep_mask_matches_changes, _kept_by_row_drops, _plan_and_rows, enc, orphan_archive, relation_in_a_prepared_transaction, renamed_archive, row, staggered_archive



@pytest.mark.parametrize("scenario", ["drop_recreate", "swap", "rename", "renamed_away", "three_generations"])
def test_the_plan_and_the_rows_choose_the_same_relation_for_a_name(scenario):
    """Which relation bears a name (tests/table_moves.py): the plan reads it from its
    Relations (what Spark uses straight from decode_changes), the single process from
    the change rows; they agree as of every commit. A run resumed from a checkpoint
    knows the earlier Relations only from it (in the order they were sent): it still
    finds the bearer, and says another relation bore the name only when one did while
    the run's changes ran — a table replaced before the run must not make every later
    batch's net_changes begin with a truncate."""
    import table_moves as TM

    from pgoutput_codec.changes import ControlPlan, control_candidates
    from pgoutput_codec.tables.rows import resolve as _resolve
    msgs, _ = TM.messages(TM.SCENARIOS[scenario])
    arch = pa.table({"seq": list(range(len(msgs))), "data": pa.array([encode_message(m) for m in msgs])})
    whole = decode_changes(arch)
    values, keys = arch.column("data").combine_chunks(), arch.column("seq").to_numpy()
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask])
    name = f"public.{TM.NAME}"

    def relation(rows):
        ids = set(rows.column("relation_id").to_pylist())
        assert len(ids) <= 1
        return ids.pop() if ids else None
    final = relation(_resolve(whole, name)[0])
    commits = sorted(set(whole.column("commit_lsn").to_pylist()))
    for cut in [None] + commits:
        mine, got, (rows, replaced), at_cut = _plan_and_rows(plan, values, keys, whole, name, cut)
        assert got.column("seq").to_pylist() == at_cut.column("seq").to_pylist(), cut
        assert (mine._chosen[1], mine._chosen[2]) == (relation(rows), replaced), cut
        if cut is None or cut == commits[-1]:
            continue
        # the run after the cut, from the checkpoint of the run up to it
        cp = plan.between(until_lsn=cut).checkpoint()
        rest = keys >= cp.from_key
        v2, k2 = values.filter(pa.array(rest)), keys[rest]
        m2 = control_candidates(v2)
        later = ControlPlan.build(v2.filter(pa.array(m2)), k2[m2], resume=cp).between(after_lsn=cut)
        holder, moved = later.bearer("public", TM.NAME)
        assert holder == final, cut
        before = relation(rows) if len(at_cut) else None   # the copy's relation
        if before == final:
            assert not moved, cut                 # no truncate: the copy holds this relation's rows
        elif before is not None and final is not None:
            assert moved, cut                     # the copy's relation bore the name into the run


@pytest.mark.parametrize("ending", ["commit", "rollback", "open"])
def test_the_plan_finds_a_table_whose_relation_came_in_a_later_committing_transaction(ending):
    """A case of Spark's random-session test run by hand (seed 3787): a prepared
    transaction sends the table's Relation, and a plain transaction that commits before
    it (or without it: the prepared one rolled back, or still open when the archive
    ends) changes the table with no Relation of its own — PostgreSQL sends a relation's
    schema once, and a decoded prepare counts (seen on 15/16/18:
    tests/conformance/test_prepared_relation.py). A plan taking only Relations of
    transactions committed by the cut would leave Spark's snapshot as of the plain commit
    (or of any commit, when the prepared one never commits) empty; the rows' rule finds
    the table: the one relation that ever bore the name bears it, as in the single process."""
    from pgoutput_codec.changes import ControlPlan, control_candidates
    msgs = relation_in_a_prepared_transaction(ending)
    arch = pa.table({"seq": list(range(len(msgs))), "data": pa.array(enc(msgs))})
    whole = decode_changes(arch)
    values, keys = arch.column("data").combine_chunks(), arch.column("seq").to_numpy()
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask])
    commits = sorted(set(whole.column("commit_lsn").to_pylist()))
    assert commits == ([20, 30] if ending == "commit" else [20])
    for cut in [None] + commits:
        mine, got, _, at_cut = _plan_and_rows(plan, values, keys, whole, "public.t", cut)
        # (the plan's rows in arrival order; Spark orders them by commit_rank)
        assert sorted(got.column("seq").to_pylist()) == sorted(at_cut.column("seq").to_pylist()) != [], cut
        assert mine._chosen[1:] == (16400, False), cut


def test_the_plan_reads_relations_sent_outside_any_transaction():
    """Relations before the archive's first Begin (an archive put together by hand or a
    tool: bench/spark_tables_bench.py's ten tables) define their relations for all that
    follows, as the decoder reads them: the plan finds the table that bears each name
    there too (a plan taking only Relations of committed transactions would choose such a
    table empty in Spark), and its rows are the single process's."""
    import dataclasses

    from pgoutput_codec.changes import ControlPlan, control_candidates
    from pgoutput_codec.tables.rows import resolve as _resolve
    rels = [dataclasses.replace(REL, relation_id=16400 + k, relation_name=f"t{k}") for k in range(3)]
    msgs = [*rels]
    for k in range(4):
        msgs += [Begin(final_lsn=k + 1, commit_ts=0, xid=700 + k),
                 *[Insert(relation_id=16400 + j, new_tuple=row(k, "v")) for j in range(k % 3 + 1)],
                 Commit(commit_lsn=k + 1, end_lsn=k + 2, commit_ts=0)]
    arch = pa.table({"seq": list(range(len(msgs))), "data": pa.array([encode_message(m) for m in msgs])})
    whole = decode_changes(arch)
    values, keys = arch.column("data").combine_chunks(), arch.column("seq").to_numpy()
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask])
    for k in range(3):
        rows, _ = _resolve(whole, f"public.t{k}")
        mine = plan.for_table("public", f"t{k}")
        assert mine._chosen[1] == 16400 + k
        assert mine.changes(values, keys).column("seq").to_pylist() == rows.column("seq").to_pylist() != []


def test_row_drops_follow_a_table_renamed_into_and_out_of_the_choice():
    """A relation id's rows are left out only while the Relation in force names a table
    not chosen: ``ALTER TABLE … RENAME`` keeps the id and sends a new Relation. A row
    before its id's first Relation is kept (the decoder reports it)."""
    import numpy as np

    from pgoutput_codec.changes import ControlPlan, control_candidates
    values, keys = renamed_archive()
    at = keys.tolist()   # rows 5, 11 and 15 are 16400's Relations, row 7 16401's
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], tables="public.t")
    keep = plan.keep_mask(values, keys)
    assert keep[[1, 2]].all()                     # before any Relation: kept, for the decoder to report
    assert not keep[[6, 8, 16, 17]].any() and keep[12]
    drops = plan.row_drops()
    assert drops.relids == {16400: [(at[5], at[11]), (at[15], None)], 16401: [(at[7], None)]}
    assert drops.segments == [(None, at[0])] and drops.stream == [] and drops.aborted == []
    assert _kept_by_row_drops(drops, values, keys) == keep.tolist()
    # without the first transaction: what changes() leaves out, read from the heads
    rest, rest_keys = values.slice(4), keys[4:]
    plan, dropped = _keep_mask_matches_changes(rest, rest_keys, tables="public.t")
    assert dropped == 4 and plan.row_drops().relids == drops.relids
    # the table named t: 16400 as of commit 3; renamed away at the end, none
    assert plan.for_table("public", "t", until_lsn=3).given_heads().firsts == {16400: at[5]}
    assert plan.for_table("public", "t").given_heads().firsts == {}
    # tables first described all through the archive, rows before their first Relation
    values, keys = staggered_archive()
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], tables="public.t7")
    keep = plan.keep_mask(values, keys)
    assert len(plan.row_drops().relids) == 29 and _kept_by_row_drops(plan.row_drops(), values, keys) == keep.tolist()
    early = np.array([v is not None and b"early" in v for v in values.to_pylist()])
    assert keep[early].all() and (~keep).sum() > 300


def test_given_heads_leave_out_changes_outside_any_transaction():
    """A change between a Commit and the next Begin is no transaction's: head_facts does
    not give it, and neither does given_heads (its key lies in ``orphans``); the
    change decoder reports it."""
    import numpy as np

    from pgoutput_codec.changes import HEAD_BYTES, ControlPlan, control_candidates
    values, keys = orphan_archive()
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect")
    heads = plan.given_heads()
    assert heads.orphans == [(keys[3], keys[5]), (keys[7], None)]   # and after the last Commit
    given = [g[0] for g in _given_by_heads(heads, values, keys)]
    assert given == [False, False, True, False, False, False, True, False]
    _, rank, _, delete = plan.head_facts(pc.binary_slice(values, 0, HEAD_BYTES), keys)
    assert given == (rank >= 0).tolist() and delete.tolist() == [g and i == 6 for i, g in enumerate(given)]
    assert plan.changes(values, keys).num_rows == 2 and plan.last_counts["orphans"] == 1
    # between a Commit and a Begin with consecutive keys no row can lie: not listed, so
    # that 100 transactions back to back need no 100 ranges
    many = pa.array(enc([m for x in range(100) for m in (
        Begin(final_lsn=x + 1, commit_ts=0, xid=x + 1), REL, Insert(relation_id=16400, new_tuple=row(x, "a")),
        Commit(commit_lsn=x + 1, end_lsn=x + 2, commit_ts=0))]), pa.binary())
    dense = np.arange(len(many))
    mask = control_candidates(many)
    heads = ControlPlan.build(many.filter(pa.array(mask)), dense[mask]).given_heads()
    assert heads is not None and heads.orphans == [(int(dense[-1]), None)]
    assert all(g[0] == (i % 4 == 2) for i, g in enumerate(_given_by_heads(heads, many, dense)))
