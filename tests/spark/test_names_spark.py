"""Table names as PostgreSQL allows them on Spark: a dotted schema named quoted, as a pair,
or (when it names one table) unquoted; odd names mirrored from Spark to the same copies
the single process writes — over an archive captured from a real server."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")
pytest.importorskip("psycopg")

from pgoutput_codec import mirror as mirror_1  # noqa: E402
from pgoutput_codec.idents import qualified_name  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path  # noqa: E402
from pgoutput_codec.spark import decode_changes, history, mirror, net_changes, snapshot, table_changes  # noqa: E402
from pgoutput_codec.spark.shipping import collect_arrow  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_names", TESTS / "lake" / "test_names.py")
TN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TN)

@pytest.fixture(scope="module")
def captured(tmp_path_factory, pg_server):
    with pg_server.connect() as c:
        TN._phase1(c)
        TN._phase2(c)
        msgs = TN._take(c)
        rows = {k: TN._server_rows(c, *k) for k in TN.TABLES}
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
        copies = [read_copy(table_path(tmp_path / w, qualified_name(s, t))) for w in ("spark", "one")]
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


def _case_archive(path) -> None:
    """public.w (key Id, ID, back`tick, __OP): two rows inserted; ID sent unchanged
    (TOAST, 'u') by an Update; then the row's key changed 1 -> 3, ID unchanged again, and
    row 2 deleted. Written to ``path``."""
    from pgoutput_codec import (Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn, Update,
                                encode_message)
    rel = Relation(relation_id=16800, namespace="public", relation_name="w", replica_identity="d",
                   columns=(RelationColumn(1, "Id", 23, -1), RelationColumn(0, "ID", 25, -1),
                            RelationColumn(0, "back`tick", 25, -1), RelationColumn(0, "__OP", 25, -1)))

    def row(*v):
        return tuple(TupleColumn("u", None) if x is ... else TupleColumn("n", None) if x is None
                     else TupleColumn("t", str(x).encode()) for x in v)

    def txn(lsn, *changes):
        return [Begin(final_lsn=lsn, commit_ts=lsn, xid=lsn), *changes,
                Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=lsn)]
    r = 16800
    msgs = (txn(10, rel, Insert(relation_id=r, new_tuple=row(1, "x", "y", "a")),
                Insert(relation_id=r, new_tuple=row(2, "p", "q", "b")))
            + txn(20, Update(relation_id=r, new_tuple=row(1, ..., "y2", "c")))
            + txn(30, Update(relation_id=r, old_kind="K", old_tuple=row(1, None, None, None),
                             new_tuple=row(3, ..., "y3", "d")),
                  Delete(relation_id=r, old_kind="K", old_tuple=row(2, None, None, None))))
    pq.write_table(pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                             "data": pa.array([encode_message(m) for m in msgs], pa.binary())}), path)


