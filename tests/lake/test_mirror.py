"""pgoutput_codec.mirror: a Delta Lake copy of every table, written by deltalake, read
back by deltalake and by a reader of our own that follows the Delta log to its Parquet
files (no delta-rs in it), against the snapshot of the same archive: after each of
several runs over a growing real-server archive, and run again over the same one."""

from __future__ import annotations

import json
import os
import urllib.parse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")

from change_cases import SETS, archive, same_values  # noqa: E402

from pgoutput_codec import decode_changes, mirror, mirror_version_at, snapshot  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path, to_delta  # noqa: E402


def log_read(path: str) -> pa.Table | None:
    """The table a Delta log says: its JSON commits replayed (add/remove), the files it
    leaves read with pyarrow alone. None when the log names no file."""
    live: dict = {}
    log = os.path.join(path, "_delta_log")
    for f in sorted(os.listdir(log)):
        if not f.endswith(".json"):
            continue
        with open(os.path.join(log, f)) as fh:
            for line in fh:
                action = json.loads(line)
                if "add" in action:
                    live[action["add"]["path"]] = True
                if "remove" in action:
                    live.pop(action["remove"]["path"], None)
    files = [os.path.join(path, urllib.parse.unquote(p)) for p in live]
    # (deltalake's MERGE stores Arrow's view types in a file's Arrow schema, its plain
    # writes the plain ones: the Parquet types are the same, read them so)
    return pa.concat_tables([_plain(pq.read_table(f)) for f in files], promote_options="permissive") \
        if files else None


def _plain(t: pa.Table) -> pa.Table:
    def plain(ty):
        if ty in (pa.string_view(), pa.large_string()):
            return pa.string()
        if ty in (pa.binary_view(), pa.large_binary()):
            return pa.binary()
        if pa.types.is_list_view(ty) or pa.types.is_large_list_view(ty) or pa.types.is_large_list(ty) \
                or pa.types.is_list(ty):
            return pa.list_(ty.value_field.with_type(plain(ty.value_type)))
        if pa.types.is_struct(ty):
            return pa.struct([f.with_type(plain(f.type)) for f in ty])
        return ty
    return t.cast(pa.schema([f.with_type(plain(f.type)) for f in t.schema]))


def same_table(got: pa.Table | None, want: pa.Table, what) -> None:
    """``got`` (a copy as read back) holds ``want``'s rows, column for column in Delta's types."""
    want = pa.table({c: to_delta(want.column(c)) for c in want.column_names})
    if got is None:
        assert not len(want), what
        return
    assert len(got) == len(want), what
    if not len(want):
        return
    key = want.column_names[0]
    got = got.select(want.column_names).cast(want.schema).sort_by(key)
    want = want.sort_by(key)
    for c in want.column_names:
        assert same_values(got.column(c), want.column(c)), (what, c)


def check_copies(target, changes: pa.Table) -> int:
    names = sorted({f"{s}.{t}" for s, t in zip(changes.column("schema").to_pylist(),
                                              changes.column("table").to_pylist(), strict=True) if t})
    for name in names:
        want = snapshot(changes, name)
        path = table_path(target, name)
        same_table(read_copy(path), want, ("deltalake", name))
        same_table(log_read(path), want, ("log", name))
    return len(names)


def versions(target) -> dict:
    return {d: deltalake.DeltaTable(os.path.join(target, d)).version() for d in sorted(os.listdir(target))
            if os.path.isdir(os.path.join(target, d))}


def operations(target) -> set[str]:
    """The Delta operations the copies' commits made."""
    return {h["operation"] for d in os.listdir(target) if os.path.isdir(os.path.join(target, d))
            for h in deltalake.DeltaTable(os.path.join(target, d)).history()}


@pytest.mark.parametrize("version,option_set,way",
                         [(*s, "merge") for s in SETS if s[1] in ("v1_text", "v3_2pc_binary_streaming")]
                         + [(*s, "rewrite") for s in SETS if s[1] == "v3_2pc_binary_streaming"])
