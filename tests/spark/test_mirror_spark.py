"""pgoutput_codec.spark.mirror: the cluster computes each table's net changes and the
driver writes them through the one writer of pgoutput_codec.mirror. Run after run over a
growing real-server archive, every copy it keeps equals the one the single process keeps
over the same archive: the same Delta schema, the same rows, the same runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

from pgoutput_codec import mirror as mirror_1  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path  # noqa: E402
from pgoutput_codec.spark import decode_changes  # noqa: E402
from pgoutput_codec.spark import mirror  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_single_changes", TESTS / "change_cases.py")
TC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TC)
import change_corpus as CS  # noqa: E402  (tests/spark is on sys.path: conftest)


def _copy(target, name) -> pa.Table:
    t = read_copy(table_path(target, name))
    orderable = [f.name for f in t.schema if not (pa.types.is_nested(f.type) or pa.types.is_dictionary(f.type))]
    return t.sort_by([(c, "ascending") for c in orderable])


#: every type, FULL identity, unchanged TOAST (CS.ALL_SOURCES), key changes, truncates
TABLES = "public.all_types,public.rid_full,public.toasty,public.rid_default,public.trunc_parent"


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
def test_spark_keeps_the_copies_one_process_keeps(spark, tmp_path):
    arc = TC.archive(CS.VERSION, "v3_2pc_binary_streaming")
    n = len(arc)
    checked = 0
    for k, cut in enumerate((n // 2, n)):
        part = arc.slice(0, cut)
        changes = decode_changes(spark.read.parquet(*CS.write_files(part, tmp_path / f"archive{k}", 3)), order_by="seq")
        got = mirror(changes, tmp_path / "spark", tables=TABLES)
        want = mirror_1(part, tmp_path / "one", tables=TABLES)
        assert got == want, k
        for r in want:
            a, b = _copy(tmp_path / "spark", r.table), _copy(tmp_path / "one", r.table)
            assert a.column_names == b.column_names, (k, r.table)
            for c in a.column_names:
                x, y = a.column(c), b.column(c)
                if x.type != y.type:    # a type of unknown OID in binary mode: its bytes as a string on Spark
                    assert (x.type, y.type) == (pa.string(), pa.binary()), (k, r.table, c)
                    y = y.cast(pa.string())
                assert TC.same_values(x, y), (k, r.table, c)
            checked += len(a)
    assert checked > 20 and {r.table for r in want} == set(TABLES.split(","))
    # the same changes again: nothing new, no version written
    assert all(r.version is None for r in mirror(changes, tmp_path / "spark", tables=TABLES))


def test_a_spark_run_waits_for_a_run_holding_the_target(spark, tmp_path):
    """While a one-process run holds the target's lock, a Spark run into it waits before
    it reads what the copies hold (its change rows not yet cached), then goes on from
    where the other left them: the copies are the ones one process keeps."""
    import os
    import subprocess
    import sys
    import threading
    import time

    import pyarrow.parquet as pq
    tables = "public.rid_default,public.toasty"
    arc = TC.archive(CS.VERSION, "v3_2pc_binary_streaming")
    n = len(arc)
    target = tmp_path / "spark"
    mirror_1(arc.slice(0, n // 3), target, tables=tables)
    pq.write_table(arc.slice(0, 2 * n // 3), tmp_path / "two_thirds.parquet")
    code = ("import sys, pyarrow.parquet as pq\nfrom pgoutput_codec import mirror\n"
            "from pgoutput_codec.lake import target_locked\nwith target_locked(sys.argv[1]):\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n"
            "    mirror(pq.read_table(sys.argv[2]), sys.argv[1], tables=sys.argv[3])\n")
    env = dict(os.environ, PYTHONPATH=str(TESTS.parent))
    holder = subprocess.Popen([sys.executable, "-c", code, str(target), str(tmp_path / "two_thirds.parquet"), tables],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert holder.stdout.readline().strip() == "held"
    changes = decode_changes(spark.read.parquet(*CS.write_files(arc, tmp_path / "archive", 3)), order_by="seq")
    got = []
    th = threading.Thread(target=lambda: got.append(mirror(changes, target, tables=tables)), daemon=True)
    try:
        th.start()
        time.sleep(3)
        assert th.is_alive() and not changes.is_cached, "the Spark run did not wait for the target's lock"
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=300) == 0
    th.join(600)
    assert got, "the Spark run did not end"
    want = mirror_1(arc, tmp_path / "one", tables=tables)
    assert [r.commit_lsn for r in got[0]] == [r.commit_lsn for r in want]
    for r in want:
        a, b = _copy(target, r.table), _copy(tmp_path / "one", r.table)
        assert a.column_names == b.column_names and a.to_pylist() == b.to_pylist(), r.table