def test_spark_carries_an_unchanged_value_of_a_column_named_as_another_but_for_case(spark, tmp_path):
    """ID (beside the key Id) sent as unchanged TOAST, before and across a key change:
    Spark's snapshot, history, net_changes (of every change, and after the first commit:
    __UNCHANGED names ID, __UNCHANGED_FROM is {Id: 1}) and table_changes equal one
    process's; the Spark mirror, run twice, writes the copy one process writes."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    from pgoutput_codec import decode_changes as decode_1
    from pgoutput_codec import history as history_1
    from pgoutput_codec import net_changes as net_1
    from pgoutput_codec import snapshot as snapshot_1
    from pgoutput_codec import table_changes as table_changes_1
    path = tmp_path / "w.parquet"
    _case_archive(path)
    ch = decode_changes(spark.read.parquet(str(path)), order_by="seq", lsn=None)
    one = decode_1(pq.read_table(path))
    name = "public.w"
    for fn, fn_1 in ((snapshot, snapshot_1), (history, history_1), (net_changes, net_1)):
        got, want = collect_arrow(fn(ch, name)), fn_1(one, name)
        assert len(got) and _by_place(got) == _by_place(want), fn.__name__
    assert collect_arrow(snapshot(ch, name)).to_pylist() == [{"Id": 3, "ID": "x", "back`tick": "y3", "__OP": "d"}]
    later = collect_arrow(net_changes(ch.where(F.col("commit_lsn") > 10), name))
    later_1 = net_1(one.filter(pc.greater(one.column("commit_lsn"), 10)), name)
    assert _by_place(later) == _by_place(later_1)
    at = later.column(0).to_pylist().index(3)     # the table's columns, then __OP, __UNCHANGED …
    assert [later.column(j)[at].as_py() for j in (3, 4, 5, 6)] == ["d", "upsert", ["ID"], {"Id": 1}]
    keep = ["op", "commit_lsn", "before", "after", "unchanged"]
    assert _by_place(collect_arrow(table_changes(ch, name)).select(keep)) == \
        _by_place(table_changes_1(one, name).select(keep))
    first = ch.where(F.col("commit_lsn") <= 10)
    for target, run in ((tmp_path / "spark", lambda d: mirror(d, tmp_path / "spark")),
                        (tmp_path / "one", lambda d: mirror_1(d, tmp_path / "one"))):
        run(first if target.name == "spark" else one.filter(pc.less_equal(one.column("commit_lsn"), 10)))
        run(ch if target.name == "spark" else one)
    copies = [read_copy(table_path(tmp_path / w, name)) for w in ("spark", "one")]
    assert copies[0].column_names == copies[1].column_names
    assert _by_place(copies[0]) == _by_place(copies[1])
    assert [{TN.RENAMED.get(k, k): v for k, v in r.items()} for r in copies[0].to_pylist()] == \
        [{"Id": 3, "ID": "x", "back`tick": "y3", "__OP": "d"}]


def test_spark_fills_an_added_column_named_as_another_but_for_case(spark, tmp_path):
    """Column ID added (with a DEFAULT, given as ``missing=``) beside the key Id, then
    back`tick dropped: Spark's snapshot (as of each commit), history and net_changes equal
    one process's."""
    from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, Update, encode_message
    from pgoutput_codec import decode_changes as decode_1
    from pgoutput_codec import history as history_1
    from pgoutput_codec import net_changes as net_1
    from pgoutput_codec import snapshot as snapshot_1

    def rel(*names):
        return Relation(relation_id=16900, namespace="public", relation_name="w", replica_identity="d",
                        columns=tuple(RelationColumn(1 if n == "Id" else 0, n, 23 if n == "Id" else 25, -1)
                                      for n in names))

    def row(*v):
        return tuple(TupleColumn("t", str(x).encode()) for x in v)

    def txn(lsn, *changes):
        return [Begin(final_lsn=lsn, commit_ts=lsn, xid=lsn), *changes,
                Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=lsn)]
    msgs = (txn(10, rel("Id", "back`tick"), Insert(relation_id=16900, new_tuple=row(1, "a")),
                Insert(relation_id=16900, new_tuple=row(2, "b")))
            + txn(20, rel("Id", "back`tick", "ID"), Insert(relation_id=16900, new_tuple=row(3, "c", "C")))
            + txn(30, rel("Id", "ID"), Update(relation_id=16900, new_tuple=row(2, "B"))))
    path = tmp_path / "w.parquet"
    pq.write_table(pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                             "data": pa.array([encode_message(m) for m in msgs], pa.binary())}), path)
    ch = decode_changes(spark.read.parquet(str(path)), order_by="seq", lsn=None)
    one = decode_1(pq.read_table(path))
    fill = {"ID": "z"}
    for cut in (10, 20, None):
        got, want = collect_arrow(snapshot(ch, "public.w", cut, missing=fill)), \
            snapshot_1(one, "public.w", cut, missing=fill)
        assert _by_place(got) == _by_place(want), cut
    assert sorted(map(repr, collect_arrow(snapshot(ch, "public.w", missing=fill)).to_pylist())) == \
        sorted(map(repr, [{"Id": 1, "ID": "z"}, {"Id": 2, "ID": "B"}, {"Id": 3, "ID": "C"}]))
    assert _by_place(collect_arrow(history(ch, "public.w"))) == _by_place(history_1(one, "public.w"))
    assert _by_place(collect_arrow(net_changes(ch, "public.w", missing=fill))) == \
        _by_place(net_1(one, "public.w", missing=fill))
