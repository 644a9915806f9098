"""Copied rows over a real server's bytes: ``capture --create-slot --snapshot`` copies a
table with rows from before the slot, then INSERT/UPDATE/DELETE run and are captured.
Every path that rebuilds the table (snapshot, history, net_changes, the mirror, in one
process and on Spark) gives the server's rows, with no warning; ``inspect`` says where
the table is whole; a table published later and never copied is warned about."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pgoutput_codec as pgc
from pgoutput_codec.archive import iter_archive, read_archive_parts
from pgoutput_codec.cli.inspect import inspect_archive
from pgoutput_codec.lake import mirror, table_path
from pgoutput_codec.pgoutput.messages import format_lsn
from pgoutput_codec.tables import IncompleteTableWarning, history, net_changes, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _capture(srv, db, out, *extra):
    dsn = " ".join(f"{k}={v}" for k, v in srv.conninfo(db).items())
    res = subprocess.run([sys.executable, "-m", "pgoutput_codec.cli", "capture", "--dsn", dsn, "--slot", db,
                          "--publication", "cp_pub", "--out", str(out), "--rows-per-file", "50",
                          "--poll-interval", "0.05", "--stop-after", "2", *extra],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture
def database(pg_server):
    db = "copied_rows"
    with pg_server.connect() as c:
        c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = %s", (db,))
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db}")
    yield db
    with pg_server.connect() as c:
        c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = %s", (db,))
        c.execute(f"DROP DATABASE IF EXISTS {db}")


def _server_rows(srv, db, table):
    with srv.connect(db) as c:
        return sorted((i, v, str(n)) for i, v, n in c.execute(f"SELECT id, v, n FROM {table}").fetchall())


def _rows(t: pa.Table):
    # (an unconstrained numeric is typed as text: its digits are kept as sent)
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), map(str, t.column("n").to_pylist()),
                      strict=True))


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_copied_table_rebuilds_to_the_servers_rows(pg_server, database, tmp_path, binary):
    srv, db = pg_server, database
    with srv.connect(db) as c:
        c.execute("CREATE TABLE t (id int PRIMARY KEY, v text, n numeric)")
        # a TOASTed value: an update that leaves it alone sends it as unchanged ('u')
        c.execute("INSERT INTO t SELECT g, CASE WHEN g = 7 THEN repeat(md5(g::text), 400) ELSE 'v' || g END, "
                  "g * 1.50 FROM generate_series(1, 120) g")
        c.execute("CREATE TABLE later (id int PRIMARY KEY, v text, n numeric)")
        c.execute("INSERT INTO later VALUES (1, 'before the slot', 1)")
        c.execute("CREATE PUBLICATION cp_pub FOR TABLE t")
    out = tmp_path / "arch"
    flags = ["--binary"] if binary else []
    _capture(srv, db, out, "--create-slot", "--snapshot", *flags)
    with srv.connect(db) as c:
        c.execute("UPDATE t SET n = n + 1 WHERE id IN (3, 7, 50)")      # 7: its TOASTed v unchanged
        c.execute("DELETE FROM t WHERE id IN (4, 60)")
        c.execute("INSERT INTO t VALUES (500, 'new', 5), (501, 'newer', 6)")
        c.execute("UPDATE t SET id = 1000 WHERE id = 10")
        c.execute("ALTER PUBLICATION cp_pub ADD TABLE later")
        c.execute("INSERT INTO later VALUES (2, 'after', 2)")
    _capture(srv, db, out, *flags)
    parts = read_archive_parts(str(out))
    arc = pa.concat_tables([t for _, t in iter_archive(parts)])
    changes = pgc.decode_changes(arc)
    copied = changes.filter(pc.equal(changes.column("op"), "R"))
    assert len(copied) == 120 and set(copied.column("xid").to_pylist()) == {0}
    want = _server_rows(srv, db, "t")
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteTableWarning)
        assert _rows(snapshot(changes, "public.t")) == want
        current = history(changes, "public.t")
        current = current.filter(pc.is_null(current.column("__END_LSN")))
        assert _rows(current) == want
        net = net_changes(changes, "public.t")
        # the copy opens with a Truncate of the table: it replaces what a target held
        assert set(net.column("__OP").to_pylist()) == {"truncate", "upsert", "delete"}
        assert _rows(net.filter(pc.equal(net.column("__OP"), "upsert"))) == want
        runs = mirror(str(out), tmp_path / "lake", tables="public.t")
    t_changes = changes.filter(pc.equal(changes.column("table"), "t"))
    assert runs[0].commit_lsn == max(t_changes.column("commit_lsn").to_pylist())
    from deltalake import DeltaTable
    assert _rows(DeltaTable(table_path(tmp_path / "lake", "public.t")).to_pyarrow_table()) == want
    with pytest.warns(IncompleteTableWarning, match=r"public\.later"):
        assert _rows(snapshot(changes, "public.later")) == [(2, "after", "2")]   # (1 is missing: not copied)
    # the one copy's commit LSN is below every commit the slot sent
    copy_lsn = min(copied.column("commit_lsn").to_pylist())
    assert copy_lsn < min(changes.filter(pc.not_equal(changes.column("xid"), 0)).column("commit_lsn").to_pylist())
    r = inspect_archive(str(out))
    assert r["by_table"]["public.t"]["R"] == 120 and r["complete_from"] == {
        "public.t": format_lsn(copy_lsn), "public.later": None}
    # a base stands for the copy: the snapshot at the copy, then the changes after it
    base = snapshot(changes, "public.t", as_of_lsn=copy_lsn)
    streamed = changes.filter(pc.not_equal(changes.column("op"), "R"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteTableWarning)
        assert _rows(snapshot(streamed, "public.t", base=base, base_lsn=copy_lsn)) == want
        assert _rows(history(streamed, "public.t", base={"public.t": base}, base_lsn=copy_lsn).filter(
            pc.is_null(pc.field("__END_LSN")))) == want