def test_each_incremental_run_leaves_every_copy_equal_to_the_snapshot(version, option_set, way, tmp_path,
                                                                      monkeypatch):
    """Three runs over an archive that grows (cut at thirds: inside transactions, streamed
    ones too); after each, every table's copy is the snapshot of the archive so far. A
    run over the same archive again writes no version. Each batch MERGEd, and each
    rewritten whole where its keys are integers (as a batch touching most of a copy is)."""
    import importlib
    m = importlib.import_module("pgoutput_codec.lake.mirror")
    rewrites = []

    def rewrite(dt, *args):     # (a copy with no file yet is written so either way)
        if len(dt.file_uris()):
            rewrites.append(dt)
        return whole(dt, *args)
    whole = m._rewrite
    monkeypatch.setattr(m, "_rewrite", rewrite)
    monkeypatch.setattr(m, "REWRITE_SHARE", 2.0 if way == "merge" else 0.0)
    arc = archive(version, option_set)
    target = tmp_path / "lake"
    for end in (len(arc) // 3, 2 * len(arc) // 3, len(arc)):
        part = arc.slice(0, end)
        mirror(part, target)
        assert check_copies(target, decode_changes(part)) > 3
    assert (not rewrites and "MERGE" in operations(target)) if way == "merge" else rewrites, len(rewrites)
    before = versions(target)
    runs = mirror(arc, target)
    assert all(r.version is None for r in runs)
    assert versions(target) == before


def test_a_copy_is_found_as_of_a_commit(tmp_path):
    """mirror_version_at names the Delta version that shows a table as of a commit LSN:
    each run's version reads as the snapshot as of the last commit it applied."""
    arc = archive("16.14", "v1_text")
    target = tmp_path / "lake"
    seen = []
    for end in (len(arc) // 3, len(arc)):
        for r in mirror(arc.slice(0, end), target, tables="public.rid_default"):
            if r.version is not None:
                seen.append((r.version, r.commit_lsn))
    assert len(seen) == 2
    changes = decode_changes(arc)
    for v, lsn in seen:
        assert mirror_version_at(target, "public.rid_default", lsn) == v
        copy = read_copy(table_path(target, "public.rid_default"), version=v)
        same_table(copy, snapshot(changes, "public.rid_default", as_of_lsn=lsn), lsn)
    assert mirror_version_at(target, "public.rid_default", 0) is None


def test_the_command_line_keeps_the_copies(tmp_path):
    from pgoutput_codec.cli import main
    arc = archive("16.14", "v3_2pc_binary_streaming")
    src = tmp_path / "archive"
    src.mkdir()
    pq.write_table(arc.slice(0, 300), src / "a.parquet")
    target = tmp_path / "lake"
    assert main(["mirror", str(src), str(target), "--tables", "public.*"]) == 0
    pq.write_table(arc.slice(300), src / "b.parquet")
    assert main(["mirror", str(src), str(target), "--tables", "public.*"]) == 0
    changes = decode_changes(arc)
    public = changes.filter(pc.equal(changes.column("schema"), "public"))
    assert check_copies(target, public) > 3
    assert not os.path.exists(table_path(target, "Sch.MixedCase"))


#: kills of the crash test, each at a random moment of a run
KILLS = 20


def test_runs_killed_at_random_moments_apply_each_batch_once(tmp_path):
    """An archive lands a file at a time; after each file a mirror run is killed with
    SIGKILL at a random moment (KILLS times), and the next run goes on from whatever it
    left. At the end one more run completes: every copy is the snapshot, and in each
    copy's history the commit LSNs its commits reached only rise (no batch applied twice)."""
    import random
    import signal
    import subprocess
    import sys
    import time
    rng = random.Random(7)
    arc = archive("16.14", "v3_2pc_binary_streaming")
    src, target = tmp_path / "archive", tmp_path / "lake"
    src.mkdir()
    cuts = sorted(rng.sample(range(1, len(arc)), KILLS - 1))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    killed, whole = 0, 2.0      # whole: how long the last run that ended took (this machine's pace)
    for k, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(arc)], strict=True)):
        pq.write_table(arc.slice(a, b - a), src / f"part-{k:03d}.parquet")
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "pgoutput_codec.cli", "mirror", str(src), str(target)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            proc.wait(timeout=rng.uniform(0.3, 1.1) * whole)
            whole = time.monotonic() - start
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        _, err = proc.communicate()
        assert proc.returncode in (0, -signal.SIGKILL), err
    assert killed >= KILLS // 2
    mirror(str(src), target)
    changes = decode_changes(arc)
    assert check_copies(target, changes) > 5
    for d in (d for d in os.listdir(target) if os.path.isdir(os.path.join(target, d))):
        reached = [int(h["pgoutput_codec.commit_lsn"]) for h in
                   sorted(deltalake.DeltaTable(os.path.join(target, d)).history(), key=lambda h: h["version"])
                   if "pgoutput_codec.commit_lsn" in h]
        assert reached == sorted(set(reached)), d


