"""``pgoutput-codec capture`` against a real server: a crash between writing a file and
advancing the slot, kill -9 and a full disk, bounded memory, a private locked archive, and
databases in other encodings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from clirun import ROOT, SAMPLE, assert_clean_failure, run_cli

import pgoutput_codec as pc
from pgoutput_codec import cli
from pgoutput_codec.archive import META_KEY, capture_meta, iter_archive, parquet_part
from pgoutput_codec.cli.capture import CRASH_ENV, STAGING_NAME
from pgoutput_codec.testing import pgserver


# ------------------------------------------------------------------------------ capture
def test_a_server_copy_is_run_only_from_a_directory_of_our_own(tmp_path):
    """The test servers' copy lives at a shared /tmp name: a directory there that another
    user owns, that others may write to, or a link, is never trusted."""
    own = tmp_path / "own"
    own.mkdir(mode=0o755)
    assert pgserver.trusted_dir(str(own))
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    assert not pgserver.trusted_dir(str(open_dir))
    (tmp_path / "link").symlink_to(own)
    assert not pgserver.trusted_dir(str(tmp_path / "link"))
    assert not pgserver.trusted_dir(str(tmp_path / "missing"))
    if os.getuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, 65534, 65534)
        assert not pgserver.trusted_dir(str(theirs))


@pytest.fixture(scope="module")
def server(pg_server):
    return pg_server


def _dsn(srv):
    return " ".join(f"{k}={v}" for k, v in srv.conninfo().items())


def _published(srv, table, publication, *slots):
    """A table (id int key, v text), a publication of it, and logical slots made now."""
    with srv.connect() as c:
        c.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        c.execute(f"CREATE PUBLICATION {publication} FOR TABLE {table}")
        for slot in slots:
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def _capture_args(srv, slot, out, *extra):
    return ["capture", "--dsn", _dsn(srv), "--slot", slot, "--publication", "cap_pub", "--out", str(out),
            "--proto", "2", "--streaming", "--messages", "--poll-interval", "0.1", "--stop-after", "2",
            "--rows-per-file", "300", *extra]


def _workload(srv, base):
    with srv.connect() as c:
        for k in range(base, base + 30):
            c.execute("INSERT INTO cap_t VALUES (%s, %s)", (k, f"row {k}"))
        c.execute("UPDATE cap_t SET v = v || '!' WHERE id %% 3 = 0 AND id >= %s", (base,))
        c.execute("DELETE FROM cap_t WHERE id %% 7 = 0 AND id >= %s", (base,))
        c.execute("SELECT pg_logical_emit_message(false, 'cap', 'standalone')")
    with srv.connect(autocommit=False) as c:   # a streamed transaction (> 64kB work mem)
        c.execute("INSERT INTO cap_t SELECT g, repeat('y', 200) FROM generate_series(%s::int, %s::int) g",
                  (base + 1000, base + 1600))
        c.commit()


def _messages(out):
    parts = cli.read_archive_parts(str(out))
    return pa.concat_tables([t for _, t in iter_archive(parts)]), parts


def _assert_archive_is_the_slots(srv, got, ref_slot, publication, table):
    """The archive's messages ``got`` are what slot ``ref_slot`` (made at the capture's
    start) holds — nothing lost, nothing twice — streamed for real, and they decode to
    the server's ``table`` (id, v)."""
    with srv.connect() as c:
        ref = c.execute("SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
                        "'proto_version', '2', 'publication_names', %s, 'streaming', 'true', "
                        "'messages', 'true')", (ref_slot, publication)).fetchall()
        server_rows = c.execute(f"SELECT id, v FROM {table} ORDER BY id").fetchall()
    # Relation messages are re-sent once per decoding session (each poll is one): compare the rest
    mine = [(lsn, d) for lsn, d in zip(got.column("lsn").to_pylist(), got.column("data").to_pylist(), strict=True)
            if d[:1] != b"R"]
    theirs = [(lsn, bytes(d)) for lsn, d in ref if bytes(d)[:1] != b"R"]
    assert mine == theirs
    assert {bytes(d)[:1] for _, d in ref} >= {b"S", b"E", b"c", b"M", b"B", b"C"}   # streamed for real
    snap = pc.snapshot(pc.decode_changes(got), f"public.{table}")
    assert sorted(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist(), strict=True)) == \
        [tuple(r) for r in server_rows]


