"""pgoutput_codec.spark.changes on a real local SparkSession, against the single-process
decoder (``changes.decode_changes``, ``tables.snapshot``/``history``) and the servers'
final tables.

Archives are written as several small Parquet files, so Relations, transactions and
streamed chunks sit in different files and partitions."""

from __future__ import annotations

import importlib.util
import os
import re
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import Observation  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pgoutput_codec import (Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            Truncate, Update, encode_message)
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import HAS_ARROW_UDF, decode_changes, history, net_changes, snapshot, table_changes  # noqa: E402
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark import archiverows as RF  # noqa: E402
from pgoutput_codec.spark.changerows import change_type  # noqa: E402
from pgoutput_codec.spark.shipping import physical_plan  # noqa: E402
from pgoutput_codec.spark.tablerows import END_OF_DAY, TIME_TYPE, conform, convert_values, table_schema  # noqa: E402
from pgoutput_codec.spark.shipping import is_connect  # noqa: E402
from pgoutput_codec.spark.sources import HAS_DATASOURCE  # noqa: E402
from pgoutput_codec.tables import history as history_1  # noqa: E402
from pgoutput_codec.tables import snapshot as snapshot_1  # noqa: E402
from pgoutput_codec.tables import table_columns  # noqa: E402
from pgoutput_codec.typecatalog import ARRAY_ELEM, with_type_names  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

TESTS = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_single_changes", TESTS / "test_changes.py")
TC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TC)   # the single-process tests' corpus helpers (typed server tables, gaps)
from archive_model import soak_seeds  # noqa: E402  (tests/ is on sys.path: conftest)
from altered_columns import said  # noqa: E402

VERSION = "16.14"
OPTION_SETS = sorted({o for v, o in TC.SETS if v == VERSION})
#: decode_changes' pass 2: one UDF per field (PySpark >= 4.1, the default there in FAILFAST)
#: and mapInArrow (PERMISSIVE/DROPMALFORMED/observation, and PySpark 3.5/4.0)
CHANGE_IMPLS = ["fields", "map"] if HAS_ARROW_UDF else ["map"]
#: the session is a Spark Connect client (make test-connect): a time crosses as µs since midnight
CONNECT = os.environ.get("PGOUTPUT_CODEC_SPARK_CONNECT") == "1"
#: the marks of a case the Connect and PySpark 3.5 runs leave out: the same code as one they run
_SHARED = [pytest.mark.same_code_on_connect, pytest.mark.same_code_on_spark35]


def collect(df) -> pa.Table:
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()
    return pa.Table.from_batches(batches) if batches else ST.arrow_schema_for(df.schema).empty_table()


def as_spark(t: pa.Table) -> pa.Table:
    """Single-process change rows (+ commit_rank when present) cast to Spark's Arrow types."""
    target = ST.arrow_schema_for(change_type())
    names = [f.name for f in target if f.name in t.column_names]
    return pa.table({n: ST.to_spark_arrow(t.column(n).combine_chunks(), target.field(n).type) for n in names})


def write_files(table: pa.Table, directory: Path, files: int) -> list[str]:
    """The archive (arrival order) as ``files`` Parquet files part-0000…, small row groups."""
    directory.mkdir(parents=True, exist_ok=True)
    n = len(table)
    paths = []
    for i in range(files):
        a, b = n * i // files, n * (i + 1) // files
        p = directory / f"part-{i:04d}.parquet"
        pq.write_table(table.slice(a, b - a), p, row_group_size=50)
        paths.append(str(p))
    return paths