def _grown_run(tmp_path, monkeypatch, arc, empty=False):
    """Mirror three files of ``arc`` (and a file of no rows), add the fourth, mirror again:
    (archive directory, target, the files the second run opened)."""
    from pgoutput_codec import archive as archive_module
    src, target = tmp_path / "archive", tmp_path / "lake"
    src.mkdir()
    cuts = [0, 100, 200, 300, len(arc)]
    for k in range(3):
        pq.write_table(arc.slice(cuts[k], cuts[k + 1] - cuts[k]), src / f"part-{k}.parquet")
    if empty:
        pq.write_table(arc.slice(0, 0), src / "empty.parquet")
    mirror(str(src), target)
    pq.write_table(arc.slice(cuts[3]), src / "part-3.parquet")
    read = []
    real = archive_module.ArchivePart.read
    monkeypatch.setattr(archive_module.ArchivePart, "read", lambda self, *a, **k: read.append(self.path) or
                        real(self, *a, **k))
    mirror(str(src), target)
    return src, target, read


def test_a_run_over_a_grown_archive_reads_only_what_is_new(tmp_path, monkeypatch):
    """An archive directory's run leaves a checkpoint beside the copies: the next run
    opens only the files from it on (Parquet statistics on seq), and the copies are the
    snapshot still. A copy removed (to rebuild it) makes the next run read from the start."""
    arc = archive("16.14", "v1_text")
    src, target, read = _grown_run(tmp_path, monkeypatch, arc)
    assert sorted(os.path.basename(p) for p in read)[0] in ("part-2.parquet", "part-3.parquet"), read
    assert check_copies(target, decode_changes(arc)) > 5
    import shutil
    shutil.rmtree(table_path(target, "public.rid_default"))
    read.clear()
    mirror(str(src), target)
    assert len(read) == 4
    assert check_copies(target, decode_changes(arc)) > 5


def _typed(cols, relation_id=16500):
    from pgoutput_codec import Relation, RelationColumn
    return Relation(relation_id=relation_id, namespace="public", relation_name="w", replica_identity="d",
                    columns=tuple(RelationColumn(1 if n == "id" else 0, n, oid, mod) for n, oid, mod in cols))


def _archive_of(msgs) -> pa.Table:
    from pgoutput_codec import encode_message
    data = [encode_message(m) for m in msgs]
    return pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})


