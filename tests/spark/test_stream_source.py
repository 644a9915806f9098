"""``spark.readStream.format("pgoutput")`` over a lake that grows by files: each day a
new query run (``Trigger.AvailableNow``, the same checkpoint location) gives what the
day added, exactly once, on real-server archives — days cut inside a streamed
transaction, runs restarted from Spark's offset log, malformed rows, a read limit, and
files that land too late."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import register  # noqa: E402
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark.sources import HAS_DATASOURCE  # noqa: E402

pytestmark = [pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0"),
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")]

#: the session is a Spark Connect client (conftest.py)
CONNECT = os.environ.get("PGOUTPUT_CODEC_SPARK_CONNECT") == "1"
CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus.parquet"
#: v3_2pc_binary_streaming on PostgreSQL 16: a transaction streamed from seq 105 commits
#: after seq 300, so a day cut at 200 leaves it open (the next run reads from its start)
CUTS = (200, 450)


def archive(option_set="v3_2pc_binary_streaming", version="16.14") -> pa.Table:
    c = pq.read_table(CORPUS)
    return c.filter(pc.and_(pc.equal(c["server_version"], version), pc.equal(c["option_set"], option_set))
                    ).sort_by("seq").select(["seq", "lsn", "xid", "data"])


def days(t: pa.Table, cuts=CUTS) -> list[pa.Table]:
    seq = t.column("seq").to_numpy()
    at = [0, *np.searchsorted(seq, cuts).tolist(), len(t)]
    return [t.slice(a, b - a) for a, b in zip(at[:-1], at[1:], strict=True)]


def land(root: Path, day: int, t: pa.Table):
    """A day's rows as two files, small row groups; names that sort before the day before's."""
    d = root / f"{9 - day}-day"
    d.mkdir(parents=True)
    half = len(t) // 2
    pq.write_table(t.slice(0, half), d / "part-b.parquet", row_group_size=40)
    pq.write_table(t.slice(half), d / "part-a.parquet", row_group_size=40)


def run(spark, root: Path, chk: Path, fail=False, outputs=None, **options):
    """One run of the stream (a new query on the same checkpoint location) until it has
    read what is there: the micro-batches' rows, one table each (those with rows).
    ``fail``: the sink fails on the first micro-batch, after Spark logged its offsets
    (the next run must redo it). ``outputs``: name -> function of the micro-batch
    DataFrame, to give each one's tables instead. The sink writes Parquet beside ``root``
    (the executors write it): on Spark Connect it runs in the server's Python process, not
    in this one. ``chk`` may be where only the driver sees (``driver_only``)."""
    out = str(root) + f"_out/{uuid.uuid4().hex}"
    fns = outputs or {"rows": None}

    def sink(b, batch_id):
        if fail:
            raise RuntimeError("the sink failed")
        b = b.persist()
        for name, fn in fns.items():
            (b if fn is None else fn(b)).write.parquet(f"{out}/{name}/batch={batch_id:06d}")
        b.unpersist()

    df = spark.readStream.format("pgoutput").options(order_by="seq", **options).load(str(root))
    w = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(chk))
    q = w.trigger(availableNow=True).start()
    q.awaitTermination()
    if q.exception() is not None:
        raise q.exception()
    got = {}
    for name in fns:
        if not Path(out, name).exists():
            got[name] = []
            continue
        t = spark.read.parquet(f"{out}/{name}").toArrow()
        ids = t.column("batch").to_numpy()
        t = t.drop_columns(["batch"])
        got[name] = [t.filter(pa.array(ids == i)) for i in sorted(set(ids.tolist()))]
    return got if outputs else got["rows"]


def in_commit_order(t: pa.Table) -> pa.Table:
    return t.sort_by([("commit_lsn", "ascending"), ("seq", "ascending")])


def test_a_stream_gives_each_days_changes_exactly_once(spark, tmp_path):
    register(spark)
    arc = archive()
    want = decode_changes_1(arc)
    root, chk = tmp_path / "lake", tmp_path / "chk"
    got = []
    for day, t in enumerate(days(arc)):
        land(root, day, t)
        if day == 1:     # a run that fails: its offsets are logged, not committed
            with pytest.raises(Exception, match="the sink failed"):
                run(spark, root, chk, fail=True, output="changes")
        batches = run(spark, root, chk, output="changes")   # a fresh reader plans the logged batch again
        assert len(batches) == 1          # what landed, in one micro-batch
        got += batches
    # nothing new: the next run reads nothing
    assert sum(len(b) for b in run(spark, root, chk, output="changes")) == 0
    out = pa.concat_tables(got)
    assert len(out) == len(want) > 200
    assert in_commit_order(out).column("seq").equals(in_commit_order(want).column("seq").cast(pa.int64()))
    # commit ranks rise across micro-batches: (commit_rank, seq) orders the whole stream
    by_rank = out.sort_by([("commit_rank", "ascending"), ("seq", "ascending")])
    assert by_rank.column("seq").equals(in_commit_order(out).column("seq"))
    for name in ("op", "table", "commit_lsn", "xid"):
        assert in_commit_order(out).column(name).to_pylist() == in_commit_order(want).column(name).to_pylist(), name
    # the transaction streamed across day 0's end is given by day 1, from its first rows
    assert pc.min(got[1].column("seq")).as_py() < CUTS[0] <= pc.max(got[0].column("seq")).as_py() + 100
    if CONNECT:     # (one run of the whole lake: the same reader code, and slow over Connect)
        return
    # the same stream in one run, and as the batch data source gives it
    whole = pa.concat_tables(run(spark, root, tmp_path / "chk_whole", output="changes"))
    assert in_commit_order(whole).drop_columns(["commit_rank"]).equals(in_commit_order(out).drop_columns(["commit_rank"]))


def _merge(target: dict, net: list, keys: list, cols: list):
    """A MERGE of net_changes rows into ``target`` (key tuple -> row), as a Delta/Iceberg
    MERGE does it: every source row against the target as it was (after a truncate)."""
    if net and net[0]["__OP"] == "truncate":
        target.clear()
    before = dict(target)
    for r in net:
        k = tuple(r[c] for c in keys)
        if r["__OP"] == "delete":
            target.pop(k, None)
        elif r["__OP"] == "upsert":
            row = {c: r[c] for c in cols}
            if r["__UNCHANGED"]:
                src = before[tuple(r["__UNCHANGED_FROM"].values())] if r["__UNCHANGED_FROM"] else before[k]
                row.update({c: src[c] for c in r["__UNCHANGED"]})
            target[k] = row


@pytest.mark.same_code_on_connect
def test_each_micro_batch_merged_gives_the_table(spark, tmp_path):
    """The job a lake's CDC pipeline runs: each micro-batch's net_changes MERGEd into a
    copy of the table — key changes, unchanged TOAST values, truncates — gives the
    table rebuilt from the whole archive at once."""
    from pgoutput_codec.spark import net_changes, snapshot
    from pgoutput_codec.spark.changes import decode_changes
    from pgoutput_codec.tables import table_columns
    register(spark)
    arc = archive("v1_text")
    single = decode_changes_1(arc)
    names = ["public.rid_default", "public.rid_index", "public.toasty", "public.trunc_parent"]
    shape = {n: table_columns(single, n) for n in names}
    targets = {n: {} for n in names}
    seen = set()
    outputs = {n: (lambda b, n=n: net_changes(b, n)) for n in names}
    root, chk = tmp_path / "lake", tmp_path / "chk"
    for day, t in enumerate(days(arc, (100, 250))):
        land(root, day, t)
        got = run(spark, root, chk, outputs=outputs, output="changes")
        for n in names:
            cols = [c["name"] for c in shape[n]]
            for net in got[n]:     # truncate first (a Parquet round trip loses the order)
                net = sorted(net.to_pylist(), key=lambda r: r["__OP"] != "truncate")
                seen.update(r["__OP"] for r in net)
                _merge(targets[n], net, [c["name"] for c in shape[n] if c["flags"] & 1], cols)
    assert seen == {"upsert", "delete", "truncate"}
    whole = decode_changes(spark.read.option("recursiveFileLookup", "true").parquet(str(root)), order_by="seq")
    for n in names:
        want = snapshot(whole, n).toArrow().to_pylist()
        key = [c["name"] for c in shape[n] if c["flags"] & 1]
        got = sorted(targets[n].values(), key=lambda r: tuple(r[c] for c in key))
        assert got == sorted(want, key=lambda r: tuple(r[c] for c in key)), n
        assert n == "public.trunc_parent" or len(got) > 0


@pytest.mark.same_code_on_connect
def test_a_random_session_landed_by_days_merges_into_the_model_tables(spark, tmp_path):
    """A random session (tests/archive_model.py: interleaved streamed transactions,
    savepoints rolled back, prepares committed or rolled back later, key changes,
    unchanged TOAST, REPLICA IDENTITY FULL, Truncates) landed in four days cut at random
    rows — inside stream blocks, between a Prepare and its end: after each day's run,
    its micro-batches' net_changes MERGEd into copies of the tables give the model's
    tables as of the last commit landed, an oracle no decoder computed."""
    _landed_by_days_merges_into_the_model(spark, tmp_path, seed=18, cut_seed=5)


def _landed_by_days_merges_into_the_model(spark, tmp_path, *, seed, cut_seed):
    import random

    import archive_model
    from pgoutput_codec.spark import net_changes
    register(spark)
    model = archive_model.TableSession(seed, events=60)
    payloads, _ = model.build(finish=False)
    t = pa.table({"seq": pa.array(range(len(payloads)), pa.int64()), "data": pa.array(payloads, pa.binary())})
    cuts = sorted(random.Random(cut_seed).sample(range(1, len(t)), 3))
    names = {rid: f"public.{name}" for rid, (name, _) in model.TABLES.items()}
    keys = {rid: model.key_columns(rid) for rid in model.TABLES}
    outputs = {names[rid]: (lambda b, n=names[rid]: net_changes(b, n)) for rid in names}
    targets = {rid: {} for rid in names}
    root, chk = tmp_path / "lake", tmp_path / "chk"
    for day, part in enumerate(days(t, cuts)):
        land(root, day, part)
        got = run(spark, root, chk, outputs=outputs, output="changes")
        for rid, name in names.items():
            for net in got[name]:     # truncate first (a Parquet round trip loses the order)
                net = sorted(net.to_pylist(), key=lambda r: r["__OP"] != "truncate")
                _merge(targets[rid], net, keys[rid], ["id", "v", "n"])
        landed = cuts[day] if day < len(cuts) else len(t)
        done = sum(n <= landed for n in model.landed)
        then = model.states[done - 1][1] if done else {rid: {} for rid in names}
        for rid in names:
            want = sorted(model.rows(then, rid), key=lambda r: r["id"])
            assert sorted(targets[rid].values(), key=lambda r: r["id"]) == want, (day, names[rid])
    assert all(targets.values()) and len(model.states) > 10


@pytest.mark.same_code_on_connect
def test_a_stream_of_messages(spark, tmp_path, driver_only):
    register(spark)
    arc = archive("v1_text")
    root, chk = tmp_path / "lake", driver_only / "chk"
    got = []
    for day, t in enumerate(days(arc, (100, 250))):
        land(root, day, t)
        got += run(spark, root, chk, fields="type,xid,relation_id")
    assert len(got) == 3
    out = pa.concat_tables(got).sort_by("seq")
    want = spark.read.format("pgoutput").options(fields="type,xid,relation_id").load(str(root)).toArrow().sort_by("seq")
    assert out.column_names == want.column_names
    assert out.equals(want) and len(out) == len(arc)


@pytest.mark.same_code_on_connect   # admission control runs in the server's data source
def test_a_read_limit_splits_a_run_into_micro_batches(spark, tmp_path):
    pytest.importorskip("pyspark.sql.streaming.datasource", reason="read limits need PySpark >= 4.2")
    from pyspark.sql.streaming import datasource as sds
    if not hasattr(sds, "ReadMaxRows"):
        pytest.skip("read limits need PySpark >= 4.2")
    register(spark)
    arc = archive()
    root = tmp_path / "lake"
    land(root, 0, arc)
    batches = [b for b in run(spark, root, tmp_path / "chk", output="changes", max_rows_per_trigger="100") if len(b)]
    assert len(batches) >= 4           # 664 rows, 100 at most a micro-batch (a held stream gives nothing)
    out = pa.concat_tables(batches)
    want = decode_changes_1(arc)
    assert in_commit_order(out).column("seq").to_pylist() == in_commit_order(want).column("seq").to_pylist()
    # each micro-batch's commits are its own: none twice
    lsns = [set(b.column("commit_lsn").to_pylist()) for b in batches]
    assert sum(map(len, lsns)) == len(set().union(*lsns))
    # rows sharing an order key stay in one micro-batch: a limit that falls between them
    # is not a row landing late on the next trigger
    twice = archive("v1_text").slice(0, 60)
    root2 = tmp_path / "twice"
    land(root2, 0, pa.concat_tables([twice, twice]).sort_by("seq"))
    msgs = run(spark, root2, tmp_path / "chk2", max_rows_per_trigger="25", fields="type")
    assert [len(b) for b in msgs] == [26, 26, 26, 26, 16]   # keys 0-12, 13-25, 26-38, 39-51, 52-59
    assert sorted(pa.concat_tables(msgs).column("seq").to_pylist()) == sorted(2 * twice.column("seq").to_pylist())


@pytest.mark.same_code_on_connect
@pytest.mark.on_cluster
def test_a_malformed_row_read_again_is_given_once(spark, tmp_path, driver_only):
    """PERMISSIVE: a bad row inside the open streamed transaction's rows is read by day
    0's micro-batch and again by day 1's; it is one error row."""
    register(spark)
    arc = archive()
    good = arc.set_column(0, "seq", pc.multiply(arc.column("seq"), 10))
    bad_at = [55, 1505, 5005]           # 1505: after the stream's start (1050), before day 0's end (2000)
    bad = pa.table({"seq": pa.array(bad_at, pa.int64()), "lsn": ["0/BAD"] * 3, "xid": pa.nulls(3, arc.schema.field("xid").type),
                    "data": pa.array([b"I\x00\x00", b"\xff\x01", b"U\x00\x00\x40\x00N\x00"], pa.binary())})
    mixed = pa.concat_tables([good, bad.cast(good.schema)]).sort_by("seq")
    root, chk = tmp_path / "lake", driver_only / "chk"
    got = []
    for day, t in enumerate(days(mixed, (2000, 4500))):
        land(root, day, t)
        got += run(spark, root, chk, output="changes", mode="PERMISSIVE")
    out = pa.concat_tables(got)
    err = out.filter(pc.is_valid(out.column("error")))
    assert sorted(err.column("seq").to_pylist()) == bad_at
    assert err.column(ST.CORRUPT_RECORD).null_count == 0
    ok = in_commit_order(out.filter(pc.is_null(out.column("error"))))
    assert ok.column("seq").to_pylist() == in_commit_order(decode_changes_1(good)).column("seq").to_pylist()
    with pytest.raises(Exception, match=r"seq (55|1505|5005) \(lsn 0/BAD\): "):
        run(spark, root, driver_only / "chk_failfast", output="changes")


@pytest.mark.same_code_on_connect
def test_a_file_that_lands_below_what_was_read_is_refused(spark, tmp_path):
    register(spark)
    arc = archive()
    d0, d1, d2 = days(arc)
    root, chk = tmp_path / "lake", tmp_path / "chk"
    land(root, 0, d0)
    land(root, 2, d2)
    run(spark, root, chk, output="changes")
    land(root, 1, d1)                    # late: its keys lie below what the run read past
    with pytest.raises(Exception, match=r"row\(s\) landed with seq at or below"):
        run(spark, root, chk, output="changes")
    # messages too (an archive without streams: a gap in one would hide the stream state)
    d0, d1, d2 = days(archive("v1_text"), (100, 250))
    root2, chk2 = tmp_path / "lake2", tmp_path / "chk2"
    land(root2, 0, d0)
    land(root2, 2, d2)
    run(spark, root2, chk2)
    land(root2, 1, d1)
    with pytest.raises(Exception, match=r"row\(s\) landed with seq at or below"):
        run(spark, root2, chk2)


def test_a_stream_needs_an_order_column_and_parquet(spark, tmp_path):
    register(spark)
    root = tmp_path / "lake"
    land(root, 0, archive())
    import pyarrow.csv as pacsv
    (tmp_path / "csv").mkdir()
    t = archive().slice(0, 10)
    pacsv.write_csv(t.set_column(3, "data", pa.array(["\\x" + v.hex() for v in t.column("data").to_pylist()])),
                    tmp_path / "csv" / "export.csv")
    for path, options, match in ((root, {}, "give order_by"),
                                 (tmp_path / "csv", {"order_by": "seq", "format": "csv"}, "Parquet archives only"),
                                 (root, {"order_by": "nope"}, "order_by column 'nope' not in the archive")):
        with pytest.raises(Exception, match=match):
            df = spark.readStream.format("pgoutput").options(**options).load(str(path))
            q = df.writeStream.foreachBatch(lambda b, i: None).option(
                "checkpointLocation", str(tmp_path / f"chk{len(match)}")).trigger(availableNow=True).start()
            q.awaitTermination()
            if q.exception() is not None:
                raise q.exception()
    # the batch reader still refuses order_by for messages (file order is its order there)
    with pytest.raises(Exception, match="order_by applies to output='changes'"):
        spark.read.format("pgoutput").options(order_by="seq").load(str(root)).collect()


@pytest.mark.same_code_on_connect
def test_a_stream_s_change_rows_type_tables_as_one_process(spark, tmp_path, driver_only):
    """The change rows a stream gave, micro-batch by micro-batch (days cut inside a
    streamed transaction), landed in a lake: the tables that hold every type, FULL
    identity's old rows and unchanged TOAST, typed by Spark's table_changes over them,
    equal one process's table_changes, value for value after the Spark mapping
    (docs/types.md)."""
    from pgoutput_codec.spark import table_changes
    from pgoutput_codec.tables import table_changes as table_changes_1
    from pgoutput_codec.tables import table_columns
    import change_corpus as CS
    register(spark)
    arc = archive()
    root = tmp_path / "lake"
    for day, t in enumerate(days(arc)):
        land(root, day, t)
    rows = pa.concat_tables(run(spark, root, driver_only / "chk", output="changes"))
    pq.write_table(rows, tmp_path / "rows.parquet")
    df = spark.read.parquet(str(tmp_path / "rows.parquet"))
    single = decode_changes_1(arc)
    checked = 0
    for name in sorted(CS.ALL_SOURCES):   # (every table: decode_changes' rows, change_corpus.py)
        one = table_changes_1(single, name)
        if len(one):
            checked += CS._same_typed_changes(CS.collect(table_changes(df, name)), one, table_columns(single, name),
                                              ("readStream", name))
    assert checked > 300