def test_capture_with_crash_and_resume(server, tmp_path):
    """Crash (hook: os._exit) right after writing a file, before advancing the slot; the
    rerun completes the advance, continues seq, and the archive equals what a second slot
    created at the same point holds: nothing lost, nothing twice."""
    _published(server, "cap_t", "cap_pub", "cap_ref")
    out = tmp_path / "arch"
    res = run_cli(*_capture_args(server, "cap_s", out, "--create-slot"))
    assert res.returncode == 0, res.stderr
    _workload(server, 0)
    res = run_cli(*_capture_args(server, "cap_s", out), env={CRASH_ENV: "1"})
    assert res.returncode == 75, (res.stdout, res.stderr)
    files = sorted(f for f in os.listdir(out) if not f.startswith("."))
    assert files == ["part-000000.parquet", "part-000001.parquet"], files
    meta1 = parquet_part(str(out / files[1])).meta
    with server.connect() as c:
        confirmed = c.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                              "WHERE slot_name = 'cap_s'").fetchone()[0]
    assert pc.parse_lsn(confirmed) < pc.parse_lsn(meta1["end_lsn"])   # the advance did not happen
    _workload(server, 5000)
    res = run_cli(*_capture_args(server, "cap_s", out))
    assert res.returncode == 0, res.stderr
    assert "completed the slot advance" in res.stdout and f"continuing at seq {meta1['seq_end'] + 1}" in res.stdout
    got, parts = _messages(out)
    assert got.column("seq").to_pylist() == list(range(len(got)))
    assert len(parts) >= 4
    for a, b in zip(parts, parts[1:], strict=False):   # files chain: each starts where the last ended
        assert b.meta["start_lsn"] == a.meta["end_lsn"]
    _assert_archive_is_the_slots(server, got, "cap_ref", "cap_pub", "cap_t")
    # a rerun with nothing new writes nothing
    res = run_cli(*_capture_args(server, "cap_s", out))
    assert res.returncode == 0 and "captured 0 messages" in res.stdout
    # mixing another slot into the archive is refused
    res = run_cli(*_capture_args(server, "cap_ref", out))
    assert_clean_failure(res, "resume it with the same --slot")
    res = run_cli(*_capture_args(server, "no_such_slot", tmp_path / "other"))
    assert_clean_failure(res, "does not exist")


def _chaos_workload(srv, stop, done):
    """Transactions until ``stop``: inserts, updates, deletes, a message, and every 25th
    a transaction big enough to be streamed; ``done`` counts the commits."""
    import random
    rnd = random.Random(11)
    with srv.connect(autocommit=False) as c:
        k = 0
        while not stop.is_set():
            k += 1
            if k % 25 == 0:   # over 64 kB: streamed
                c.execute("INSERT INTO chaos_t SELECT g, repeat('z', 200) FROM generate_series(%s::int, %s::int) g "
                          "ON CONFLICT (id) DO UPDATE SET v = excluded.v", (100_000 + k * 1000, 100_000 + k * 1000 + 400))
            else:
                for _ in range(rnd.randint(1, 6)):
                    i = rnd.randint(0, 400)
                    op = rnd.random()
                    if op < 0.6:
                        c.execute("INSERT INTO chaos_t VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET v = excluded.v",
                                  (i, f"v{k}"))
                    elif op < 0.8:
                        c.execute("DELETE FROM chaos_t WHERE id = %s", (i,))
                    else:
                        c.execute("SELECT pg_logical_emit_message(true, 'chaos', %s)", (str(k),))
            c.commit()
            done.append(k)
            time.sleep(0.03)


#: SIGKILLs of capture in the chaos test
KILLS = 21


