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
_spec = importlib.util.spec_from_file_location("_single_changes", TESTS / "test_changes.py")
TC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TC)
_spec = importlib.util.spec_from_file_location("_changes_spark", Path(__file__).parent / "test_changes_spark.py")
CS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(CS)


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
