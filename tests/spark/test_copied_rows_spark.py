"""Copied rows ('R', the Inserts of a COPY transaction) on Spark: the change rows, the
tables rebuilt from them, bases and the warning of an unknown start, equal to one
process (tests/tables/test_copied_rows.py)."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec import tables as T1  # noqa: E402
from pgoutput_codec.spark import decode_changes, history, net_changes, snapshot  # noqa: E402
from pgoutput_codec.tables import IncompleteTableWarning  # noqa: E402
from change_corpus import CHANGE_IMPLS, as_spark, collect, write_files  # noqa: E402
from copied_rows import BASE, WANT_OPS, WANT_T, copy_archive, uncopied_archive  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


def _rows(t: pa.Table):
    return sorted((r["id"], r["v"]) for r in t.to_pylist())


def _hist(t: pa.Table):
    return sorted((r["id"], r["v"], r["__OP"], r["__START_LSN"], r["__END_LSN"]) for r in t.to_pylist())


def _net(t: pa.Table):
    return sorted((r["__OP"], r["id"], r["v"], r["__COMMIT_LSN"]) for r in t.to_pylist())


@pytest.fixture(scope="module")
def copied(tmp_path_factory):
    return write_files(copy_archive(), tmp_path_factory.mktemp("copied"), 3)


@pytest.mark.parametrize("impl", CHANGE_IMPLS)
def test_spark_gives_R_rows_as_one_process(spark, copied, impl):
    got = collect(decode_changes(spark.read.parquet(*copied), order_by="seq", impl=impl))
    assert got.column("op").to_pylist() == WANT_OPS
    assert got.drop_columns(["commit_rank"]).equals(as_spark(decode_changes_1(copy_archive())))


@pytest.mark.parametrize("form", ["straight", "read back"])
def test_spark_tables_of_copied_rows_equal_one_process(spark, copied, tmp_path, form):
    """snapshot, history, net_changes over copied rows (one copied again, equal to the
    row held: no new version) equal one process's; the table never copied warns, once
    per call, with no job of its own; the copied one does not."""
    single = decode_changes_1(copy_archive())
    ch = decode_changes(spark.read.parquet(*copied), order_by="seq", impl=CHANGE_IMPLS[0])
    if form == "read back":
        ch.write.parquet(str(tmp_path / "rows"))
        ch = spark.read.parquet(str(tmp_path / "rows"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteTableWarning)
        assert _rows(collect(snapshot(ch, "public.t"))) == [(r["id"], r["v"]) for r in WANT_T]
        assert _hist(collect(history(ch, "public.t"))) == _hist(T1.history(single, "public.t"))
        assert _net(collect(net_changes(ch, "public.t"))) == _net(T1.net_changes(single, "public.t"))
    for fn in (snapshot, history, net_changes):
        with pytest.warns(IncompleteTableWarning, match=r"public\.u: rows that existed before capture"):
            fn(ch, "public.u")


def test_spark_bases_equal_one_process(spark, tmp_path):
    """A base (a DataFrame, a Parquet path, a mapping by name) stands for the copy as in
    one process: its rows 'R' at base_lsn, the changes at or below it skipped, an
    unchanged TOAST value taken from the base's row."""
    single = decode_changes_1(uncopied_archive())
    ch = decode_changes(spark.read.parquet(*write_files(uncopied_archive(), tmp_path / "a", 2)), order_by="seq",
                        impl=CHANGE_IMPLS[0])
    pq.write_table(BASE, tmp_path / "base.parquet")
    base_df = spark.createDataFrame(BASE.to_pandas())
    for kw in (dict(base=base_df, base_lsn=0x100), dict(base=str(tmp_path / "base.parquet"), base_lsn="0/100"),
               dict(base={"public.t": base_df}, base_lsn={"public.t": 0x100})):
        with warnings.catch_warnings():
            warnings.simplefilter("error", IncompleteTableWarning)
            assert _rows(collect(snapshot(ch, "public.t", **kw))) == [(r["id"], r["v"]) for r in WANT_T]
            assert _hist(collect(history(ch, "public.t", **kw))) == \
                _hist(T1.history(single, "public.t", base=BASE, base_lsn=0x100))
            assert _net(collect(net_changes(ch, "public.t", **kw))) == \
                _net(T1.net_changes(single, "public.t", base=BASE, base_lsn=0x100))
    later = pa.table({"id": pa.array([1, 2, 4, 5], pa.int32()), "v": ["c1", "u2", "c4", "n5"]})
    assert _rows(collect(snapshot(ch, "public.t", base=spark.createDataFrame(later.to_pandas()),
                                  base_lsn=0x200))) == [(r["id"], r["v"]) for r in WANT_T]


def test_spark_mirror_of_copied_rows_and_a_base(spark, copied, tmp_path):
    """The Spark mirror's copies equal one process's: t from its copied rows, w from its
    base alone, u made with a warning."""
    DeltaTable = pytest.importorskip("deltalake").DeltaTable

    from pgoutput_codec.lake import table_path
    from pgoutput_codec.spark import mirror
    ch = decode_changes(spark.read.parquet(*copied), order_by="seq")
    w = spark.createDataFrame(pa.table({"id": pa.array([7], pa.int32()), "v": ["z"]}).to_pandas())
    with pytest.warns(IncompleteTableWarning) as said:
        mirror(ch, tmp_path / "lake", base={"public.w": w}, base_lsn=0x100)
    assert [x.message.table for x in said if issubclass(x.category, IncompleteTableWarning)] == ["public.u"]

    def rows(name):
        return _rows(DeltaTable(table_path(tmp_path / "lake", name)).to_pyarrow_table())
    assert rows("public.t") == [(r["id"], r["v"]) for r in WANT_T]
    assert rows("public.w") == [(7, "z")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteTableWarning)
        runs = mirror(ch.where(F.lit(True)), tmp_path / "lake", base={"public.w": w}, base_lsn=0x100)
    assert all(r.version is None for r in runs)


def test_the_data_source_and_a_stream_give_R_rows(spark, tmp_path):
    """spark.read.format("pgoutput") (output changes) and readStream give the copy's
    Inserts as 'R' rows, as one process."""
    from pgoutput_codec.spark import register
    from pgoutput_codec.spark.sources import HAS_DATASOURCE
    if not HAS_DATASOURCE:
        pytest.skip("Python data sources need PySpark >= 4.0")
    from test_stream_source import run
    register(spark)
    root = tmp_path / "arc"
    write_files(copy_archive(), root, 3)
    got = collect(spark.read.format("pgoutput").options(output="changes", order_by="seq").load(str(root))
                  .orderBy("commit_rank", "seq"))
    assert got.column("op").to_pylist() == WANT_OPS
    batches = run(spark, root, tmp_path / "chk", output="changes")
    rows = pa.concat_tables(batches).sort_by([("commit_lsn", "ascending"), ("seq", "ascending")])
    assert rows.column("op").to_pylist() == WANT_OPS
