"""The transaction walk on hand-built streams: streamed and two-phase transactions, aborts,
truncates, Type and Relation messages, errors, and the rules for damaged or cut archives
(a Begin inside a transaction, an end that is not the open one, rows outside any), on
both decoders."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from pgoutput_codec import (
    Begin, Commit, Delete, Insert, Origin, Relation, StreamCommit, StreamStart,
    StreamStop, Truncate, Update,
)
from pgoutput_codec import BeginPrepare, CommitPrepared, Prepare, RollbackPrepared
from pgoutput_codec import ChangeDecoder, decode_changes
from pgoutput_codec.selection import parse_table_list
from pgoutput_codec.errors import PgoutputDecodeError


from change_cases import REL, REL2, _both_decoders, enc, row, streamed_with_aborted_subxact



def test_streamed_subtransaction_abort_drops_only_its_changes():
    msgs = streamed_with_aborted_subxact(stray_abort=True)   # the stray abort is tolerated
    ch = decode_changes(enc(msgs))
    assert ch.column("op").to_pylist() == ["I", "I"]
    assert [r[0]["data"] for r in ch.column("after").to_pylist()] == [b"1", b"3"]
    assert set(ch.column("xid").to_pylist()) == {100}
    assert set(ch.column("commit_lsn").to_pylist()) == {500}


def test_prepared_transactions_commit_or_vanish():
    def prep(gid, xid, v):
        return [BeginPrepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=xid, gid=gid), REL,
                Insert(relation_id=16400, new_tuple=row(v, gid)),
                Prepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=xid, gid=gid)]
    msgs = prep("g1", 7, 1) + prep("g2", 8, 2) + [
        RollbackPrepared(prepare_end_lsn=11, rollback_end_lsn=20, prepare_ts=1, rollback_ts=2, xid=8, gid="g2"),
        CommitPrepared(commit_lsn=30, end_lsn=31, commit_ts=3, xid=7, gid="g1"),
    ]
    ch = decode_changes(enc(msgs))
    assert ch.column("op").to_pylist() == ["I"]
    assert ch.column("xid").to_pylist() == [7]
    assert ch.column("commit_lsn").to_pylist() == [30]


def test_options_tables_empty_xacts_and_columns():
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), REL, REL2,
            Insert(relation_id=16400, new_tuple=row(1, "x")),
            Insert(relation_id=16401, new_tuple=row(5)),
            Commit(commit_lsn=1, end_lsn=2, commit_ts=0),
            Begin(final_lsn=3, commit_ts=0, xid=2),
            Truncate(options=3, relation_ids=(16400, 16401)),
            Commit(commit_lsn=3, end_lsn=4, commit_ts=0),
            Begin(final_lsn=5, commit_ts=0, xid=3), Commit(commit_lsn=5, end_lsn=6, commit_ts=0)]
    all_ = decode_changes(enc(msgs))
    assert all_.column("op").to_pylist() == ["I", "I", "T", "T"]
    assert all_.column("truncate_options").to_pylist()[2:] == [3, 3]
    only = decode_changes(enc(msgs), tables="public.*")
    assert only.column("table").to_pylist() == ["t", "t"]
    assert decode_changes(enc(msgs), tables="*.u").column("table").to_pylist() == ["u", "u"]
    keep = decode_changes(enc(msgs), tables="public.t", skip_empty_xacts=False)
    assert keep.column("op").to_pylist() == ["I", "T", "C"]       # xid 3 was empty
    slim = decode_changes(enc(msgs), include_xids=False, include_timestamp=False, include_origin=False)
    assert {"xid", "commit_ts", "origin"}.isdisjoint(slim.column_names)
    assert parse_table_list('public.t1,*.t3,my_schema.*,"a.b".c') == \
        [("public", "t1"), ("*", "t3"), ("my_schema", "*"), ("a.b", "c")]


def test_errors_raise_or_are_collected_and_counted():
    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL,
                Insert(relation_id=16400, new_tuple=row(1, "x")), Commit(commit_lsn=1, end_lsn=2, commit_ts=0)])
    bad = msgs[:2] + [b"I\x00\x00"] + msgs[2:]
    with pytest.raises(PgoutputDecodeError, match="seq 2"):
        decode_changes(bad)
    dec = ChangeDecoder(errors="collect")
    out = dec.feed(bad)
    assert len(out) == 1 and len(dec.errors) == 1
    c = dec.counts
    assert c["rows_in"] == c["rows_decoded"] + c["rows_in_error"] == 5


def test_a_truncate_takes_the_relation_as_it_was_when_fed_in_pieces():
    """A Truncate of a relation that the same feed redefines after it keeps the
    definition in force at the Truncate: a decoder fed in two pieces (or resumed from a
    state) gives what one feed gives, not a Truncate read by the definition from after
    the piece."""
    renamed = Relation(relation_id=16400, namespace="public", relation_name="t_renamed", replica_identity="d",
                       columns=REL.columns[:1])
    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL, Insert(relation_id=16400, new_tuple=row(1, "x")),
                Commit(commit_lsn=1, end_lsn=2, commit_ts=0),
                Begin(final_lsn=3, commit_ts=0, xid=2), Truncate(options=0, relation_ids=(16400,)),
                Commit(commit_lsn=3, end_lsn=4, commit_ts=0),
                Begin(final_lsn=5, commit_ts=0, xid=3), renamed, Insert(relation_id=16400, new_tuple=row(2)),
                Commit(commit_lsn=5, end_lsn=6, commit_ts=0)])
    whole = decode_changes(msgs)
    assert whole.column("table").to_pylist() == ["t", "t", "t_renamed"]
    for cut in range(len(msgs) + 1):
        dec = ChangeDecoder()
        first = dec.feed(msgs[:cut])
        rest = ChangeDecoder.from_state(pickle.loads(pickle.dumps(dec.state))).feed(msgs[cut:])
        assert pa.concat_tables([first, rest]).equals(whole), cut


def test_a_truncate_naming_a_relation_many_times_is_one_row():
    """A Truncate that lists one relation 5,000 times (the server lists each once) gives
    one row per relation, on the sequential decoder and on the plan alike: a few bytes
    of input cannot make thousands of rows, each with a copy of the column list."""
    import numpy as np

    from pgoutput_codec.changes import ControlPlan, control_candidates

    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL, REL2,
                Truncate(options=1, relation_ids=(16400,) * 5000 + (16401, 16400)),
                Commit(commit_lsn=1, end_lsn=2, commit_ts=0)])
    got = decode_changes(msgs)
    assert got.column("relation_id").to_pylist() == [16400, 16401]
    assert got.column("table").to_pylist() == ["t", "u"]
    values = pa.array(msgs, pa.binary())
    keys = np.arange(len(msgs), dtype=np.int64)
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask])
    lsn = pa.nulls(len(msgs), pa.uint64())
    assert plan.changes(values, keys, lsn).drop_columns(["commit_rank"]).equals(got)


def test_type_messages_resent_with_each_transaction_are_kept_once():
    """pgoutput resends a Type message in each transaction that uses the type: the
    decoder's state and the plan's checkpoint keep one entry per type OID (the newest
    name), not one per transaction."""
    import numpy as np

    from pgoutput_codec import Type
    from pgoutput_codec.changes import ControlPlan, control_candidates

    msgs = []
    for x in range(1, 201):
        name = "mood" if x < 200 else "feeling"        # renamed before the last transaction
        msgs += [Begin(final_lsn=x, commit_ts=0, xid=x), Type(type_oid=70000, namespace="public", type_name=name),
                 Type(type_oid=70001, namespace="public", type_name="tag"), REL,
                 Insert(relation_id=16400, new_tuple=row(x, "v")), Commit(commit_lsn=x, end_lsn=x + 1, commit_ts=0)]
    want = [(70000, "public", "feeling"), (70001, "public", "tag")]
    dec = ChangeDecoder()
    assert len(dec.feed(enc(msgs))) == 200
    assert sorted(dec.state["types"]) == want
    resumed = ChangeDecoder.from_state(pickle.loads(pickle.dumps(dec.state)))
    assert sorted(resumed.state["types"]) == want
    values = pa.array(enc(msgs), pa.binary())
    keys = np.arange(len(values), dtype=np.int64)
    mask = control_candidates(values)
    cp = ControlPlan.build(values.filter(pa.array(mask)), keys[mask]).checkpoint()
    assert sorted(cp.types) == want
    assert sorted(type(cp).from_json(cp.to_json()).types) == want


def test_a_tuple_whose_width_differs_from_its_relation_is_an_error_row():
    """The server writes a TupleData and its Relation from the same columns: a tuple of
    another width is corruption. It is an error naming the row, the byte of the column
    count and both widths (never padded with nulls or cut), on the decoder and on the plan,
    and rows in = rows decoded + rows in error."""
    import numpy as np

    from pgoutput_codec.changes import ControlPlan, control_candidates

    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL,
                Insert(relation_id=16400, new_tuple=row(1)),
                Insert(relation_id=16400, new_tuple=row(2, "a", "b")),
                Insert(relation_id=16400, new_tuple=row(3, "ok")),
                Update(relation_id=16400, old_kind="K", old_tuple=row(3, None), new_tuple=row(4)),
                Update(relation_id=16400, old_kind="K", old_tuple=row(3), new_tuple=row(4, "x")),
                Delete(relation_id=16400, old_kind="K", old_tuple=row(3, None)),
                Commit(commit_lsn=1, end_lsn=2, commit_ts=0)])
    want = {2: "Insert ('I') at byte 6: the new TupleData has 1 column, its Relation 2",
            3: "Insert ('I') at byte 6: the new TupleData has 3 columns, its Relation 2",
            5: "Update ('U') at byte 16: the new TupleData has 1 column, its Relation 2",
            6: "Update ('U') at byte 6: the old TupleData has 1 column, its Relation 2"}
    dec = ChangeDecoder(errors="collect")
    got = dec.feed(msgs)
    assert got.column("op").to_pylist() == ["I", "D"]
    assert {e["seq"]: e["error"] for e in dec.errors} == want
    c = dec.counts
    assert (c["rows_in"], c["rows_decoded"], c["rows_in_error"]) == (len(msgs), len(msgs) - 4, 4)
    with pytest.raises(PgoutputDecodeError, match=r"archive row seq 2: Insert \('I'\) at byte 6: the new"):
        decode_changes(msgs)
    values = pa.array(msgs, pa.binary())
    keys = np.arange(len(msgs), dtype=np.int64)
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect")
    lsn = pa.nulls(len(msgs), pa.uint64())
    assert plan.changes(values, keys, lsn).drop_columns(["commit_rank"]).equals(got)
    assert {e["seq"]: e["error"] for e in plan.last_errors} == want
    assert plan.last_counts["rows_decoded"] + plan.last_counts["rows_in_error"] == len(msgs)
    with pytest.raises(PgoutputDecodeError, match="at byte 6: the new TupleData has 1 column"):
        plan.changes(values, keys, lsn, errors="raise")


@pytest.mark.parametrize("first", ["commit", "prepare"])
def test_an_archive_starting_with_a_commit_judges_its_lsn_on_both_decoders(first):
    """An archive may start with the end of a transaction none of whose rows it holds (a
    Commit, or a Prepare then its Commit Prepared). The sequential decoder and the plan,
    which sees control rows only, both take that commit's LSN: a later commit below it
    is out of order for both."""
    import numpy as np

    from pgoutput_codec.errors import ArchiveOrderError
    from pgoutput_codec.changes import ControlPlan, control_candidates

    if first == "commit":
        lead = [Commit(commit_lsn=900, end_lsn=901, commit_ts=0)]
    else:
        lead = [Prepare(prepare_lsn=800, end_lsn=801, prepare_ts=0, xid=5, gid="g"),
                CommitPrepared(commit_lsn=900, end_lsn=901, commit_ts=0, xid=5, gid="g")]
    msgs = enc(lead + [Begin(final_lsn=100, commit_ts=0, xid=7), REL,
                       Insert(relation_id=16400, new_tuple=row(1)), Commit(commit_lsn=100, end_lsn=101, commit_ts=0)])
    with pytest.raises(ArchiveOrderError):
        ChangeDecoder(errors="collect").feed(msgs)
    values = pa.array(msgs, pa.binary())
    keys = np.arange(len(msgs), dtype=np.int64)
    mask = control_candidates(values)
    with pytest.raises(ArchiveOrderError):
        ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect")


def test_a_begin_inside_an_open_transaction_drops_the_one_that_lost_its_commit():
    """The server sends a transaction whole: a Begin while one is open means the first
    lost its Commit (or is sent again from its start). It is dropped and counted, not
    held for ever; the one that commits is given."""
    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=7), REL, Insert(relation_id=16400, new_tuple=row(1, "lost")),
                Begin(final_lsn=2, commit_ts=0, xid=8), Insert(relation_id=16400, new_tuple=row(2, "kept")),
                Commit(commit_lsn=2, end_lsn=3, commit_ts=0)])
    for cut in range(len(msgs) + 1):
        dec = ChangeDecoder()
        first = dec.feed(msgs[:cut])
        dec = ChangeDecoder.from_state(pickle.loads(pickle.dumps(dec.state)))
        got = pa.concat_tables([first, dec.feed(msgs[cut:])])
        assert got.column("xid").to_pylist() == [8] and got.column("after")[0][1]["data"].as_py() == b"kept", cut
        assert dec.counts["abandoned_transactions"] == 1 and dec.walk.abandoned == [dict(xid=7, seq=3)], cut
        assert not dec.open_transactions, cut


def test_change_before_any_relation_is_an_error_not_a_guess():
    with pytest.raises(PgoutputDecodeError, match="before any Relation"):
        decode_changes(enc([Begin(final_lsn=1, commit_ts=0, xid=1),
                            Insert(relation_id=1, new_tuple=row(1)), Commit(commit_lsn=1, end_lsn=2, commit_ts=0)]))


def test_a_change_outside_any_transaction_is_an_error_of_both_decoders():
    """After the archive's first Begin, Commit or stream marker a change with no
    transaction open lost its Begin (or was sent again after its Commit): both decoders
    report it, give the rest, and hold nothing for it — before, the sequential decoder
    opened a transaction for it that the next Begin left open for ever. Rows before that
    marker, Relations among them, are a transaction begun before the archive, as ever."""
    msgs = enc([Insert(relation_id=16400, new_tuple=row(0, "before")), Commit(commit_lsn=1, end_lsn=2, commit_ts=0),
                Begin(final_lsn=3, commit_ts=0, xid=2), REL, Insert(relation_id=16400, new_tuple=row(1, "a")),
                Commit(commit_lsn=3, end_lsn=4, commit_ts=0),
                Insert(relation_id=16400, new_tuple=row(2, "lost")),
                Begin(final_lsn=5, commit_ts=0, xid=3), Insert(relation_id=16400, new_tuple=row(3, "b")),
                Commit(commit_lsn=5, end_lsn=6, commit_ts=0)])
    # the first Insert names relation 16400 before its Relation: an error too
    got, errors, counts = _both_decoders(msgs)
    assert got.column("seq").to_pylist() == [4, 8]
    assert errors == {0: "change to relation 16400 before any Relation message for it (start decoding earlier, "
                         "or resume from a state)", 6: "change outside any transaction"}
    dec = ChangeDecoder(errors="collect")
    dec.feed(msgs)
    assert not dec.walk.txns
    with pytest.raises(PgoutputDecodeError, match="seq 5: change outside any transaction"):
        decode_changes(msgs[1:])
    # an archive that starts inside a transaction begun before it: its Origin names it
    got, _, _ = _both_decoders(enc([Origin(origin_lsn=9, origin_name="upstream")]) + msgs[3:5] + msgs[1:2])
    assert got.column("origin").to_pylist() == ["upstream"]
    # an archive that starts with a Relation inside the transaction begun before it
    got, errors, _ = _both_decoders(msgs[3:6] + msgs[1:2] + msgs[6:])
    assert got.column("seq").to_pylist() == [1, 6] and errors == {4: "change outside any transaction"}


def test_a_begin_prepare_inside_an_open_transaction_drops_the_one_that_lost_its_end():
    """A Begin Prepare while a transaction is open, or a Begin while a prepared one is:
    the open one lost its end and is dropped and counted, as for two Begins; the rows
    after the second belong to it (before, a Begin Prepare left the first open for ever
    and a Prepare of the wrong transaction could take them)."""
    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=7), REL, Insert(relation_id=16400, new_tuple=row(1, "lost")),
                BeginPrepare(prepare_lsn=2, end_lsn=3, prepare_ts=0, xid=8, gid="g8"),
                Insert(relation_id=16400, new_tuple=row(2, "kept")),
                Prepare(prepare_lsn=2, end_lsn=3, prepare_ts=0, xid=8, gid="g8"),
                CommitPrepared(commit_lsn=4, end_lsn=5, commit_ts=0, xid=8, gid="g8"),
                BeginPrepare(prepare_lsn=6, end_lsn=7, prepare_ts=0, xid=9, gid="g9"),
                Insert(relation_id=16400, new_tuple=row(3, "lost")),
                Begin(final_lsn=8, commit_ts=0, xid=10), Insert(relation_id=16400, new_tuple=row(4, "kept")),
                Commit(commit_lsn=8, end_lsn=9, commit_ts=0)])
    got, errors, counts = _both_decoders(msgs)
    assert got.column("xid").to_pylist() == [8, 10] and not errors
    assert counts["abandoned_transactions"] == 2


def test_an_end_that_is_not_the_open_transactions_leaves_it_open():
    """A Prepare inside a stream block or of another transaction, a Commit inside a Begin
    Prepare's transaction: corruption, left alone, and what is open ends by its own
    marker. Before, the Prepare took the streamed transaction, its Stream Commit and a
    Rollback Prepared then both ended it, and the decoder failed with a KeyError."""
    msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL, Commit(commit_lsn=1, end_lsn=2, commit_ts=0),
                StreamStart(xid=10, first_segment=True), Insert(xid=10, relation_id=16400, new_tuple=row(1, "s")),
                Prepare(prepare_lsn=3, end_lsn=4, prepare_ts=0, xid=99, gid="x"), StreamStop(),
                StreamCommit(xid=10, commit_lsn=5, end_lsn=6, commit_ts=0),
                RollbackPrepared(prepare_end_lsn=4, rollback_end_lsn=7, prepare_ts=0, rollback_ts=0, xid=99, gid="x"),
                BeginPrepare(prepare_lsn=8, end_lsn=9, prepare_ts=0, xid=11, gid="y"),
                Insert(relation_id=16400, new_tuple=row(2, "p")), Commit(commit_lsn=8, end_lsn=9, commit_ts=0),
                Prepare(prepare_lsn=8, end_lsn=9, prepare_ts=0, xid=12, gid="z"),
                Insert(relation_id=16400, new_tuple=row(3, "p")),
                Prepare(prepare_lsn=8, end_lsn=9, prepare_ts=0, xid=11, gid="y"),
                CommitPrepared(commit_lsn=10, end_lsn=11, commit_ts=0, xid=11, gid="y")])
    got, errors, _ = _both_decoders(msgs)
    assert list(zip(got.column("xid").to_pylist(), got.column("seq").to_pylist(), strict=True)) == \
        [(10, 4), (11, 10), (11, 13)] and not errors


def test_a_stream_stop_with_no_start_does_not_put_the_archive_in_a_stream():
    """The stream state an archive starts in comes from its first control row that tells
    it — a Begin, Commit or Origin is never sent inside a stream block — so the plan,
    which sees only control rows, infers what the sequential decoder does. Before, the
    plan took a Stream Stop whose Start was lost for the first word and read every row
    before it as streamed."""
    msgs = enc([Origin(origin_lsn=1, origin_name="o"), REL, Insert(relation_id=16400, new_tuple=row(1, "a")),
                Commit(commit_lsn=2, end_lsn=3, commit_ts=0), Begin(final_lsn=4, commit_ts=0, xid=5),
                Insert(relation_id=16400, new_tuple=row(2, "b")), Commit(commit_lsn=4, end_lsn=5, commit_ts=0),
                StreamStop(), Begin(final_lsn=6, commit_ts=0, xid=6), Insert(relation_id=16400, new_tuple=row(3, "c")),
                Commit(commit_lsn=6, end_lsn=7, commit_ts=0)])
    got, errors, _ = _both_decoders(msgs)
    assert got.column("seq").to_pylist() == [2, 5, 9] and not errors


def test_an_archive_that_starts_inside_a_stream_block_is_read_so_by_both_decoders():
    """The sequential decoder infers the stream state its first rows are in, as the plan
    does; before, it took them to be outside a stream block, misread the streamed
    Relation and refused the changes that needed it. (The rows before the first Stream
    Stop are a segment whose Stream Start is not in the archive: held, not given —
    docs/limits.md.)"""
    rel = Relation(xid=10, relation_id=REL.relation_id, namespace="public", relation_name="t",
                   replica_identity="d", columns=REL.columns)
    msgs = enc([rel, Insert(xid=10, relation_id=16400, new_tuple=row(1, "a")), StreamStop(),
                StreamStart(xid=10, first_segment=False), Insert(xid=10, relation_id=16400, new_tuple=row(2, "b")),
                StreamStop(), StreamCommit(xid=10, commit_lsn=5, end_lsn=6, commit_ts=0)])
    got, errors, _ = _both_decoders(msgs)
    assert got.column("seq").to_pylist() == [4] and not errors


def test_a_transaction_streamed_again_from_its_first_segment_replaces_the_earlier_copy():
    rel = Relation(xid=100, relation_id=REL.relation_id, namespace="public", relation_name="t",
                   replica_identity="d", columns=REL.columns)
    first = [StreamStart(xid=100, first_segment=True), rel,
             Insert(xid=100, relation_id=16400, new_tuple=row(1, "a")), StreamStop()]
    msgs = first + first + [StreamCommit(xid=100, flags=0, commit_lsn=500, end_lsn=510, commit_ts=1)]
    ch = decode_changes(enc(msgs))
    assert ch.column("op").to_pylist() == ["I"]
