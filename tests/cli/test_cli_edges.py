"""The command's edges: outputs kept apart from inputs, archive paths read as paths, each
archive file read once, counts that add up, ``seq`` checked, incremental runs that never
drop a transaction silently, checkpoints checked field by field."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import ArchiveOrderError, cli
from pgoutput_codec.pgoutput.encode import encode_message
from pgoutput_codec.archive import META_KEY
from pgoutput_codec.cli.inspect import inspect_archive
from pgoutput_codec.data import sample_archive_path
from pgoutput_codec.lake import mirror
from pgoutput_codec.pgoutput.messages import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn

SAMPLE = sample_archive_path()


def run(capsys, *args):
    """``pgoutput-codec args`` in this process: (exit status, stdout, stderr lines)."""
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, [ln for ln in err.splitlines() if ln.strip()]


def refused(capsys, *args, needle):
    code, out, err = run(capsys, *args)
    assert code == 1, (out, err)
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert needle in err[0], err[0]
    return err[0]


def digest(path):
    if os.path.isdir(path):
        return {n: digest(os.path.join(path, n)) for n in sorted(os.listdir(path))}
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ------------------------------------------------------------------------------ outputs apart from inputs
@pytest.fixture()
def arch(tmp_path):
    d = tmp_path / "arch"
    d.mkdir()
    shutil.copy(SAMPLE, d / "a.parquet")
    return d


def test_decode_refuses_to_write_over_its_archive_file(capsys, arch, tmp_path, monkeypatch):
    f = arch / "a.parquet"
    before = digest(arch)
    refused(capsys, "decode", f, f, needle="would be overwritten")
    monkeypatch.chdir(arch)                                  # a relative path naming the same file
    refused(capsys, "decode", "a.parquet", "./../arch/a.parquet", needle="would be overwritten")
    os.symlink(f, tmp_path / "link.parquet")                 # a symbolic link to it
    refused(capsys, "decode", f, tmp_path / "link.parquet", needle="would be overwritten")
    os.link(f, tmp_path / "hard.parquet")                    # a hard link to it
    refused(capsys, "decode", tmp_path / "hard.parquet", f, needle="would be overwritten")
    refused(capsys, "decode", f, tmp_path / "out.parquet", "--changes", "--checkpoint", f,
            needle="would be overwritten")
    assert digest(arch) == before
    assert not os.path.exists(tmp_path / "out.parquet")


def test_decode_refuses_an_output_inside_the_archive_directory(capsys, arch, tmp_path):
    before = digest(arch)
    refused(capsys, "decode", arch, arch, "--changes", needle="inside")          # OUT: the directory itself
    refused(capsys, "decode", arch, arch / "x.parquet", needle="inside")
    os.symlink(arch, tmp_path / "alias")
    refused(capsys, "decode", tmp_path / "alias", arch / "sub.parquet", needle="inside")
    refused(capsys, "decode", arch, tmp_path / "o.parquet", "--changes", "--checkpoint", arch / "cp.json",
            needle="inside")
    assert digest(arch) == before
    assert run(capsys, "decode", arch, tmp_path / "o.parquet")[0] == 0      # the archive still reads


def test_decode_refuses_a_checkpoint_that_is_its_output(capsys, arch, tmp_path):
    out = tmp_path / "o.parquet"
    refused(capsys, "decode", arch, out, "--changes", "--checkpoint", out, needle="same file")
    assert not out.exists()
    d = tmp_path / "outdir"
    d.mkdir()                # OUT a directory: the file written in it
    refused(capsys, "decode", arch, d, "--changes", "--checkpoint", d / "changes.parquet", needle="same file")
    assert os.listdir(d) == []


def test_transcode_refuses_to_write_over_its_archive(capsys, arch, tmp_path, monkeypatch):
    before = digest(arch)
    refused(capsys, "transcode", arch, arch, "--encoding", "LATIN1", needle="would be overwritten")
    refused(capsys, "transcode", arch, arch / "sub", "--encoding", "LATIN1", needle="inside")
    monkeypatch.chdir(arch)       # OUT a directory holding the archive file
    refused(capsys, "transcode", "a.parquet", ".", "--encoding", "LATIN1", needle="would be overwritten")
    assert digest(arch) == before


def test_transcode_keeps_the_layout_of_subdirectories(capsys, tmp_path):
    """Files of one name in two subdirectories: two files written, every row kept."""
    t = pq.read_table(SAMPLE).replace_schema_metadata(None)
    src = tmp_path / "arch"
    for i, sub in enumerate(("x", "y")):
        (src / sub).mkdir(parents=True)
        pq.write_table(t.slice(i * 1300, 1300), src / sub / "part.parquet")
    code, out, err = run(capsys, "transcode", src, tmp_path / "out", "--encoding", "LATIN1", "--errors", "keep")
    assert code == 0, err
    assert "rows: 2600 " in out and "files: 2 " in out, out
    for sub in ("x", "y"):
        assert pq.read_table(tmp_path / "out" / sub / "part.parquet").num_rows == 1300
    assert sorted(os.listdir(tmp_path / "out")) == ["x", "y"]


# ------------------------------------------------------------------------------ archive paths read as paths
def run_process(*args, timeout=60):
    """The command in a process of its own (for what could hang), its result."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    return subprocess.run([sys.executable, "-m", "pgoutput_codec.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=root)