def archive(version, option_set):
    return TC.archive(version, option_set).select(["seq", "lsn", "xid", "data"])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Every option set of one server, each as 5 Parquet files."""
    root = tmp_path_factory.mktemp("archives")
    return {o: write_files(archive(VERSION, o), root / o, 5) for o in OPTION_SETS}


# --------------------------------------------------------------------------- decode_changes

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

    from pgoutput_codec.plan import HEAD_BYTES, ControlPlan, control_candidates
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

    from pgoutput_codec.plan import RowDrops
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

    from pgoutput_codec.messages import format_lsn
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


# --------------------------------------------------------------------------- modes

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


# --------------------------------------------------------------------------- tables

def _conformed(t: pa.Table, cols, reg, raw=None) -> pa.Table:
    """A single-process/server table converted the way the Spark side types values: a
    column the catalog kept raw as a whole (arrays of mixed dimensionality) value by
    value from ``raw`` (name -> (kinds, data)), as the Spark side does. Array columns as
    deep as ``t``'s; one ``t`` keeps raw (arrays of several dimensions) raw, as Spark does."""
    ndims = {}
    for c in cols:
        typ = t.schema.field(c["name"]).type if c["name"] in t.column_names else None
        if typ is not None and pa.types.is_list(typ):
            ndims[c["name"]] = str(typ).count("list<")
        elif typ is not None and pa.types.is_binary(typ) and c["type_oid"] in ARRAY_ELEM:
            ndims[c["name"]] = frozenset({1, 2})
    reg = with_type_names(reg, [cols])
    st, plan = table_schema(cols, reg, ndims=ndims, time_type=None if CONNECT else TIME_TYPE)
    target = ST.arrow_schema_for(st)
    out = {}
    for name, at, _sp, oid, typmod in plan:
        if name not in t.column_names:
            continue
        v = t.column(name).combine_chunks()
        if isinstance(ndims.get(name), frozenset):
            out[name] = v
            continue
        if not v.type.equals(at):
            if raw is None:
                continue
            v, _ = convert_values(*raw[name], oid, typmod, reg, at)
        out[name] = conform(v, at, target.field(name).type)
    return pa.table(out)


def _server_raw(t):
    return {n: (pa.array(["n" if r[j] is None else "t" for r in t["rows"]], pa.string()),
                pa.array([None if r[j] is None else r[j].encode() for r in t["rows"]], pa.binary()))
            for j, n in enumerate(t["column_names"])}


def _same_table(got: pa.Table, want: pa.Table, t, option_set, key):
    got, want = got.sort_by(key), want.sort_by(key)
    checked = 0
    for col in want.column_names:
        if TC.known_gap(VERSION, option_set, col, t):
            continue
        assert col in got.column_names, col
        assert TC.same_values(got.column(col), want.column(col).cast(got.column(col).type)), (t["table"], col)
        checked += 1
    return checked


@pytest.mark.same_code_on_connect
@pytest.mark.parametrize("option_set", [pytest.param("v1_text", marks=pytest.mark.same_code_on_spark35),
                                        "v3_2pc_binary_streaming"])
def test_snapshot_equals_server_tables(spark, files, option_set):
    reg = TC.registry_for(VERSION)
    ch = decode_changes(spark.read.parquet(*files[option_set]).repartition(4), order_by="seq").cache()
    single = decode_changes_1(archive(VERSION, option_set), registry=reg)
    checked = 0
    # the corpus has updates that change the replica-identity key: snapshots must follow them
    ops = single.filter(pc.equal(single.column("op"), "U"))
    assert any(r["before"] is not None for r in ops.select(["before"]).to_pylist())
    for t in TC.TABLES:
        if t["server_version"] != VERSION or t["is_partition"]:
            continue
        name = f'{t["schema"]}.{t["table"]}'
        cols = table_columns(single, name)
        got = collect(snapshot(ch, name, registry=reg))
        want_server = TC.server_table(t, reg)
        assert len(got) == len(want_server), name
        if not len(want_server):
            continue
        key = want_server.column_names[0]
        srv_cols = [c for c in cols if c["name"] in want_server.column_names]
        checked += _same_table(got, _conformed(want_server, srv_cols, reg, _server_raw(t)), t, option_set, key)
        # and the single-process snapshot, every column
        one = _conformed(snapshot_1(single, name, registry=reg), cols, reg)
        _same_table(got, one, t, option_set, key)
    ch.unpersist()
    assert checked > 50


@pytest.mark.parametrize("option_set", [pytest.param("v1_text", marks=_SHARED),
                                        pytest.param("v1_binary_messages", marks=_SHARED)])
