"""pgoutput_codec.spark.changes on a real local SparkSession, against the single-process
decoder (``changes.decode_changes``): the change rows, the row filters chosen before any
decoding, arrival order, commit windows, checkpoints and parse modes.

Archives are written as several small Parquet files, so Relations, transactions and
streamed chunks sit in different files and partitions (change_corpus.py)."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import Observation  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pgoutput_codec import (Begin, Commit, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            encode_message)
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import HAS_ARROW_UDF, decode_changes, snapshot, table_changes  # noqa: E402
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark import archiverows as RF  # noqa: E402
from pgoutput_codec.spark.shipping import physical_plan  # noqa: E402
from pgoutput_codec.spark.shipping import is_connect  # noqa: E402
from pgoutput_codec.tables import table_columns  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

from change_corpus import (CHANGE_IMPLS, OPTION_SETS, TC, VERSION, _SHARED, archive, as_spark, collect,  # noqa: E402
                           write_files)


@pytest.mark.skipif(not HAS_ARROW_UDF, reason="per-field change UDFs need arrow_udf (PySpark >= 4.1)")
def test_the_plan_reaches_the_workers_once_not_with_every_udf(spark, files):
    """decode_changes' per-field path is one UDF per change field, all reading the plan:
    a broadcast, or on Spark Connect a file artifact loaded once per worker — never a
    copy pickled into each UDF (16 copies, within the Connect message limit)."""
    import pickle

    from pgoutput_codec.spark.changerows import pass2_of
    from pgoutput_codec.spark.shipping import Shipped
    ch = decode_changes(spark.read.parquet(*files["v3_2pc_binary_streaming"]), order_by="seq")
    fields = pass2_of(ch)
    carried = fields.plan_bc
    if is_connect(spark):
        assert isinstance(carried, Shipped)
        assert len(pickle.dumps(carried)) < 300 < len(pickle.dumps(fields.plan))
    else:
        from pyspark.broadcast import Broadcast
        assert isinstance(carried, Broadcast)
    want = as_spark(decode_changes_1(archive(VERSION, "v3_2pc_binary_streaming")))
    assert collect(ch).drop_columns(["commit_rank"]).equals(want)


@pytest.mark.parametrize("impl", CHANGE_IMPLS)
@pytest.mark.parametrize("option_set", OPTION_SETS)
def test_spark_changes_equal_single_process(spark, files, option_set, impl):
    df = spark.read.parquet(*files[option_set])
    got = collect(decode_changes(df, order_by="seq", impl=impl))
    want = as_spark(decode_changes_1(archive(VERSION, option_set)))
    assert len(want) > 100
    assert got.drop_columns(["commit_rank"]).equals(want), option_set
    rank = got.column("commit_rank").to_pylist()
    assert rank == sorted(rank)


def test_replayed_transactions_once_and_files_out_of_order_refused(spark, tmp_path, caplog):
    """An at-least-once archive: the last three transactions of a real-server archive
    received again (a consumer that reconnected before confirming). Both Spark
    implementations give each transaction once, as the single-process decoder does.
    Files listed out of order (order_by=None, names that sort the later half first) are
    refused with the commit that shows it, not decoded in a wrong commit order. The
    replays are named (``replayed_of``) and logged as a warning."""
    from pgoutput_codec import ArchiveOrderError, ChangeDecoder
    from pgoutput_codec.spark import replayed_of
    t = archive(VERSION, "v1_text")
    tags = [d[:1] for d in t.column("data").to_pylist()]
    begins = [i for i, g in enumerate(tags) if g == b"B"]
    again = t.slice(begins[-3])
    again = again.set_column(0, "seq", pa.array(range(len(t), len(t) + len(again)), pa.int64()))
    replayed = pa.concat_tables([t, again])
    want = as_spark(decode_changes_1(t))
    assert as_spark(decode_changes_1(replayed)).equals(want)
    df = spark.read.parquet(*write_files(replayed, tmp_path / "replayed", 3))
    dec = ChangeDecoder()
    dec.feed(replayed)
    assert len(dec.replayed) == 3
    for impl in CHANGE_IMPLS:
        caplog.clear()
        with caplog.at_level("WARNING", logger="pgoutput_codec"):
            ch = decode_changes(df, order_by="seq", impl=impl)
        assert "3 transaction(s) received again" in caplog.text, impl
        assert replayed_of(ch) == dec.replayed, impl
        got = collect(ch)
        assert got.drop_columns(["commit_rank"]).equals(want), impl
        assert decode_changes(df, order_by="seq", impl=impl, sort=False).count() == len(want), impl
    # the later half first: file names that sort it first, no order column
    half = begins[len(begins) // 2]
    out_of_order = tmp_path / "swapped"
    out_of_order.mkdir()
    pq.write_table(t.slice(half).drop_columns(["seq"]), out_of_order / "a.parquet")
    pq.write_table(t.slice(0, half).drop_columns(["seq"]), out_of_order / "b.parquet")
    first_c = next(i for i in range(len(tags)) if tags[i] == b"C")
    for mode in ("FAILFAST", "PERMISSIVE"):
        with pytest.raises(ArchiveOrderError) as e:
            decode_changes(spark.read.parquet(str(out_of_order)), mode=mode)
        assert e.value.seq == (1 << 40) + first_c, mode   # file 1, row first_c: the key order_by=None gives


def _python_nodes(df) -> list[str]:
    plan = physical_plan(df)
    return [line for line in plan.splitlines() if "EvalPython" in line or "MapInArrow" in line
            or "PythonMapInArrow" in line]


@pytest.mark.skipif(not HAS_ARROW_UDF, reason="per-field change UDFs need arrow_udf (PySpark >= 4.1)")
def test_change_rows_cost_only_what_a_query_reads(spark, files, monkeypatch):
    """One UDF per field: a count decodes nothing (Spark filters by tag byte and, for
    whole uncommitted transactions, by order key; for aborted subtransactions by key
    and xid), ``op`` is one UDF call, and where the plan is too long to say as a Spark
    filter only 35 payload bytes cross for it. The counts and values stay those of the
    single-process decoder."""
    plain = spark.read.parquet(*files["v1_text"])
    want = decode_changes_1(archive(VERSION, "v1_text"))
    ch = decode_changes(plain, order_by="seq", sort=False)
    assert _python_nodes(ch.groupBy().count()) == []
    assert ch.count() == len(want)
    ops = ch.select("op")
    nodes = _python_nodes(ops)
    assert len(nodes) == 1 and nodes[0].count("ChangeField") == 1, nodes
    assert sorted(r.op for r in ops.collect()) == sorted(want.column("op").to_pylist())

    streamed = spark.read.parquet(*files["v2_streaming"])
    want = decode_changes_1(archive(VERSION, "v2_streaming"))
    for limit in (RF.ROW_DROP_LIMIT, 0):
        monkeypatch.setattr(RF, "ROW_DROP_LIMIT", limit)
        ch = decode_changes(streamed, order_by="seq", sort=False)
        nodes = _python_nodes(ch.groupBy().count())
        if limit:
            assert nodes == [], nodes
        else:
            assert len(nodes) == 1 and "KeepRows" in nodes[0] and "ChangeField" not in nodes[0], nodes
        assert ch.count() == len(want)
        got = collect(ch.select("seq", "xid", "after").orderBy("seq"))
        assert got.column("after").to_pylist() == want.sort_by("seq").column("after").to_pylist()


@pytest.mark.skipif(not HAS_ARROW_UDF, reason="per-field change UDFs need arrow_udf (PySpark >= 4.1)")
@pytest.mark.parametrize("limit", [None, 0])
def test_a_query_filtering_on_decoded_fields(spark, files, monkeypatch, limit):
    """Spark evaluates a query's filter on a decoded field next to the row filters, on
    every row before them (control rows, Truncates, changes of aborted subtransactions;
    with ``limit`` 0 in the same Python node as ``keep_mask``): the field UDFs give those
    rows nulls, and the counts are the single-process ones."""
    if limit is not None:
        monkeypatch.setattr(RF, "ROW_DROP_LIMIT", limit)
    df = spark.read.parquet(*files["v3_2pc_binary_streaming"])
    want = decode_changes_1(archive(VERSION, "v3_2pc_binary_streaming"))
    ch = decode_changes(df, order_by="seq", sort=False)
    table = want.column("table")[0].as_py()
    for cond, n in [(F.col("op") == "I", pc.sum(pc.equal(want.column("op"), "I")).as_py()),
                    (F.col("table") == table, pc.sum(pc.equal(want.column("table"), table)).as_py()),
                    (F.col("xid").isNotNull() & (F.col("op") != "T"), pc.sum(pc.not_equal(want.column("op"), "T"))
                     .as_py())]:
        q = ch.where(cond)
        nodes = _python_nodes(q)
        assert any("ChangeField" in n_ and ("KeepRows" in n_) == (limit == 0) for n_ in nodes), nodes
        assert q.count() == n > 0


@pytest.fixture()
def heads_through_python(monkeypatch) -> list:
    """A list that gets one entry each time a versions job sends the payload heads
    through Python (a ``HeadFacts`` built on the driver); clear it before each job."""
    from pgoutput_codec.spark import changes
    built = []

    class Recorded(changes.HeadFacts):
        def __init__(self, plan_bc):
            built.append(plan_bc)
            super().__init__(plan_bc)
    monkeypatch.setattr(changes, "HeadFacts", Recorded)
    return built


@pytest.mark.skipif(not HAS_ARROW_UDF, reason="per-field change UDFs need arrow_udf (PySpark >= 4.1)")
def test_table_changes_choose_the_table_before_decoding(spark, files, heads_through_python):
    """Over decode_changes' field UDFs, a filter on ``table`` would be pushed below them
    into a Python node of its own (every payload sent and decoded twice): table_changes
    chooses the table on the payload heads instead, and gets the same rows as over the
    mapInArrow path; a cached DataFrame is filtered as it is. The versions job finds
    what the decoded rows say without Python (``HeadFacts``), for a table altered twice
    too (its column lists ordered by key: this archive's commits follow its rows)."""
    df = spark.read.parquet(*files["v1_text"])
    want = decode_changes_1(archive(VERSION, "v1_text"))
    name = max(set(zip(want.column("schema").to_pylist(), want.column("table").to_pylist(), strict=True)),
               key=lambda st: want.column("table").to_pylist().count(st[1]))
    name = ".".join(name)
    ch = decode_changes(df, order_by="seq")
    tc = table_changes(ch, name)
    nodes = _python_nodes(tc)
    decoding = [n for n in nodes if "ChangeField" in n]
    assert len(decoding) == 1 == len(nodes), nodes   # the other tables' rows: a Spark filter
    got = collect(tc)
    ref = collect(table_changes(decode_changes(df, order_by="seq", impl="map"), name))
    assert len(got) > 10 and got.equals(ref)
    cached = decode_changes(df, order_by="seq").cache()
    assert collect(table_changes(cached, name)).equals(ref)
    cached.unpersist()
    # tables= leaving the table out leaves no rows
    assert table_changes(decode_changes(df, order_by="seq", tables="nosuch.*"), name).count() == 0
    # the versions job reads the payload heads only, and finds what the decoded rows say
    from pgoutput_codec.spark.tablerows import table_info
    mapped = decode_changes(df, order_by="seq", impl="map").select("*")   # its decoded rows
    truncated = {f"{r['schema']}.{r['table']}" for r in want.filter(pc.equal(want.column("op"), "T")).to_pylist()}
    assert truncated
    deleted = {f"{r['schema']}.{r['table']}" for r in want.filter(pc.equal(want.column("op"), "D")).to_pylist()}
    assert deleted and (truncated | {name}) - deleted
    through_python = heads_through_python
    for t in sorted(truncated | {name, "public.schema_change"}):
        through_python.clear()
        got, want_info = table_info(ch, t), None
        versions, truncs, sends_old, deletes, fingerprints = got[:5]
        assert not through_python, t
        want_info = table_info(mapped, t)
        want_versions, want_truncs, want_sends_old, want_deletes, want_fps = want_info[:5]
        # the relation that bears the name: from the plan's Relations, and from the rows
        facts = ("relation_id", "replaced", "found")
        assert [getattr(got, f) for f in facts] == [getattr(want_info, f) for f in facts], t
        assert got.relation_id is not None and got.found, t
        assert got.truncates or [p[1] for p in got.firsts + got.lasts] == \
            [p[1] for p in want_info.firsts + want_info.lasts], t
        assert versions == want_versions and versions and sends_old == want_sends_old, t
        assert fingerprints == want_fps and len(set(fingerprints)) == len(versions), t
        assert deletes == want_deletes == (t in deleted), t
        assert len(versions) == (3 if t == "public.schema_change" else 1), t
        assert [x[:3] for x in truncs] == [x[:3] for x in want_truncs], t
        assert [x[3].timestamp() for x in truncs] == [x[3].timestamp() for x in want_truncs], t


def test_versions_of_an_altered_table_in_commit_order(spark, tmp_path, heads_through_python):
    """A table altered twice, its second column list used only by a streamed
    transaction that commits after a later plain transaction: ordered by their last
    change, the versions are v1, v3, v2, not the order of their rows. Where commits
    follow the rows' order (``GivenHeads.serial``) Spark finds that order by key alone;
    here the versions job must send the heads through Python for the commit ranks."""
    from pgoutput_codec import StreamCommit, StreamStart, StreamStop
    from pgoutput_codec.spark.tablerows import table_info

    def rel(*names, xid=None):
        return Relation(xid=xid, relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
                        columns=tuple(RelationColumn(int(n == "id"), n, 23, -1) for n in names))

    def vals(*v):
        return tuple(TupleColumn("t", str(x).encode()) for x in v)
    msgs = [Begin(final_lsn=10, commit_ts=0, xid=1), rel("id"), Insert(relation_id=16400, new_tuple=vals(1)),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            StreamStart(xid=2, first_segment=True), rel("id", "b", xid=2),
            Insert(xid=2, relation_id=16400, new_tuple=vals(2, 2)), StreamStop(),
            Begin(final_lsn=20, commit_ts=1, xid=3), rel("id", "c"), Insert(relation_id=16400, new_tuple=vals(3, 3)),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=1),
            StreamCommit(xid=2, commit_lsn=30, end_lsn=31, commit_ts=2)]
    data = [encode_message(m) for m in msgs]
    t = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    df = spark.read.parquet(*write_files(t, tmp_path / "altered", 2))
    serial = [Begin(final_lsn=5, commit_ts=0, xid=9), Insert(relation_id=16401, new_tuple=vals(0)),
              Commit(commit_lsn=5, end_lsn=6, commit_ts=0)] + msgs[:4] + msgs[8:12]
    data = [encode_message(m) for m in serial]
    t = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    serial_df = spark.read.parquet(*write_files(t, tmp_path / "serial", 2))
    through_python = heads_through_python
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        through_python.clear()
        info = table_info(ch, "public.t")
        assert through_python, impl
        assert [[c["name"] for c in v] for v in info.versions] == [["id"], ["id", "c"], ["id", "b"]], impl
        assert info.versions == table_info(ch.select("*"), "public.t").versions   # the decoded rows' order
        # without the stream, after a row of a relation never described: Spark alone, by key
        plain = decode_changes(serial_df, order_by="seq", lsn=None, impl=impl)
        through_python.clear()
        assert [[c["name"] for c in v] for v in table_info(plain, "public.t").versions] == [["id"], ["id", "c"]]
        assert not through_python, impl
    got = collect(table_changes(decode_changes(df, order_by="seq", lsn=None), "public.t"))
    assert got.column("after").to_pylist() == [{"id": 1, "c": None, "b": None}, {"id": 3, "c": 3, "b": None},
                                               {"id": 2, "c": None, "b": 2}]


