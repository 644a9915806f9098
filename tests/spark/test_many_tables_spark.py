"""spark.mirror over many tables at once: every table's copy written by the executor holding
its rows, in a number of Spark jobs that does not grow with the number of tables; the
copies, runs and warnings are one process's, run after run, over tables inserted into,
updated (keys too), deleted from, truncated, dropped and created again, and renamed."""

from __future__ import annotations

import dataclasses
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

from change_cases import REL, enc, row, same_values  # noqa: E402
from conftest import CONNECT  # noqa: E402

from pgoutput_codec import Begin, Commit, Delete, Insert, Truncate, Update  # noqa: E402
from pgoutput_codec import mirror as mirror_1  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path  # noqa: E402
from pgoutput_codec.spark import decode_changes, mirror  # noqa: E402
from pgoutput_codec.tables import IncompleteTableWarning  # noqa: E402


def _archive(tables: int, *, seed_rows: int = 4) -> pa.Table:
    """``tables`` tables t000… (id int key, v text): inserts, updates (one moving its key),
    deletes; t001 truncated; t002 dropped and created again under its name; t003 renamed
    to t003_new. Each step its own transaction, spread so that tables interleave."""
    msgs, lsn = [], [100]

    def txn(*body):
        lsn[0] += 10
        msgs.extend([Begin(final_lsn=lsn[0], commit_ts=lsn[0], xid=lsn[0]), *body,
                     Commit(commit_lsn=lsn[0], end_lsn=lsn[0] + 1, commit_ts=lsn[0])])

    rels = {k: dataclasses.replace(REL, relation_id=20000 + k, relation_name=f"t{k:03d}") for k in range(tables)}
    for k, rel in rels.items():
        txn(rel, *[Insert(relation_id=rel.relation_id, new_tuple=row(i, f"v{k}.{i}")) for i in range(seed_rows)])
    for k, rel in rels.items():
        rid = rel.relation_id
        txn(Update(relation_id=rid, new_tuple=row(0, f"u{k}")),
            Update(relation_id=rid, old_kind="K", old_tuple=row(1, None), new_tuple=row(100 + k, f"moved{k}")),
            Delete(relation_id=rid, old_kind="K", old_tuple=row(2, None)))
    if tables > 3:
        txn(Truncate(relation_ids=(rels[1].relation_id,), options=0))
        txn(Insert(relation_id=rels[1].relation_id, new_tuple=row(7, "after truncate")))
        again = dataclasses.replace(rels[2], relation_id=29999)
        txn(again, Insert(relation_id=29999, new_tuple=row(1, "created again")))
        renamed = dataclasses.replace(rels[3], relation_name="t003_new")
        txn(renamed, Update(relation_id=rels[3].relation_id, new_tuple=row(3, "renamed")))
    payload = pa.array(enc(msgs), pa.binary())
    return pa.table({"seq": pa.array(range(len(payload)), pa.int64()), "data": payload})


def _same_copies(target_a, target_b, runs):
    for r in runs:
        if not os.path.isdir(table_path(target_b, r.table)):     # a name no relation bears: no copy
            assert not os.path.isdir(table_path(target_a, r.table)), r.table
            continue
        a, b = read_copy(table_path(target_a, r.table)), read_copy(table_path(target_b, r.table))
        assert a.schema.equals(b.schema), r.table
        a, b = (t.sort_by([(c, "ascending") for c in t.column_names]) for t in (a, b))
        assert all(same_values(a.column(j), b.column(j)) for j in range(a.num_columns)), r.table


def _spark_changes(spark, arc: pa.Table, where):
    path = str(where / f"{uuid.uuid4().hex}.parquet")
    pq.write_table(arc, path)
    return decode_changes(spark.read.parquet(path), order_by="seq")


def _jobs(spark, run):
    """(what ``run()`` gave, the Spark jobs it ran)."""
    sc = spark.sparkContext
    group = uuid.uuid4().hex
    sc.setJobGroup(group, "many tables")
    try:
        out = run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return out, len(sc.statusTracker().getJobIdsForGroup(group))


@pytest.mark.on_cluster
@pytest.mark.filterwarnings("ignore::pgoutput_codec.tables.IncompleteTableWarning")
def test_many_tables_are_one_process_s_copies_run_after_run(spark, tmp_path):
    arc = _archive(24)
    n = len(arc)
    for k, cut in enumerate((n // 2, n)):
        part = arc.slice(0, cut)
        got = mirror(_spark_changes(spark, part, tmp_path), tmp_path / "spark")
        want = mirror_1(part, tmp_path / "one")
        assert got == want, k
        _same_copies(tmp_path / "spark", tmp_path / "one", want)
    assert len(want) == 25 and {"public.t003_new", "public.t002"} <= {r.table for r in want}
    assert sum(r.upserts for r in want) > 24 and any(r.truncated for r in want)
    again = mirror(_spark_changes(spark, arc, tmp_path), tmp_path / "spark")
    assert [r.version for r in again] == [None] * len(want)
    assert [r.commit_lsn for r in again] == [r.commit_lsn for r in want]


@pytest.mark.skipif(CONNECT, reason="a Connect client sees no SparkContext to count jobs by")
@pytest.mark.filterwarnings("ignore::pgoutput_codec.tables.IncompleteTableWarning")
def test_the_number_of_jobs_does_not_grow_with_the_tables(spark, tmp_path):
    counts = {}
    for tables in (3, 12):
        changes = _spark_changes(spark, _archive(tables), tmp_path)
        runs, counts[tables] = _jobs(spark, lambda c=changes, t=tables: mirror(c, tmp_path / f"lake{t}"))
        assert len(runs) == tables + (tables > 3) and sum(r.version is not None for r in runs) >= tables
    # the decoding's own jobs, one listing the tables, one pass (its shuffle's stages)
    assert counts[3] == counts[12] <= 10, counts


def test_executors_warnings_and_errors_reach_the_driver(spark, tmp_path):
    """A copy made from changes with no copied row warns once per table, on the driver; a
    Delta table the mirror did not write, at one table's place, is named in the error
    raised after every other table's copy is current."""
    arc = _archive(5)
    target = tmp_path / "spark"
    os.makedirs(target)
    deltalake.write_deltalake(table_path(target, "public.t004"), pa.table({"x": [1]}))
    with pytest.warns(IncompleteTableWarning) as seen, \
            pytest.raises(ValueError, match=r"public\.t004: .* is a Delta table the mirror did not write"):
        mirror(_spark_changes(spark, arc, tmp_path), target)
    named = sorted(w.message.table for w in seen if isinstance(w.message, IncompleteTableWarning))
    with pytest.warns(IncompleteTableWarning) as one:
        want = mirror_1(arc, tmp_path / "one", tables="public.t00[0-3]*")
    assert [n for n in named if n != "public.t004"] == sorted(w.message.table for w in one)
    assert "public.t000" in named and "public.t001" not in named     # t001's truncate is its start
    _same_copies(target, tmp_path / "one", want)
    assert read_copy(table_path(target, "public.t004")).to_pylist() == [{"x": 1}]