def test_domains_and_times_are_typed_with_no_catalog(spark, files, option_set):
    """With no registry, a domain reads as its base type through its Type message, on
    Spark as in one process; a time is Spark's TimeType (PySpark 4.1 and later; µs since
    midnight before), and PostgreSQL's 24:00:00, past Spark's last time of day, is null
    with ``__special`` "24:00:00" (one process keeps it: time64 holds it)."""
    single = snapshot_1(decode_changes_1(archive(VERSION, option_set)), "public.all_types").sort_by("id")
    us = single["c_time"].cast(pa.int64()).to_pylist()
    for impl in CHANGE_IMPLS:
        ch = decode_changes(spark.read.parquet(*files[option_set]), order_by="seq", impl=impl)
        got = collect(snapshot(ch, "public.all_types")).sort_by("id")
        assert got.schema.field("c_posint").type == pa.int32(), impl
        assert got["c_posint"].to_pylist() == single["c_posint"].to_pylist() == [42, 2147483647, None, 1, 7]
        tm = got["c_time"]
        if TIME_TYPE is None:
            assert tm.type == pa.int64() and tm.to_pylist() == us
            continue
        assert pa.types.is_time64(tm.type), tm.type
        unit = 1000 if tm.type.unit == "ns" else 1
        assert [None if v is None else v // unit for v in tm.cast(pa.int64()).to_pylist()] == \
            [None if v == END_OF_DAY else v for v in us]
        assert got["c_time__special"].to_pylist() == ["24:00:00" if v == END_OF_DAY else None for v in us]
        assert END_OF_DAY in us


def _same_typed_changes(got: pa.Table, one: pa.Table, cols: list, what) -> int:
    """Spark's ``table_changes`` against one process's, value for value after the
    documented mapping of Arrow types to Spark's (``_conformed``): the values compared."""
    got, one = got.sort_by("seq"), one.sort_by("seq")
    assert got.column("op").to_pylist() == one.column("op").to_pylist(), what
    checked = 0
    for side in ("before", "after"):
        g, o = got.column(side).combine_chunks(), one.column(side).combine_chunks()
        mine = {f.name: a for f, a in zip(g.type, g.flatten(), strict=True)}
        want = _conformed(pa.Table.from_arrays(o.flatten(), names=[f.name for f in o.type]), cols, None)
        for name in want.column_names:
            assert TC.same_values(pa.chunked_array([mine[name]]), want.column(name).cast(mine[name].type)), \
                (what, side, name)
            checked += len(want)
    return checked


#: every_table's option sets: text, and binary streamed two-phase (the others give the same
#: change rows: test_spark_changes_equal_single_process); Connect and PySpark 3.5 run the binary one
TYPED_SETS = [pytest.param("v1_text", marks=_SHARED), "v3_2pc_binary_streaming"]
#: the tables every source of change rows is typed for (the others: decode_changes'): every
#: type, FULL identity's old rows, unchanged TOAST
ALL_SOURCES = {"public.all_types", "public.rid_full", "public.toasty"}


@pytest.mark.parametrize("option_set", TYPED_SETS)
def test_every_table_is_typed_as_in_one_process(spark, files, option_set, tmp_path):
    """Every table of the archive, typed by Spark's table_changes (with no registry: the
    domain learnt from its Type message), equals one process's table_changes value for
    value after the documented Spark mapping (docs/types.md), straight from
    decode_changes (per field) and, for the binary archive's ALL_SOURCES, through
    mapInArrow and from the data source's change rows (a stream's micro-batches:
    test_stream_source.py)."""
    from pgoutput_codec.tables import table_changes as table_changes_1
    single = decode_changes_1(archive(VERSION, option_set))
    ch = decode_changes(spark.read.parquet(*files[option_set]), order_by="seq", impl=CHANGE_IMPLS[0])
    sources = {f"decode_changes, impl={CHANGE_IMPLS[0]}": ch}
    if option_set == "v3_2pc_binary_streaming" and len(CHANGE_IMPLS) > 1:
        sources["decode_changes, impl=map"] = decode_changes(spark.read.parquet(*files[option_set]), order_by="seq",
                                                             impl="map")
    if option_set == "v3_2pc_binary_streaming" and HAS_DATASOURCE and not is_connect(spark):
        from pgoutput_codec.spark import register
        register(spark)
        sources["data source"] = spark.read.format("pgoutput").options(output="changes").load(
            str(Path(files[option_set][0]).parent))
    checked = 0
    for t in TC.TABLES:
        if t["server_version"] != VERSION or t["is_partition"]:
            continue
        name = f'{t["schema"]}.{t["table"]}'
        one = table_changes_1(single, name)
        if not len(one):
            continue
        for what, df in sources.items():
            # past the first source, and on Connect and PySpark 3.5 (the lanes that run the
            # same typing code again), the tables of ALL_SOURCES stand for the others
            if (what != next(iter(sources)) or CONNECT or not HAS_ARROW_UDF) and name not in ALL_SOURCES:
                continue
            checked += _same_typed_changes(collect(table_changes(df, name)), one, table_columns(single, name),
                                           (what, name))
    assert checked > (300 if CONNECT or not HAS_ARROW_UDF else 1000)


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_arrays_are_typed_as_deep_as_their_values(spark, tmp_path):
    """An int[][] column whose values are all 2-dimensional is array<array<int>> on Spark,
    as it is list<list<int32>> in one process (array_dims learns the depth in one job);
    a column whose values have 1 and 2 dimensions stays as sent on both paths, with the
    same note; a domain over an array reads as the array (its Type message names _int4)."""
    from pgoutput_codec import Type
    from pgoutput_codec.tables import table_changes as table_changes_1
    rel = Relation(relation_id=16500, namespace="public", relation_name="arr", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "ia2", 1007, -1),
                            RelationColumn(0, "mix", 1007, -1), RelationColumn(0, "dom", 16600, -1)))

    def row(*vals):
        return tuple(TupleColumn("n", None) if v is None else TupleColumn("t", v.encode()) for v in vals)
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), Type(type_oid=16600, namespace="", type_name="_int4"), rel,
            Insert(relation_id=16500, new_tuple=row("1", "{{1,2},{3,4}}", "{1}", "{{7}}")),
            Insert(relation_id=16500, new_tuple=row("2", "{}", "{{5}}", "{}")),
            Insert(relation_id=16500, new_tuple=row("3", None, None, None)),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0)]
    t, single = _encoded(msgs)
    one = table_changes_1(single, "public.arr").column("after").combine_chunks()
    assert one.type.field("ia2").type == pa.list_(pa.list_(pa.int32()))
    assert one.type.field("dom").type == pa.list_(pa.list_(pa.int32()))
    assert one.type.field("mix").type == pa.binary()
    note = "arrays of 1 and 2 dimensions in one column: kept as sent"
    assert one.field("mix__special").to_pylist() == [note] * 3
    df = spark.read.parquet(*write_files(t, tmp_path / "arr", 2))
    for impl in CHANGE_IMPLS:
        got = collect(table_changes(decode_changes(df, order_by="seq", impl=impl), "public.arr"))
        after = got.sort_by("seq").column("after").combine_chunks()
        for c in ("ia2", "dom", "mix", "mix__special"):
            assert after.field(c).to_pylist() == one.field(c).to_pylist(), (impl, c)
        assert after.field("ia2").to_pylist()[0] == [[1, 2], [3, 4]]


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
def test_key_change_toast_and_history(spark, tmp_path):
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


