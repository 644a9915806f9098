"""spark.mirror's many-table pass at its edges: groups spanning Arrow batches and many
groups in one batch, openGauss rows (no relation id), names with dots and quotes, bases
by mapping, selections and DataFrames with no rows: the copies and runs one process
keeps over the same changes."""

from __future__ import annotations

import dataclasses
import os
import random
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

from change_cases import REL, enc, row, same_values  # noqa: E402

from pgoutput_codec import Begin, Commit, Insert, Update  # noqa: E402
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec import mirror as mirror_1  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path  # noqa: E402
from pgoutput_codec.spark import decode_changes, mirror  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::pgoutput_codec.tables.IncompleteTableWarning")


def _same_copies(target_a, target_b, runs):
    for r in runs:
        a, b = read_copy(table_path(target_a, r.table)), read_copy(table_path(target_b, r.table))
        assert a.schema.equals(b.schema), r.table
        a, b = (t.sort_by([(c, "ascending") for c in t.column_names]) for t in (a, b))
        assert all(same_values(a.column(j), b.column(j)) for j in range(a.num_columns)), r.table


def _archive(rels, txns):
    """Relations ``rels`` (schema, table, relation id), then ``txns`` transactions of
    (relation index, message) lists."""
    msgs, lsn = [], 100
    relations = [dataclasses.replace(REL, namespace=s, relation_name=t, relation_id=i) for s, t, i in rels]
    for body in txns:
        lsn += 10
        msgs += [Begin(final_lsn=lsn, commit_ts=lsn, xid=lsn), *relations, *body,
                 Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=lsn)]
    payload = pa.array(enc(msgs), pa.binary())
    return pa.table({"seq": pa.array(range(len(payload)), pa.int64()), "data": payload})


def _df(spark, arc, where, files=1):
    d = where / uuid.uuid4().hex
    os.makedirs(d)
    step = -(-len(arc) // files)
    for k in range(files):
        pq.write_table(arc.slice(k * step, step), d / f"{k}.parquet")
    return spark.read.parquet(str(d))


@pytest.mark.same_code_on_connect
def test_groups_span_batches_and_share_them(spark, tmp_path):
    """One table of many more change rows than an Arrow batch holds (700 in the suite),
    beside tables of a row or two, keys updated many times over (their order inside the
    group decides the copy)."""
    rels = [("public", "big", 30000)] + [("public", f"s{k:02d}", 30001 + k) for k in range(12)]
    rng = random.Random(5)
    txns = [[Insert(relation_id=30000, new_tuple=row(i, f"b{i}")) for i in range(1500)]]
    for step in range(20):
        body = [Update(relation_id=30000, new_tuple=row(rng.randrange(50), f"u{step}.{j}")) for j in range(60)]
        body += [Insert(relation_id=30001 + rng.randrange(12), new_tuple=row(1000 + step, f"x{step}"))]
        body += [Update(relation_id=30001 + k, new_tuple=row(1000 + step, f"y{step}")) for k in range(12)]
        txns.append(body)
    arc = _archive(rels, txns)
    got = mirror(decode_changes(_df(spark, arc, tmp_path, 3), order_by="seq"), tmp_path / "spark", partitions=3)
    want = mirror_1(arc, tmp_path / "one")
    assert got == want
    _same_copies(tmp_path / "spark", tmp_path / "one", want)


def test_names_with_dots_and_quotes(spark, tmp_path):
    rels = [("sales.eu", "orders", 30100), ("sales", "eu.orders", 30101), ("public", 'a"b', 30102),
            ("public", "a.b", 30103), ("Mixed", "Case", 30104)]
    txns = [[Insert(relation_id=r[2], new_tuple=row(k, f"{r[1]}{k}")) for r in rels for k in range(3)],
            [Update(relation_id=r[2], new_tuple=row(1, "u")) for r in rels]]
    arc = _archive(rels, txns)
    changes = decode_changes(_df(spark, arc, tmp_path), order_by="seq")
    for k in range(2):
        got = mirror(changes, tmp_path / "spark")
        want = mirror_1(arc, tmp_path / "one")
        assert got == want, k
    assert len(want) == 5
    _same_copies(tmp_path / "spark", tmp_path / "one", want)
    got = mirror(changes, tmp_path / "spark2", tables='"sales.eu".orders,public."a""b"')
    want = mirror_1(arc, tmp_path / "one2", tables='"sales.eu".orders,public."a""b"')
    assert got == want and len(want) == 2


def test_selections_and_dataframes_with_no_row(spark, tmp_path):
    rels = [("public", "t", 30200)]
    arc = _archive(rels, [[Insert(relation_id=30200, new_tuple=row(1, "a"))]])
    changes = decode_changes(_df(spark, arc, tmp_path), order_by="seq")
    assert mirror(changes, tmp_path / "spark", tables="public.nothing*") == \
        mirror_1(arc, tmp_path / "one", tables="public.nothing*") == []
    assert mirror(changes.limit(0), tmp_path / "spark") == []
    assert mirror(changes.where("op = 'X'"), tmp_path / "spark") == []
    assert not os.path.isdir(table_path(tmp_path / "spark", "public.t"))


def test_bases_by_mapping_for_a_table_with_no_change(spark, tmp_path):
    from pyspark.sql import functions as F
    rels = [("public", "t", 30300)]
    arc = _archive(rels, [[Insert(relation_id=30300, new_tuple=row(1, "a"))],
                          [Update(relation_id=30300, new_tuple=row(2, "b"))]])
    changes = decode_changes(_df(spark, arc, tmp_path), order_by="seq")
    bt = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "v": ["o1", "o2", "o3"]})
    bw = pa.table({"id": pa.array([7], pa.int32()), "v": ["z"]})
    base = {"t": spark.createDataFrame(bt.to_pandas()), "w": spark.createDataFrame(bw.to_pandas())}
    lsns = {"public.t": 110, "public.w": "0/64"}
    # more tasks than tables: some have no row; w's group is its stand-in row alone
    got = mirror(changes.where(F.lit(True)), tmp_path / "spark", base=base, base_lsn=lsns, partitions=6)
    want = mirror_1(arc, tmp_path / "one", base={"t": bt, "w": bw}, base_lsn=lsns)
    assert got == want and [r.table for r in want] == ["public.t", "public.w"]
    _same_copies(tmp_path / "spark", tmp_path / "one", want)
    assert os.listdir(tmp_path / "spark" / ".pgoutput_codec.bases") == []


