"""pgoutput_codec.spark on a real local SparkSession (PySpark 3.5 and 4.x).

The oracle is the single-process decoder: every Spark result is compared with
``decode_batch`` (or ``opengauss.decode_batch``) over the same payloads, cast to the
Arrow types Spark exchanges (``spark.types``).
"""

from __future__ import annotations

import csv
from collections import Counter
import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import Observation  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

import pgoutput_codec as pc_  # noqa: E402
from pgoutput_codec import ArchiveOrderError, decode_batch, encode_message  # noqa: E402
from pgoutput_codec.pgoutput.messages import TupleColumn as TC  # noqa: E402
from pgoutput_codec.schema import MESSAGE_STRUCT  # noqa: E402
from pgoutput_codec.spark import (  # noqa: E402
    CORRUPT_RECORD,
    HAS_ARROW_UDF,
    MESSAGE_TYPE,
    decode_messages,
    from_opengauss,
    from_pgoutput,
    opengauss_messages,
    read_archive,
    register,
    spark_type,
)
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark.shipping import physical_plan  # noqa: E402
from pgoutput_codec.spark.sources import HAS_DATASOURCE  # noqa: E402
from pgoutput_codec.spark.shipping import is_connect  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus.parquet"
# PySpark 4 warns that it does not fully support pandas 3 (nothing here depends on it);
# PySpark 3.5 still uses distutils' LooseVersion.
pytestmark = [pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
              pytest.mark.filterwarnings("ignore:distutils Version classes are deprecated:DeprecationWarning")]

IMPLS = ["arrow", "pandas"] if HAS_ARROW_UDF else ["pandas"]


# --------------------------------------------------------------------------- helpers


def num_partitions(df) -> int:
    """The DataFrame's partitions (Spark Connect has no RDD: the partitions holding rows)."""
    if is_connect(df.sparkSession):
        return df.select(F.spark_partition_id()).distinct().count()
    return df.rdd.getNumPartitions()


def collect(df) -> pa.Table:
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()  # PySpark 3.5: what toPandas uses
    return pa.Table.from_batches(batches) if batches else pa.table({})


def expected_struct(values, **kw) -> pa.Table:
    """decode_batch + the _corrupt_record column, cast to Spark's Arrow types."""
    payloads = pa.array(values, pa.binary()) if not isinstance(values, pa.Array) else values
    out = decode_batch(payloads, **kw)
    fields = out.flatten()
    err = fields[MESSAGE_STRUCT.get_field_index("error")]
    fields.append(pc.if_else(pc.is_valid(err), payloads, pa.scalar(None, pa.binary())))
    schema = ST.arrow_schema_for(MESSAGE_TYPE)
    return pa.Table.from_arrays([ST.to_spark_arrow(a, schema.field(i).type) for i, a in enumerate(fields)],
                                schema=schema)


def same(got: pa.Table, want: pa.Table, columns=None):
    columns = columns or want.column_names
    got = got.select(columns).cast(want.select(columns).schema)
    want = want.select(columns)
    if not got.equals(want):
        for c in columns:
            g, w = got.column(c).to_pylist(), want.column(c).to_pylist()
            for i, (a, b) in enumerate(zip(g, w, strict=False)):
                assert a == b, f"column {c} row {i}: spark {a!r} != decode_batch {b!r}"
            assert len(g) == len(w), f"column {c}: {len(g)} rows != {len(w)}"
    return True


@pytest.fixture(scope="session")
def corpus():
    if not CORPUS.exists():
        pytest.skip(f"{CORPUS} not present (make corpus)")
    t = pq.read_table(CORPUS)
    return t.append_column("row", pa.array(range(t.num_rows), pa.int64()))