def test_an_archive_path_with_glob_characters_is_that_path(capsys, tmp_path):
    t = pq.read_table(SAMPLE)
    for name, rows in (("arch[1]", 2630), ("arch1", 100), ("arch*", 7), ("arch?", 9)):
        (tmp_path / name).mkdir()
        pq.write_table(t.slice(0, rows), tmp_path / name / "a.parquet")
    for name, rows in (("arch[1]", 2630), ("arch*", 7), ("arch?", 9)):
        r = inspect_archive(str(tmp_path / name))
        assert (r["files"], r["messages"]) == (1, rows), name
        code, out, err = run(capsys, "decode", tmp_path / name, tmp_path / f"{rows}.parquet")
        assert code == 0 and f"rows in: {rows} " in out, (out, err)
    shutil.copytree(tmp_path / "arch[1]", tmp_path / "plain")
    got = {(r.table, r.upserts, r.deletes) for r in mirror(str(tmp_path / "arch[1]"), str(tmp_path / "lake1"))}
    want = {(r.table, r.upserts, r.deletes) for r in mirror(str(tmp_path / "plain"), str(tmp_path / "lake2"))}
    assert got == want and sum(u for _, u, _ in got) > 0


def test_each_archive_file_is_read_once(capsys, tmp_path):
    """A file re-captured whole (every row already in the file before it), a symbolic link
    looping to its own directory, and a second name of one file: each row once."""
    t = pq.read_table(SAMPLE)
    meta = t.schema.metadata[META_KEY]
    d = tmp_path / "arch"
    d.mkdir()
    pq.write_table(t, d / "part-000000.parquet")
    again = json.loads(meta)
    again.update(file_index=1, seq_start=2630, seq_end=5259)
    seq = pa.array(range(2630, 5260), pa.int64())
    pq.write_table(t.set_column(0, "seq", seq).replace_schema_metadata({META_KEY: json.dumps(again).encode()}),
                   d / "part-000001.parquet")
    code, out, err = run(capsys, "decode", d, tmp_path / "m.parquet")
    assert code == 0 and "rows in: 2630 " in out, (out, err)
    assert pq.read_table(tmp_path / "m.parquet").num_rows == 2630
    assert inspect_archive(str(d))["messages"] == 2630

    loop = tmp_path / "loop"
    loop.mkdir()
    shutil.copy(SAMPLE, loop / "a.parquet")
    os.symlink(loop, loop / "again")                       # loop/again/again/... is loop
    os.link(loop / "a.parquet", loop / "b.parquet")        # one file, two names
    r = inspect_archive(str(loop))
    assert (r["files"], r["messages"]) == (1, 2630)


