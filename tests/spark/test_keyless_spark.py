"""Tables with no key as multisets on Spark (tests/keyless_rows.py: a real server's
workload): snapshot, history and net_changes hold as many rows alike as the server, as
the single-process functions do, and the mirror keeps the same copies."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark")

import keyless_rows as K  # noqa: E402  (tests/ is on sys.path: conftest)
import pyarrow.parquet as pq  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import decode_changes, history, net_changes, snapshot  # noqa: E402
from pgoutput_codec.tables import net_changes as net_changes_1  # noqa: E402


def _collect(df) -> list:
    return [r.asDict() for r in df.collect()]


def _rows(rows) -> list:
    return K.rows_of(rows)


@pytest.fixture(scope="module")
def steps(pg_server):
    with pg_server.connect() as conn:
        return K.run(conn)


def _frame(spark, archive, path):
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(archive, path / "part-0000.parquet", row_group_size=7)
    return decode_changes(spark.read.parquet(str(path)), order_by="seq", lsn=None)


def _cut(archive):
    return pc.max(decode_changes_1(archive).column("commit_lsn")).as_py()


def test_spark_tables_hold_as_many_alike_rows_as_the_server(spark, steps, tmp_path):
    final = steps[-1][1]
    ch = _frame(spark, final, tmp_path / "arc")
    single = decode_changes_1(final)
    hist = {t: _collect(history(ch, f"public.{t}")) for t in K.TABLES}
    for step, archive, server in steps:
        cut = _cut(archive)
        for t in K.TABLES:
            assert _rows(_collect(snapshot(ch, f"public.{t}", as_of_lsn=cut))) == server[t], (step, t)
            alive = [r for r in hist[t] if r["__START_LSN"] <= cut and (r["__END_LSN"] is None or r["__END_LSN"] > cut)]
            assert _rows(alive) == server[t], (step, t)
    for k in (3, 6, 9):    # net changes after a step, applied to the server's rows then
        cut = _cut(steps[k][1])
        later = ch.where(F.col("commit_lsn") > F.lit(cut))
        later_1 = single.filter(pc.greater(single.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
        for t in K.TABLES:
            net = _collect(net_changes(later, f"public.{t}"))
            assert K.applied(steps[k][2][t], net) == steps[-1][2][t], (k, t)
            one = net_changes_1(later_1, f"public.{t}").to_pylist()
            assert sorted((r["__OP"], r["k"], r["v"], int(r["__COMMIT_LSN"])) for r in net) == \
                sorted((r["__OP"], r["k"], r["v"], r["__COMMIT_LSN"]) for r in one), (k, t)


def test_spark_history_ends_the_oldest_of_rows_alike_as_one_process(spark, steps, tmp_path):
    from pgoutput_codec.tables import history as history_1
    final = steps[-1][1]
    ch = _frame(spark, final, tmp_path / "arc")
    single = decode_changes_1(final)
    for t in K.TABLES:
        got = _collect(history(ch, f"public.{t}"))
        want = history_1(single, f"public.{t}").to_pylist()

        def versions(rs):
            return sorted((r["k"], r["v"], r["__OP"], int(r["__START_LSN"]),
                           None if r["__END_LSN"] is None else int(r["__END_LSN"])) for r in rs)
        assert versions(got) == versions(want), t


def test_spark_mirror_keeps_rows_alike_as_one_process(spark, steps, tmp_path):
    pytest.importorskip("deltalake")
    from pgoutput_codec import mirror as mirror_1
    from pgoutput_codec.lake import read_copy, table_path
    from pgoutput_codec.spark import mirror
    for k in (3, 8, len(steps) - 1):
        step, archive, server = steps[k]
        ch = _frame(spark, archive, tmp_path / f"arc{k}")
        got = mirror(ch, tmp_path / "spark")
        want = mirror_1(archive, tmp_path / "one")
        assert got == want, k
        for t in K.TABLES:
            a = read_copy(table_path(tmp_path / "spark", f"public.{t}"))
            assert K.rows_of(a) == server[t] == K.rows_of(read_copy(table_path(tmp_path / "one", f"public.{t}"))), (k, t)


def test_spark_base_with_rows_alike_counts_them(spark, steps, tmp_path):
    """A base (the server's rows after a step, duplicates kept) with the changes after
    it: Spark's snapshot, net changes and history give the server's rows at the end."""
    from pyspark.sql import types as T
    k = 4
    ch = _frame(spark, steps[-1][1], tmp_path / "arc")
    lsn = _cut(steps[k][1])
    schema = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("v", T.StringType())])
    for t in K.TABLES:
        base = spark.createDataFrame([tuple(r) for r in steps[k][2][t]], schema)
        want = steps[-1][2][t]
        assert _rows(_collect(snapshot(ch, f"public.{t}", base=base, base_lsn=lsn))) == want, t
        assert K.applied([], _collect(net_changes(ch, f"public.{t}", base=base, base_lsn=lsn))) == want, t
        hist = _collect(history(ch, f"public.{t}", base=base, base_lsn=lsn))
        assert _rows(r for r in hist if r["__END_LSN"] is None) == want, t