def test_opengauss_rows_have_no_relation_id(spark, tmp_path):
    """openGauss change rows carry no relation id: a table is its name."""
    from test_opengauss_spark import _df as og_df
    from test_opengauss_spark import _frames, _records
    frames = _frames(_records(seed=7, n_txns=60, alter=True), seed=7)
    df = og_df(spark, frames, 2)
    changes = decode_changes(df, source="opengauss", order_by="seq")
    arc = pa.table({"seq": pa.array([i * 3 + 7 for i in range(len(frames))], pa.int64()),
                    "data": pa.array(frames, pa.binary())})
    got = mirror(changes, tmp_path / "spark")
    want = mirror_1(decode_changes_1(arc, source="opengauss"), tmp_path / "one")
    assert got == want and len(want) == 3
    _same_copies(tmp_path / "spark", tmp_path / "one", want)


def test_tables_the_decoding_left_out_are_no_run(spark, tmp_path):
    """A table whose Relation the decoding walked but whose rows its ``tables`` left out
    is no table of the run, as in one process, though its copy exists."""
    from pyspark.sql import functions as F
    rels = [("public", "t", 30400), ("public", "u", 30401)]
    arc = _archive(rels, [[Insert(relation_id=r[2], new_tuple=row(1, "a")) for r in rels],
                          [Update(relation_id=r[2], new_tuple=row(1, "b")) for r in rels]])
    df = _df(spark, arc, tmp_path)
    mirror(decode_changes(df, order_by="seq"), tmp_path / "spark")
    mirror_1(arc, tmp_path / "one")
    want = mirror_1(decode_changes_1(arc, tables="public.u"), tmp_path / "one")
    assert [r.table for r in want] == ["public.u"]
    changes = decode_changes(df, order_by="seq", tables="public.u")
    assert mirror(changes.where(F.lit(True)), tmp_path / "spark") == want
    assert mirror(changes, tmp_path / "spark") == want