def test_a_fifo_is_not_read_as_an_archive_file(tmp_path):
    d = tmp_path / "arch"
    d.mkdir()
    shutil.copy(SAMPLE, d / "a.parquet")
    os.mkfifo(d / "pipe.parquet")
    res = run_process("inspect", d)
    assert res.returncode == 0, res.stderr
    assert "2630 messages" in res.stdout
    assert "pipe.parquet" in res.stderr and "not a regular file" in res.stderr, res.stderr
    res = run_process("inspect", d / "pipe.parquet")
    assert res.returncode == 1 and "not a regular file" in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_capture_clears_only_its_own_directory_of_unfinished_files(capsys, tmp_path):
    """--out 'arch[1]': the unfinished files of that directory go, not those of arch1."""
    for name in ("arch[1]", "arch1"):
        (tmp_path / name).mkdir(mode=0o700)
        (tmp_path / name / ".part-000000.parquet.tmp").write_bytes(b"x")
    refused(capsys, "capture", "--dsn", "host=/nonexistent port=1", "--slot", "s", "--publication", "p",
            "--out", tmp_path / "arch[1]", needle="cannot connect")
    assert os.listdir(tmp_path / "arch1") == [".part-000000.parquet.tmp"]
    assert not os.path.exists(tmp_path / "arch[1]" / ".part-000000.parquet.tmp")


# ------------------------------------------------------------------------------ counts add up
@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
def test_rows_in_are_rows_decoded_and_rows_in_error_when_every_row_is_bad(capsys, tmp_path, mode):
    f = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"seq": pa.array(range(5), pa.int64()), "data": pa.array([b"\xff\x00"] * 5)}), f)
    code, out, err = run(capsys, "decode", f, tmp_path / "o.parquet", "--mode", mode)
    assert code == 0, err
    assert "rows in: 5  rows decoded: 0  rows in error: 5 " in out, out


# ------------------------------------------------------------------------------ seq checked
def _with_seq(tmp_path, seq):
    t = pq.read_table(SAMPLE).slice(0, 3).replace_schema_metadata(None)
    f = tmp_path / "a.parquet"
    pq.write_table(t.set_column(0, "seq", seq), f)
    return f


def test_a_seq_that_is_not_integer_is_refused(capsys, tmp_path):
    f = _with_seq(tmp_path, pa.array(["10", "9", "100"]))
    msg = refused(capsys, "decode", f, tmp_path / "o.parquet", needle="seq")
    assert "a.parquet" in msg and "string" in msg, msg
    msg = refused(capsys, "decode", f, tmp_path / "o.parquet", "--changes", "--checkpoint", tmp_path / "cp",
                  needle="string")
    d = tmp_path / "dir"
    d.mkdir()
    shutil.move(f, d / "a.parquet")
    refused(capsys, "inspect", d, needle="string")


def test_a_null_seq_is_refused(capsys, tmp_path):
    f = _with_seq(tmp_path, pa.array([0, None, 2], pa.int64()))
    for extra in ((), ("--changes",), ("--changes", "--checkpoint", tmp_path / "cp")):
        msg = refused(capsys, "decode", f, tmp_path / "o.parquet", *extra, needle="a.parquet")
        assert "seq" in msg and "1 null" in msg, msg
    assert not (tmp_path / "cp").exists()


# ------------------------------------------------------------------------------ incremental runs drop nothing silently
REL = 16384


