"""pgoutput_codec.mirror over many tables at once: each table is brought current from its
own group of change rows (split once), on several threads or one, and gives the copies
the per-table step gives over every table's rows; a copy made by a run is one Delta
commit."""

from __future__ import annotations

import os
import warnings

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

import table_moves as TM  # noqa: E402
from change_cases import archive, enc, renamed_archive, same_values  # noqa: E402

from pgoutput_codec import decode_changes, mirror  # noqa: E402
from pgoutput_codec.idents import qualified_name  # noqa: E402
from pgoutput_codec.lake import mirror_table, read_copy, table_path  # noqa: E402
from pgoutput_codec.tables import IncompleteTableWarning  # noqa: E402

#: the copies' commit metadata the mirror writes
TABLE_KEY, LSN_KEY = "pgoutput_codec.table", "pgoutput_codec.commit_lsn"


def sources() -> dict:
    """Change rows of many tables: a real server's (every type, TOAST, truncates,
    streamed and prepared transactions), tables dropped and created again, swapped and
    renamed (the scenarios one after another, in relations of their own), and a table
    renamed out of a name and back."""
    moves, first = [], 16500
    for steps in TM.SCENARIOS.values():
        msgs, _ = TM.messages(steps, first_relation_id=first, lsn=100 + 10 * first)
        moves += msgs
        first += 1000
    return {"server": decode_changes(archive("16.14", "v3_2pc_binary_streaming")),
            "moves": decode_changes(pa.array(enc(moves), pa.binary())),
            "renamed": decode_changes(renamed_archive()[0][4:])}     # (from its first Relation on)


