"""The replay rules on Spark (``snapshot``, ``history``, ``net_changes``), against the
single-process tables: unchanged TOAST values, key changes, replica identity changes, the
relation that bears a table's name, truncates, runs appended to a lake, random sessions."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from pgoutput_codec import (Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            Truncate, Update, encode_message)
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import HAS_ARROW_UDF, decode_changes, history, net_changes, snapshot, table_changes  # noqa: E402
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark.shipping import is_connect  # noqa: E402
from pgoutput_codec.spark.sources import HAS_DATASOURCE  # noqa: E402
from pgoutput_codec.tables import history as history_1  # noqa: E402
from pgoutput_codec.tables import snapshot as snapshot_1  # noqa: E402
from pgoutput_codec.tables import table_columns  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

from archive_model import soak_seeds  # noqa: E402  (tests/ is on sys.path: conftest)
from altered_columns import said  # noqa: E402
from change_corpus import (CHANGE_IMPLS, TC, VERSION, _SHARED, _conformed, _encoded, _toast_chains,  # noqa: E402
                           archive, as_spark, collect, write_files)


def _hand_built():
    rel = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))

    def row(*vals):
        return tuple(TupleColumn("n", None) if v is None else TupleColumn("u", None) if v == "<u>"
                     else TupleColumn("t", str(v).encode()) for v in vals)
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), rel,
            Insert(relation_id=16400, new_tuple=row(1, "big")),
            Insert(relation_id=16400, new_tuple=row(2, "two")),
            Insert(relation_id=16400, new_tuple=row(3, None)),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            Begin(final_lsn=2, commit_ts=1, xid=2),
            Update(relation_id=16400, old_kind="K", old_tuple=row(1, None), new_tuple=row(5, "<u>")),
            Delete(relation_id=16400, old_kind="K", old_tuple=row(2, None)),
            Update(relation_id=16400, new_tuple=row(3, "<u>")),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=1),
            Begin(final_lsn=3, commit_ts=2, xid=3),
            Update(relation_id=16400, new_tuple=row(5, "new")),
            Insert(relation_id=16400, new_tuple=row(1, "again")),
            Commit(commit_lsn=30, end_lsn=31, commit_ts=2)]
    data = [encode_message(m) for m in msgs]
    return pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_key_move_toast_and_history(spark, tmp_path):
    t = _hand_built()
    df = spark.read.parquet(*write_files(t, tmp_path / "hb", 3)).repartition(3)
    ch = decode_changes(df, order_by="seq", lsn=None)
    single = decode_changes_1(t)
    snap = collect(snapshot(ch, "public.t")).sort_by("id").to_pylist()
    assert snap == [{"id": 1, "v": "again"}, {"id": 3, "v": None}, {"id": 5, "v": "new"}]
    assert snap == snapshot_1(single, "public.t").sort_by("id").to_pylist()
    at20 = collect(snapshot(ch, "public.t", as_of_lsn=20)).sort_by("id").to_pylist()
    assert at20 == [{"id": 3, "v": None}, {"id": 5, "v": "big"}]   # key 1 → 5 carried the TOAST value
    assert at20 == snapshot_1(single, "public.t", as_of_lsn=20).sort_by("id").to_pylist()
    h = collect(history(ch, "public.t"))
    h1 = history_1(single, "public.t")
    keys = ["__START_LSN", "id"]
    a = h.sort_by([(k, "ascending") for k in keys])
    b = h1.sort_by([(k, "ascending") for k in keys])
    for c in ["id", "v", "__OP"]:
        assert a.column(c).to_pylist() == b.column(c).to_pylist(), c
    for c in ["__START_LSN", "__END_LSN"]:
        assert a.column(c).to_pylist() == [None if v is None else int(v) for v in b.column(c).to_pylist()], c
    tc = collect(table_changes(ch, "public.t"))
    assert tc.column("unchanged").to_pylist() == [None, None, None, ["v"], None, ["v"], None, None]


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_carry_toast_follows_rows_through_key_changes(spark, tmp_path):
    """The snapshot and history carry an unchanged TOAST value along the row, through
    one and two key changes and a later in-place update, as the single-process replay
    does; a new row under a key an older row left starts afresh."""
    t = _toast_chains()
    single = decode_changes_1(t)
    assert snapshot_1(single, "public.t").sort_by("id").to_pylist() == [
        {"id": 2, "v": "newtwo"}, {"id": 6, "v": "big"}, {"id": 9, "v": "two"}]
    df = spark.read.parquet(*write_files(t, tmp_path / "chains", 2))
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        for lsn in (None, 20, 30):
            got = collect(snapshot(ch, "public.t", as_of_lsn=lsn)).sort_by("id").to_pylist()
            assert got == snapshot_1(single, "public.t", as_of_lsn=lsn).sort_by("id").to_pylist(), (impl, lsn)
        h = collect(history(ch, "public.t")).sort_by([("__START_LSN", "ascending"), ("id", "ascending")])
        h1 = history_1(single, "public.t").sort_by([("__START_LSN", "ascending"), ("id", "ascending")])
        for c in ["id", "v", "__OP"]:
            assert h.column(c).to_pylist() == h1.column(c).to_pylist(), (impl, c)


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_carry_toast_takes_full_identity_values_from_the_old_row(spark, tmp_path):
    """REPLICA IDENTITY FULL sends the old row with its TOAST values inline ('O' tuple,
    as PostgreSQL 15/16/18 do: tests/conformance/test_toast_identity.py): an archive that
    starts after the Insert still gives the value in table_changes, snapshot and
    net_changes, on both implementations, as the single-process functions do."""
    from pgoutput_codec.tables import net_changes as net_1
    rel = Relation(relation_id=16401, namespace="public", relation_name="f", replica_identity="f",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(1, "note", 25, -1),
                            RelationColumn(1, "big", 25, -1)))

    def tup(*vals):
        return tuple(TupleColumn("u", None) if v is None else TupleColumn("t", v.encode()) for v in vals)
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), rel,
            Update(relation_id=16401, old_kind="O", old_tuple=tup("1", "a", "BIG"), new_tuple=tup("1", "b", None)),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0), Begin(final_lsn=2, commit_ts=1, xid=2),
            Update(relation_id=16401, old_kind="O", old_tuple=tup("1", "b", "BIG"), new_tuple=tup("2", "b", None)),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=1)]
    data = [encode_message(m) for m in msgs]
    t = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    single = decode_changes_1(t)
    assert snapshot_1(single, "public.f").to_pylist() == [{"id": 2, "note": "b", "big": "BIG"}]
    df = spark.read.parquet(*write_files(t, tmp_path / "full", 2))
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        tc = collect(table_changes(ch, "public.f")).sort_by("seq")
        assert [r["big"] for r in tc.column("after").to_pylist()] == ["BIG", "BIG"], impl
        assert tc.column("unchanged").to_pylist() == [None, None], impl
        assert collect(snapshot(ch, "public.f")).to_pylist() == [{"id": 2, "note": "b", "big": "BIG"}], impl
        def rows(net):
            return sorted((r["__OP"], r["id"], r["note"], r["big"], r["__UNCHANGED"]) for r in net.to_pylist())
        got = rows(collect(net_changes(ch, "public.f")))
        assert got == rows(net_1(single, "public.f")), impl
        assert [r[3] for r in got] == ["BIG"] * 2 and all(r[4] == [] for r in got), impl


# PySpark 3.5 and Connect run the scenario with a lookup (_found_keys, DataFrame code no other
# test runs) whose key is stored out of line, which takes the lookup and its TOAST pointer;
# the others key rows by columns, as every table whose identity never changed


@pytest.mark.parametrize("scenario", [pytest.param("ends_default", marks=_SHARED),
                                      pytest.param("ends_full", marks=_SHARED),
                                      pytest.param("no_common_key", marks=_SHARED),
                                      "no_common_key_toast", pytest.param("truncated_then_full", marks=_SHARED)])
def test_found_keys_across_replica_identity_changes(spark, tmp_path, scenario):
    """A table whose REPLICA IDENTITY changes while the archive runs
    (tests/identity_moves.py: the messages real servers send,
    tests/conformance/test_identity_change.py): each change names its row by its own
    Relation's key, and Spark finds it as the single-process replay does — snapshot (now
    and as of a commit) gives the model's rows, history and net_changes (of all changes
    and of those after a commit) equal single-process — whether the changes come straight
    from decode_changes or from any DataFrame (cached). no_common_key_toast: the newest
    key (u) stored out of line, unsaid by the Updates under DEFAULT, one of which moves
    its row to another id (_found_keys' pointer, resolved on the driver)."""
    import identity_moves as IM
    from pgoutput_codec.tables import net_changes as net_1
    msgs, final = IM.messages(IM.SCENARIOS[scenario])
    t, single = _encoded(msgs)
    name = f"public.{IM.TABLE}"

    def rows(table):
        return sorted(tuple(r[c] for c in IM.NAMES) for r in table.to_pylist())

    def hist(table):
        return sorted((r["id"], r["v"], r["u"], r["__OP"], r["__START_LSN"], r["__END_LSN"]) for r in table.to_pylist())

    def net(table):   # by repr: a batch may name a row by an unknown (null) key
        return sorted(((r["__OP"], r["id"], r["v"], r["u"], r["__COMMIT_LSN"]) for r in table.to_pylist()), key=repr)
    assert rows(snapshot_1(single, name)) == final
    commits = sorted(set(single.column("commit_lsn").to_pylist()))
    cut = commits[4]
    steps = IM.SCENARIOS[scenario]
    idents = ["default"] + [s[1] for s in steps if s[0] == "alter"]
    if not set.intersection(*({n for n, f in zip(IM.NAMES, IM.FLAGS[i], strict=True) if f} for i in idents)):
        # no column every identity held: a batch that starts before the last ALTER names
        # rows older than it by keys it cannot know (README Limits; the two paths say so
        # differently), so the batch starts after it
        txns = sum(1 for s in steps if s[0] != "alter")
        before = sum(1 for s in steps[:max(i for i, s in enumerate(steps) if s[0] == "alter")] if s[0] != "alter")
        assert len(commits) == txns
        cut = max(cut, commits[before - 1])
    later_1 = single.filter(pc.greater(single.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
    df = spark.read.parquet(*write_files(t, tmp_path / "ident", 3))
    if not HAS_ARROW_UDF or is_connect(spark):
        # PySpark 3.5 and Connect run this case for the lookup alone: its snapshot and net changes
        ch = decode_changes(df, order_by="seq", lsn=None, impl="map")
        assert rows(collect(snapshot(ch, name))) == final
        assert net(collect(net_changes(ch, name))) == net(net_1(single, name))
        return
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        # the tables code sees the same change rows from either impl: every check once, on
        # the first; the other's rows are checked by the rebuilt table and its net changes.
        # cached: any DataFrame of change rows, not only decode_changes' plan
        first = impl == CHANGE_IMPLS[0]
        for form in ("straight", "cached") if first else ("straight",):
            # cache() marks ch itself, and a cached DataFrame's rows are read as they
            # are: the straight form first (building both up front tested only the cached)
            changes = ch if form == "straight" else ch.cache()
            assert rows(collect(snapshot(changes, name))) == final, (impl, form)
            assert net(collect(net_changes(changes, name))) == net(net_1(single, name)), (impl, form)
            if not first:
                continue
            assert hist(collect(history(changes, name))) == hist(history_1(single, name)), (impl, form)
            if form == "cached":
                continue
            assert rows(collect(snapshot(changes, name, as_of_lsn=cut))) == rows(snapshot_1(single, name, cut))
            later = changes.where(F.col("commit_lsn") > F.lit(cut).cast(ST.LSN_TYPE))
            assert net(collect(net_changes(later, name))) == net(net_1(later_1, name)), (impl, form)
        ch.unpersist()

# PySpark 3.5 runs the map impl's plan path, and Connect the same code as classic Spark,
# on one scenario: three_generations (three relations bear the name in turn)
@pytest.mark.parametrize("scenario", [pytest.param("swap", marks=_SHARED),
                                      pytest.param("rename", marks=_SHARED),
                                      pytest.param("renamed_away", marks=_SHARED),
                                      pytest.param("drop_recreate", marks=_SHARED), "three_generations"])
def test_a_table_is_the_relation_that_bears_its_name(spark, tmp_path, scenario):
    """Tables dropped and created again, renamed, swapped (tests/table_moves.py: the
    messages real servers send, tests/conformance/test_table_moves.py): Spark chooses
    the relation that bears the name — as of every commit too — as the single-process
    code does, whether the changes come straight from decode_changes (the plan's
    Relations) or from any DataFrame (cached: its rows); net_changes begin with the
    truncate and name the relation."""
    import table_moves as TM
    from pgoutput_codec.tables import net_changes as net_1
    from pgoutput_codec.tables import table_changes as table_changes_1
    msgs, final = TM.messages(TM.SCENARIOS[scenario])
    t, single = _encoded(msgs)
    name = f"public.{TM.NAME}"

    def rows(table):
        return sorted((r["id"], r["v"]) for r in table.to_pylist()) if table.num_columns else []

    def net(table):
        return sorted((r["__OP"], r.get("id"), r.get("v"), r["__COMMIT_LSN"], r["__RELATION_ID"])
                      for r in table.to_pylist())

    def hist(table):
        return sorted((r["id"], r["v"], r["__START_LSN"], r["__END_LSN"]) for r in table.to_pylist())
    assert rows(snapshot_1(single, name)) == final.get(TM.NAME, [])
    commits = sorted(set(single.column("commit_lsn").to_pylist()))
    df = spark.read.parquet(*write_files(t, tmp_path / "moves", 2))
    ch = decode_changes(df, order_by="seq", lsn=None, impl=CHANGE_IMPLS[0])
    for form in ("straight", "cached"):
        # (cache() marks ch itself: the straight form first)
        changes = ch if form == "straight" else ch.cache()
        assert rows(collect(snapshot(changes, name))) == final.get(TM.NAME, []), form
        assert net(collect(net_changes(changes, name))) == net(net_1(single, name)), form
        assert hist(collect(history(changes, name))) == hist(history_1(single, name)), form
        assert collect(table_changes(changes, name)).num_rows == table_changes_1(single, name).num_rows, form
        # as of every commit straight from decode_changes; from the cached rows (the same
        # cut logic over another table_info) as of the middle one
        for cut in commits[1:-1] if form == "straight" else [commits[len(commits) // 2]]:
            assert rows(collect(snapshot(changes, name, as_of_lsn=cut))) == rows(snapshot_1(single, name, cut)), \
                (form, cut)
        cut = commits[len(commits) // 2]
        later = changes.where(F.col("commit_lsn") > F.lit(cut).cast(ST.LSN_TYPE))
        later_1 = single.filter(pc.greater(single.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
        assert net(collect(net_changes(later, name))) == net(net_1(later_1, name)), (form, cut)
    ch.unpersist()
    # an incremental run resumed from the checkpoint of the run up to each commit (the
    # plan knows the earlier Relations from the checkpoint only): its net changes are of
    # the relation that bears the name, begin with a truncate never when the copy made
    # then is of that relation, and merged into the copy give the table — unless the
    # copy is of another relation (its __RELATION_ID says so) or the run's relation bore
    # another name when the copy was made (its rows from then are not the name's)
    # (the choice is the driver's, the same Python on every Spark: on classic 4.x only)
    from pgoutput_codec.spark.changes import checkpoint_of
    bearer = {r[4] for r in net(net_1(single, name))}
    for cut in commits[:-1] if HAS_ARROW_UDF and not is_connect(spark) else ():
        upto = decode_changes(df, order_by="seq", lsn=None, until_lsn=cut, impl=CHANGE_IMPLS[0])
        copy = rows(collect(snapshot(upto, name)))
        copy_rel = {r[4] for r in net(collect(net_changes(upto, name)))}
        run = decode_changes(df, order_by="seq", lsn=None, resume=checkpoint_of(upto), impl=CHANGE_IMPLS[0])
        got = collect(net_changes(run, name)).to_pylist()
        if not got:
            continue
        rel = {r["__RELATION_ID"] for r in got}
        assert rel == bearer, cut
        truncated = got[0]["__OP"] == "truncate"
        assert not (truncated and copy_rel == rel), cut       # a truncate would lose the copy's rows
        merged = {} if truncated else {r[0]: r for r in copy}
        for r in got[truncated:]:
            if r["__OP"] == "delete":
                merged.pop(r["id"], None)
            else:
                merged[r["id"]] = (r["id"], r["v"])
        renamed_in = any(r["relation_id"] in rel and r["table"] != TM.NAME and r["commit_lsn"] <= cut
                         for r in single.to_pylist())
        if sorted(merged.values()) != final.get(TM.NAME, []):
            assert (copy_rel and copy_rel != rel) or renamed_in, cut


def _jobs(spark, build) -> int:
    """How many Spark jobs ``build()`` runs (building a lazy DataFrame may run some)."""
    if is_connect(spark):
        pytest.skip("Spark Connect has no SparkContext job groups to count jobs by")
    sc = spark.sparkContext
    group = f"jobs-{uuid.uuid4()}"
    sc.setJobGroup(group, "counted")
    try:
        build()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


@pytest.mark.same_code_on_spark35
def test_carry_toast_follows_keys_only_when_an_update_sent_an_old_key(spark, tmp_path):
    """Following rows across key changes costs snapshot/history/net_changes a Spark job
    of its own. It runs only when an Update of the table sent its old key or row ('K'/'O',
    read from the payload heads by the versions job): with in-place updates alone,
    building them runs the versions job and nothing more, and the unchanged TOAST value
    is still carried along the key."""
    from pgoutput_codec.spark.tablerows import table_info
    rel = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), rel,
            Insert(relation_id=16400, new_tuple=(TupleColumn("t", b"1"), TupleColumn("t", b"big"))),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0), Begin(final_lsn=2, commit_ts=1, xid=2),
            Update(relation_id=16400, new_tuple=(TupleColumn("t", b"1"), TupleColumn("u", None))),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=1)]
    data = [encode_message(m) for m in msgs]
    in_place = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    for label, t, extra in (("in place", in_place, 0), ("key changes", _toast_chains(), 1)):
        single = decode_changes_1(t)
        df = spark.read.parquet(*write_files(t, tmp_path / label.replace(" ", "_"), 2))
        for impl in CHANGE_IMPLS:
            ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
            versions_job = _jobs(spark, lambda ch=ch: table_info(ch, "public.t"))
            assert versions_job >= 1
            for fn in (snapshot, history, net_changes):
                built = _jobs(spark, lambda fn=fn, ch=ch: fn(ch, "public.t"))
                assert (built > versions_job) == bool(extra), (label, impl, fn.__name__)
            got = collect(snapshot(ch, "public.t")).sort_by("id").to_pylist()
            assert got == snapshot_1(single, "public.t").sort_by("id").to_pylist(), (label, impl)
    assert snapshot_1(decode_changes_1(in_place), "public.t").to_pylist() == [{"id": 1, "v": "big"}]


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_tables_rebuilt_from_runs_appended_to_a_lake(spark, tmp_path):
    """The README's incremental runs: two runs over the bundled sample archive, the second
    resumed from the first's checkpoint, appended to one Parquet table. snapshot and
    history over it, read back, equal those over the whole archive decoded at once: the
    second run's commit ranks follow the first's (they started at 0 again before, and
    public.inventory's snapshot had 19 rows where the archive gives 2)."""
    from pgoutput_codec import Checkpoint
    from pgoutput_codec.data import sample_archive_path
    from pgoutput_codec.spark.changes import checkpoint_of
    arch = spark.read.parquet(sample_archive_path())
    out, saved = str(tmp_path / "changes"), None
    for upto in (1300, None):
        ch = decode_changes(arch.where(f"seq < {upto}") if upto else arch, order_by="seq",
                            resume=Checkpoint.from_json(saved) if saved else None)
        ch.write.mode("append").parquet(out)
        saved = checkpoint_of(ch).to_json()
    lake, whole = spark.read.parquet(out), decode_changes(arch, order_by="seq")
    assert lake.count() == whole.count()
    for name in ("public.inventory", "public.orders", "public.events", "public.customers"):
        for fn in (snapshot, history):
            got, want = (sorted(map(repr, collect(fn(d, name)).to_pylist())) for d in (lake, whole))
            assert len(got) > 1 and got == want, (name, fn.__name__)

def _same_net(got: pa.Table, want1: pa.Table, cols, reg, label):
    """Spark's net_changes rows equal the single-process ones (typed as Spark types them)."""
    if not len(want1):
        assert len(got) == 0, label
        return
    want = _conformed(want1, cols, reg)
    for c in ["__OP", "__UNCHANGED", "__UNCHANGED_FROM", "__COMMIT_LSN", "__COMMIT_AT"]:
        want = want.append_column(c, want1.column(c))
    got = got.set_column(got.column_names.index("__COMMIT_LSN"), "__COMMIT_LSN",
                         got.column("__COMMIT_LSN").cast(pa.uint64()))
    key = [("__OP", "ascending"), (cols[0]["name"], "ascending"), ("__COMMIT_LSN", "ascending")]
    got, want = got.sort_by(key), want.sort_by(key)
    assert len(got) == len(want), label
    for c in want.column_names:
        if c in ("__UNCHANGED", "__UNCHANGED_FROM"):
            assert got.column(c).to_pylist() == want.column(c).to_pylist(), (label, c)
        else:
            assert TC.same_values(got.column(c), want.column(c).cast(got.column(c).type)), (label, c)


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_net_changes_equal_single_process(spark, files, tmp_path):
    """net_changes over the changes after a cut, Spark against single-process: the
    corpus tables with key changes (default, index, FULL identity), unchanged TOAST and
    truncates, and rows moved by key changes with their TOAST value unchanged."""
    from pgoutput_codec.tables import net_changes as net_1
    reg = TC.registry_for(VERSION)
    ch = decode_changes(spark.read.parquet(*files["v1_text"]), order_by="seq").cache()
    single = decode_changes_1(archive(VERSION, "v1_text"), registry=reg)
    lsns = sorted(set(single.column("commit_lsn").to_pylist()))
    cut = lsns[len(lsns) // 3]
    later1 = single.filter(pc.greater(single.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
    later = ch.where(F.col("commit_lsn") > F.lit(cut))
    ops = set()
    for name in ["public.rid_full", "public.rid_default", "public.rid_index", "public.toasty",
                 "public.trunc_parent", "Sch.MixedCase"]:
        want1 = net_1(later1, name, registry=reg)
        ops |= set(want1.column("__OP").to_pylist())
        _same_net(collect(net_changes(later, name, registry=reg)), want1, table_columns(later1, name), reg, name)
    assert ops == {"upsert", "delete", "truncate"}, ops
    ch.unpersist()
    t = _toast_chains()
    single = decode_changes_1(t)
    ch = decode_changes(spark.read.parquet(*write_files(t, tmp_path / "chains", 2)), order_by="seq", lsn=None)
    want1 = net_1(single.filter(pc.greater(single.column("commit_lsn"), 10)), "public.t")
    assert want1.column("__UNCHANGED_FROM").to_pylist().count(None) < len(want1)   # a moved row's value
    _same_net(collect(net_changes(ch.where(F.col("commit_lsn") > 10), "public.t")), want1,
              table_columns(single, "public.t"), None, "chains")


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
@pytest.mark.on_cluster
def test_history_equals_single_process_on_corpus(spark, files):
    """SCD2 rows on the corpus tables with key-changing updates (default, index and FULL
    identity), unchanged TOAST and truncates."""
    reg = TC.registry_for(VERSION)
    ch = decode_changes(spark.read.parquet(*files["v1_text"]).repartition(3), order_by="seq").cache()
    single = decode_changes_1(archive(VERSION, "v1_text"), registry=reg)
    for name in ["public.rid_full", "public.rid_default", "public.rid_index", "public.toasty",
                 "public.trunc_other", "Sch.MixedCase"]:
        cols = table_columns(single, name)
        want1 = history_1(single, name, registry=reg)
        assert len(want1), name
        want = _conformed(want1, cols, reg)
        for c in ["__OP", "__START_LSN", "__END_LSN"]:
            want = want.append_column(c, want1.column(c))
        got = collect(history(ch, name, registry=reg))
        key = [(c, "ascending") for c in ["__START_LSN", cols[0]["name"], "__END_LSN"]]
        got = got.cast(pa.schema([f.with_type(pa.uint64()) if f.name in ("__START_LSN", "__END_LSN") else f
                                  for f in got.schema])).sort_by(key)
        want = want.sort_by(key)
        assert len(got) == len(want), name
        for c in want.column_names:
            assert TC.same_values(got.column(c), want.column(c).cast(got.column(c).type)), (name, c)
    ch.unpersist()


def test_tables_without_row_changes_give_empty_frames(spark, files):
    """A table with no row change in the DataFrame (an incremental run where it did not
    change): empty snapshot, history and net changes, also on PySpark 3.5 (which refuses
    an empty struct column)."""
    ch = decode_changes(spark.read.parquet(*files["v1_text"]), order_by="seq")
    nothing = ch.where(F.col("commit_lsn") < 0)
    assert snapshot(nothing, "public.rid_full").count() == 0
    assert history(nothing, "public.rid_full").count() == 0
    net = net_changes(nothing, "public.rid_full")
    assert net.count() == 0 and "__OP" in net.columns


@pytest.mark.same_code_on_connect
# 99: a Truncate and a moved row with unchanged TOAST after the cut; 104: identities
# flipping, both tables' rows found only across them (a replay keyed by one identity fails);
# 133: n retyped int8 <-> numeric(20,2) while in keys (FULL) and out; 100: v and n dropped
# and added again, six times over both tables, in keys (FULL) and out, with n retyped and
# identities flipping; then the soak's seeds, if asked for (archive_model.soak_seeds:
# identities flip on odd seeds, n is retyped on every third, a column dropped and added
# again on half; checked as of three commits, CI's as of the middle one). PySpark 3.5's own
# code is the map impl, which PySpark 4 runs on every seed here
@pytest.mark.same_code_on_spark35
@pytest.mark.parametrize("seed,flips,retypes,readds", [(99, False, False, False), (104, True, False, False),
                                                       (133, True, True, False), (100, True, True, True)]
                         + [(s, s % 2 == 1, s % 3 == 0, s % 4 < 2) for s in soak_seeds()])
def test_random_sessions_rebuild_the_model_tables(spark, tmp_path, seed, flips, retypes, readds):
    """A random session (tests/archive_model.py: interleaved streamed transactions,
    savepoints rolled back, stream-prepared and two-phase transactions, key changes,
    unchanged TOAST, REPLICA IDENTITY FULL, Truncates; REPLICA IDENTITY flipping between
    DEFAULT and FULL; a column retyped; columns dropped and added again), its files cut anywhere: Spark's
    changes equal the single-process ones (both pass-2 paths), and snapshot (now and as
    of a commit) and history give the model's tables, an oracle no decoder computed;
    net_changes after the commit, merged into the model's table then, give the final
    table; typed table_changes and the data source's changes equal single-process (on the
    sessions that add columns again: every kind of move)."""
    import archive_model
    import numpy as np
    model = archive_model.TableSession(seed, events=60, flips=flips, retypes=retypes, readds=readds)
    payloads, _ = model.build(finish=False)
    t = pa.table({"seq": pa.array(range(len(payloads)), pa.int64()), "data": pa.array(payloads, pa.binary())})
    df = spark.read.parquet(*write_files(t, tmp_path / "model", 4)).repartition(5)
    single = decode_changes_1(t)
    assert len(single) > 40 or seed in soak_seeds()   # CI's seeds make rich sessions
    for impl in CHANGE_IMPLS:
        got = collect(decode_changes(df, order_by="seq", lsn=None, impl=impl))
        assert got.drop_columns(["commit_rank"]).equals(as_spark(single)), impl
    ch = decode_changes(df, order_by="seq", lsn=None)
    cuts = [model.states[len(model.states) // 2]]
    if seed in soak_seeds():    # a hunt by hand checks two random commits more (CI's time: the middle one)
        r = np.random.default_rng(seed)
        cuts += [model.states[int(i)] for i in r.choice(len(model.states), size=2, replace=False)]
    for rid, (tname, _) in model.TABLES.items():
        name = f"public.{tname}"
        # (a column dropped and added again shows with the table's next change: not before)
        assert model.unseen(rid) or \
            TC._norm(collect(snapshot(ch, name)).to_pylist()) == TC._norm(model.rows(model.committed, rid))
        hist = collect(history(ch, name)).to_pylist()
        for lsn, then in cuts:
            assert model.unseen(rid, lsn) or TC._norm(collect(snapshot(ch, name, as_of_lsn=lsn)).to_pylist()) == \
                TC._norm(model.rows(then, rid)), (name, lsn)
            assert TC._norm(model.alive(hist, lsn, rid)) == TC._norm(model.rows(then, rid)), (name, lsn)
            # net_changes after the commit, merged into the model's table then (the columns
            # added again after it added again: a MERGE on one of them has no key): the final table
            later = single.filter(pc.greater(single.column("commit_lsn"), pa.scalar(lsn, pa.uint64())))
            keycols = model.key_columns(rid, later)
            if len(TC.table_changes(later, name)) and not model.unseen(rid) \
                    and not set(keycols) & {c for at, c, _ in model.dropped[rid] if at >= lsn}:
                net = collect(net_changes(ch.where(F.col("commit_lsn") > F.lit(lsn)), name))
                merged = TC._apply_net(model.table(then, rid, copied_at=lsn), net, keycols)
                assert merged == TC._norm(model.rows(model.committed, rid)), (name, lsn)
        # typed table changes: the single-process ones, typed as Spark types them (on the
        # sessions that add columns again: every kind of move)
        if readds and tname in single.column("table").to_pylist():
            want = TC.table_changes(single, name)
            want = want.sort_by([("commit_lsn", "ascending"), ("seq", "ascending")])   # (commit order)
            got = collect(table_changes(ch, name)).sort_by([("commit_lsn", "ascending"), ("seq", "ascending")])
            cols = ["op", "seq", "xid", "commit_lsn", "before", "after", "unchanged"]
            assert got.num_rows and said(got.select(cols).to_pylist()) == said(want.select(cols).to_pylist()), name
    # the data source's changes (file order, no order column) are decode_changes' rows
    if HAS_DATASOURCE and readds:
        from pgoutput_codec.spark import register
        register(spark)
        d = tmp_path / "model"
        ds = spark.read.format("pgoutput").options(output="changes").load(str(d))
        got = collect(ds.orderBy("commit_rank", "seq")).drop_columns(["commit_rank", "seq"])
        assert got.equals(as_spark(single).drop_columns(["seq"]).select(got.column_names))


@pytest.mark.parametrize("ending", ["commit", pytest.param("rollback", marks=_SHARED)])
def test_a_table_whose_relation_came_in_a_later_committing_transaction(spark, tmp_path, ending):
    """Found by this test's soak (seed 3787): a prepared transaction sends the table's
    Relation, a plain one changes the table relying on it and commits first (or alone:
    the prepared one rolled back). The plan chose the bearer from the Relations of the
    transactions committed by the cut, so snapshot as of the plain commit was empty, and
    with the prepared one rolled back every query of the table was; they equal the
    single process's now."""
    msgs = TC.relation_in_a_prepared_transaction(ending)
    t, single = _encoded(msgs)
    ch = decode_changes(spark.read.parquet(*write_files(t, tmp_path / "prep", 2)), order_by="seq", lsn=None)
    for cut in (None, 20):
        assert collect(snapshot(ch, "public.t", as_of_lsn=cut)).sort_by("id").to_pylist() == \
            snapshot_1(single, "public.t", cut).sort_by("id").to_pylist() != [], cut


@pytest.mark.same_code_on_connect
def test_end_versions_of_rows_written_after_a_truncate(spark, tmp_path):
    """A version with no Truncate after it (rows written after the table's last
    Truncate) ends at its key's next change or stays current — under ANSI, Spark 4's
    default, looking up "the first Truncate after it" in an empty list raised."""
    rel = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))

    def row(k, v):
        return (TupleColumn("t", str(k).encode()), TupleColumn("t", v.encode()))
    msgs = [Begin(final_lsn=10, commit_ts=0, xid=1), rel, Insert(relation_id=16400, new_tuple=row(1, "a")),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            Begin(final_lsn=20, commit_ts=1, xid=2), Truncate(options=0, relation_ids=(16400,)),
            Insert(relation_id=16400, new_tuple=row(2, "b")), Commit(commit_lsn=20, end_lsn=21, commit_ts=1),
            Begin(final_lsn=30, commit_ts=2, xid=3), Update(relation_id=16400, new_tuple=row(2, "c")),
            Commit(commit_lsn=30, end_lsn=31, commit_ts=2)]
    data = [encode_message(m) for m in msgs]
    t = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    ch = decode_changes(spark.read.parquet(*write_files(t, tmp_path / "tr", 1)), order_by="seq", lsn=None)
    got = sorted((r["id"], r["v"], r["__START_LSN"], r["__END_LSN"]) for r in collect(history(ch, "public.t")).to_pylist())
    assert got == [(1, "a", 10, 20), (2, "b", 20, 30), (2, "c", 30, None)]
    single = history_1(decode_changes_1(t), "public.t").to_pylist()
    assert sorted((r["id"], r["v"], r["__START_LSN"], r["__END_LSN"]) for r in single) == got