def _toast_chains():
    """Rows moved by key changes (once, twice, then updated in place) while their TOAST
    value stays unchanged, and a new row under a key one of them left."""
    rel = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))

    def row(k, v):
        return (TupleColumn("t", str(k).encode()),
                TupleColumn("u", None) if v is None else TupleColumn("t", v.encode()))

    def up(old, new):
        return Update(relation_id=16400, old_kind="K" if old != new else None,
                      old_tuple=(TupleColumn("t", str(old).encode()), TupleColumn("n", None)) if old != new else None,
                      new_tuple=row(new, None))
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), rel,
            Insert(relation_id=16400, new_tuple=row(1, "big")), Insert(relation_id=16400, new_tuple=row(2, "two")),
            Insert(relation_id=16400, new_tuple=row(3, "three")), Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            Begin(final_lsn=2, commit_ts=1, xid=2), up(1, 6), up(6, 6), up(2, 8), up(8, 9),
            Insert(relation_id=16400, new_tuple=row(2, "newtwo")), Commit(commit_lsn=20, end_lsn=21, commit_ts=1),
            Begin(final_lsn=3, commit_ts=2, xid=3), up(9, 9), up(2, 2),
            Delete(relation_id=16400, old_kind="K", old_tuple=(TupleColumn("t", b"3"), TupleColumn("n", None))),
            Commit(commit_lsn=30, end_lsn=31, commit_ts=2)]
    data = [encode_message(m) for m in msgs]
    return pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_toast_values_follow_rows_through_key_changes(spark, tmp_path):
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
def test_full_identity_toast_values_come_from_the_old_row(spark, tmp_path):
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