@pytest.fixture(scope="session")
def corpus_path(corpus, tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    pq.write_table(corpus, p, row_group_size=1000)  # 8 row groups: 8 data source partitions
    return str(p)


@pytest.fixture(scope="session")
def corpus_df(spark, corpus_path):
    return spark.read.parquet(corpus_path)


def in_partitions(df, n):
    return df.repartitionByRange(n, "row").sortWithinPartitions("row")


def generated():
    """Every message type once, streaming blocks, LSN/xid/OID at their maxima."""
    M = pc_
    big = 2**64 - 1
    cols = (M.RelationColumn(1, "id", 23, -1), M.RelationColumn(0, "v", 25, -1))
    row = (TC("t", b"1"), TC("n", None), TC("u", None), TC("b", b"\x00\xff"))
    msgs = [
        M.Begin(final_lsn=big, commit_ts=700_000_000_000_000, xid=2**32 - 1),
        M.Origin(origin_lsn=2**63, origin_name="origin"),
        M.Relation(relation_id=2**32 - 1, namespace="public", relation_name="t", replica_identity="f",
                   columns=cols),
        M.Type(type_oid=2**31 + 5, namespace="pg_catalog", type_name="mood"),
        M.Insert(relation_id=2**32 - 1, new_tuple=row),
        M.Update(relation_id=1, old_kind="O", old_tuple=row, new_tuple=row),
        M.Update(relation_id=1, new_tuple=row[:1]),
        M.Delete(relation_id=1, old_kind="K", old_tuple=row[:1]),
        M.Truncate(options=3, relation_ids=(1, 2**32 - 1)),
        M.LogicalMessage(flags=1, lsn=2**63 + 5, prefix="p", content=b"\x00x"),
        M.Commit(commit_lsn=big, end_lsn=big - 1, commit_ts=1),
        M.StreamStart(xid=9, first_segment=True),
        M.Relation(xid=9, relation_id=7, namespace="myschema", relation_name="s", replica_identity="d",
                   columns=cols),
        M.Insert(xid=9, relation_id=7, new_tuple=row),
        M.StreamStop(),
        M.StreamCommit(xid=9, commit_lsn=10, end_lsn=11, commit_ts=12),
        M.StreamAbort(xid=10, subxid=11),
        M.BeginPrepare(prepare_lsn=1, end_lsn=2, prepare_ts=3, xid=4, gid="g"),
        M.Prepare(prepare_lsn=1, end_lsn=2, prepare_ts=3, xid=4, gid="g"),
        M.CommitPrepared(commit_lsn=1, end_lsn=2, commit_ts=3, xid=4, gid="g"),
        M.RollbackPrepared(prepare_end_lsn=1, rollback_end_lsn=2, prepare_ts=3, rollback_ts=4, xid=4, gid="g"),
    ]
    return [encode_message(m) for m in msgs]


def malformed():
    ins = encode_message(pc_.Insert(relation_id=1, new_tuple=(TC("t", b"abc"),)))
    return [b"", None, b"Z\x00\x01", ins[:-1], ins + b"\x00"]


def frame_df(spark, payloads, extra=None):
    rows = [(i, f"0/{i:X}", p) for i, p in enumerate(payloads)]
    schema = T.StructType([T.StructField("seq", T.LongType()), T.StructField("lsn", T.StringType()),
                           T.StructField("data", T.BinaryType())])
    return spark.createDataFrame(rows, schema).coalesce(1)


# --------------------------------------------------------------------------- types (no JVM)

def test_type_converter():
    assert spark_type(pa.uint64()) == T.DecimalType(20, 0)
    assert spark_type(pa.uint32()) == T.LongType()
    assert spark_type(pa.uint8()) == T.ShortType()
    assert spark_type(pa.timestamp("us", tz="UTC")) == T.TimestampType()
    assert MESSAGE_TYPE.names == [f.name for f in MESSAGE_STRUCT] + [CORRUPT_RECORD]
    assert MESSAGE_TYPE["columns"].dataType.elementType["type_oid"].dataType == T.LongType()
    assert spark_type(pa.float16()) == T.FloatType()   # no half float in Spark: widened, exactly
    with pytest.raises(TypeError):
        spark_type(pa.duration("s"))


def test_lsn_decimals_written_directly_equal_the_cast():
    vals = [0, 1, 2**64 - 1, None, 2**63, 2**32]
    for arr in (pa.array(vals, pa.uint64()), pa.array([], pa.uint64()), pa.array(vals, pa.uint64()).slice(2, 3),
                pa.array([5, 6], pa.uint64())):
        got = ST.to_spark_arrow(arr, pa.decimal128(20, 0))
        got.validate(full=True)
        assert got.equals(arr.cast(pa.decimal128(20, 0))), arr


# --------------------------------------------------------------------------- from_pgoutput

@pytest.mark.parametrize("impl", IMPLS)
def test_from_pgoutput_corpus_equals_decode_batch(spark, corpus, corpus_df, impl):
    want = expected_struct(corpus.column("data").combine_chunks())
    # pandas_udf is the slow path (Spark converts nested columns per row): 8 partitions only
    for n in ((1, 8) if impl == "arrow" else (8,)):
        df = in_partitions(corpus_df, n)
        got = collect(df.select("row", from_pgoutput("data", impl=impl).alias("m"))
                      .orderBy("row").select("m.*"))
        assert got.num_rows == corpus.num_rows
        assert got.column("error").null_count == got.num_rows
        same(got, want)


@pytest.mark.parametrize("impl", IMPLS)
def test_from_pgoutput_generated_and_big_lsn(spark, impl):
    payloads = generated()
    df = frame_df(spark, payloads)
    got = collect(df.select("seq", from_pgoutput("data", impl=impl).alias("m")).orderBy("seq").select("m.*"))
    same(got, expected_struct(payloads))
    assert got.column("error").null_count == len(payloads)
    assert got.column("final_lsn")[0].as_py() == decimal.Decimal(2**64 - 1)
    assert got.column("lsn")[9].as_py() == decimal.Decimal(2**63 + 5)
    assert got.column("relation_id")[2].as_py() == 2**32 - 1
    assert got.column("xid")[13].as_py() == 9  # inside the stream block
    # SQL sees exact LSNs too
    df.select(from_pgoutput("data", impl=impl).alias("m")).createOrReplaceTempView("gen")
    assert spark.sql("SELECT max(m.final_lsn) FROM gen").first()[0] == decimal.Decimal(2**64 - 1)


def test_sql_pgoutput_decode(spark, corpus, corpus_df):
    register(spark)
    corpus_df.createOrReplaceTempView("corpus")
    got = collect(spark.sql("SELECT row, pgoutput_decode(data) AS m FROM corpus").orderBy("row").select("m.*"))
    same(got, expected_struct(corpus.column("data").combine_chunks()))
    bad = frame_df(spark, malformed())
    bad.createOrReplaceTempView("bad")
    got = collect(spark.sql("SELECT seq, pgoutput_decode_permissive(data).error AS e FROM bad ORDER BY seq"))
    assert got.column("e").to_pylist() == decode_batch(malformed()).field("error").to_pylist()
    with pytest.raises(Exception, match="Malformed pgoutput payload"):
        spark.sql("SELECT pgoutput_decode(data) FROM bad").collect()


# --------------------------------------------------------------------------- modes

def mixed():
    good = generated()
    out = []
    for i, b in enumerate(malformed()):
        out += good[i * 3:(i + 1) * 3] + [b]
    return out + good[15:]


@pytest.mark.parametrize("impl", IMPLS)
def test_from_pgoutput_fields_selects_from_the_full_struct(spark, corpus, corpus_df, impl):
    """``fields=`` returns exactly those fields of the full struct, in the order asked."""
    want = expected_struct(corpus.column("data").combine_chunks())
    pick = ["new_tuple", "type", "lsn", "error"]
    got = collect(in_partitions(corpus_df, 3).select("row", from_pgoutput("data", impl=impl, fields=pick)
                                                     .alias("m")).orderBy("row").select("m.*"))
    assert got.column_names == pick
    same(got, want.select(pick))
    with pytest.raises(ValueError, match="fields"):
        from_pgoutput("data", fields=["type", "no_such_field"])


@pytest.mark.skipif(not HAS_ARROW_UDF, reason="per-field UDFs need arrow_udf (PySpark >= 4.1)")
def test_from_pgoutput_evaluates_only_the_fields_read(spark, corpus, corpus_df):
    """The struct is one UDF call per field: Spark keeps only the calls a query reads, all
    in one Python node (the payload column crosses once)."""
    q = in_partitions(corpus_df, 3).select(from_pgoutput("data").alias("m")).groupBy("m.type").count()
    plan = physical_plan(q)
    assert plan.count("ArrowEvalPython") == 1 and plan.count("_FieldOf") == 1, plan
    want = pc.value_counts(decode_batch(corpus.column("data").combine_chunks()).field("type")).to_pylist()
    assert {r["type"]: r["count"] for r in q.collect()} == {d["values"]: d["counts"] for d in want}
    two = corpus_df.select(from_pgoutput("data").alias("m")).select("m.type", "m.lsn")
    plan = physical_plan(two)
    assert plan.count("ArrowEvalPython") == 1 and plan.count("_FieldOf") == 2, plan


def test_field_udfs_share_one_decode_per_batch(monkeypatch):
    """No JVM: the per-field UDF bodies decode an Arrow batch once between them, and carry
    the stream state from batch to batch (here: no task, as on the driver)."""
    from pgoutput_codec.spark import messages as SF
    calls = []
    real = SF.decode_pgoutput_arrays

    def counting(payload, keys, **kw):
        calls.append(len(payload))
        return real(payload, keys, **kw)
    monkeypatch.setattr(SF, "decode_pgoutput_arrays", counting)
    monkeypatch.setattr(SF, "_LAST", [None, None, None])
    monkeypatch.setattr(SF, "_STATES", {})
    dec = SF._PgoutputDecoder("auto", None, "FAILFAST")
    names = ST.MESSAGE_TYPE.names
    body = {f: SF._FieldOf(dec, names.index(f), ST.arrow_type_for(ST.MESSAGE_TYPE[f].dataType), None)
            for f in ("type", "xid")}
    msgs = generated()
    first, second, third = (pa.array(m, pa.binary()) for m in (msgs[:12], msgs[12:14], msgs[14:]))
    assert body["type"](first).to_pylist() == [chr(m[0]) for m in msgs[:12]]
    body["xid"](first)
    assert calls == [12]
    # the second batch lies inside the stream block opened by the first one (Stream Start
    # at row 11) and has no Stream Start/Stop of its own: its Relation and Insert carry the
    # streamed xid only with the state carried over
    assert body["xid"](second).to_pylist() == [9, 9] and calls == [12, 2]
    assert body["type"](second).to_pylist() == ["R", "I"] and calls == [12, 2]
    xids = body["xid"](third).to_pylist()
    assert xids == decode_batch(pa.array(msgs, pa.binary())).field("xid").to_pylist()[14:]


@pytest.mark.parametrize("impl", IMPLS)
def test_from_pgoutput_permissive(spark, impl):
    payloads = mixed()
    df = frame_df(spark, payloads)
    got = collect(df.select("seq", from_pgoutput("data", mode="PERMISSIVE", impl=impl).alias("m"))
                  .orderBy("seq").select("m.*"))
    want = expected_struct(payloads)
    same(got, want)
    err = got.column("error").to_pylist()
    assert sum(e is not None for e in err) == len(malformed())
    for e, p, c in zip(err, payloads, got.column(CORRUPT_RECORD).to_pylist(), strict=True):
        assert c == (p if e is not None else None)
    assert "Insert ('I') at byte" in next(e for e in err if e and e.startswith("Insert"))


@pytest.mark.parametrize("impl", IMPLS)
def test_from_pgoutput_failfast_names_row_key_type_offset(spark, impl):
    df = frame_df(spark, mixed())
    with pytest.raises(Exception) as ei:
        df.select(from_pgoutput("data", key="lsn", impl=impl)).collect()
    text = str(ei.value)
    assert "Malformed pgoutput payload in row 3" in text and "(lsn=0/3)" in text
    assert "at byte 0" in text and "FAILFAST" in text  # first bad row: the empty payload
    with pytest.raises(ValueError, match="DROPMALFORMED"):
        from_pgoutput("data", mode="DROPMALFORMED")


def test_decode_messages_modes(spark):
    payloads = mixed()
    nbad = len(malformed())
    df = frame_df(spark, payloads)
    want = expected_struct(payloads)
    # PERMISSIVE: every row, flattened, keys renamed where they clash (lsn → source_lsn)
    obs = Observation("permissive")
    got = collect(decode_messages(df, mode="PERMISSIVE", observation=obs).orderBy("seq"))
    assert got.column_names[:2] == ["source_lsn", "seq"]
    assert got.column_names[2:] == MESSAGE_TYPE.names
    same(got, want)
    assert obs.get == {"rows": len(payloads), "malformed": nbad}
    # DROPMALFORMED: rows in = rows out + malformed, with and without an observation
    obs = Observation("drop")
    kept = collect(decode_messages(df, mode="DROPMALFORMED", observation=obs).orderBy("seq"))
    assert obs.get == {"rows": len(payloads), "malformed": nbad}
    assert kept.num_rows == len(payloads) - nbad and kept.column("error").null_count == kept.num_rows
    good = want.filter(pc.is_null(want.column("error")))
    same(kept, good)
    assert decode_messages(df, mode="DROPMALFORMED").count() == len(payloads) - nbad
    # FAILFAST: the kept columns name the row
    with pytest.raises(Exception) as ei:
        decode_messages(df).collect()
    assert "source_lsn=0/3, seq=3" in str(ei.value) and "at byte 0" in str(ei.value)
    with pytest.raises(Exception, match=r"Insert \('I'\) at byte"):
        decode_messages(df.filter("seq > 12")).collect()


def test_decode_messages_fields_gives_only_the_fields_named(spark):
    """fields=: the chosen columns, in the order named, equal to the full decode's;
    PERMISSIVE adds error and _corrupt_record; DROPMALFORMED still drops every malformed
    row though error is not among them; an unknown name is refused with the valid ones."""
    payloads = mixed()
    nbad = len(malformed())
    df = frame_df(spark, payloads)
    want = expected_struct(payloads)
    pick = ["new_tuple", "type", "relation_id"]
    got = collect(decode_messages(df, mode="DROPMALFORMED", keep=("seq",), fields=pick).orderBy("seq"))
    assert got.column_names == ["seq", *pick]
    same(got, want.filter(pc.is_null(want.column("error"))), pick)
    got = collect(decode_messages(df, mode="PERMISSIVE", keep=("seq",), fields="type, relation_id").orderBy("seq"))
    assert got.column_names == ["seq", "type", "relation_id", "error", ST.CORRUPT_RECORD]
    same(got, want, got.column_names[1:])
    obs = Observation("fields")
    got = decode_messages(df, mode="DROPMALFORMED", fields=["type"], observation=obs)
    assert got.columns == ["source_lsn", "seq", "type"]
    assert got.count() == len(payloads) - nbad
    assert obs.get == {"rows": len(payloads), "malformed": nbad}
    with pytest.raises(ValueError, match=r"no message field \['tpye'\].*relation_id"):
        decode_messages(df, fields="tpye")
    with pytest.raises(Exception, match=r"Insert \('I'\) at byte"):
        decode_messages(df.filter("seq > 12"), fields="type").collect()


@pytest.mark.on_cluster
def test_decode_messages_corpus_1_vs_8_partitions(spark, corpus, corpus_df):
    want = expected_struct(corpus.column("data").combine_chunks())
    results = []
    for n in (1, 8):
        got = collect(decode_messages(in_partitions(corpus_df, n), keep=("row", "lsn", "xid", "seq"))
                      .orderBy("row"))
        assert got.column_names[:4] == ["row", "source_lsn", "source_xid", "seq"]
        same(got, want)
        results.append(got)
    assert results[0].equals(results[1])


def test_partitions_and_batches_cut_inside_a_stream_block(spark, corpus, tmp_path):
    """A stream block can hold more rows than a Spark partition or an Arrow batch (its size
    is logical_decoding_work_mem): partitions and first batches that hold only rows of a
    block, no Stream Start/Stop, must be decoded inside it (the state is inferred from a
    row that parses one way only), by every messages function."""
    tags = [p[0] if p else 0 for p in corpus.column("data").to_pylist()]
    block = next(i for i, t in enumerate(tags) if t == ord("S") and set(tags[i + 2:i + 50]) == {ord("I")})
    start, cut = block + 3, 16
    piece = corpus.slice(start, 32 * cut)
    want = expected_struct(corpus.column("data").combine_chunks()).slice(start, piece.num_rows)
    assert want.column("xid").slice(0, 2 * cut).null_count == 0   # the first two cuts are inside
    path = tmp_path / "piece.parquet"
    pq.write_table(piece, path, row_group_size=cut)
    df = spark.read.parquet(str(path)).coalesce(1)
    conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(conf)
    spark.conf.set(conf, str(cut))
    try:
        got = collect(df.select("row", from_pgoutput("data").alias("m")).orderBy("row").select("m.*"))
        same(got, want)
        same(collect(decode_messages(df, keep=("row",)).orderBy("row")), want)
    finally:
        spark.conf.set(conf, before)
    if HAS_DATASOURCE:
        register(spark)
        ds = spark.read.format("pgoutput").option("keep", "row").load(str(path))
        assert num_partitions(ds) == 32   # one per row group
        same(collect(ds.orderBy("row")), want)


# --------------------------------------------------------------------------- archives

def write_csv(path, corpus, *, sep=",", prefix="\\x"):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter=sep, lineterminator="\n")
        w.writerow(["lsn", "xid", "data"])
        for lsn, xid, data in zip(*(corpus.column(c).to_pylist() for c in ("lsn", "xid", "data")), strict=True):
            w.writerow([lsn, xid, prefix + data.hex()])


