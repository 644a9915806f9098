"""Table names as PostgreSQL allows them on Spark: a dotted schema named quoted, as a pair,
or (when it names one table) unquoted; odd names mirrored from Spark to the same copies
the single process writes — over an archive captured from a real server."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")
pytest.importorskip("psycopg")

from pgoutput_codec import mirror as mirror_1  # noqa: E402
from pgoutput_codec.idents import qualified_name  # noqa: E402
from pgoutput_codec.lake import table_path  # noqa: E402
from pgoutput_codec.spark import decode_changes, history, mirror, net_changes, snapshot, table_changes  # noqa: E402
from pgoutput_codec.spark.dataframes import collect_arrow  # noqa: E402
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
    """Every table, public.cols too (columns Id and ID, __OP, __COMMIT_LSN, __UNCHANGED,
    a.b, it's, back`tick): Spark writes the copy one process writes (names, rows), and
    the server's rows."""
    path, rows = captured
    ch = decode_changes(spark.read.parquet(str(path)), order_by="seq")
    got = mirror(ch, tmp_path / "spark")
    want = mirror_1(pq.read_table(path), tmp_path / "one")
    assert got == want
    assert sorted(r.table for r in got) == sorted(qualified_name(s, t) for s, t in TN.TABLES)
    for s, t in TN.TABLES:
        copies = [deltalake.DeltaTable(table_path(tmp_path / w, qualified_name(s, t))).to_pyarrow_table()
                  for w in ("spark", "one")]
        assert copies[0].column_names == copies[1].column_names, (s, t)
        assert _by_place(copies[0]) == _by_place(copies[1]), (s, t)
        assert TN._copy_rows(tmp_path / "spark", s, t) == rows[(s, t)], (s, t)
    assert all(r.version is None for r in mirror(ch, tmp_path / "spark"))


def _norm(v):
    """A value as both paths give it: Spark's decimal LSNs and long ids as integers,
    times as naive UTC."""
    if isinstance(v, Decimal):
        return int(v)
    if isinstance(v, datetime):
        return v.astimezone(timezone.utc).replace(tzinfo=None) if v.tzinfo else v
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def _by_place(t) -> tuple:
    """A table's column names and its rows by place (names may repeat), in a set order."""
    cols = [t.column(j).to_pylist() for j in range(t.num_columns)]
    return t.column_names, sorted((repr(tuple(_norm(c[i]) for c in cols)) for i in range(len(t))))


def test_spark_tables_of_a_table_with_odd_column_names_equal_one_process(spark, captured):
    """public.cols (a key Id beside ID, columns named as net changes' and history's own,
    a.b TOASTed and sent unchanged, it's, back`tick, s.a): Spark's snapshot, history,
    net_changes and table_changes equal one process's, names and values, without the
    session's spark.sql.caseSensitive changed."""
    from pgoutput_codec import decode_changes as decode_1
    from pgoutput_codec import history as history_1
    from pgoutput_codec import net_changes as net_1
    from pgoutput_codec import snapshot as snapshot_1
    from pgoutput_codec import table_changes as table_changes_1
    path, rows = captured
    ch = decode_changes(spark.read.parquet(str(path)), order_by="seq")
    one = decode_1(pq.read_table(path))
    name = "public.cols"
    assert spark.conf.get("spark.sql.caseSensitive") == "false"
    for fn, fn_1 in ((snapshot, snapshot_1), (history, history_1), (net_changes, net_1)):
        got, want = collect_arrow(fn(ch, name)), fn_1(one, name)
        assert len(got) > 1 and _by_place(got) == _by_place(want), fn.__name__
    snap = collect_arrow(snapshot(ch, name))
    assert sorted(snap.to_pylist(), key=lambda r: r["Id"]) == rows[("public", "cols")]
    assert history(ch, name).columns[-5:] == ["___OP", "__START_LSN", "__START_AT", "__END_LSN", "__END_AT"]
    assert net_changes(ch, name).columns[-6:] == ["__OP", "__UNCHANGED", "__UNCHANGED_FROM", "__COMMIT_LSN",
                                                  "__COMMIT_AT", "__RELATION_ID"]
    got, want = collect_arrow(table_changes(ch, name)), table_changes_1(one, name)
    keep = ["op", "commit_lsn", "before", "after", "unchanged"]
    assert _by_place(got.select(keep)) == _by_place(want.select(keep))
    assert spark.conf.get("spark.sql.caseSensitive") == "false"