def test_spark_drops_the_rows_keep_mask_leaves_out(spark):
    """``ControlPlan.row_drops`` as a Spark filter (``rowfilter.dropped``): on every archive of the
    corpus (streamed rows, aborted subtransactions, two-phase), with ``tables`` choosing,
    narrowed to one table, to one table up to a commit, and in XLogData frames, Spark
    leaves out exactly the rows the heads-only ``keep_mask`` does (the other tables' rows
    never reach Python). On the same plans Spark's ``rowfilter.given`` reads the rows as
    ``ControlPlan.given_heads`` says (checked against ``head_facts`` in ``test_changes``)."""
    import numpy as np

    from pgoutput_codec.changes import HEAD_BYTES, ControlPlan, control_candidates
    from pgoutput_codec.spark.archiverows import KEY as _KEY
    from pgoutput_codec.spark.archiverows import PAYLOAD as _PAYLOAD
    streamed = aborted = 0
    for option_set in OPTION_SETS:
        arch = archive(VERSION, option_set)
        plain = arch.column("data").combine_chunks()
        keys = arch.column("seq").to_numpy()
        wrapped = TC.in_xlogdata(plain, lambda i: i % 3)
        # in XLogData frames: the archive with streams, aborts and two-phase (one job each)
        for values in (plain, wrapped) if option_set == "v3_2pc_binary_streaming" else (plain,):
            mask = control_candidates(values)
            whole = ControlPlan.build(values.filter(pa.array(mask)), keys[mask])
            v = whole.versions[-1]
            commits = np.unique(whole.commit_lsn.to_numpy(zero_copy_only=False))
            one = whole.for_table(v["schema"], v["table"])
            plans = [ControlPlan.build(values.filter(pa.array(mask)), keys[mask], tables="public.[a-m]*"), one,
                     one.between(until_lsn=int(commits[len(commits) // 2]))]
            plans += [whole] if whole.aborted else []   # the aborted subtransactions' rows of every table
            drops = [p.row_drops() for p in plans]
            assert None not in drops, option_set
            given = [p.given_heads() for p in plans]
            assert None not in given, option_set
            streamed += any(d.stream for d in drops)
            aborted += bool(whole.aborted and drops[-1].aborted)
            df = spark.createDataFrame(pa.table({_PAYLOAD: values, _KEY: keys}).to_pandas())   # 3.5: no Arrow tables
            facts = [c.alias(f"g{i}_{j}") for i, g in enumerate(given) for j, c in enumerate(RF.given(g))]
            facts += [RF.version_of(g).alias(f"v{i}") for i, g in enumerate(given)]
            got = collect(df.select(_KEY, *[RF.dropped(d).alias(f"d{i}") for i, d in enumerate(drops)], *facts)
                          .orderBy(_KEY))
            assert got.column(_KEY).to_numpy().tolist() == sorted(keys.tolist())
            order = np.argsort(keys)
            heads = pc.binary_slice(values, 0, HEAD_BYTES)
            for i, p in enumerate(plans):
                want = ~p.keep_mask(heads, keys)[order]
                assert want.any() and got.column(f"d{i}").to_numpy(zero_copy_only=False).tolist() == want.tolist(), \
                    (option_set, i)
                read = TC._given_by_heads(given[i], values.take(pa.array(order)), keys[order])
                for j in range(3):
                    assert got.column(f"g{i}_{j}").to_pylist() == [r[j] for r in read], (option_set, i, j)
                assert [v for v, r in zip(got.column(f"v{i}").to_pylist(), read, strict=True) if r[0]] == \
                    [r[3] for r in read if r[0]], (option_set, i)   # the version in force
                assert any(r[0] for r in read), (option_set, i)
    assert streamed and aborted   # the corpus has both: the xid and the later relation id read
    # a table renamed out of the choice and back, rows before any Relation for their id;
    # then 30 tables first described all through the archive (the ids' groups by key)
    for (values, keys), name, dropped in ((TC.renamed_archive(), "public.t", 4),
                                          (TC.staggered_archive(), "public.t7", 442)):
        mask = control_candidates(values)
        p = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], tables=name)
        df = spark.createDataFrame(pa.table({_PAYLOAD: values, _KEY: keys}).to_pandas())   # 3.5: no Arrow tables
        got = collect(df.select(RF.dropped(p.row_drops()).alias("d"), _KEY).orderBy(_KEY)).column("d").to_pylist()
        assert got == (~p.keep_mask(values, keys)).tolist() and sum(got) == dropped, name
    # given: a change outside any transaction (keys rise with the rows in these archives)
    for values, keys in (TC.orphan_archive(), TC.renamed_archive()):
        mask = control_candidates(values)
        g = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], tables="public.t", errors="collect").given_heads()
        df = spark.createDataFrame(pa.table({_PAYLOAD: values, _KEY: keys}).to_pandas())   # 3.5: no Arrow tables
        got = collect(df.select(_KEY, *[c.alias(f"g{j}") for j, c in enumerate(RF.given(g))]).orderBy(_KEY))
        want = TC._given_by_heads(g, values, keys)
        assert [tuple(r[f"g{j}"] for j in range(3)) for r in got.to_pylist()] == [w[:3] for w in want]
        assert any(w[0] for w in want)


