"""One table's rows typed on Spark (``table_changes``, ``snapshot``), against the
single-process tables and the servers' final tables: every type, arrays as deep as their
values, change rows read back from a lake, columns retyped, dropped and added."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from pgoutput_codec import (Begin, Commit, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            )
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import HAS_ARROW_UDF, decode_changes, history, net_changes, snapshot, table_changes  # noqa: E402
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark.tablerows import END_OF_DAY, TIME_TYPE  # noqa: E402
from pgoutput_codec.spark.shipping import is_connect  # noqa: E402
from pgoutput_codec.spark.sources import HAS_DATASOURCE  # noqa: E402
from pgoutput_codec.tables import history as history_1  # noqa: E402
from pgoutput_codec.tables import snapshot as snapshot_1  # noqa: E402
from pgoutput_codec.tables import table_columns  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

from altered_columns import said  # noqa: E402
from change_corpus import (CHANGE_IMPLS, CONNECT, TC, VERSION, _SHARED, ALL_SOURCES, _conformed,  # noqa: E402
                           _encoded, _same_typed_changes, archive, collect, write_files)


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


#: every_table's option sets: text, and binary streamed two-phase (the others give the same
#: change rows: test_spark_changes_equal_single_process); Connect and PySpark 3.5 run the binary one
TYPED_SETS = [pytest.param("v1_text", marks=_SHARED), "v3_2pc_binary_streaming"]


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
def test_as_added_a_column_dropped_and_added_again_is_a_new_column(spark, tmp_path, form):
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
def test_missing_values_give_the_defaults_of_columns_added(spark, tmp_path, form):
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
def test_columns_in_force_leave_out_the_columns_dropped_by_the_cut(spark, tmp_path, form):
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