def _txn(xid, lsn, relation=False):
    msgs = [Begin(final_lsn=lsn, commit_ts=0, xid=xid)]
    if relation:
        msgs.append(Relation(relation_id=REL, namespace="public", relation_name="t", replica_identity="d",
                             columns=(RelationColumn(1, "id", 23, -1),)))
    msgs += [Insert(relation_id=REL, new_tuple=(TupleColumn("t", str(xid).encode()),)),
             Commit(flags=0, commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=0)]
    return [encode_message(m) for m in msgs]


def _append_file(d, txns):
    """One more archive file in ``d``: the transactions (xid, commit lsn), seq going on."""
    files = sorted(os.listdir(d))
    start = pq.read_table(d / files[-1]).column("seq")[-1].as_py() + 1 if files else 0
    data = [p for i, (xid, lsn) in enumerate(txns) for p in _txn(xid, lsn, relation=not files and i == 0)]
    pq.write_table(pa.table({"seq": pa.array(range(start, start + len(data)), pa.int64()),
                             "data": pa.array(data, pa.binary())}), d / f"part-{len(files):06d}.parquet")


def test_an_incremental_run_refuses_a_later_commit_below_the_checkpoint(capsys, tmp_path):
    d = tmp_path / "arch"
    d.mkdir()
    cp = tmp_path / "cp.json"
    _append_file(d, [(1, 0x100), (2, 0x300)])
    code, out, err = run(capsys, "decode", d, tmp_path / "1.parquet", "--changes", "--checkpoint", cp)
    assert code == 0 and "change rows written: 2 " in out, (out, err)
    _append_file(d, [(3, 0x200), (4, 0x400)])          # 0/200: after 0/300, no commit had it
    msg = refused(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp,
                  needle="0/200")
    assert "0/300" in msg and "arrival order" in msg, msg
    assert "--mode" not in msg                        # no parse mode gets past the archive's order
    # the same archive in one run: the same error
    refused(capsys, "decode", d, tmp_path / "3.parquet", "--changes", needle="0/200")


def test_an_incremental_run_drops_a_replay_of_the_last_commit(capsys, tmp_path):
    d, cp = _first_run(capsys, tmp_path)
    _append_file(d, [(2, 0x300), (4, 0x400)])          # received again after a reconnect
    code, out, err = run(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp)
    assert code == 0 and "change rows written: 1 " in out and "1 transaction(s) received again" in out, (out, err)
    assert pq.read_table(tmp_path / "2.parquet").column("xid").to_pylist() == [4]


def test_a_mirror_refuses_a_later_commit_below_what_it_holds(tmp_path):
    d = tmp_path / "arch"
    d.mkdir()
    _append_file(d, [(1, 0x100), (2, 0x300)])
    assert sum(r.upserts for r in mirror(str(d), str(tmp_path / "lake"))) == 2
    _append_file(d, [(3, 0x200), (4, 0x400)])
    with pytest.raises(ArchiveOrderError, match="0/200"):
        mirror(str(d), str(tmp_path / "lake"))


# ------------------------------------------------------------------------------ checkpoints checked
def _first_run(capsys, tmp_path):
    """An archive of two transactions and the checkpoint its first run leaves."""
    d = tmp_path / "arch"
    d.mkdir()
    cp = tmp_path / "cp.json"
    _append_file(d, [(1, 0x100), (2, 0x300)])
    assert run(capsys, "decode", d, tmp_path / "1.parquet", "--changes", "--checkpoint", cp)[0] == 0
    return d, cp


@pytest.mark.parametrize("field, value", [
    ("from_key", 10 ** 30), ("from_key", "1e400"), ("from_key", -(2 ** 64)), ("after_lsn", 2 ** 64),
    ("after_lsn", -1), ("rank_base", -5), ("rank_base", 2 ** 63), ("end_key", 2 ** 80), ("from_key", True),
    ("rank_base", 1.5)])
