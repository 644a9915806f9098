"""mirror's checkpoint names its archive: one target fed from a new archive directory
(a new capture, its ``seq`` starting at 0 again), or from the same directory refilled
so, reads that archive from its start, and each copy's held commit LSN says what is
new. The archives are a real server's: its slot read (and consumed) a batch at a time,
each batch a new decoding session that sends its Relations again."""

from __future__ import annotations

import os

import checks
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")

from pgoutput_codec import mirror  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path  # noqa: E402

SLOT, PUB = "ma_slot", "ma_pub"


def _land(x, directory, name="part-0.parquet"):
    """The slot's changes since the last call, consumed, as one archive file (seq from 0)."""
    rows = x(f"SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('{SLOT}', NULL, NULL, "
             "'proto_version', '1', 'publication_names', %s)", (PUB,)).fetchall()
    os.makedirs(directory, exist_ok=True)
    pq.write_table(checks.archive_of(rows), os.path.join(directory, name))
    return len(rows)


def _server_rows(x, table):
    return sorted(x(f"SELECT id, v FROM {table}").fetchall())


def _copy_rows(target, table):
    return sorted((r["id"], r["v"]) for r in read_copy(table_path(target, f"public.{table}")).to_pylist())


def test_a_new_archive_into_the_same_target_is_read_from_its_start(pg_server, tmp_path):
    target = str(tmp_path / "lake")
    with pg_server.connect() as conn:
        x = conn.execute
        x("CREATE TABLE ma (id int PRIMARY KEY, v text)")
        x(f"CREATE PUBLICATION {PUB} FOR TABLE ma")
        x(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")
        try:
            for i in range(1, 41):              # one transaction each: the first archive is the longer
                x(f"INSERT INTO ma VALUES ({i}, 'a{i}')")
            first = _land(x, tmp_path / "archive-1")
            mirror(str(tmp_path / "archive-1"), target)
            assert _copy_rows(target, "ma") == _server_rows(x, "ma")
            for i in range(41, 60):
                x(f"INSERT INTO ma VALUES ({i}, 'b{i}')")
            x("UPDATE ma SET v = 'changed' WHERE id = 3")
            second = _land(x, tmp_path / "archive-2")
            assert second < first          # wholly before the first archive's checkpoint, by seq
            mirror(str(tmp_path / "archive-2"), target)
            assert len(_copy_rows(target, "ma")) == 59
            assert _copy_rows(target, "ma") == _server_rows(x, "ma")
            # the first directory refilled: its old file gone, a new capture from seq 0
            for i in range(60, 70):
                x(f"INSERT INTO ma VALUES ({i}, 'c{i}')")
            os.remove(tmp_path / "archive-1" / "part-0.parquet")
            _land(x, tmp_path / "archive-1", "part-1.parquet")
            mirror(str(tmp_path / "archive-1"), target)
            assert _copy_rows(target, "ma") == _server_rows(x, "ma")
            # and a run over it again: nothing new, no version written
            before = deltalake.DeltaTable(table_path(target, "public.ma")).version()
            assert all(r.version is None for r in mirror(str(tmp_path / "archive-1"), target))
            assert deltalake.DeltaTable(table_path(target, "public.ma")).version() == before
        finally:
            x(f"SELECT pg_drop_replication_slot('{SLOT}')")
            x(f"DROP PUBLICATION {PUB}")
            x("DROP TABLE ma")