def _encoded(msgs) -> tuple:
    """(an archive of the messages, seq and data; its single-process change rows)."""
    data = [encode_message(m) for m in msgs]
    t = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    return t, decode_changes_1(t)


# PySpark 3.5 and Connect run the scenario with a lookup (_found_keys, DataFrame code no other
# test runs) whose key is stored out of line, which takes the lookup and its TOAST pointer;
# the others key rows by columns, as every table whose identity never changed


@pytest.mark.parametrize("scenario", [pytest.param("ends_default", marks=_SHARED),
                                      pytest.param("ends_full", marks=_SHARED),
                                      pytest.param("no_common_key", marks=_SHARED),
                                      "no_common_key_toast", pytest.param("truncated_then_full", marks=_SHARED)])
def test_rows_are_found_across_replica_identity_changes(spark, tmp_path, scenario):
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
def test_rows_are_followed_across_keys_only_when_an_update_sent_an_old_key(spark, tmp_path):
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
def test_table_changes_over_change_rows_read_back_from_a_lake(spark, files, tmp_path):
    """Decode once, keep the change rows as Parquet, build tables from them later:
    table_changes and snapshot over the rows read back (the generic mapInArrow path:
    a null before/after list crosses into Python as an empty one and a flag, the column
    lists go back by relation_version) equal those straight from decode_changes, on the
    corpus tables with Inserts (null before), Deletes (null after), Truncates, key
    changes, unchanged TOAST and an altered table."""
    df = spark.read.parquet(*files["v1_text"])
    ch = decode_changes(df, order_by="seq")
    ch.write.parquet(str(tmp_path / "changes"))
    lake = spark.read.parquet(str(tmp_path / "changes"))
    seen = set()
    for name in ["public.rid_full", "public.toasty", "public.trunc_parent", "public.schema_change"]:
        got = collect(table_changes(lake, name)).sort_by("seq")
        want = collect(table_changes(ch, name)).sort_by("seq")
        assert len(got) > 1 and got.equals(want), name
        seen |= {(op, b is None, a is None) for op, b, a in zip(
            got.column("op").to_pylist(), got.column("before").to_pylist(), got.column("after").to_pylist(),
            strict=True)}
        want = collect(snapshot(ch, name))
        key = [(want.column_names[0], "ascending")]
        assert collect(snapshot(lake, name)).sort_by(key).equals(want.sort_by(key)), name
    assert {("I", True, False), ("D", False, True), ("T", True, True)} <= seen, seen
    # the same Parquet read back without Spark (files in name order, Spark types): the
    # single-process table functions take it as their own change rows
    files_back = pq.read_table(str(tmp_path / "changes"))
    assert files_back.schema.field("commit_lsn").type == pa.decimal128(20, 0)
    single = decode_changes_1(archive(VERSION, "v1_text"))
    for name in ["public.rid_full", "public.toasty", "public.schema_change"]:
        for f in (TC.snapshot, TC.history, TC.net_changes, TC.table_changes):
            got, want = f(files_back, name), f(single, name)
            if "xid" in got.column_names:   # (carried as given: Spark's LongType here)
                assert got.schema.field("xid").type == pa.int64()
                got = got.set_column(got.schema.get_field_index("xid"), "xid", got.column("xid").cast(pa.uint32()))
            assert got.equals(want), (name, f.__name__)



