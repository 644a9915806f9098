"""Spark's ``transcode``: an archive captured in LATIN1 rewritten as UTF-8 in parallel,
row for row what the single process gives the whole archive (which test_transcode.py
and tests/conformance/test_encodings.py hold to what a UTF-8 session receives), however
its rows are partitioned."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from pgoutput_codec import transcode_payloads
from pgoutput_codec.spark import register, transcode
from pgoutput_codec.spark.sources import HAS_DATASOURCE
from test_transcode import archive


@pytest.fixture(scope="module")
def latin1(tmp_path_factory):
    """(directory of 4 Parquet files of a LATIN1 archive, its payloads, the UTF-8 ones)."""
    theirs, want = archive("latin-1"), archive("utf-8")
    assert theirs != want and transcode_payloads(theirs, "LATIN1")[0].to_pylist() == want
    dirs = []
    for name, rows in (("latin1", theirs), ("utf8", want)):
        d = tmp_path_factory.mktemp(name)
        q = len(rows) // 4 + 1
        for i in range(4):
            part = rows[i * q:(i + 1) * q]
            pq.write_table(pa.table({"seq": pa.array(range(i * q, i * q + len(part)), pa.int64()),
                                     "data": pa.array(part, pa.binary())}), d / f"part-{i}.parquet",
                           row_group_size=100)
        dirs.append(str(d))
    return dirs[0], theirs, want, dirs[1]


def _by_seq(df):
    return [bytes(r.data) for r in df.orderBy("seq").collect()]


@pytest.mark.same_code_on_connect     # the mapper is the same; the next test ships the timeline there
@pytest.mark.same_code_on_spark35
@pytest.mark.parametrize("shape", ["files", "one", "eight", "shuffled"])
def test_every_partitioning_gives_the_single_process_rewrite(spark, latin1, shape):
    path, _, want, _ = latin1
    df = spark.read.parquet(path)
    order_by = "seq"
    if shape == "files":
        order_by = None                                   # file order and row index
    elif shape == "one":
        df = df.coalesce(1)
    elif shape == "eight":
        df = df.repartitionByRange(8, "seq")
    else:                                                 # any rows in any partition
        df = df.repartition(5, F.col("seq") % 7)
    out = transcode(df, "LATIN1", order_by=order_by)
    assert out.columns == ["seq", "data"]
    assert _by_seq(out) == want


def test_a_payload_it_cannot_rewrite_names_its_order_key(spark, latin1, tmp_path):
    _, theirs, want, _ = latin1
    bad = list(theirs)
    i = next(k for k, p in enumerate(bad) if p[:1] == b"I" and k > 100)
    bad[i] = bad[i][:-2]
    pq.write_table(pa.table({"seq": pa.array(range(len(bad)), pa.int64()), "data": pa.array(bad, pa.binary())}),
                   tmp_path / "bad.parquet")
    df = spark.read.parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(Exception, match=f"order key {i}: Insert \\('I'\\) at byte"):
        transcode(df, "LATIN1", order_by="seq").collect()
    got = _by_seq(transcode(df, "LATIN1", order_by="seq", errors="keep"))
    assert got[i] == bad[i] and got[:i] == want[:i] and got[i + 1:] == want[i + 1:]


@pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0")
@pytest.mark.parametrize("output", ["messages", pytest.param("changes", marks=pytest.mark.on_cluster)])
def test_the_data_source_reads_an_archive_in_another_encoding(spark, latin1, output):
    """option('encoding'): the same rows as the data source over the UTF-8 archive (a
    partition per row group of 100 rows: the state rows of most partitions' rows lie in
    others, and each carries its key range's part of the timeline)."""
    path, _, _, utf8 = latin1
    register(spark)
    opts = {"output": output} if output == "messages" else {"output": output, "order_by": "seq"}
    got = spark.read.format("pgoutput").options(encoding="LATIN1", **opts).load(path)
    want = spark.read.format("pgoutput").options(**opts).load(utf8)
    key = "seq" if output == "messages" else ["commit_rank", "seq"]
    assert got.orderBy(key).collect() == want.orderBy(key).collect()
    assert got.count() > 100
    as_sent = spark.read.format("pgoutput").options(**opts).load(path)   # values in LATIN1
    assert as_sent.orderBy(key).collect() != want.orderBy(key).collect()