def test_a_widened_column_is_rewritten_in_its_new_type_and_others_refused(tmp_path):
    """ALTER COLUMN … TYPE to a type that holds every value of the old (int4 -> int8,
    int2 -> int4, real -> double, numeric(5,2) -> numeric(9,3), date -> timestamp, int4
    -> numeric(12,2)): the copy's column is rewritten in the new Delta type and equals the
    snapshot; int4 -> text is refused by name; a table created again under the name with
    its key as text restarts the copy in the new types."""
    from deltalake import DeltaTable

    from pgoutput_codec import Begin, Commit, Insert, TupleColumn, Update

    def row(*vals):
        return tuple(TupleColumn("t", str(v).encode()) for v in vals)

    def txn(lsn, *changes):
        return [Begin(final_lsn=lsn, commit_ts=lsn, xid=lsn), *changes,
                Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=lsn)]
    num = lambda p, s: ((p << 16) | s) + 4   # noqa: E731
    old = _typed([("id", 23, -1), ("a", 21, -1), ("f", 700, -1), ("d", 1700, num(5, 2)), ("day", 1082, -1),
                  ("m", 23, -1), ("s", 23, -1)])
    new = _typed([("id", 20, -1), ("a", 23, -1), ("f", 701, -1), ("d", 1700, num(9, 3)), ("day", 1114, -1),
                  ("m", 1700, num(12, 2)), ("s", 23, -1)])
    msgs = txn(10, old, Insert(relation_id=16500, new_tuple=row(1, 7, 1.5, "123.45", "2024-02-29", 5, 1)),
               Insert(relation_id=16500, new_tuple=row(2, -3, -0.25, "-0.01", "1999-12-31", -6, 2)))
    target = tmp_path / "lake"
    mirror(_archive_of(msgs), target)
    path = table_path(target, "public.w")
    msgs += txn(20, new, Insert(relation_id=16500, new_tuple=row(3000000000, 70000, 1e300, "123456.789",
                                                                  "2024-03-01 12:00:00", "1234567890.12", 3)),
                Update(relation_id=16500, new_tuple=row(2, 9, 0.5, "1.5", "2000-01-01 00:00:01", "7.25", 4)))
    mirror(_archive_of(msgs), target)
    held = pa.schema(DeltaTable(path).schema().to_arrow())
    assert [(f.name, str(f.type)) for f in held][:6] == [
        ("id", "int64"), ("a", "int32"), ("f", "double"), ("d", "decimal128(9, 3)"), ("day", "timestamp[us]"),
        ("m", "decimal128(12, 2)")]
    want = snapshot(decode_changes(_archive_of(msgs)), "public.w")
    same_table(read_copy(path), want, "widened")
    same_table(log_read(path), want, "widened, from the log")
    assert same_values(pa.chunked_array([read_copy(path).sort_by("id").column("day")]),
                       pa.chunked_array([pa.array([1709164800, 946684801, 1709294400], pa.timestamp("s"))
                                         .cast(pa.timestamp("us"))]))
    # the same archive again: the widening is done, nothing new
    assert all(r.version is None for r in mirror(_archive_of(msgs), target))
    retyped = _typed([("id", 20, -1), ("a", 23, -1), ("f", 701, -1), ("d", 1700, num(9, 3)), ("day", 1114, -1),
                      ("m", 1700, num(12, 2)), ("s", 25, -1)])
    refused = msgs + txn(30, retyped, Insert(relation_id=16500, new_tuple=row(4, 1, 1, 1, "2024-01-01", 1, "four")))
    with pytest.raises(ValueError, match=r"public\.w\.s: the copy holds int32, the changes now send string"):
        mirror(_archive_of(refused), target)
    # dropped and created again, its key now text: a new relation, the copy restarted in its types
    again = _typed([("id", 25, -1), ("s", 25, -1)], relation_id=16600)
    msgs += txn(40, again, Insert(relation_id=16600, new_tuple=row("k1", "x")))
    mirror(_archive_of(msgs), target)
    assert read_copy(path).to_pylist() == [{"id": "k1", "s": "x"}]
    assert DeltaTable(path).metadata().configuration["delta.dataSkippingStatsColumns"] == "`id`"


def test_a_target_that_is_its_archive_or_inside_it_is_refused(tmp_path):
    """mirror() over an archive path refuses a target that is the archive, or a directory
    inside the archive's directory (its files would be read as archive files), before it
    writes anything."""
    arc = archive("16.14", "v1_text")
    src = tmp_path / "archive"
    src.mkdir()
    pq.write_table(arc, src / "a.parquet")
    with pytest.raises(ValueError, match="inside"):
        mirror(str(src), src / "lake")
    assert sorted(os.listdir(src)) == ["a.parquet"]
    with pytest.raises(ValueError, match="is the archive"):
        mirror(str(src), src)
    with pytest.raises(ValueError, match="is the archive"):
        mirror(str(src / "a.parquet"), src / "a.parquet")
    assert sorted(os.listdir(src)) == ["a.parquet"]


def test_a_zero_row_archive_file_leaves_the_run_resumable(tmp_path, monkeypatch):
    """An archive directory holding a file of no rows (a capture that ended before its
    first message): the next run still opens only what is new. A file without seq
    statistics makes each run read the archive from its start, and the run says so in
    one warning."""
    from pgoutput_codec.lake import MirrorWarning
    arc = archive("16.14", "v1_text")
    src, target, read = _grown_run(tmp_path, monkeypatch, arc, empty=True)
    # (the empty file is opened, to no effect: it has no seq to skip it by)
    assert sorted(os.path.basename(p) for p in read if "empty" not in p)[0] in ("part-2.parquet",
                                                                               "part-3.parquet"), read
    assert check_copies(target, decode_changes(arc)) > 5
    pq.write_table(arc.slice(0, 100), src / "part-0.parquet", write_statistics=False)
    with pytest.warns(MirrorWarning, match="part-0.parquet.*no seq statistics") as said:
        mirror(str(src), target)
    assert len([w for w in said if issubclass(w.category, MirrorWarning)]) == 1
    assert check_copies(target, decode_changes(arc)) > 5