@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_lake_rows_cross_into_python_in_parts(spark, files, tmp_path):
    """Over change rows read back from a lake, the versions job reads each version's column
    list from the version's first row alone, and from all its rows when that one has none;
    a row image crosses as its values and a string of its kinds, and the uint64 columns as
    int64 less 2^63. The altered table's rows, with no column list on each version's first
    row, LSNs past 2^63 and null ones, equal those straight from decode_changes; a kind
    that is not one letter is an error naming the row."""
    from decimal import Decimal

    from pgoutput_codec.spark.tablerows import rescanned_cheaply
    name = "public.schema_change"
    df = spark.read.parquet(*files["v1_text"])
    ch = decode_changes(df, order_by="seq")
    assert not rescanned_cheaply(decode_changes(df, order_by="seq", mode="PERMISSIVE"))
    far = Decimal(2**64 - 2**40)
    # each version's first row without its column list where the version has more rows
    first = ch.groupBy("relation_version").agg(F.min("seq").alias("first"), F.count("*").alias("n"))
    odd = (ch.join(first, "relation_version", "left")
           .withColumn("columns", F.when((F.col("seq") == F.col("first")) & (F.col("n") > 1),
                                         F.lit(None).cast(ch.schema["columns"].dataType)).otherwise(F.col("columns")))
           .withColumn("lsn", F.when(F.col("seq") % 2 == 0, (F.col("lsn") + F.lit(far)).cast(ST.LSN_TYPE)))
           .drop("first", "n"))
    odd.write.parquet(str(tmp_path / "odd"))
    lake = spark.read.parquet(str(tmp_path / "odd"))
    assert rescanned_cheaply(lake)
    want = collect(table_changes(ch, name)).sort_by("seq")
    got = collect(table_changes(lake, name)).sort_by("seq")
    assert len(collect(ch.where(F.col("table") == "schema_change").select("relation_version").distinct())) > 1
    assert lake.where((F.col("table") == "schema_change") & F.col("columns").isNull()).count() == 1
    assert max(want.column("lsn").to_pylist()) < 2**40
    assert got.column("lsn").to_pylist() == [
        None if s % 2 else lsn + int(far) for s, lsn in zip(want.column("seq").to_pylist(), want.column("lsn").to_pylist(),
                                                             strict=True)]
    assert got.drop(["lsn"]).equals(want.drop(["lsn"]))
    key = [(collect(snapshot(ch, name)).column_names[0], "ascending")]
    assert collect(snapshot(lake, name)).sort_by(key).equals(collect(snapshot(ch, name)).sort_by(key))
    s0 = min(s for s, op in zip(want.column("seq").to_pylist(), want.column("op").to_pylist(), strict=True) if op == "I")
    bad = lake.withColumn("after", F.when(F.col("seq") == s0, F.transform(
        "after", lambda v, i: F.when(i == 0, v.withField("kind", F.lit("tt"))).otherwise(v))).otherwise(F.col("after")))
    with pytest.raises(Exception, match=rf"{name}: change row seq={s0}: its after image holds a kind that is not one"):
        collect(table_changes(bad, name))


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
def test_history_of_rows_written_after_a_truncate(spark, tmp_path):
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


@pytest.mark.parametrize("binary", [pytest.param(False, marks=_SHARED), True])
def test_a_column_whose_type_changed_is_read_by_the_type_each_value_was_sent_under(spark, tmp_path, binary):
    """Spark types each batch by the table's columns, so a batch holding only rows sent
    before an ``ALTER COLUMN … TYPE`` reads them by their own types and casts them (an
    int4 read as int8 failed, a text value read as int4 too): table_changes, snapshot
    and history equal the single process's, which equals the servers'
    (tests/conformance/test_retyped_columns.py); a value the cast cannot hold (text
    'ww' for an int column) is null with the text in ``word__special``, in Spark's
    schema because the column changed type."""
    from pgoutput_codec.tables import table_changes as table_changes_1
    import altered_columns
    t, single = _encoded(altered_columns.retyped(binary))
    name = "public.retyped"
    want = snapshot_1(single, name).sort_by("id").to_pylist()
    assert [(r["id"], r["i"], r["code"], r["word"]) for r in want] == altered_columns.RETYPED_FINAL
    assert {r["id"]: r["f"] for r in want} == altered_columns.RETYPED_F
    assert "'www'" in want[2]["word__special"]
    df = spark.read.parquet(*write_files(t, tmp_path / "retyped", 3))

    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        typed = collect(table_changes(ch, name).orderBy("seq"))
        assert said(typed.column("after").to_pylist()) == said(
            table_changes_1(single, name).column("after").to_pylist()), impl
        assert said(collect(snapshot(ch, name)).sort_by("id").to_pylist()) == said(want), impl
        order = [("id", "ascending"), ("__START_LSN", "ascending")]
        hist = collect(history(ch, name)).sort_by(order)
        one = history_1(single, name).sort_by(order)
        assert said(hist.to_pylist()) == said(one.to_pylist()) and len(one) == 5, impl