def thirds(changes: pa.Table):
    return [changes.slice(0, end) for end in (len(changes) // 3, 2 * len(changes) // 3, len(changes))]


def copies(target) -> dict:
    """Each copy's rows (sorted), Delta version and application transaction."""
    out = {}
    for d in sorted(os.listdir(target)):
        path = os.path.join(target, d)
        if not os.path.isdir(os.path.join(path, "_delta_log")):
            continue
        dt = deltalake.DeltaTable(path)
        rows = read_copy(dt)
        rows = rows.sort_by([(c, "ascending") for c in rows.column_names
                             if not pa.types.is_nested(rows.schema.field(c).type)])
        out[d] = (rows, dt.version(), dt.transaction_version("pgoutput_codec.mirror"))
    return out


def same_copies(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for d in a:
        assert a[d][1:] == b[d][1:], d
        assert a[d][0].schema == b[d][0].schema, d
        assert all(same_values(a[d][0].column(c), b[d][0].column(c)) for c in a[d][0].column_names), d


def names_of(changes: pa.Table) -> list[str]:
    return sorted({qualified_name(s, t) for s, t in zip(changes.column("schema").to_pylist(),
                                                         changes.column("table").to_pylist(), strict=True) if t})


def said(fn, *args, **kw) -> tuple:
    """(what ``fn`` gives, the warnings it gives, in order)."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = fn(*args, **kw)
    return out, [(w.category, str(w.message)) for w in got]


@pytest.mark.parametrize("which", ["server", "moves", "renamed"])
def test_many_tables_at_once_give_the_copies_of_table_by_table(which, tmp_path):
    """mirror() splits the rows once and brings each table current from its group; the
    per-table step given every table's rows, table by table, gives the same copies
    (rows, Delta versions, transactions) and the same runs, over three growing runs."""
    changes = sources()[which]
    for part in thirds(changes):
        runs, _ = said(mirror, part, tmp_path / "all")
        one, _ = said(lambda p: [mirror_table(tmp_path / "each", n, p) for n in names_of(p)], part)
        assert runs == sorted(one, key=lambda r: r.table)
        same_copies(copies(tmp_path / "all"), copies(tmp_path / "each"))
    assert len(copies(tmp_path / "all")) >= 2


@pytest.mark.parametrize("workers", [2, 5])
def test_tables_on_several_threads_give_the_copies_of_one(workers, tmp_path):
    """workers=N writes copies on N threads: the same copies, runs and warnings (in the
    same order) as on one, run after run."""
    for which, changes in sources().items():
        for part in thirds(changes):
            one = said(mirror, part, tmp_path / which / "one", workers=1)
            many = said(mirror, part, tmp_path / which / "many", workers=workers)
            assert many == one
            incomplete = [m for c, m in many[1] if c is IncompleteTableWarning]     # in table order
            assert incomplete == sorted(incomplete, key=lambda m: m.split(":")[0])
            same_copies(copies(tmp_path / which / "many"), copies(tmp_path / which / "one"))


def test_workers_must_be_a_positive_number(tmp_path):
    changes = sources()["renamed"]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            mirror(changes, tmp_path / "lake", workers=bad)
    assert not os.path.exists(tmp_path / "lake")


def test_a_copy_made_by_a_run_is_one_commit_with_its_rows_name_and_transaction(tmp_path):
    """A copy created by a run exists whole or not at all: one Delta commit holds its
    rows, the table it is of, the commit LSN it reached and the run's application
    transaction."""
    changes = sources()["server"]
    runs = mirror(changes, tmp_path / "lake")
    assert len(runs) > 3
    for r in runs:
        dt = deltalake.DeltaTable(table_path(tmp_path / "lake", r.table))
        assert dt.version() == 0 == r.version, r.table
        (commit,) = dt.history()
        assert commit[TABLE_KEY] == r.table and int(commit[LSN_KEY]) == r.commit_lsn
        assert dt.transaction_version("pgoutput_codec.mirror") == r.commit_lsn
        assert len(read_copy(dt)) == r.upserts
    assert sum(r.upserts for r in runs) > 0


def test_change_rows_read_back_from_parquet_split_without_a_copy_per_table(tmp_path):
    """Change rows read back from Parquet hold a column list per row, in several chunks
    (one per file here): split by table, the groups hold about the rows' bytes, not
    every chunk's column lists once per table (tables times rows)."""
    import pyarrow.parquet as pq

    from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn
    from pgoutput_codec.tables.rows import split_tables
    msgs = []
    for k in range(100):
        msgs += [Begin(final_lsn=10 * k + 10, commit_ts=0, xid=k + 1),
                 Relation(relation_id=30000 + k, namespace="public", relation_name=f"t{k}", replica_identity="d",
                          columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1))),
                 *[Insert(relation_id=30000 + k, new_tuple=(TupleColumn("t", str(i).encode()),
                                                            TupleColumn("t", b"x"))) for i in range(20)],
                 Commit(commit_lsn=10 * k + 10, end_lsn=10 * k + 11, commit_ts=0)]
    changes = decode_changes(pa.array(enc(msgs), pa.binary()))
    half = len(changes) // 2
    pq.write_table(changes.slice(0, half), tmp_path / "a.parquet")
    pq.write_table(changes.slice(half), tmp_path / "b.parquet")
    back = pa.concat_tables([pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "b.parquet")])
    assert back.column("columns").num_chunks == 2
    before = pa.total_allocated_bytes()
    groups = split_tables(back)
    assert len(groups) == 100 and sum(len(g) for g in groups.values()) == len(back)
    assert pa.total_allocated_bytes() - before < 3 * back.nbytes, (pa.total_allocated_bytes() - before, back.nbytes)
    same_copies(copies(_mirrored(back, tmp_path / "back")), copies(_mirrored(changes, tmp_path / "decoded")))


