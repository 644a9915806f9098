"""Table names as PostgreSQL allows them on Spark: a dotted schema named quoted, as a pair,
or (when it names one table) unquoted; odd names mirrored from Spark to the same copies
the single process writes — over an archive captured from a real server."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")
pytest.importorskip("psycopg")

from pgoutput_codec import mirror as mirror_1  # noqa: E402
from pgoutput_codec.idents import qualified_name  # noqa: E402
from pgoutput_codec.lake import table_path  # noqa: E402
from pgoutput_codec.spark import decode_changes, mirror, snapshot  # noqa: E402
from pgoutput_codec.testing import pgserver  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_names", TESTS / "test_names.py")
TN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TN)

@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    try:
        spec = pgserver.first_available()
    except RuntimeError as e:
        pytest.skip(str(e))
    srv = pgserver.PgServer(spec)
    srv.start()
    try:
        with srv.connect() as c:
            TN._phase1(c)
            TN._phase2(c)
            msgs = TN._take(c)
            rows = {k: TN._server_rows(c, *k) for k in TN.TABLES}
    finally:
        srv.stop()
    path = tmp_path_factory.mktemp("names") / "archive.parquet"
    pq.write_table(TN._archive(msgs), path)
    return path, rows


def test_spark_names_tables_as_postgresql_quotes_them(spark, captured):
    path, rows = captured
    ch = decode_changes(spark.read.parquet(str(path)), order_by="seq")
    want = rows[("sales.eu", "orders")]
    for name in ('"sales.eu".orders', ("sales.eu", "orders")):
        assert sorted((r.asDict() for r in snapshot(ch, name).collect()), key=lambda r: r["id"]) == want
    assert sorted((r.asDict() for r in snapshot(ch, 'sales."eu.orders"').collect()), key=lambda r: r["id"]) == \
        rows[("sales", "eu.orders")]
    with pytest.raises(ValueError, match="matches 2 tables"):
        snapshot(ch, "sales.eu.orders")
    assert sorted((r.asDict() for r in snapshot(ch, f"{TN.CJK_SCHEMA}.{TN.CJK_TABLE}").collect()),
                  key=lambda r: r["id"]) == rows[(TN.CJK_SCHEMA, TN.CJK_TABLE)]


def test_spark_mirrors_every_name_to_the_copies_one_process_keeps(spark, captured, tmp_path):
    path, rows = captured
    ch = decode_changes(spark.read.parquet(str(path)), order_by="seq")
    # public.cols aside: Spark's net changes name their own columns __OP, __COMMIT_LSN …
    names = [(s, t) for s, t in TN.TABLES if t != "cols"]
    got = mirror(ch, tmp_path / "spark", tables=[qualified_name(s, t) for s, t in names])
    want = mirror_1(pq.read_table(path), tmp_path / "one", tables=[qualified_name(s, t) for s, t in names])
    assert got == want
    assert sorted(r.table for r in got) == sorted(qualified_name(s, t) for s, t in names)
    for s, t in names:
        copy = deltalake.DeltaTable(table_path(tmp_path / "spark", qualified_name(s, t))).to_pyarrow_table()
        assert sorted(copy.to_pylist(), key=lambda r: r["id"]) == rows[(s, t)], (s, t)