def test_a_tampered_checkpoint_names_its_field(capsys, tmp_path, field, value):
    d, cp = _first_run(capsys, tmp_path)
    text = cp.read_text()
    good = json.loads(text)
    assert field in good
    good[field] = value
    text = json.dumps(good)
    if value == "1e400":
        text = text.replace('"1e400"', "1e400")       # JSON's infinity
    cp.write_text(text)
    msg = refused(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp, needle=field)
    assert "not a checkpoint" in msg and "Overflow" not in msg, msg
    assert not (tmp_path / "2.parquet").exists()


@pytest.mark.parametrize("path, value", [
    (("relations", 0, "relation_id"), 2 ** 40), (("relations", 0, "columns", 0, "type_oid"), -1),
    (("relations", 0, "columns", 0, "type_modifier"), 2 ** 40), (("relations", 0, "columns", 0, "flags"), 1e300),
    (("types",), [[2 ** 70, "public", "mood"]])])
def test_a_tampered_checkpoint_definition_names_its_field(capsys, tmp_path, path, value):
    d, cp = _first_run(capsys, tmp_path)
    good = json.loads(cp.read_text())
    at = good
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    cp.write_text(json.dumps(good))
    msg = refused(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp,
                  needle=path[-1] if path[-1] != "types" else "type_oid")
    assert "not a checkpoint" in msg and "Overflow" not in msg, msg


def test_mirror_refuses_a_target_that_is_its_archive_or_inside_it(capsys, arch, tmp_path):
    """A copy's Parquet files inside the archive directory would be read as archive files
    by every later run."""
    before = digest(arch)
    refused(capsys, "mirror", arch, arch, needle="is ARCHIVE")
    refused(capsys, "mirror", arch, arch / "lake", needle="inside")
    refused(capsys, "mirror", arch / "a.parquet", arch / "a.parquet", needle="is ARCHIVE")
    assert digest(arch) == before
    assert run(capsys, "mirror", arch, tmp_path / "lake")[0] == 0


# ------------------------------------------------------------------------------ replays across runs
def _replayed_archive(capsys, tmp_path, *extra):
    """Three transactions, the checkpoint of a run over them, then a reconnect that
    resends the last two from a confirmed_flush behind them, and a new fourth."""
    d = tmp_path / "arch"
    d.mkdir()
    cp = tmp_path / "cp.json"
    _append_file(d, [(1, 0x100), (2, 0x200), (3, 0x300)])
    assert run(capsys, "decode", d, tmp_path / "1.parquet", "--changes", "--checkpoint", cp, *extra)[0] == 0
    _append_file(d, [(2, 0x200), (3, 0x300), (4, 0x400)])
    return d, cp


def test_an_incremental_run_drops_a_replay_of_several_commits(capsys, tmp_path):
    d, cp = _replayed_archive(capsys, tmp_path)
    code, out, err = run(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp)
    assert code == 0 and "2 transaction(s) received again" in out, (out, err)
    # one run over the whole archive: the same rows for the new commit, the same replays
    code, out, err = run(capsys, "decode", d, tmp_path / "all.parquet", "--changes")
    assert code == 0 and "2 transaction(s) received again" in out, (out, err)
    whole = pq.read_table(tmp_path / "all.parquet")
    resumed = pq.read_table(tmp_path / "2.parquet")
    assert resumed.column("xid").to_pylist() == [4]
    tail = whole.filter(pa.compute.greater(whole.column("commit_lsn"), 0x300))
    assert resumed.drop_columns(["commit_rank"] if "commit_rank" in resumed.column_names else []).select(
        ["xid", "commit_lsn", "seq", "op"]).equals(tail.select(["xid", "commit_lsn", "seq", "op"]))
    # and the checkpoint it leaves carries on: a later replay of commit 4 is dropped too
    _append_file(d, [(4, 0x400), (5, 0x500)])
    code, out, err = run(capsys, "decode", d, tmp_path / "3.parquet", "--changes", "--checkpoint", cp)
    assert code == 0 and "1 transaction(s) received again" in out, (out, err)
    assert pq.read_table(tmp_path / "3.parquet").column("xid").to_pylist() == [5]