@pytest.fixture(scope="session")
def csv_paths(corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("csv")
    write_csv(d / "export.csv", corpus)
    (d / "copy").mkdir()
    write_csv(d / "copy" / "export.tsv", corpus, sep="\t", prefix="\\\\x")  # COPY text format
    return d


def test_read_archive_parquet_and_csv(spark, corpus, corpus_path, csv_paths):
    want = expected_struct(corpus.column("data").combine_chunks())
    got = collect(read_archive(spark, corpus_path).orderBy("row"))
    assert got.column_names[:5] == ["server_version", "option_set", "seq", "source_lsn", "source_xid"]
    same(got, want)
    for path, sep in ((csv_paths / "export.csv", ","), (csv_paths / "copy", "\t")):
        got = collect(read_archive(spark, str(path), format="csv", sep=sep))
        assert got.num_rows == corpus.num_rows
        assert got.schema.field("source_xid").type == pa.string()  # CSV has no types
        same(got, want)  # single file: Spark keeps the file order
    from pgoutput_codec.spark.changes import decode_changes
    # the corpus file holds 14 slots' archives one after another, whose commit LSNs
    # restart: refused as out of order, unless told to keep every commit
    with pytest.raises(ArchiveOrderError):
        read_archive(spark, corpus_path, output="changes")
    assert read_archive(spark, corpus_path, output="changes", replays="keep").count() == \
        decode_changes(spark.read.parquet(corpus_path), replays="keep").count()


def test_csv_bad_hex_is_an_error_row(spark, tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("lsn,xid,data\n0/1,1,\\x45\n0/2,1,nothex\n0/3,1,\\x4\n")
    got = collect(read_archive(spark, str(p), format="csv", mode="PERMISSIVE").orderBy("source_lsn"))
    assert got.column("error").to_pylist()[1:] == [
        "payload is not bytea hex text ('\\x' followed by an even number of hex digits)"] * 2
    assert got.column(CORRUPT_RECORD).to_pylist()[1:] == [b"nothex", b"\\x4"]
    with pytest.raises(Exception, match=r"row 1 of the Arrow batch \(source_lsn=0/2"):
        read_archive(spark, str(p), format="csv").collect()


@pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0 (use read_archive)")
def test_data_source_parquet_and_csv(spark, corpus, corpus_path, csv_paths):
    register(spark)
    want = expected_struct(corpus.column("data").combine_chunks())
    df = spark.read.format("pgoutput").load(corpus_path)
    assert num_partitions(df) == 8  # one per row group
    got = collect(df.orderBy("row"))
    same(got, want)
    assert got.select(["row", "seq"]).equals(collect(read_archive(spark, corpus_path).orderBy("row"))
                                             .select(["row", "seq"]))
    got = collect(spark.read.format("pgoutput").option("format", "csv").load(str(csv_paths / "export.csv")))
    same(got, want)
    got = collect(spark.read.format("pgoutput").options(format="csv", sep="\\t", keep="lsn")
                  .load(str(csv_paths / "copy")))
    assert got.column_names[0] == "source_lsn" and got.column_names[1] == "type"
    same(got, want)

@pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0 (use read_archive)")
def test_data_source_fields_option(spark, corpus, corpus_path, tmp_path):
    """option("fields"): Spark never prunes a Python data source's columns, so the reader
    is told which message fields to send; they equal the full read's."""
    register(spark)
    want = expected_struct(corpus.column("data").combine_chunks())
    df = (spark.read.format("pgoutput").option("keep", "row").option("fields", "commit_lsn,type,new_tuple")
          .load(corpus_path))
    assert df.columns == ["row", "commit_lsn", "type", "new_tuple"]
    same(collect(df.orderBy("row")), want, ["commit_lsn", "type", "new_tuple"])
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW archived_messages USING pgoutput "
              f"OPTIONS (path '{corpus_path}', fields 'type')")
    cols = spark.sql("SELECT * FROM archived_messages").columns
    assert cols[-1] == "type" and "data" not in cols and "new_tuple" not in cols
    by_type = spark.sql("SELECT type, count(*) FROM archived_messages GROUP BY type").collect()
    assert dict(map(tuple, by_type)) == Counter(want.column("type").to_pylist())
    with pytest.raises(Exception, match="no message field"):
        spark.read.format("pgoutput").option("fields", "nope").load(corpus_path).collect()
    with pytest.raises(Exception, match="fields applies to output='messages'"):
        spark.read.format("pgoutput").options(output="changes", fields="type").load(corpus_path).collect()
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"seq": pa.array(range(len(malformed())), pa.int64()),
                             "data": pa.array(malformed(), pa.binary())}), bad)
    got = collect(spark.read.format("pgoutput").options(fields="type", mode="PERMISSIVE").load(str(bad)))
    assert got.column_names == ["seq", "type", "error", ST.CORRUPT_RECORD]
    assert got.column("error").null_count == 0
    dropped = spark.read.format("pgoutput").options(fields="type", mode="DROPMALFORMED").load(str(bad))
    assert dropped.count() == 0