def test_capture_survives_kill_9_and_a_full_disk(server, tmp_path):
    """A running workload (plain, streamed and message-carrying transactions); capture
    killed with SIGKILL at 21 random moments and restarted each time, and once run with
    its writes failing (RLIMIT_FSIZE: EFBIG, as a full disk fails them with ENOSPC),
    which must stop it with one line and leave the archive as it was. Drained at the end,
    the archive holds exactly what a second slot created at the same point holds —
    nothing lost, nothing twice — and decodes to the server's table."""
    import random
    import resource
    import signal
    import threading

    _published(server, "chaos_t", "chaos_pub", "chaos_ref", "chaos_s")
    out = tmp_path / "arch"
    args = ["capture", "--dsn", _dsn(server), "--slot", "chaos_s", "--publication", "chaos_pub", "--out", str(out),
            "--proto", "2", "--streaming", "--messages", "--rows-per-file", "500"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    stop, done = threading.Event(), []
    work = threading.Thread(target=_chaos_workload, args=(server, stop, done), daemon=True)
    work.start()
    rnd = random.Random(5)
    try:
        for _ in range(KILLS):
            p = subprocess.Popen([sys.executable, "-m", "pgoutput_codec.cli", *args, "--poll-interval", "0.02"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
            # the archive exists before the first kill, however slowly a loaded machine
            # starts the command: the full-disk run below must find one to leave as it was
            deadline = time.monotonic() + 120
            while not out.exists() and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rnd.uniform(0.3, 2.0))
            p.send_signal(signal.SIGKILL)
            _, err = p.communicate()
            assert p.returncode == -signal.SIGKILL, err   # it was running, not failing
        files_before = sorted(os.listdir(out))

        def small_files():
            resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
        full = subprocess.run([sys.executable, "-m", "pgoutput_codec.cli", *args, "--poll-interval", "0.02",
                               "--stop-after", "50"], capture_output=True, text=True, env=env, cwd=ROOT,
                              preexec_fn=small_files, timeout=120)
        assert_clean_failure(full, "File too large")
        assert sorted(f for f in os.listdir(out) if not f.endswith(".tmp")) == \
            [f for f in files_before if not f.endswith(".tmp")]
    finally:
        stop.set()
        work.join()
    res = run_cli(*args, "--poll-interval", "0.05", "--stop-after", "3")
    assert res.returncode == 0, res.stderr
    assert len(done) > 50
    got, parts = _messages(out)
    assert len(parts) > KILLS // 2
    assert got.column("seq").to_pylist() == list(range(len(got)))
    _assert_archive_is_the_slots(server, got, "chaos_ref", "chaos_pub", "chaos_t")


#: runs its arguments as a command and prints the command's peak RSS (kB) last: a
#: process's peak counts the memory of the process it was started from (until its exec),
#: so the command is the child of this small one rather than of the test's
_MEASURE = ("import os, subprocess, sys\n"
            "p = subprocess.Popen(sys.argv[1:])\n"
            "_, status, usage = os.wait4(p.pid, 0)\n"
            "print(usage.ru_maxrss, flush=True)\n"
            "sys.exit(os.waitstatus_to_exitcode(status))\n")


def _run_measured(*args):
    """Run the command line ``args``: (its result, its peak RSS in MB)."""
    res = run_cli(*args, prefix=["-c", _MEASURE, sys.executable])
    out, _, peak = res.stdout.rstrip("\n").rpartition("\n")
    res.stdout = out
    return res, int(peak) / 1024


#: row data of the big transaction of the bounded-memory test, in MB
BIG_TX_MB = 120


def test_capture_reads_a_big_open_transaction_in_bounded_memory(server, tmp_path):
    """One streamed transaction of 120 MB of row data, open while capture polls and then
    committed: capture's peak memory stays within two thirds of that above a run that
    wrote a small file, both while it peeks the open transaction (no boundary: nothing
    is written) and while it writes the whole transaction to one file; the archive is
    what the slot holds, and a staging file left by a crash is removed."""
    _published(server, "big_t", "big_pub", "big_ref", "big_s")
    with server.connect() as c:
        c.execute("INSERT INTO big_t VALUES (0, 'small')")
        c.execute("SELECT pg_logical_emit_message(false, 'big', 'standalone')")
    out = tmp_path / "arch"
    args = ["capture", "--dsn", _dsn(server), "--slot", "big_s", "--publication", "big_pub", "--out", str(out),
            "--proto", "2", "--streaming", "--messages", "--poll-interval", "0.1", "--stop-after", "1",
            "--rows-per-file", "1000"]
    res, small_mb = _run_measured(*args)
    assert res.returncode == 0, res.stderr
    rows = BIG_TX_MB * 1000
    with server.connect(autocommit=False) as c:
        c.execute("INSERT INTO big_t SELECT g, repeat(md5(g::text), 31) FROM generate_series(1, %s) g", (rows,))
        with server.connect() as c2:
            # a peek reads only flushed WAL, and waits for a record that ends past it: a WAL
            # switch flushes the open transaction's last record
            c2.execute("SELECT pg_switch_wal()")
        res, open_mb = _run_measured(*args)
        assert res.returncode == 0 and "captured 0 messages" in res.stdout, res
        c.commit()
    assert sorted(f for f in os.listdir(out) if f.endswith(".parquet")) == ["part-000000.parquet"]
    (out / STAGING_NAME).write_bytes(b"left by a crash")
    res, commit_mb = _run_measured(*args)
    assert res.returncode == 0, res.stderr
    assert max(open_mb, commit_mb) - small_mb < BIG_TX_MB * 2 / 3, (small_mb, open_mb, commit_mb)
    assert sorted(f for f in os.listdir(out) if f.startswith(".")) == [".capture.lock"]
    got, parts = _messages(out)
    assert [p.meta["rows"] for p in parts[1:]] == [len(got) - parts[0].meta["rows"]] and len(got) > rows
    assert got.column("seq").to_pylist() == list(range(len(got)))
    _assert_archive_is_the_slots(server, got, "big_ref", "big_pub", "big_t")


def test_capture_keeps_its_archive_private_locked_and_takes_libpq_environment(server, tmp_path):
    """The archive is 0700 with 0600 files; a second capture into it while one runs is
    refused (the lock goes with the process); with no --dsn the connection comes from
    libpq's environment, so no password need be on the command line."""
    import fcntl
    import stat

    with server.connect() as c:
        c.execute("CREATE TABLE cap_env (id int PRIMARY KEY)")
        c.execute("CREATE PUBLICATION cap_env_pub FOR TABLE cap_env")
        c.execute("SELECT pg_create_logical_replication_slot('cap_env_s', 'pgoutput')")
        c.execute("INSERT INTO cap_env SELECT generate_series(1, 20)")
    out = tmp_path / "arch"
    info = server.conninfo()
    env = {"PGHOST": str(info["host"]), "PGPORT": str(info["port"]), "PGUSER": info["user"],
           "PGDATABASE": info["dbname"]}
    args = ["capture", "--slot", "cap_env_s", "--publication", "cap_env_pub", "--out", str(out),
            "--poll-interval", "0.1", "--stop-after", "1"]
    res = run_cli(*args, env=env)
    assert res.returncode == 0, res.stderr
    files = [f for f in os.listdir(out) if f.endswith(".parquet")]
    assert files and stat.S_IMODE(os.stat(out).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(out / f).st_mode) == 0o600 for f in files)
    fd = os.open(out / ".capture.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)      # as a running capture holds it
        assert_clean_failure(run_cli(*args, env=env), "another capture is writing to this archive")
    finally:
        os.close(fd)
    assert run_cli(*args, env=env).returncode == 0


def test_capture_orders_files_as_numbers_and_never_overwrites_one(tmp_path):
    """Past part-999999 the names grow a digit: the next index is read from the last file
    by number, not by text; and a file is put in place by a link that fails when the
    name is taken, so a wrong index can never replace archived rows."""
    from pgoutput_codec.cli.capture import _existing_files, _write_new
    from pgoutput_codec.cli.console import CliError

    for name in ("part-1000000.parquet", "part-999999.parquet", "part-000002.parquet", ".part-7.parquet.tmp"):
        (tmp_path / name).write_bytes(b"x")
    assert [os.path.basename(f) for f in _existing_files(str(tmp_path))] == \
        ["part-000002.parquet", "part-999999.parquet", "part-1000000.parquet"]
    table = pa.table({"a": [1]})
    with pytest.raises(CliError, match="nothing was overwritten"):
        _write_new(str(tmp_path / "part-999999.parquet"), table.schema, [table])
    assert (tmp_path / "part-999999.parquet").read_bytes() == b"x"
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp") and "999999" in f]
    _write_new(str(tmp_path / "part-1000001.parquet"), table.schema, [table])
    assert pq.read_table(tmp_path / "part-1000001.parquet").equals(table)


def test_readers_drop_recaptured_rows(tmp_path):
    """Should an archive hold rows captured twice (a file written again from the same slot
    position), decode/inspect skip the re-captured prefix using the files' start/end LSNs."""
    src = pq.read_table(SAMPLE)
    meta = capture_meta(src.schema)
    lsns = src.column("lsn").to_pylist()
    data = src.column("data").to_pylist()
    cut = max(i for i in range(1200) if data[i][:1] == b"C")
    d = tmp_path / "arch"
    d.mkdir()

    def write(name, t, **m):
        md = dict(meta, **m)
        pq.write_table(t.replace_schema_metadata({META_KEY: json.dumps(md).encode()}), d / name)

    a = src.slice(0, cut + 1)
    write("part-000000.parquet", a, seq_start=0, seq_end=cut, start_lsn=lsns[0], end_lsn=lsns[cut])
    # the second file was peeked from the same start again: it repeats file 0, then goes on
    b = src.slice(0)
    b = b.set_column(0, "seq", pa.array(range(cut + 1, cut + 1 + len(b)), pa.int64()))
    write("part-000001.parquet", b, seq_start=cut + 1, seq_end=cut + len(b), start_lsn=lsns[0],
          end_lsn=lsns[-1])
    out = tmp_path / "c.parquet"
    res = run_cli("decode", str(d), str(out), "--changes")
    assert res.returncode == 0, res.stderr
    assert f"skipping {cut + 1} rows re-captured" in res.stderr
    want = pc.decode_changes(src)
    got = pq.read_table(out)
    assert len(got) == len(want)
    assert got.column("after").to_pylist() == want.column("after").to_pylist()


def _latin1_database(srv, db):
    """A LATIN1 database whose schema, table, column names and values are not ASCII."""
    with srv.connect() as c:
        c.execute(f"CREATE DATABASE {db} ENCODING 'LATIN1' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
    with srv.connect(db) as c:
        c.execute("SET client_encoding = 'UTF8'")
        c.execute('CREATE TABLE "café" (id int PRIMARY KEY, "crème" text)')
        c.execute('CREATE PUBLICATION cap_pub FOR TABLE "café"')


def _latin1_workload(srv, db):
    with srv.connect(db) as c:
        c.execute("SET client_encoding = 'UTF8'")
        for k in range(20):
            c.execute('INSERT INTO "café" VALUES (%s, %s)', (k, f"été {k} à la"))
        c.execute('UPDATE "café" SET "crème" = "crème" || \'ü\' WHERE id % 4 = 0')
        return c.execute('SELECT id, "crème" FROM "café" ORDER BY id').fetchall()


def test_capture_of_a_latin1_database_is_utf8(server, tmp_path):
    """The server converts what a slot sends into the session's client_encoding, by
    default the database's: capture sets UTF8, so a LATIN1 database's archive decodes
    (a decoder reading the LATIN1 bytes would refuse its Relation: 'relation_name is not
    valid UTF-8')."""
    db = "cap_latin1"
    _latin1_database(server, db)
    dsn = " ".join(f"{k}={v}" for k, v in server.conninfo(db).items())
    out = tmp_path / "arch"
    args = ["capture", "--dsn", dsn, "--slot", "cap_l1", "--publication", "cap_pub", "--out", str(out),
            "--poll-interval", "0.1", "--stop-after", "2"]
    res = run_cli(*args, "--create-slot", "--binary")
    assert res.returncode == 0, res.stderr
    server_rows = _latin1_workload(server, db)
    res = run_cli(*args, "--binary")
    assert res.returncode == 0, res.stderr
    got, parts = _messages(out)
    assert parts[-1].meta["server_encoding"] == "LATIN1" and parts[-1].meta["client_encoding"] == "UTF8"
    snap = pc.snapshot(pc.decode_changes(got), "public.café")
    assert snap.column_names == ["id", "crème"]
    assert sorted(zip(snap.column("id").to_pylist(), snap.column("crème").to_pylist(), strict=True)) == \
        [tuple(r) for r in server_rows]


def test_transcode_an_archive_captured_in_latin1(server, tmp_path):
    """An archive landed by a session that kept the database's LATIN1 (a SELECT job,
    pg_recvlogical): 'transcode' rewrites it as UTF-8, 'decode --encoding' reads it as
    it is; both give the server's rows, and plain 'decode' names what it cannot read."""
    db = "tr_latin1"
    _latin1_database(server, db)
    with server.connect(db) as c:
        c.execute("SELECT pg_create_logical_replication_slot('tr_l1', 'pgoutput')")
    server_rows = _latin1_workload(server, db)
    with server.connect(db) as c:
        assert c.execute("SHOW client_encoding").fetchone()[0] == "LATIN1"    # psycopg keeps the default
        rows = c.execute("SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('tr_l1', NULL, NULL, "
                         "'proto_version', '1', 'publication_names', 'cap_pub')").fetchall()
    src = tmp_path / "latin1.parquet"
    pq.write_table(pa.table({"seq": pa.array(range(len(rows)), pa.int64()), "lsn": [r[0] for r in rows],
                             "data": pa.array([bytes(r[1]) for r in rows], pa.binary())}), src)
    res = run_cli("decode", str(src), str(tmp_path / "x.parquet"), "--changes")
    assert_clean_failure(res, "relation_name is not valid UTF-8", "client_encoding? see transcode")
    res = run_cli("transcode", str(src), str(tmp_path / "utf8"), "--encoding", "iso-8859-1")
    assert res.returncode == 0, res.stderr
    assert f"rows: {len(rows)}" in res.stdout and "left as sent: 0  files: 1" in res.stdout
    outs = []
    for arch, extra in ((tmp_path / "utf8", ()), (src, ("--encoding", "latin1"))):
        dest = tmp_path / f"c{len(outs)}.parquet"
        res = run_cli("decode", str(arch), str(dest), "--changes", *extra)
        assert res.returncode == 0, res.stderr
        outs.append(pq.read_table(dest))
        snap = pc.snapshot(outs[-1], "public.café")
        assert sorted(zip(snap.column("id").to_pylist(), snap.column("crème").to_pylist(), strict=True)) == \
            [tuple(r) for r in server_rows]
    assert outs[0].equals(outs[1])
    res = run_cli("inspect", str(src), "--json", "--encoding", "LATIN1")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["errors"] == 0 and "public.café" in json.dumps(report, ensure_ascii=False)
    md = pq.read_schema(tmp_path / "utf8" / "latin1.parquet").metadata
    assert md[b"pgoutput_codec.transcoded_from"] == b"LATIN1"   # PostgreSQL's name, however given
    res = run_cli("transcode", str(src), str(tmp_path / "u2"), "--encoding", "SQL_ASCII")
    assert_clean_failure(res, "SQL_ASCII is no encoding")


def test_capture_of_a_sql_ascii_database_warns_and_transcode_reads_it(server, tmp_path):
    """A SQL_ASCII database converts nothing: its text is whatever its clients stored
    (here LATIN1 bytes), under any client_encoding. capture says so; transcode with the
    encoding the clients wrote reads it."""
    db = "cap_sqlascii"
    with server.connect() as c:
        c.execute(f"CREATE DATABASE {db} ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
    with server.connect(db) as c:
        c.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        c.execute("CREATE PUBLICATION cap_pub FOR TABLE t")
    dsn = " ".join(f"{k}={v}" for k, v in server.conninfo(db).items())
    out = tmp_path / "arch"
    args = ["capture", "--dsn", dsn, "--slot", "cap_sa", "--publication", "cap_pub", "--out", str(out),
            "--poll-interval", "0.1", "--stop-after", "2"]
    res = run_cli(*args, "--create-slot")
    assert res.returncode == 0 and "SQL_ASCII, which converts nothing" in res.stderr, res.stderr
    with server.connect(db) as c:
        c.execute(r"INSERT INTO t VALUES (1, E'caf\351 cr\350me'), (2, 'plain')")   # LATIN1 bytes, stored as sent
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    res = run_cli("decode", str(out), str(tmp_path / "raw.parquet"), "--changes")
    assert res.returncode == 0, res.stderr      # names are ASCII: the rows decode, values as bytes
    res = run_cli("transcode", str(out), str(tmp_path / "utf8"), "--encoding", "LATIN1")
    assert res.returncode == 0, res.stderr
    got, _ = _messages(tmp_path / "utf8")
    snap = pc.snapshot(pc.decode_changes(got), "public.t")
    assert snap.column("v").to_pylist() == ["caf\u00e9 cr\u00e8me", "plain"]