def test_an_incremental_run_refuses_a_new_commit_below_the_checkpoint_it_does_not_remember(capsys, tmp_path):
    d, cp = _replayed_archive(capsys, tmp_path)
    _append_file(d, [(5, 0x250)])                     # no run took a commit at 0/250
    msg = refused(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp,
                  needle="0/250")
    assert "arrival order" in msg, msg
    refused(capsys, "decode", d, tmp_path / "3.parquet", "--changes", needle="0/250")


def test_an_incremental_run_names_the_commits_its_checkpoint_remembers(capsys, tmp_path):
    d, cp = _replayed_archive(capsys, tmp_path)
    good = json.loads(cp.read_text())
    assert good["commit_lsns"] == [0x100, 0x200, 0x300]
    good["commit_lsns"] = [0x300]                     # remembering the last commit only
    cp.write_text(json.dumps(good))
    msg = refused(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp,
                  needle="0/200")
    assert "remembers 1 commit" in msg and "0/300" in msg, msg


@pytest.mark.parametrize("value", [[2 ** 64], [-1], [0x300, 0x200], [0x300, 0x300], "0/300", [True], [0x400]])
def test_a_tampered_checkpoint_commit_list_names_its_field(capsys, tmp_path, value):
    d, cp = _first_run(capsys, tmp_path)
    good = json.loads(cp.read_text())
    good["commit_lsns"] = value
    cp.write_text(json.dumps(good))
    msg = refused(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp,
                  needle="commit_lsns")
    assert "not a checkpoint" in msg, msg


def test_an_incremental_run_from_a_checkpoint_without_commit_lsns_drops_the_last_commit_only(capsys, tmp_path):
    d, cp = _replayed_archive(capsys, tmp_path)
    good = json.loads(cp.read_text())
    del good["commit_lsns"]
    cp.write_text(json.dumps(good))
    refused(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp, needle="0/200")


def test_an_incremental_run_keeping_replays_gives_what_one_run_gives(capsys, tmp_path):
    d, cp = _replayed_archive(capsys, tmp_path, "--replays", "keep")
    code, out, err = run(capsys, "decode", d, tmp_path / "2.parquet", "--changes", "--checkpoint", cp,
                         "--replays", "keep")
    assert code == 0, (out, err)
    code, out, err = run(capsys, "decode", d, tmp_path / "all.parquet", "--changes", "--replays", "keep")
    assert code == 0, (out, err)
    first = pq.read_table(tmp_path / "1.parquet").column("xid").to_pylist()
    resumed = pq.read_table(tmp_path / "2.parquet").column("xid").to_pylist()
    assert first == [1, 2, 3] and resumed == [2, 3, 4]
    assert first + resumed == pq.read_table(tmp_path / "all.parquet").column("xid").to_pylist()


def test_a_mirror_drops_a_replay_of_several_commits_as_one_run_does(tmp_path):
    from deltalake import DeltaTable

    from pgoutput_codec.lake.mirror import table_path
    d = tmp_path / "arch"
    d.mkdir()
    _append_file(d, [(1, 0x100), (2, 0x200), (3, 0x300)])
    assert sum(r.upserts for r in mirror(str(d), str(tmp_path / "lake"))) == 3
    _append_file(d, [(2, 0x200), (3, 0x300), (4, 0x400)])
    runs = mirror(str(d), str(tmp_path / "lake"))
    assert sum(r.upserts for r in runs) == 1 and runs[0].commit_lsn == 0x400
    mirror(str(d), str(tmp_path / "whole"))
    copies = [DeltaTable(table_path(tmp_path / lake, "public.t")).to_pyarrow_table().sort_by("id")
              for lake in ("lake", "whole")]
    assert copies[0].equals(copies[1]) and copies[0].column("id").to_pylist() == [1, 2, 3, 4]
