"""Runs resumed from checkpoints give the archive's changes once; checkpoints held by
streamed and prepared transactions; bad checkpoints refused."""

from __future__ import annotations


import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import (
    Begin, Commit, Insert, Relation, StreamCommit, StreamStart,
    StreamStop,
)
from pgoutput_codec import BeginPrepare, CommitPrepared, Prepare
from pgoutput_codec import ChangeDecoder, decode_changes
from pgoutput_codec.tables import history, net_changes, snapshot, table_changes
from pgoutput_codec.tables.rows import in_commit_order as _in_commit_order
from pgoutput_codec._native.gather import take_table


from change_cases import DATA, REL, SETS, _in_order, _norm, _resumed_runs, _rows, archive, enc, registry_for, row



@pytest.mark.parametrize("version,option_set", SETS)
def test_runs_resumed_from_checkpoints_give_the_archive_changes_once(version, option_set):
    """An archive decoded in 2, 3, 7 and 20 successive runs, each over the rows up to a
    cut that lands anywhere (mid-transaction, mid-stream, between Prepare and Commit
    Prepared), each reading only the rows from the previous run's checkpoint on (JSON
    round trip): together they give exactly the archive's changes, once each, in order."""
    import numpy as np

    from pgoutput_codec.changes import ControlPlan
    arch = archive(version, option_set)
    want = decode_changes(arch)
    values = arch.column("data").combine_chunks()
    keys = arch.column("seq").to_numpy()
    kinds = set()
    for parts in (2, 3, 7, 20):
        cuts = np.linspace(keys.min(), keys.max() + 1, parts + 1, dtype=np.int64)[1:]
        got, cp, read, held = _resumed_runs(values, keys, arch.column("lsn").combine_chunks(), cuts)
        assert got.equals(want), parts
        # the whole archive read: nothing open, the next run starts after its last row
        assert cp.held_by == () and cp.from_key == keys.max() + 1
        assert cp.after_lsn == pc.max(want.column("commit_lsn")).as_py()
        assert read < (parts if parts < 7 else 4) * len(keys)
        kinds |= held
    assert "tx" in kinds and ("stream" in kinds) == (not option_set.startswith("v1"))   # v2+ stream big ones
    # rows before the checkpoint are refused, not decoded twice
    mid = ControlPlan.build(values.slice(0, len(values) // 2), keys[:len(values) // 2]).checkpoint()
    with pytest.raises(ValueError, match="before the checkpoint's from_key"):
        ControlPlan.build(values, keys, resume=mid)


@pytest.mark.parametrize("version,option_set", SETS)
def test_tables_rebuilt_from_runs_read_back_in_any_order(version, option_set):
    """The outputs of runs resumed from checkpoints, read back together in another order
    than the runs' (a lake directory: ``pq.read_table`` reads files by name, Spark names
    them at random): the table functions put them in commit order, so every table's
    snapshot, history, typed changes and net changes equal those over the whole
    archive. Single-process rows by commit LSN; ``ControlPlan`` rows (with
    ``commit_rank``) shuffled row by row, by (``commit_rank``, ``seq``)."""
    import numpy as np

    from pgoutput_codec.changes import ControlPlan, checkpoint_after, control_candidates
    reg = registry_for(version)
    arch = archive(version, option_set)
    keys = arch.column("seq").to_numpy()
    want = decode_changes(arch, registry=reg)
    runs, cp = [], None
    for cut in np.linspace(keys.min(), keys.max() + 1, 4, dtype=np.int64)[1:]:
        rows = arch.filter(pa.array((keys < cut) & (keys >= (cp.from_key if cp else keys.min()))))
        runs.append(decode_changes(rows, registry=reg, resume=cp))
        cp = checkpoint_after(rows["data"], rows["seq"], resume=cp)
    assert pa.concat_tables(runs).equals(want)
    backwards = pa.concat_tables(runs[::-1])
    assert not backwards.equals(want)
    # runs whose commit LSNs overlap (a run read twice, as replays="keep" gives a
    # transaction received twice) are not runs out of order: left as given
    twice = pa.concat_tables([runs[0], runs[1], runs[0]])
    assert _in_commit_order(twice) is twice and _in_commit_order(want) is want
    values = arch.column("data").combine_chunks()
    m = control_candidates(values)
    ranked = ControlPlan.build(values.filter(pa.array(m)), keys[m]).changes(values, keys, arch.column("lsn"))
    shuffled = take_table(ranked, np.random.default_rng(5).permutation(len(ranked)))
    assert len(shuffled) == len(want) and not shuffled.drop_columns(["commit_rank"]).equals(want)
    names = sorted({f"{s}.{t}" for s, t in zip(want.column("schema").to_pylist(),
                                              want.column("table").to_pylist(), strict=True) if t})
    for name in names:
        for got in (backwards, shuffled):
            assert _norm(_rows(snapshot(got, name, registry=reg))) == _norm(_rows(snapshot(want, name, registry=reg)))
            for f in (history, net_changes, table_changes):
                a, b = f(got, name, registry=reg), f(want, name, registry=reg)
                assert _in_order(a) == _in_order(b), (name, f.__name__)


def _held_open() -> list:
    """Messages of a run whose end a streamed transaction (xid 100) and a prepared one
    (gid "g") hold open, between committed ones (LSNs 10 and 30)."""
    rel = Relation(relation_id=REL.relation_id, namespace="public", relation_name="t",
                   replica_identity="d", columns=REL.columns)
    return [Begin(final_lsn=10, commit_ts=0, xid=1), rel, Insert(relation_id=16400, new_tuple=row(1, "a")),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            StreamStart(xid=100, first_segment=True), Insert(xid=100, relation_id=16400, new_tuple=row(2, "s")),
            StreamStop(),
            BeginPrepare(prepare_lsn=20, end_lsn=21, prepare_ts=1, xid=7, gid="g"),
            Insert(relation_id=16400, new_tuple=row(3, "p")),
            Prepare(prepare_lsn=20, end_lsn=21, prepare_ts=1, xid=7, gid="g"),
            Begin(final_lsn=30, commit_ts=0, xid=2), Insert(relation_id=16400, new_tuple=row(4, "b")),
            Commit(commit_lsn=30, end_lsn=31, commit_ts=0)]


def test_a_checkpoint_held_by_a_streamed_and_a_prepared_transaction():
    """Transactions that commit while a streamed one (and a prepared one) stay open are
    read again by the next run, from the streamed one's first chunk, and not given twice;
    a Relation sent before the checkpoint names the rows after it."""
    import numpy as np

    msgs = _held_open()
    later = [StreamStart(xid=100, first_segment=False), Insert(xid=100, relation_id=16400, new_tuple=row(5, "s")),
             StreamStop(), StreamCommit(xid=100, flags=0, commit_lsn=40, end_lsn=41, commit_ts=1),
             Begin(final_lsn=50, commit_ts=0, xid=3), Insert(relation_id=16400, new_tuple=row(6, "c")),
             Commit(commit_lsn=50, end_lsn=51, commit_ts=0),
             CommitPrepared(commit_lsn=60, end_lsn=61, commit_ts=2, xid=7, gid="g")]
    values = pa.array(enc(msgs + later), pa.binary())
    keys = np.arange(len(values), dtype=np.int64) + 1000
    want = decode_changes(enc(msgs + later))
    assert want.column("seq").to_pylist() != sorted(want.column("seq").to_pylist())   # commit order, not arrival
    got, cp, read, held = _resumed_runs(values, keys, None, [1000 + len(msgs), 1000 + len(values)])
    assert got.drop_columns(["seq"]).equals(want.drop_columns(["seq"]))
    assert pc.subtract(got.column("seq"), 1000).equals(want.column("seq"))
    assert held == {"stream", "prepared"} and read == len(msgs) + len(later) + (len(msgs) - 4)
    from pgoutput_codec.changes import ControlPlan, control_candidates
    # a run with nothing new leaves the checkpoint as it was
    again = ControlPlan.build(pa.array([], pa.binary()), np.zeros(0, np.int64), resume=cp).checkpoint()
    assert again == cp and again.held_by == cp.held_by == ()
    # a run up to until_lsn: what committed after it holds the checkpoint too, and comes next
    m = control_candidates(values)
    first = ControlPlan.build(values.filter(pa.array(m)), keys[m], until_lsn=30)
    cp = first.checkpoint()
    assert cp.after_lsn == 30 and cp.from_key == 1004 and {h["kind"] for h in cp.held_by} == {"committed later"}
    rest = keys >= cp.from_key
    second = ControlPlan.build(values.filter(pa.array(m & rest)), keys[m & rest], resume=cp)
    got = pa.concat_tables([p.changes(values.filter(pa.array(sel)), keys[sel]).sort_by(
        [("commit_rank", "ascending"), ("seq", "ascending")]).drop_columns(["commit_rank"])
        for p, sel in ((first, np.ones(len(keys), bool)), (second, rest))])
    assert got.drop_columns(["seq"]).equals(want.drop_columns(["seq"]))


def test_a_bad_checkpoint_is_refused_with_a_clear_error():
    """A checkpoint read back after months, or edited by hand: checked before any row."""
    import json

    from pgoutput_codec.changes.checkpoint import Checkpoint
    from pgoutput_codec.changes import checkpoint_after
    sample = pq.read_table(DATA.parent.parent / "pgoutput_codec" / "data" / "sample_archive.parquet")
    good = json.loads(checkpoint_after(sample["data"], sample["seq"]).to_json())
    assert good["relations"] and Checkpoint.of(good) == Checkpoint.from_json(json.dumps(good))
    assert good["rank_base"] > 0 and Checkpoint.of({k: v for k, v in good.items() if k != "rank_base"}).rank_base == 0
    col = dict(good["relations"][0]["columns"][0])
    del col["type_oid"]
    for bad, why in [({k: v for k, v in good.items() if k != "from_key"}, "no 'from_key'"),
                     (good | {"format": 99}, "format 99"),
                     (good | {"from_key": "x"}, "not a checkpoint"),
                     (good | {"relations": [{"schema": "s"}]}, "columns list"),
                     (good | {"relations": [good["relations"][0] | {"columns": [col]}]}, "no 'type_oid'"),
                     (good | {"types": [[1, 2]]}, "not a checkpoint"),
                     (good | {"rank_base": "x"}, "not a checkpoint")]:
        with pytest.raises(ValueError, match=why):
            Checkpoint.of(bad)
    with pytest.raises(ValueError, match="not a checkpoint"):
        ChangeDecoder(resume="{broken")
    with pytest.raises(TypeError, match="resume must be"):
        ChangeDecoder(resume=42)


def test_a_checkpoint_json_holds_its_fields_and_reads_back_equal():
    """A checkpoint's JSON is its fields as they are (tuples as lists, keys sorted, its
    format), of a run's checkpoint (Relations, Types, transactions holding it) and of one
    with every field set; read back, it is the checkpoint again, its held_by too."""
    import dataclasses
    import json

    import numpy as np

    from pgoutput_codec.changes import ControlPlan, control_candidates
    from pgoutput_codec.changes.checkpoint import Checkpoint
    msgs = _held_open()
    values = pa.array(enc(msgs), pa.binary())
    keys = np.arange(len(values), dtype=np.int64) + 1000
    m = control_candidates(values)
    cps = [ControlPlan.build(values.filter(pa.array(m)), keys[m]).checkpoint(),
           ControlPlan.build(values.filter(pa.array(m)), keys[m], until_lsn=10).checkpoint(),
           Checkpoint(from_key=5, after_lsn=2 ** 64 - 1, in_stream=True, rank_base=3, end_key=9, commit_lsns=(1, 2),
                      relations=({"schema": "s", "table": "t", "relation_id": 7, "replica_identity": "f",
                                  "columns": [{"name": "c", "type_oid": 99999, "type_modifier": -1, "flags": 1,
                                               "type_namespace": "s", "type_name": "ty"}]},),
                      types=((99999, "s", "ty"),),
                      held_by=({"xid": 7, "kind": "prepared", "gid": "g", "from_key": 5},))]
    assert cps[0].held_by and cps[0].relations and cps[1].held_by
    for cp in cps:
        text = cp.to_json()
        assert text == json.dumps({**dataclasses.asdict(cp), "format": 1}, sort_keys=True)
        back = Checkpoint.from_json(text)
        assert back == cp and back.held_by == cp.held_by