def test_change_rows_read_back_from_a_lake_of_runs(spark, tmp_path):
    """Change rows of two runs written by one process (no ``commit_rank``), read back in
    the other order of the runs: each group in commit order, as one process puts them."""
    rels = [("public", "t", 30500), ("public", "u", 30501)]
    rng = random.Random(3)
    txns = [[Insert(relation_id=r[2], new_tuple=row(i, "a")) for r in rels for i in range(20)]]
    txns += [[Update(relation_id=rels[rng.randrange(2)][2], new_tuple=row(rng.randrange(20), f"v{k}.{j}"))
              for j in range(5)] for k in range(30)]
    arc = _archive(rels, txns)
    whole = decode_changes_1(arc)
    mid = whole.column("commit_lsn")[len(whole) // 2].as_py()
    lake = tmp_path / "lake"
    os.makedirs(lake)
    pq.write_table(decode_changes_1(arc, after_lsn=mid), lake / "a.parquet")
    pq.write_table(decode_changes_1(arc, until_lsn=mid), lake / "b.parquet")
    read = pq.read_table(lake)
    assert read.column("commit_lsn")[0].as_py() > mid
    got = mirror(spark.read.parquet(str(lake)), tmp_path / "spark", partitions=1)
    want = mirror_1(read, tmp_path / "one")
    assert got == want and len(want) == 2
    _same_copies(tmp_path / "spark", tmp_path / "one", want)


def test_a_dataframe_base_keeps_its_types(spark, tmp_path):
    """A table known only by its DataFrame base: its copy holds the DataFrame's rows as
    Arrow gives them (a Spark timestamp is an instant, in UTC), as one process's copy of
    the same rows does."""
    import datetime as dt
    from decimal import Decimal
    rels = [("public", "t", 30600)]
    arc = _archive(rels, [[Insert(relation_id=30600, new_tuple=row(1, "a"))]])
    changes = decode_changes(_df(spark, arc, tmp_path), order_by="seq")
    w = spark.createDataFrame([(7, dt.datetime(2024, 5, 1, 12, 30, 0, 123456), dt.date(2024, 5, 1), Decimal("1.50"))],
                              "id int, at timestamp, d date, n decimal(10,2)")
    got = mirror(changes, tmp_path / "spark", base={"public.w": w}, base_lsn=100)
    want = mirror_1(arc, tmp_path / "one", base={"public.w": w.toArrow()}, base_lsn=100)
    assert got == want
    _same_copies(tmp_path / "spark", tmp_path / "one", want)


def test_a_dataframe_base_keeps_its_types_in_written_snapshots(spark, tmp_path):
    import datetime as dt

    from pgoutput_codec import snapshot
    from pgoutput_codec.spark import write_snapshots
    rels = [("public", "t", 30700)]
    arc = _archive(rels, [[Insert(relation_id=30700, new_tuple=row(1, "a"))]])
    changes = decode_changes(_df(spark, arc, tmp_path), order_by="seq")
    w = spark.createDataFrame([(7, dt.datetime(2024, 5, 1, 12, 30, 0, 123456))], "id int, at timestamp")
    written = write_snapshots(changes, tmp_path / "out", base={"public.w": w}, base_lsn=100)
    got = pq.read_table([x.path for x in written if x.table == "public.w"][0])
    want = snapshot(decode_changes_1(arc), "public.w", base=w.toArrow(), base_lsn=100)
    assert got.schema.field("at").type == want.schema.field("at").type == pa.timestamp("us", "UTC")
    assert got.column("at").to_pylist() == want.column("at").to_pylist()


def test_a_kind_of_more_than_one_letter_is_an_error_naming_its_table(spark, tmp_path):
    """Change rows read back from a lake, one row image of one table holding a kind that
    is no letter of the four, in the batch of another table's rows: the error names the
    table and the row."""
    from pyspark.sql import functions as F
    rels = [("public", "t", 30600), ("public", "u", 30601)]
    arc = _archive(rels, [[Insert(relation_id=r[2], new_tuple=row(i, "a")) for r in rels for i in range(5)]])
    lake = tmp_path / "lake"
    os.makedirs(lake)
    rows = decode_changes_1(arc)
    pq.write_table(rows, lake / "a.parquet")
    s0 = max(s for s, t in zip(rows.column("seq").to_pylist(), rows.column("table").to_pylist(), strict=True)
             if t == "u")
    read = spark.read.parquet(str(lake))
    bad = read.withColumn("after", F.when(F.col("seq") == s0, F.transform(
        "after", lambda v, i: F.when(i == 0, v.withField("kind", F.lit("tt"))).otherwise(v))).otherwise(F.col("after")))
    assert mirror(read, tmp_path / "good", partitions=1) == mirror_1(rows, tmp_path / "one")
    with pytest.raises(Exception, match=rf"public\.u: change row seq={s0}: its after image holds a kind that is not"):
        mirror(bad, tmp_path / "bad", partitions=1)


def test_a_local_frame_holds_its_rows_as_given(spark):
    """The small maps the many-table pass joins are made on the driver (``local_frame``):
    every value as given (nulls, 20-digit LSNs), and from PySpark 4 on a local table
    scan, which a broadcast reads with no Python worker."""
    from decimal import Decimal

    from pyspark.sql import types as T

    from pgoutput_codec.spark.shipping import is_connect, local_frame, physical_plan
    from pgoutput_codec.spark.types import LSN_TYPE
    schema = T.StructType([T.StructField("relation_id", T.LongType()), T.StructField("t", T.StringType()),
                           T.StructField("held", LSN_TYPE)])
    rows = [(16384, "public.a", None), (4294967295, 'odd."name', Decimal(2**64 - 1)), (1, None, Decimal(7))]
    df = local_frame(spark, rows, schema)
    assert df.schema == schema
    assert sorted((tuple(r) for r in df.collect()), key=lambda r: r[0]) == sorted(rows, key=lambda r: r[0])
    assert local_frame(spark, [], schema).count() == 0
    import pyspark
    if int(pyspark.__version__.split(".")[0]) >= 4 and not is_connect(spark):
        assert "LocalTableScan" in physical_plan(df), physical_plan(df)