@pytest.mark.parametrize("binary", [pytest.param(False, marks=_SHARED), True])
def test_a_timestamp_retyped_to_timestamptz_is_read_on_the_registry_s_clock(spark, tmp_path, binary):
    """The registry carries the ALTER session's TimeZone to Spark's tasks: values sent as
    ``timestamp`` before an ``ALTER … TYPE timestamptz`` become the instants the server
    made of them in America/New_York (tests/conformance/test_retyped_columns.py's
    ``ZONED``), as in the single process; without the zone, in UTC, they differ."""
    import altered_columns
    from pgoutput_codec.typecatalog import TypeRegistry
    t, single = _encoded(altered_columns.zoned(binary))
    name, reg = "public.zoned", TypeRegistry(timezone="America/New_York")

    def instants(rows):
        return {r["id"]: r["ts"] for r in rows.cast(pa.schema([("id", pa.int32()), ("ts", pa.int64())])).to_pylist()
                if r["ts"] is not None}
    want = snapshot_1(single, name, registry=reg).select(["id", "ts"])
    assert instants(want) == altered_columns.ZONED_FINAL
    df = spark.read.parquet(*write_files(t, tmp_path / "zoned", 2))
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        assert instants(collect(snapshot(ch, name, registry=reg)).select(["id", "ts"])) == \
            altered_columns.ZONED_FINAL, impl
        in_utc = instants(collect(snapshot(ch, name)).select(["id", "ts"]))
        assert all(in_utc[k] != v for k, v in altered_columns.ZONED_FINAL.items()), impl


@pytest.mark.parametrize("form", [pytest.param("straight", marks=_SHARED), "cached"])
def test_a_column_dropped_and_added_again_is_a_new_column(spark, tmp_path, form):
    """tests/altered_columns.readded (the messages of test_dropped_columns.READDED, whose
    single-process snapshots equal the servers' tables): Spark's snapshot as of every
    commit leaves the dropped column's values out of the column added again by its name,
    as the single process does, straight from decode_changes (the versions' last changes
    from the plan) or from any DataFrame (from the versions job); so do net_changes;
    history keeps what was sent."""
    import altered_columns
    from altered_columns import said

    from pgoutput_codec.tables import net_changes as net_changes_1
    t, single = _encoded(altered_columns.readded())
    name = "public.readded"
    commits = sorted(set(single.column("commit_lsn").to_pylist()))
    final = {r["id"]: (r["b"], r["a"], r["c"]) for r in snapshot_1(single, name).to_pylist()}
    assert final == altered_columns.READDED_FINAL
    df = spark.read.parquet(*write_files(t, tmp_path / "readded", 2))
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        ch = ch.cache() if form == "cached" else ch
        for cut in [*commits, None]:
            want = said(snapshot_1(single, name, cut).sort_by("id").to_pylist())
            got = said(collect(snapshot(ch, name, as_of_lsn=cut)).sort_by("id").to_pylist())
            assert got == want, (impl, cut)
        net = said(collect(net_changes(ch, name)).sort_by("id").drop_columns(["__RELATION_ID"]).to_pylist())
        assert net == said(net_changes_1(single, name).sort_by("id").drop_columns(["__RELATION_ID"]).to_pylist()), impl
        order = [("id", "ascending"), ("__START_LSN", "ascending")]
        hist = said(collect(history(ch, name)).sort_by(order).to_pylist())
        assert hist == said(history_1(single, name).sort_by(order).to_pylist()), impl
        ch.unpersist()