def test_the_command_line_prints_the_mirror_warnings_alone(tmp_path, monkeypatch, capsys):
    """``mirror`` prints the mirror's own warnings as ``mirror: warning:`` lines; another
    library's warning (a DeprecationWarning raised during the run) is left to Python's
    warnings machinery."""
    import warnings

    from pgoutput_codec import lake
    from pgoutput_codec.cli import main
    arc = archive("16.14", "v1_text")
    src = tmp_path / "archive"
    src.mkdir()
    pq.write_table(arc, src / "a.parquet")
    target = tmp_path / "lake"
    real = lake.mirror

    def noisy(*a, **k):
        warnings.warn("some library's call is deprecated", DeprecationWarning, stacklevel=1)
        return real(*a, **k)
    monkeypatch.setattr(lake, "mirror", noisy)
    os.makedirs(target)
    (target / ".pgoutput_codec.mirror.json").write_text("[]")
    with warnings.catch_warnings(record=True) as others:
        warnings.simplefilter("always")
        assert main(["mirror", str(src), str(target)]) == 0
    err = capsys.readouterr().err
    assert "mirror: warning:" in err and "not a mirror checkpoint" in err, err
    assert "deprecated" not in err, err
    assert [str(w.message) for w in others] == ["some library's call is deprecated"]


class _LockHolder:
    """Another process holding the target's lock (``flock`` on its lock file) until
    :meth:`release`."""

    def __init__(self, target):
        import subprocess
        import sys
        os.makedirs(target, exist_ok=True)
        code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); "
                "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(target / ".pgoutput_codec.mirror.lock")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def waits_for_the_lock(target, run) -> None:
    """``run()`` (a write into ``target``) waits while another process holds the
    target's lock, and ends once it lets go."""
    import threading
    holder = _LockHolder(target)
    done = []
    th = threading.Thread(target=lambda: done.append(run()), daemon=True)
    try:
        th.start()
        th.join(2.0)
        assert th.is_alive() and not done, "the run did not wait for the target's lock"
    finally:
        holder.release()
    th.join(120)
    assert done, "the run did not end once the lock was let go"


def test_apply_batch_waits_for_the_targets_lock(tmp_path):
    """lake.apply_batch, the writer Spark's mirror shares, takes the target's lock as
    mirror() does: it waits while another process holds it, then writes its batch."""
    from pgoutput_codec import Begin, Commit, Insert, TupleColumn, net_changes
    from pgoutput_codec.lake import apply_batch
    msgs = [Begin(final_lsn=10, commit_ts=10, xid=10), _typed([("id", 23, -1), ("s", 25, -1)]),
            Insert(relation_id=16500, new_tuple=(TupleColumn("t", b"1"), TupleColumn("t", b"x"))),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=10)]
    net = net_changes(decode_changes(_archive_of(msgs)), "public.w")
    target = tmp_path / "lake"
    waits_for_the_lock(target, lambda: apply_batch(target, "public.w", net, []))
    assert read_copy(table_path(target, "public.w")).to_pylist() == [{"id": 1, "s": "x"}]


def test_the_lake_loads_no_opengauss_reader_until_one_is_asked_for():
    """A mirror of a pgoutput archive has no use for the openGauss readers: the lake and
    decode_changes load without them, and decode_changes(source="opengauss") loads them."""
    import subprocess
    import sys

    import pgoutput_codec
    code = ("import sys, pgoutput_codec.lake\n"
            "from pgoutput_codec import decode_changes\n"
            "assert not [m for m in sys.modules if '.opengauss' in m], sorted(sys.modules)\n"
            "assert len(decode_changes([], source='opengauss')) == 0\n"
            "assert 'pgoutput_codec.opengauss.changes' in sys.modules\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(pgoutput_codec.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