# Connect and PySpark 3.5 take the deepest filter once (the envelope changes only offsets)
@pytest.mark.parametrize("envelope", [pytest.param("none", marks=_SHARED), "auto"])
def test_a_row_drops_filter_at_its_limits(spark, envelope):
    """``rowfilter.dropped`` of a ``RowDrops`` as long as ``ROW_DROP_LIMIT`` lets one be (64 key
    ranges of each kind, 256 relation ranges, 64 aborted subtransactions) against the
    same description read row by row in Python, on random payloads: short ones, other
    tags, ids inside and outside the ranges, streamed and framed rows. Spark Connect
    takes it too (its terms nest in balanced trees, not 256 deep)."""
    import random

    from pgoutput_codec.changes import RowDrops
    from pgoutput_codec.spark.archiverows import KEY as _KEY
    from pgoutput_codec.spark.archiverows import PAYLOAD as _PAYLOAD
    rnd = random.Random(5)
    limit = RF.ROW_DROP_LIMIT
    cuts = sorted(rnd.sample(range(1, 100_000), 4 * limit))
    ranges = [(cuts[2 * i], cuts[2 * i + 1]) for i in range(2 * limit)]
    segments, stream = ranges[:limit:2] + [(None, 50)], ranges[1:limit:2] + [(99_000, None)]
    # half of the aborted transactions' ranges inside stream blocks, half outside
    ranges = ranges[1:limit:2] + ranges[limit::2]
    relids = {16384 + i: [(rnd.randrange(-10, 60_000), None)] for i in range(4 * limit - 65)}
    relids.update({20_000 + i: [(rnd.randrange(0, 30_000), rnd.randrange(30_000, 60_000)),
                                (rnd.randrange(60_000, 90_000), None)] for i in range(32)})
    relids[30_000] = [(None, 40_000)]
    aborted = [([ranges[i]], [700 + i, 900 + i]) for i in range(limit)]
    drops = RowDrops(envelope, segments, stream, relids, aborted)
    ids = list(relids) + [1, 2, 3]
    values, keys = [], rnd.sample(range(-20, 100_100), 4000)
    for k in keys:
        body = rnd.choice(b"IUDIUDIUDBCR").to_bytes(1, "big")
        if rnd.random() < 0.5:   # an xid: often the aborted one of the range the key is in
            near = [i for i, (lo, hi) in enumerate(ranges) if lo < k < hi] or [rnd.randrange(limit)]
            body += rnd.choice([700 + near[0], 900 + near[0], 5]).to_bytes(4, "big")
        body += rnd.choice(ids).to_bytes(4, "big") + rnd.choice([b"", b"N", b"K\x00\x01"])
        if rnd.random() < 0.05:
            body = body[:rnd.randrange(len(body))]
        framed = envelope != "none" and rnd.random() < 0.3
        values.append(None if rnd.random() < 0.01 else (b"w" + bytes(24) + body if framed else body))
    table = pa.table({_PAYLOAD: pa.array(values, pa.binary()), _KEY: pa.array(keys, pa.int64())})
    want = TC._kept_by_row_drops(drops, table.column(_PAYLOAD), table.column(_KEY).to_numpy())
    assert 300 < want.count(False) < 3700
    df = spark.createDataFrame(table.to_pandas())   # 3.5: no Arrow tables
    got = collect(df.select(_KEY, RF.dropped(drops).alias("d"))).sort_by(_KEY)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    assert got.column("d").to_pylist() == [not want[i] for i in order]