def _mirrored(changes, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mirror(changes, target)
    return target


def _net(data: dict, ops: list, truncated: bool, chunks: int) -> pa.Table:
    """A net_changes batch of table public.t by hand: ``data``'s columns (key ``id``),
    ``ops`` per row, a truncate row first or not, in ``chunks`` chunks."""
    import datetime as dt
    from pgoutput_codec.tables.net import truncate_row
    n = len(ops)
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    t = pa.table({**data, "__OP": pa.array(ops), "__UNCHANGED": pa.array([[]] * n, pa.list_(pa.string())),
                  "__UNCHANGED_FROM": pa.nulls(n, pa.struct([("id", pa.int64())])),
                  "__COMMIT_LSN": pa.array([100 + 10 * i for i in range(n)], pa.uint64()),
                  "__COMMIT_AT": pa.array([at + dt.timedelta(seconds=i) for i in range(n)],
                                          pa.timestamp("us", tz="UTC")),
                  "__RELATION_ID": pa.array([16384] * n, pa.uint32())})
    if truncated:
        t = pa.concat_tables([truncate_row(t.schema, (90, at), 16384), t])
    if chunks > 1:
        t = pa.concat_tables([t.slice(0, 2), t.slice(2)])
        assert t.column(0).num_chunks >= 2
    return t


@pytest.mark.parametrize("truncated", [False, True])
@pytest.mark.parametrize("chunks", [1, 2])
@pytest.mark.parametrize("deletes", [False, True])
@pytest.mark.parametrize("typed", ["delta", "converted", "spark"])
def test_a_copy_created_holds_the_batch_upserts_in_delta_types(typed, deletes, chunks, truncated, tmp_path):
    """A copy created from a batch holds its upserts alone (a delete finds no row), in
    Delta's types: columns in Delta's types already, or converted (uint32 to int64, time
    to µs), or as a batch of Spark's holds them (commit LSNs as decimal(20,0), fields
    required and with metadata, as read back from Parquet: the copy's columns are
    nullable), in one chunk or several, after a truncate row or not; the run counts the
    upserts and deletes."""
    import datetime as dt
    from pgoutput_codec.lake import apply_batch
    ops = ["upsert", "delete", "upsert", "upsert", "delete"] if deletes else ["upsert"] * 5
    up = [i for i, o in enumerate(ops) if o == "upsert"]
    data = {"id": pa.array(range(1, 6), pa.int64()),
            "s": pa.array([None if o == "delete" else f"s{i}" for i, o in enumerate(ops)])}
    want = [{"id": i + 1, "s": f"s{i}"} for i in up]
    types = {"id": pa.int64(), "s": pa.string()}
    if typed == "converted":
        data["u"] = pa.array([None if o == "delete" else 2**32 - 1 - i for i, o in enumerate(ops)], pa.uint32())
        data["at"] = pa.array([None if o == "delete" else dt.time(1, 2, i) for i, o in enumerate(ops)],
                              pa.time64("us"))
        for r, i in zip(want, up, strict=True):
            r.update(u=2**32 - 1 - i, at=(3600 + 120 + i) * 1_000_000)
        types.update(u=pa.int64(), at=pa.int64())
    net = _net(data, ops, truncated, chunks)
    if typed == "spark":
        net = net.cast(pa.schema([f.with_type(pa.decimal128(20, 0)) if f.name == "__COMMIT_LSN" else
                                  f.with_nullable(f.name != "id" or truncated).with_metadata({b"from": b"parquet"})
                                  if f.name in data else f for f in net.schema]))
    run = apply_batch(tmp_path / "lake", "public.t", net, [])
    assert run == ("public.t", 0, 140, len(up), len(ops) - len(up), truncated)
    back = read_copy(table_path(tmp_path / "lake", "public.t"))
    assert back.schema == pa.schema(types)
    assert back.sort_by("id").to_pylist() == want


@pytest.mark.parametrize("min_bytes,threads", [(None, 1), (1, 2)])
def test_an_archive_decodes_on_the_threads_its_files_pay_for(min_bytes, threads, tmp_path, monkeypatch):
    """workers=2 over an archive directory: its feeds (here the two small files joined)
    decode on up to two threads, as many as the largest file's payload pays for
    (``threads.WORKER_MIN_BYTES``, as the decoder sizes workers=None): a small one on
    one. The copies are those of workers=1."""
    import importlib

    import pyarrow.parquet as pq

    import pgoutput_codec.threads as T
    lm = importlib.import_module("pgoutput_codec.lake.mirror")
    if min_bytes is not None:
        monkeypatch.setattr(T, "WORKER_MIN_BYTES", min_bytes)
    monkeypatch.setattr(T, "usable_cores", lambda: 2)
    used = []

    class Seen(lm.ChangeDecoder):
        def feed(self, *args, **kwargs):
            out = super().feed(*args, **kwargs)
            used.append(self.workers)
            return out
    monkeypatch.setattr(lm, "ChangeDecoder", Seen)
    arc = archive("16.14", "v3_2pc_binary_streaming")
    src = tmp_path / "archive"
    src.mkdir()
    pq.write_table(arc.slice(0, 300), src / "a.parquet")
    pq.write_table(arc.slice(300), src / "b.parquet")
    two = said(mirror, src, tmp_path / "two", workers=2)
    assert used and set(used) == {threads}
    assert said(mirror, src, tmp_path / "one", workers=1) == two
    assert len(copies(tmp_path / "one")) > 3
    same_copies(copies(tmp_path / "two"), copies(tmp_path / "one"))


def test_an_archive_of_small_files_is_decoded_in_joined_feeds(tmp_path):
    """Files of few rows (capture's ``rows_per_file``, or a poll's) are fed to the decoder
    joined, up to a feed's rows, a file of another schema apart: the feeds hold the
    files' rows in order, and the copies and runs are those of the rows in one file."""
    import pyarrow.parquet as pq

    from pgoutput_codec.runs import IncrementalRun
    arc = archive("16.14", "v3_2pc_binary_streaming")
    many, one = tmp_path / "many", tmp_path / "one"
    many.mkdir()
    one.mkdir()
    starts = list(range(0, len(arc), 37))
    for k, a in enumerate(starts):
        part = arc.slice(a, 37)
        pq.write_table(part.drop_columns(["lsn"]) if k == 3 else part, many / f"part-{k:04d}.parquet")
    pq.write_table(arc, one / "all.parquet")
    feeds = list(IncrementalRun(many).feeds(100))
    sizes = [len(t) for t in feeds]
    assert sizes[:4] == [74, 37, 37, 74] and max(sizes) <= 100 and sum(sizes) == len(arc)
    assert "lsn" not in feeds[2].column_names
    files = [t for _, t in IncrementalRun(many).tables()]
    assert all(a.select(["seq", "data"]).equals(b.select(["seq", "data"]))
               for a, b in zip(feeds, [pa.concat_tables(files[0:2]), files[2], files[3]], strict=False))
    runs = said(mirror, many, tmp_path / "from_many")
    assert said(mirror, one, tmp_path / "from_one") == runs and len(runs[0]) > 3
    same_copies(copies(tmp_path / "from_many"), copies(tmp_path / "from_one"))


def test_a_mirror_run_loads_no_pyarrow_dataset(tmp_path):
    """A run in a fresh process reads its archive files and splits their rows without
    pyarrow.dataset (pq.read_table and Arrow's group_by load it and what it loads, tens
    of milliseconds a process)."""
    import subprocess
    import sys

    import pyarrow.parquet as pq
    src = tmp_path / "archive"
    src.mkdir()
    arc = archive("16.14", "v3_2pc_binary_streaming")
    pq.write_table(arc.slice(0, 300), src / "a.parquet")
    pq.write_table(arc.slice(300), src / "b.parquet")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys, warnings; warnings.simplefilter('ignore'); import pgoutput_codec; "
            f"runs = pgoutput_codec.mirror({str(src)!r}, {str(tmp_path / 'lake')!r}); "
            "print(len(runs), sorted(m for m in sys.modules if m.startswith(('pyarrow.dataset', 'pyarrow.acero'))))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=root), capture_output=True,
                         text=True, check=True).stdout.split(maxsplit=1)
    assert int(out[0]) > 3 and out[1].strip() == "[]"
