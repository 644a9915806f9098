"""The synthetic many-table archives of pgoutput_codec.testing.archives: wire bytes as the
encoder writes them, decoded to the change rows and the final rows the generator planned."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import decode_changes, decode_message, encode_message
from pgoutput_codec.archive import ArchiveError, ArchivePart, archive_catalog, last_seq, read_archive_parts, seq_stats
from pgoutput_codec.tables import snapshot
from pgoutput_codec.testing.archives import SCHEMA, big_table_archive, many_tables, write_archive


def _per_table(changes: pa.Table) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in changes.group_by(["schema", "table", "op"]).aggregate([("op", "count")]).to_pylist():
        out.setdefault(f"{r['schema']}.{r['table']}", {})[r["op"]] = r["op_count"]
    return out


def test_every_payload_is_what_the_encoder_writes():
    plan = many_tables(4, 60, per_txn=9, seed=3)
    data = plan.archive.column("data").to_pylist()
    assert [encode_message(decode_message(b, in_stream=False)) for b in data] == data
    tags = [b[:1] for b in data]
    assert tags.count(b"R") == 4 and tags.count(b"B") == tags.count(b"C") == -(-(60 + 6 + 3) // 9)
    assert plan.archive.column("seq").to_pylist() == list(range(len(data)))


@pytest.mark.parametrize("one_table", [False, True])
def test_small_archive_decodes_to_the_planned_tables(one_table):
    rows, tables = 700, 10
    plan = many_tables(tables, rows, per_txn=37, seed=5, one_table=one_table)
    changes = decode_changes(plan.archive)
    counts = _per_table(changes)
    names = ["public.t0000"] if one_table else [f"public.t{k:04d}" for k in range(tables)]
    assert plan.names == sorted(counts) == names
    assert {n: sum(c.values()) for n, c in counts.items()} == plan.change_rows
    assert sum(plan.change_rows.values()) == rows + 70 + 35 == len(changes)
    assert sum(c.get("I", 0) for c in counts.values()) == rows
    assert sum(c.get("U", 0) for c in counts.values()) == 70
    assert sum(c.get("D", 0) for c in counts.values()) == 35
    committed = plan.committed()
    assert sum(len(t) for t in committed.values()) == rows - 35
    for name in names:
        got = snapshot(changes, name).sort_by("id")
        assert got.schema == SCHEMA
        assert got.equals(committed[name]), name


def test_one_table_holds_the_same_rows_as_many():
    many = many_tables(7, 300, seed=2)
    one = many_tables(7, 300, seed=2, one_table=True)
    rows = pa.concat_tables(many.committed().values()).sort_by("id")
    assert rows.equals(one.committed()["public.t0000"])
    assert sum(many.change_rows.values()) == one.change_rows["public.t0000"]
    # the same changes in the same order, only the relation differs
    assert len(many.archive) == len(one.archive) + 6


def test_some_values_are_null_and_updates_change_every_column():
    plan = many_tables(1, 40, updated=0.5, deleted=0.0, seed=1)
    rows = plan.committed()["public.t0000"]
    assert rows.column("n").null_count == len([i for i in range(40) if i % 13 == 5])
    updated = pc.is_in(rows.column("id"), pa.array(plan.updated_ids)).to_numpy(zero_copy_only=False)
    assert updated.sum() == 20
    texts = rows.column("s").to_pylist()
    assert all(t.endswith(" gen 1") == u for t, u in zip(texts, updated, strict=True))


def test_written_archive_reads_back(tmp_path):
    plan = many_tables(3, 500, seed=4)
    path = write_archive(plan.archive, tmp_path / "arc", files=3)
    parts = read_archive_parts(path)
    assert len(parts) == 3
    back = pa.concat_tables(p.read() for p in parts)
    assert back.equals(plan.archive)
    changes = decode_changes(back)
    assert len(changes) == sum(plan.change_rows.values())
    for name, rows in plan.committed().items():
        assert snapshot(changes, name).sort_by("id").equals(rows)


def test_listed_files_carry_their_footer_facts(tmp_path):
    """A listed archive file holds what its footer says, read once: its rows, its seq
    statistics (as seq_stats and last_seq read them from the file) and the data column's
    bytes, for files with rows and without; a part made by hand reads them when asked."""
    import os

    plan = many_tables(3, 500, seed=4)
    path = write_archive(plan.archive, tmp_path / "arc", files=3)
    pq.write_table(plan.archive.slice(0, 0), os.path.join(path, "zz-empty.parquet"))
    parts = read_archive_parts(path)
    assert len(parts) == 4
    for p in parts:
        rows = pq.ParquetFile(p.path).metadata.num_rows
        assert p.num_rows == rows and p.data_bytes is not None and (rows == 0 or p.data_bytes > 0)
        assert p.seq_stats() == seq_stats(p.path) and last_seq(p) == last_seq(p.path)
        bare = ArchivePart(p.path, "parquet")
        assert bare.seq_stats() == seq_stats(p.path) and last_seq(bare) == last_seq(p.path)
        assert archive_catalog([bare]) == archive_catalog([p])          # its catalog read on asking
    ends = [last_seq(p) for p in parts if p.num_rows]        # listed in seq order
    assert len(ends) == 3 and ends == sorted(ends)


def test_a_nested_data_column_is_refused_as_an_archive_error(tmp_path):
    """A file whose 'data' column is not a leaf (a struct of that name) is listed with its
    size unknown, and reading it says which column is wrong: no bare lookup error."""
    pq.write_table(pa.table({"data": pa.array([{"x": b"a"}]), "seq": pa.array([1], pa.int64())}),
                   tmp_path / "a.parquet")
    parts = read_archive_parts(str(tmp_path))
    assert [p.data_bytes for p in parts] == [None]
    with pytest.raises(ArchiveError, match="payload column 'data' is struct"):
        parts[0].read()


def test_big_table_archive():
    n = 120_000
    arc = big_table_archive(n, per_txn=25_000)
    changes = decode_changes(arc)
    assert len(changes) == n and pc.all(pc.equal(changes.column("op"), "I")).as_py()
    assert len(arc) == n + 1 + 2 * 5
    last = snapshot(changes, "public.t0000").sort_by("id").slice(n - 1)
    assert last.to_pylist() == many_tables(1, n, updated=0, deleted=0).committed()["public.t0000"].slice(n - 1) \
        .to_pylist()