@pytest.mark.same_code_on_connect
@pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0 (use read_archive)")
@pytest.mark.on_cluster
def test_data_source_changes_equal_decode_changes(spark, tmp_path):
    """output=changes: the same change rows (and seq: file index, row index) as
    decode_changes on the DataFrame without order_by, over several files and row groups —
    streamed and two-phase transactions span them — and from a CSV export."""
    from pgoutput_codec import decode_changes as decode_changes_1
    from pgoutput_codec.spark import decode_changes
    arc = pq.read_table(CORPUS)
    arc = arc.filter(pc.and_(pc.equal(arc["server_version"], "16.14"),
                             pc.equal(arc["option_set"], "v3_2pc_binary_streaming"))).sort_by("seq")
    arc = arc.select(["lsn", "xid", "data"])
    d = tmp_path / "arc"
    d.mkdir()
    n = len(arc)
    for i in range(4):
        a, b = n * i // 4, n * (i + 1) // 4
        pq.write_table(arc.slice(a, b - a), d / f"part-{i}.parquet", row_group_size=40)
    register(spark)
    ds = spark.read.format("pgoutput").option("output", "changes").load(str(d))
    assert num_partitions(ds) > 4
    got = collect(ds.orderBy("commit_rank", "seq"))
    want = collect(decode_changes(spark.read.parquet(str(d))))
    assert got.column_names == want.column_names
    assert got.equals(want)
    single = decode_changes_1(arc)
    assert got.column("op").to_pylist() == single.column("op").to_pylist()
    assert len(got) > 100
    # from SQL: the data source as a view
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW archived_changes USING pgoutput "
              f"OPTIONS (path '{d}', output 'changes')")
    by_op = spark.sql("SELECT op, count(*) FROM archived_changes GROUP BY op").collect()
    assert dict(map(tuple, by_op)) == Counter(single.column("op").to_pylist())
    # a commit-LSN window: the rows of the transactions committed after the first third
    lsns = sorted(set(got.column("commit_lsn").to_pylist()))
    after = lsns[len(lsns) // 3]
    win = collect(spark.read.format("pgoutput").options(output="changes", after_lsn=str(after)).load(str(d))
                  .orderBy("commit_rank", "seq"))
    assert win.equals(got.filter(pc.greater(got.column("commit_lsn"), pa.scalar(after, got.column("commit_lsn").type))))
    assert 0 < len(win) < len(got)
    # a CSV export (bytea as \x hex), one file: the same rows but for seq's file part
    csv = tmp_path / "export.csv"
    hexed = pa.array(["\\x" + v.hex() for v in arc.column("data").to_pylist()])
    import pyarrow.csv as pacsv
    pacsv.write_csv(pa.table({"lsn": arc.column("lsn"), "xid": arc.column("xid").cast(pa.string()),
                              "data": hexed}), csv)
    got_csv = collect(spark.read.format("pgoutput").options(format="csv", output="changes").load(str(csv))
                      .orderBy("commit_rank", "seq"))
    assert got_csv.drop_columns(["seq"]).equals(got.drop_columns(["seq"]))
    # modes: a malformed payload is an error row (PERMISSIVE) or dropped and counted out
    bad = pa.concat_tables([arc.slice(0, 30), pa.table({"lsn": ["0/0"], "xid": pa.array([None], arc.schema.field("xid").type),
                                                        "data": [b"I\x00"]}), arc.slice(30)])
    d2 = tmp_path / "bad"
    d2.mkdir()
    pq.write_table(bad, d2 / "part-0.parquet", row_group_size=40)
    with pytest.raises(Exception, match="seq 30"):
        collect(spark.read.format("pgoutput").option("output", "changes").load(str(d2)))
    perm = collect(spark.read.format("pgoutput").options(output="changes", mode="PERMISSIVE").load(str(d2)))
    assert perm.filter(pc.is_valid(perm.column("error"))).column(ST.CORRUPT_RECORD).to_pylist() == [b"I\x00"]
    drop = collect(spark.read.format("pgoutput").options(output="changes", mode="DROPMALFORMED").load(str(d2))
                   .orderBy("commit_rank", "seq"))
    assert "error" not in drop.column_names and len(drop) == len(got)


def _plain_archive(n_txns: int) -> pa.Table:
    """``n_txns`` one-row transactions of one table (a Relation before the first)."""
    from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn
    rel = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))
    msgs = [rel]
    for i in range(n_txns):
        lsn = 1000 + 100 * i
        msgs += [Begin(final_lsn=lsn, commit_ts=i, xid=500 + i),
                 Insert(relation_id=16400, new_tuple=(TC("t", str(i).encode()), TC("t", b"x" * 20))),
                 Commit(commit_lsn=lsn, end_lsn=lsn + 8, commit_ts=i)]
    return pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                     "data": pa.array([encode_message(m) for m in msgs], pa.binary())})


@pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0")
def test_data_source_partitions_carry_their_part_of_the_plan(tmp_path):
    """Spark pickles the reader for every task and each partition for its own: the
    plan rides in the partitions, each holding its key range's part (ControlPlan.for_keys),
    so a read of P partitions ships about one plan, not P (the reader: none). Batch
    reader, with and without order_by, and a stream's micro-batch."""
    import pickle

    from pgoutput_codec.changes import ControlPlan
    from pgoutput_codec.spark.sources import PgoutputDataSource
    arc = _plain_archive(3000)
    d = tmp_path / "arc"
    d.mkdir()
    pq.write_table(arc.slice(0, 4500), d / "part-0.parquet", row_group_size=1500)
    pq.write_table(arc.slice(4500), d / "part-1.parquet", row_group_size=1500)

    def shipped(parts, whole):
        sizes = [len(pickle.dumps(p.plan)) for p in parts]
        assert all(isinstance(p.plan, ControlPlan) and p.plan.key_range is not None for p in parts)
        hi = int(whole.ctrl_keys.max()) + 1
        fixed = len(pickle.dumps(whole.for_keys(hi, hi)))   # what every part holds
        one = len(pickle.dumps(whole)) - fixed
        assert len(parts) >= 6 and sum(sizes) - len(parts) * fixed < 1.3 * one, (sizes, fixed, one)
        return sizes

    for options in ({}, {"order_by": "seq"}):
        source = PgoutputDataSource({"path": str(d), "output": "changes", **options})
        reader = source.reader(source.schema())
        whole = reader.plan
        assert len(whole.commit_slots) == 3000
        assert b"ControlPlan" not in pickle.dumps(reader)
        parts = reader.partitions()
        shipped(parts, whole)
        # each part decodes its rows as the whole plan does
        for p in parts[:3]:
            rows = list(reader._keyed(p, ["data"]))
            v = pa.concat_arrays([r[0] for r in rows])
            k = np.concatenate([r[1] for r in rows])
            assert p.plan.changes(v, k).equals(whole.changes(v, k)) and len(p.plan.changes(v, k)) >= 400
    if hasattr(source, "streamReader"):   # a stream's first micro-batch, planned at once
        stream = source.streamReader(source.schema())
        start = stream.initialOffset()
        end = stream.latestOffset(start, None)
        parts = stream.partitions(start, end)
        shipped(parts, stream._plan(start, end["key"], stream._groups()))


@pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0")
def test_data_source_changes_ordered_by_a_column(spark, tmp_path):
    """A lake whose file names sort in no useful order (as repeated Spark appends leave
    it): with order_by="seq" the data source gives the rows decode_changes(order_by=)
    gives; without it the files are read in name order, which the plan refuses as out
    of order instead of giving rows in a wrong commit order."""
    from pgoutput_codec import decode_changes as decode_changes_1
    from pgoutput_codec.spark import decode_changes
    arc = pq.read_table(CORPUS)
    arc = arc.filter(pc.and_(pc.equal(arc["server_version"], "18.4"),
                             pc.equal(arc["option_set"], "v3_2pc_binary_streaming"))).sort_by("seq")
    arc = arc.select(["seq", "lsn", "xid", "data"])
    register(spark)
    d = tmp_path / "appended"
    d.mkdir()
    n = len(arc)
    for i, name in enumerate(["part-00000-f3a1", "part-00000-9c2e", "part-00000-07bd"]):   # later first
        a, b = n * i // 3, n * (i + 1) // 3
        pq.write_table(arc.slice(a, b - a), d / f"{name}.parquet", row_group_size=40)
    ds = spark.read.format("pgoutput").options(output="changes", order_by="seq").load(str(d))
    got = collect(ds.orderBy("commit_rank", "seq"))
    want = collect(decode_changes(spark.read.parquet(str(d)), order_by="seq"))
    assert got.equals(want) and len(got) > 100
    single = decode_changes_1(arc)
    assert got.column("seq").to_pylist() == single.column("seq").to_pylist()
    # without order_by, name order; an archive without streamed transactions (whose
    # stream state alone would already fail) is refused for its commit order
    plain = pq.read_table(CORPUS)
    plain = plain.filter(pc.and_(pc.equal(plain["server_version"], "18.4"),
                                 pc.equal(plain["option_set"], "v1_text"))).sort_by("seq")
    d2 = tmp_path / "appended_plain"
    d2.mkdir()
    half = len(plain) // 2
    pq.write_table(plain.slice(0, half), d2 / "part-00000-f3a1.parquet")
    pq.write_table(plain.slice(half), d2 / "part-00000-07bd.parquet")
    with pytest.raises(Exception, match="not in arrival order"):
        collect(spark.read.format("pgoutput").options(output="changes").load(str(d2)))
    ok = spark.read.format("pgoutput").options(output="changes", order_by="seq").load(str(d2))
    assert ok.count() == len(decode_changes_1(plain))
    with pytest.raises(Exception, match="order_by column 'nope' not in the archive"):
        spark.read.format("pgoutput").options(output="changes", order_by="nope").load(str(d)).collect()
    with pytest.raises(Exception, match="order_by applies to output='changes'"):
        spark.read.format("pgoutput").options(order_by="seq").load(str(d)).collect()