@pytest.mark.same_code_on_connect
def test_map_table_changes_are_typed_where_they_are_decoded(spark, files):
    """Over decode_changes' mapInArrow (impl "map": PySpark 3.5, and 4.x when asked),
    table_changes types one table's rows in the mapInArrow that decodes them: one
    Python node, not the decode's then the typing's, and the rows, in the order, of the
    two steps (over a DataFrame derived from the change rows); so for sort=False and for
    snapshot's as_of_lsn. Its versions job reads the payload heads. A malformed row
    still fails with its order key."""
    from pgoutput_codec.spark.tablerows import table_info
    df = spark.read.parquet(*files["v1_text"])
    want = decode_changes_1(archive(VERSION, "v1_text"))
    names = pc.binary_join_element_wise(want.column("schema"), want.column("table"), ".")
    ops = {}
    for n, op in zip(names.to_pylist(), want.column("op").to_pylist(), strict=True):
        ops.setdefault(n, set()).add(op)
    truncated = sorted(n for n, o in ops.items() if "T" in o)
    deleted = sorted(n for n, o in ops.items() if "D" in o and "T" not in o)
    assert truncated and deleted
    ch = decode_changes(df, order_by="seq", impl="map")
    for name in (truncated[0], deleted[0]):
        # the versions job reads the heads and finds what the decoded rows say
        info, want_info = table_info(ch, name), table_info(ch.select("*"), name)
        facts = ("sends_old", "deletes", "fingerprints", "relation_id", "replaced", "found")
        assert info[0] == want_info[0] and info[0], name
        assert [getattr(info, f) for f in facts] == [getattr(want_info, f) for f in facts], name
        # each version's first and last change: the heads' by order key, the rows' by (rank,
        # key), a Truncate's row among them (the heads read row changes only)
        assert info.truncates or [p[1] for p in info.firsts + info.lasts] == \
            [p[1] for p in want_info.firsts + want_info.lasts], name
        assert [x[:3] for x in info[1]] == [x[:3] for x in want_info[1]], name
        assert [x[3].timestamp() for x in info[1]] == [x[3].timestamp() for x in want_info[1]], name
        assert info.deletes == (name in deleted) and bool(info.truncates) == (name in truncated), name
        tc = table_changes(ch, name)
        assert len(_python_nodes(tc)) == 1, (name, _python_nodes(tc))
        got, ref = collect(tc), collect(table_changes(ch.select("*"), name))
        assert len(got) == pc.sum(pc.equal(names, name)).as_py() and got.equals(ref), name
    name = deleted[0]
    unsorted = decode_changes(df, order_by="seq", impl="map", sort=False)
    assert collect(table_changes(unsorted, name)).sort_by("seq").equals(got.sort_by("seq"))
    lsns = sorted(want.filter(pc.equal(names, name)).column("commit_lsn").to_pylist())   # the table's commits
    key = [(c["name"], "ascending") for c in table_columns(want, name) if c["flags"] & 1]
    assert key
    at_mid, ref = (collect(snapshot(c, name, as_of_lsn=lsns[len(lsns) // 2])).sort_by(key)
                   for c in (ch, ch.select("*")))
    assert at_mid.equals(ref) and 0 < len(at_mid)
    bad = df.unionByName(spark.createDataFrame([(b"I\x00\x00", 10 ** 9)], "data binary, seq long")
                         .select(*[F.col(c) if c in ("data", "seq") else F.lit(None).cast(df.schema[c].dataType)
                                   .alias(c) for c in df.columns]))
    from pgoutput_codec.spark.tables import _table_changes
    info = table_info(ch, name)   # (the versions job over the bad rows would fail first)
    with pytest.raises(Exception, match=str(10 ** 9)):
        collect(_table_changes(decode_changes(bad, order_by="seq", impl="map"), name, info=info))


@pytest.mark.parametrize("impl", CHANGE_IMPLS)
def test_failfast_names_null_short_and_unknown_rows(spark, tmp_path, impl):
    """Rows no filter may pass over silently: a null payload, an XLogData frame too short
    to hold a tag, an unknown tag byte. FAILFAST names the row's order key when the
    rows are read. With impl="fields" a count decodes nothing (as Spark's from_avro or
    CSV column pruning): the row is counted, not lost; ``observation`` decodes all."""
    t = archive(VERSION, "v1_text")
    seq = t.column("seq").to_numpy() * 10
    good = t.set_column(0, "seq", pa.array(seq))
    for k, bad in enumerate([None, b"w" + b"\x00" * 20, b"\x07abc", b"B\x00\x01"]):   # the last: pass 1's
        at = int(seq[len(seq) // 2]) + 5
        row = pa.table({"seq": pa.array([at]), "lsn": pa.array(["0/AB"]), "xid": pa.nulls(1, pa.int64()),
                        "data": pa.array([bad], pa.binary())})
        mixed = pa.concat_tables([good, row.cast(good.schema)]).sort_by("seq")
        df = spark.read.parquet(*write_files(mixed, tmp_path / f"b{k}", 2))
        with pytest.raises(Exception, match=rf"seq {at} \(lsn 0/AB\)"):
            decode_changes(df, order_by="seq", impl=impl).count() if impl == "map" else \
                collect(decode_changes(df, order_by="seq", impl=impl))
        if impl == "fields" and (bad or b"")[:1] != b"B":
            assert decode_changes(df, order_by="seq").count() == len(decode_changes_1(t)) + 1
            with pytest.raises(Exception, match=f"seq {at}"):
                decode_changes(df, order_by="seq", observation=Observation("o")).count()


@pytest.mark.on_cluster
def test_partitions_and_file_order_do_not_matter(spark, files):
    """Streaming + two-phase archive: 1 partition, 8 shuffled partitions, files listed in
    reverse, and the default order (file path, then row index) give the same rows."""
    paths = files["v3_2pc_binary_streaming"]
    want = as_spark(decode_changes_1(archive(VERSION, "v3_2pc_binary_streaming")))
    base = spark.read.parquet(*paths)
    one = collect(decode_changes(base.coalesce(1), order_by="seq")).drop_columns(["commit_rank"])
    eight = collect(decode_changes(base.repartition(8), order_by="seq")).drop_columns(["commit_rank"])
    rev = collect(decode_changes(spark.read.parquet(*reversed(paths)).repartition(8), order_by="seq"))
    assert one.equals(want) and eight.equals(want) and rev.drop_columns(["commit_rank"]).equals(want)
    # order_by=None: seq is the packed (file rank, row index) key; everything else equal
    dflt = collect(decode_changes(spark.read.parquet(*reversed(paths))))
    assert dflt.drop_columns(["seq", "commit_rank"]).equals(want.drop_columns(["seq"]))
    s = dflt.column("seq").to_numpy()
    files_ = s >> 40
    assert set(files_) <= set(range(5)) and len(set(files_)) > 1


def test_order_is_arrival_not_lsn(spark, files):
    """Shuffling rows and giving an lsn column changes nothing: lsn is never the order."""
    df = spark.read.parquet(*files["v1_text"]).orderBy(F.col("lsn").desc())
    got = collect(decode_changes(df, order_by="seq"))
    want = as_spark(decode_changes_1(archive(VERSION, "v1_text")))
    assert got.drop_columns(["commit_rank"]).equals(want)


def test_multi_column_order_by(spark, tmp_path):
    t = archive(VERSION, "v2_streaming")
    seq = t.column("seq").to_numpy()
    t = t.append_column("hi", pa.array(seq // 100)).append_column("lo", pa.array(seq % 100))
    paths = write_files(t.drop_columns(["seq"]), tmp_path / "mc", 3)
    got = collect(decode_changes(spark.read.parquet(*paths).repartition(4), order_by=["hi", "lo"]))
    want = as_spark(decode_changes_1(archive(VERSION, "v2_streaming")))
    assert got.drop_columns(["seq", "commit_rank"]).equals(want.drop_columns(["seq"]))


@pytest.mark.parametrize("envelope", ["auto", "xlogdata"])
def test_xlogdata_wrapped_archives(spark, tmp_path, envelope):
    """Payloads inside XLogData ('w') frames: the control rows are found by the tag byte
    inside the frame (pass 1 reads it in Spark), with every row or every other row
    wrapped."""
    t = archive(VERSION, "v2_streaming")
    every = 1 if envelope == "xlogdata" else 2
    t = t.set_column(t.column_names.index("data"), "data",
                     TC.in_xlogdata(t.column("data").combine_chunks(), lambda i: i % every == 0))
    paths = write_files(t, tmp_path / "w", 3)
    got = collect(decode_changes(spark.read.parquet(*paths).repartition(3), order_by="seq", envelope=envelope))
    want = as_spark(decode_changes_1(archive(VERSION, "v2_streaming")))
    assert len(want) > 100 and got.drop_columns(["commit_rank"]).equals(want)


def test_options_pass_through(spark, files):
    df = spark.read.parquet(*files["v1_text"])
    got = collect(decode_changes(df, order_by="seq", tables="public.*", include_origin=False))
    want = decode_changes_1(archive(VERSION, "v1_text"), tables="public.*", include_origin=False)
    assert "origin" not in got.column_names
    assert got.column("seq").to_pylist() == want.column("seq").to_pylist()
    with pytest.raises(ValueError, match="skip_empty_xacts"):
        decode_changes(df, order_by="seq", skip_empty_xacts=False)


@pytest.mark.parametrize("impl", CHANGE_IMPLS)
def test_commit_window_gives_the_filtered_changes(spark, files, impl):
    """after_lsn/until_lsn: exactly the rows of the whole decode whose commit_lsn lies in
    (after, until], commit_rank included; bounds as Spark gives them back (Decimal) or
    as X/Y text. On the per-field path a window over whole transactions is an order-key
    filter: a count runs no Python at all."""
    import decimal

    from pgoutput_codec.pgoutput.messages import format_lsn
    for option_set in ("v3_2pc_binary_streaming", "v1_text"):
        df = spark.read.parquet(*files[option_set])
        whole = collect(decode_changes(df, order_by="seq", impl=impl))
        lsns = sorted(set(whole.column("commit_lsn").to_pylist()))
        after, until = lsns[len(lsns) // 3], lsns[2 * len(lsns) // 3]
        win = decode_changes(df, order_by="seq", impl=impl, after_lsn=decimal.Decimal(after),
                             until_lsn=format_lsn(int(until)))
        c = whole.column("commit_lsn")
        want = whole.filter(pc.and_(pc.greater(c, pa.scalar(after, c.type)), pc.less_equal(c, pa.scalar(until, c.type))))
        assert 0 < len(want) < len(whole)
        assert collect(win).equals(want), option_set
        if impl == "fields" and option_set == "v1_text":
            assert _python_nodes(win.groupBy().count()) == []
            assert win.count() == len(want)
        if impl == "map" and option_set == "v1_text":   # FAILFAST: the key-range filter, given to the scan
            def pushed(d):   # the seq predicates the Parquet scan is given (Spark Connect merges Filter nodes)
                return re.search(r"PushedFilters: \[(.*?)\]?, ReadSchema", physical_plan(d)).group(1).count("(seq")
            assert pushed(win) > pushed(decode_changes(df, order_by="seq", impl=impl)) >= 1


@pytest.mark.parametrize("impl", CHANGE_IMPLS)
def test_runs_resumed_from_checkpoints_over_a_growing_archive(spark, tmp_path, impl):
    """A lake that grows by a few files a day, decoded each day from the day before's
    checkpoint (saved as JSON): each run reads only the rows from the checkpoint's key on
    (the observed rows in; Parquet skips the rest), and the days together give exactly
    the whole archive's changes. Cuts land mid-stream and between Prepare and Commit
    Prepared."""
    from pgoutput_codec.spark.changes import checkpoint_of
    for option_set in ("v3_2pc_binary_streaming", "v1_text"):
        arch = archive(VERSION, option_set)
        want = as_spark(decode_changes_1(arch))
        n, cp, got = len(arch), None, []
        root = tmp_path / impl / option_set
        for day, (a, b) in enumerate([(0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)]):
            write_files(arch.slice(a, b - a), root / f"day{day}", 2)
            df = spark.read.parquet(*[str(p) for p in sorted(root.glob("day*/*.parquet"))])
            obs = Observation(f"day{day}{impl}{option_set}") if impl == "map" else None
            ch = decode_changes(df, order_by="seq", impl=impl, resume=cp, observation=obs)
            nxt = checkpoint_of(ch)
            got.append(collect(ch))
            if obs is not None:   # the rows read: those from the checkpoint's key on
                seq = arch.column("seq").slice(0, b).to_numpy()
                assert obs.get["rows_in"] == int((seq >= (cp.from_key if cp else 0)).sum())
                assert (obs.get["rows_in"] < b) == (day > 0)
            if cp is not None:     # a filter the Parquet scan is given (statistics skip files, row groups)
                assert "GreaterThanOrEqual(seq," in physical_plan(ch)
            cp = type(nxt).from_json(nxt.to_json())
        # a day's commit ranks follow the day before's: the days' rows sort into commit order
        days = pa.concat_tables(got)
        assert days.drop_columns(["commit_rank"]).equals(want), option_set
        assert days.sort_by([("commit_rank", "ascending"), ("seq", "ascending")]).equals(days), option_set
        assert cp.held_by == () and cp.from_key == pc.max(arch.column("seq")).as_py() + 1
    with pytest.raises(ValueError, match="before any transformation"):
        checkpoint_of(ch.select("op"))
    with pytest.raises(ValueError, match="resume needs order_by"):
        decode_changes(df, resume=cp)


def _with_bad_rows(t: pa.Table):
    """Malformed payloads mixed in (inside and between transactions), seq spread out."""
    seq = t.column("seq").to_numpy() * 10
    bad_at = seq[[5, len(seq) // 2, len(seq) - 3]] + 5
    bad = pa.table({"seq": pa.array(bad_at), "lsn": pa.array(["0/BAD05"] * 3), "xid": pa.nulls(3, pa.int64()),
                    "data": pa.array([b"I\x00\x00", b"\xff\x01", b"U\x00\x00\x40\x00N\x00"], pa.binary())})
    good = t.set_column(0, "seq", pa.array(seq))
    return pa.concat_tables([good, bad]).sort_by("seq"), good


def test_modes_with_malformed_rows(spark, tmp_path):
    mixed, good = _with_bad_rows(archive(VERSION, "v2_streaming"))
    df = spark.read.parquet(*write_files(mixed, tmp_path / "bad", 3)).repartition(3)
    want = as_spark(decode_changes_1(good))
    for impl in CHANGE_IMPLS:   # the order key, the lsn, the message type and byte offset
        with pytest.raises(Exception, match=r"seq [0-9]+5 \(lsn 0/BAD05\): .* at byte [0-9]+"):
            collect(decode_changes(df, order_by="seq", impl=impl))
    obs = Observation("counts")
    perm = collect(decode_changes(df, order_by="seq", mode="PERMISSIVE", observation=obs))
    err = perm.filter(pc.is_valid(perm.column("error")))
    assert len(err) == 3 and err.column(ST.CORRUPT_RECORD).to_pylist() == mixed.filter(
        pc.is_in(mixed.column("seq"), err.column("seq"))).column("data").to_pylist()
    assert all(s % 10 == 5 for s in err.column("seq").to_pylist())
    assert err.column("op").null_count == 3
    ok = perm.filter(pc.is_null(perm.column("error"))).drop_columns(["commit_rank", "error", ST.CORRUPT_RECORD])
    assert ok.equals(want)
    m = obs.get
    assert m["rows_in"] == len(mixed) == m["rows_decoded"] + m["rows_in_error"] and m["rows_in_error"] == 3
    drop = collect(decode_changes(df, order_by="seq", mode="DROPMALFORMED"))
    assert "error" not in drop.column_names and drop.drop_columns(["commit_rank"]).equals(want)


def test_default_order_without_row_index_metadata(spark, files):
    """A union of scans has no ``_metadata``: file order (input_file_name) and the row's
    place in its split; after a shuffle that order is gone, so it is refused."""
    paths = files["v2_streaming"]
    want = as_spark(decode_changes_1(archive(VERSION, "v2_streaming")))
    df = spark.read.parquet(*paths[3:]).union(spark.read.parquet(*paths[:3]))
    got = collect(decode_changes(df))
    assert got.drop_columns(["seq", "commit_rank"]).equals(want.drop_columns(["seq"]))
    with pytest.raises(ValueError, match="order_by"):
        decode_changes(df.repartition(2))