@pytest.mark.parametrize("form", [pytest.param("straight", marks=_SHARED), "cached"])
def test_the_defaults_of_columns_added_are_given_by_missing(spark, tmp_path, form):
    """tests/altered_columns.defaulted (the messages of test_dropped_columns.DEFAULTED,
    whose single-process snapshot with ``missing=`` equals the servers' tables): Spark's
    snapshot and net_changes with the defaults named are the single process's: bool,
    date and int literals in the rows older than their columns, and none without them."""
    import altered_columns
    from altered_columns import said

    from pgoutput_codec.tables import net_changes as net_changes_1
    t, single = _encoded(altered_columns.defaulted())
    name, fill = "public.defaulted", altered_columns.DEFAULTS
    want = snapshot_1(single, name, missing=fill).sort_by("id")
    assert {r["id"]: (r["a"], r["flag"], str(r["at"]), r["n"]) for r in want.to_pylist()} == \
        altered_columns.DEFAULTED_FINAL
    df = spark.read.parquet(*write_files(t, tmp_path / "defaulted", 2))
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        ch = ch.cache() if form == "cached" else ch
        assert said(collect(snapshot(ch, name, missing=fill)).sort_by("id").to_pylist()) == \
            said(want.to_pylist()), impl
        assert said(collect(snapshot(ch, name)).sort_by("id").to_pylist()) == \
            said(snapshot_1(single, name).sort_by("id").to_pylist()), impl
        net = collect(net_changes(ch, name, missing=fill)).sort_by("id").drop_columns(["__RELATION_ID"])
        assert said(net.to_pylist()) == said(net_changes_1(single, name, missing=fill).sort_by("id")
                                             .drop_columns(["__RELATION_ID"]).to_pylist()), impl
        ch.unpersist()


@pytest.mark.parametrize("form", [pytest.param("straight", marks=_SHARED),
                                  pytest.param("cached", marks=pytest.mark.same_code_on_connect)])
def test_the_snapshot_leaves_out_the_columns_dropped_by_its_cut(spark, tmp_path, form):
    """``DROP COLUMN`` and ``ADD COLUMN`` in the archive (tests/altered_columns.dropped,
    the messages of tests/conformance/test_dropped_columns.py, whose single-process
    snapshots equal the servers' tables): Spark's snapshot as of every commit has the
    columns of the Relation in force then and the single process's rows, whether the
    changes come straight from decode_changes (one more small job at a cut) or from any
    DataFrame (the versions job's own facts); history and net_changes keep every column, as the
    single process's do."""
    import altered_columns

    from pgoutput_codec.tables import net_changes as net_changes_1
    t, single = _encoded(altered_columns.dropped())
    name = "public.dropped"
    commits = sorted(set(single.column("commit_lsn").to_pylist()))
    df = spark.read.parquet(*write_files(t, tmp_path / "dropped", 2))
    for impl in CHANGE_IMPLS:
        ch = decode_changes(df, order_by="seq", lsn=None, impl=impl)
        ch = ch.cache() if form == "cached" else ch
        for cut, names in zip([*commits, None], [*altered_columns.DROPPED_COLUMNS, {"id", "c", "d"}], strict=True):
            want = snapshot_1(single, name, cut)
            assert set(want.column_names) == names, cut
            got = collect(snapshot(ch, name, as_of_lsn=cut))
            assert sorted(got.column_names) == sorted(names), (impl, cut)
            assert got.sort_by("id").to_pylist() == want.select(got.column_names).sort_by("id").to_pylist(), (impl, cut)
        if impl == CHANGE_IMPLS[0]:   # history and net_changes keep every column, as the single process's
            order = [("id", "ascending"), ("__START_LSN", "ascending")]
            hist = collect(history(ch, name)).sort_by(order)
            assert hist.to_pylist() == history_1(single, name).sort_by(order).select(hist.column_names).to_pylist()
            assert {"a", "b"} <= set(hist.column_names)
            later = ch.where(F.col("commit_lsn") > F.lit(commits[0]))
            net = collect(net_changes(later, name)).sort_by("id")
            assert net.column("__OP").to_pylist() == ["upsert", "upsert", "delete", "upsert"]
            net_1 = net_changes_1(single.filter(pc.greater(single.column("commit_lsn"), pa.scalar(commits[0], pa.uint64()))),
                                  name).sort_by("id")
            assert net.drop_columns(["__RELATION_ID"]).to_pylist() == \
                net_1.select(net.column_names).drop_columns(["__RELATION_ID"]).to_pylist()
        ch.unpersist()