# --------------------------------------------------------------------------- openGauss

def og_frames():
    from pgoutput_codec.opengauss import Column, Record
    from pgoutput_codec.opengauss.encode import encode_frame
    ts = "2024-02-05 14:46:35.203057+08"
    recs = [
        Record("B", 0x0CFE64D0, csn=2359, first_lsn=0x0CFE64D0, xid=2**64 - 1, commit_time=ts, options="XT"),
        Record("I", 0x0CFE6500, schema="public", table="t1",
               new_tuple=(Column("a", 23, b"1"), Column('"Mixed"', 25, None))),
        Record("D", 0x0CFE6700, schema="public", table="t1", old_tuple=(Column("a", 23, b"4"),)),
        Record("C", 0x0CFE6900, xid=78109, commit_time=ts, options="XT"),
    ]
    good = encode_frame(recs)
    return [good, encode_frame(recs[:1]), good[:-7], good]


def test_opengauss(spark):
    from pgoutput_codec.opengauss import decode_batch as og_decode
    frames = og_frames()
    want = og_decode(pa.array(frames, pa.binary()))
    df = frame_df(spark, frames)
    got = collect(opengauss_messages(df, mode="PERMISSIVE").orderBy("seq", "record"))
    assert got.num_rows == want.num_rows
    assert got.column("seq").to_pylist() == want.column("row").to_pylist()
    cols = [c for c in want.column_names if c != "row"]
    same(got, want.select(cols).cast(pa.schema([ST.arrow_schema_for(ST.spark_type(
        pa.struct([want.schema.field(c) for c in cols]))).field(c) for c in cols])))
    nerr = want.column("error").null_count
    assert got.column(CORRUPT_RECORD).null_count == nerr
    obs = Observation("og")
    assert opengauss_messages(df, mode="DROPMALFORMED", observation=obs).count() == nerr
    assert obs.get["rows"] == want.num_rows and obs.get["malformed"] == want.num_rows - nerr
    with pytest.raises(Exception, match="Malformed openGauss frame in row 2"):
        opengauss_messages(df).collect()
    # column function: an array of records per frame
    arr = collect(df.select("seq", from_opengauss("data", mode="PERMISSIVE").alias("r")).orderBy("seq"))
    sizes = [len(x) for x in arr.column("r").to_pylist()]
    assert sizes == [sum(1 for r in want.column("row").to_pylist() if r == i) for i in range(len(frames))]
    exploded = df.select("seq", F.posexplode(from_opengauss("data", mode="PERMISSIVE")))
    assert exploded.count() == want.num_rows


def test_intervals_cross_to_spark_from_their_buffer():
    """Spark's interval struct (months, days, microseconds) is read from the Arrow value
    buffer, sliced arrays and nulls included: the same values as field by field
    (microseconds floored, negative ones too)."""
    from pgoutput_codec.spark.tablerows import interval_struct
    target = pa.struct([("months", pa.int32()), ("days", pa.int32()), ("microseconds", pa.int64())])
    a = pa.array([pa.MonthDayNano([1, 2, 3000]), None, pa.MonthDayNano([-5, -7, -1500]),
                  pa.MonthDayNano([0, 0, 2**62])], pa.month_day_nano_interval())
    for x in (a, a.slice(1), a.slice(2, 1), a.slice(0, 0)):
        want = [None if v is None else {"months": v.months, "days": v.days, "microseconds": v.nanoseconds // 1000}
                for v in x.to_pylist()]
        assert interval_struct(x, target).to_pylist() == want
    assert interval_struct(a, target)[2].as_py() == {"months": -5, "days": -7, "microseconds": -2}
