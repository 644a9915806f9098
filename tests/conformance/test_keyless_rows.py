"""Tables with no key as multisets, on real servers (15, 16, 18): rows alike in every
column are as many in ``snapshot``, ``history``, ``net_changes`` and ``mirror`` as on the
server, an Update or Delete naming several by its old row changes one of them, as the
server's own apply does (tests/keyless_rows.py: the workload)."""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

import keyless_rows as K  # noqa: E402

from pgoutput_codec import decode_changes, history, mirror, net_changes, snapshot  # noqa: E402


@pytest.fixture(scope="module")
def steps(pg_server):
    with pg_server.connect() as conn:
        return K.run(conn)


def _cut(changes: pa.Table):
    return pc.max(changes.column("commit_lsn")).as_py()


def test_snapshot_holds_as_many_alike_rows_as_the_server(steps):
    for step, archive, server in steps:
        changes = decode_changes(archive)
        for t in K.TABLES:
            assert K.rows_of(snapshot(changes, f"public.{t}")) == server[t], (step, t)


def test_history_holds_as_many_alike_versions_as_the_server_rows(steps):
    """The versions alive as of each step's commit are the server's rows then; an Update
    of one of several alike rows ends one version."""
    final = decode_changes(steps[-1][1])
    hist = {t: history(final, f"public.{t}").to_pylist() for t in K.TABLES}
    for step, archive, server in steps:
        cut = _cut(decode_changes(archive))
        for t in K.TABLES:
            alive = [r for r in hist[t] if r["__START_LSN"] <= cut and (r["__END_LSN"] is None or r["__END_LSN"] > cut)]
            assert K.rows_of(alive) == server[t], (step, t)
    ms = hist["ms"]
    assert sum(r["__OP"] == "U" for r in ms) == 5
    assert sorted(r["v"] for r in ms if r["__OP"] == "I" and r["k"] == 1) == ["a", "a", "a"]


def test_net_changes_count_alike_rows(steps):
    """The net changes after any step, applied to the server's rows then (each upsert
    adds a row, each delete removes one), give the server's rows at the end."""
    final = decode_changes(steps[-1][1])
    for t in K.TABLES:
        net = net_changes(final, f"public.{t}")
        assert K.applied([], net) == steps[-1][2][t], t
    for step, archive, server in steps:
        cut = _cut(decode_changes(archive))
        later = final.filter(pc.greater(final.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
        for t in K.TABLES:
            net = net_changes(later, f"public.{t}")
            assert K.applied(server[t], net) == steps[-1][2][t], (step, t)


def test_net_changes_of_inserts_and_deletes_by_columns_equal_the_replay(steps):
    """A batch of Inserts and Deletes alone is counted a column at a time; the replay
    counts the same rows."""
    from pgoutput_codec.tables.net import net_by_columns, net_by_replay
    from pgoutput_codec.tables.rows import resolve, table_columns
    final = decode_changes(steps[-1][1])
    fast = 0
    for i in range(len(steps)):
        for j in range(i + 1, len(steps)):
            lo, hi = _cut(decode_changes(steps[i][1])), _cut(decode_changes(steps[j][1]))
            lsn = final.column("commit_lsn")
            batch = final.filter(pc.and_(pc.greater(lsn, pa.scalar(lo, pa.uint64())),
                                         pc.less_equal(lsn, pa.scalar(hi, pa.uint64()))))
            for t in K.TABLES:
                rows, replaced = resolve(batch, f"public.{t}")
                cols = table_columns(batch, f"public.{t}", _rows=rows)
                got = net_by_columns(rows, cols)
                if got is None:
                    continue
                fast += 1
                want = net_by_replay(rows, f"public.{t}", replaced, cols)
                assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, want.to_pylist())), (i, j, t)
    assert fast >= 10


def test_net_changes_of_two_inserted_and_one_deleted_is_one_insert(steps):
    before, after = steps[9], steps[10]
    assert after[0].startswith("BEGIN; INSERT INTO ms VALUES (6, 'd')")
    changes = decode_changes(after[1])
    net = net_changes(changes.filter(pc.greater(changes.column("commit_lsn"),
                                                pa.scalar(_cut(decode_changes(before[1])), pa.uint64()))), "public.ms")
    assert [(r["__OP"], r["k"], r["v"]) for r in net.to_pylist()] == [("upsert", 6, "d")]
    # three alike rows inserted, and one more in a later transaction: four upserts
    net = net_changes(decode_changes(steps[7][1]), "public.mn")
    assert [(r["__OP"], r["k"], r["v"]) for r in net.to_pylist()] == [("upsert", 1, "x")] * 3


def test_mirror_holds_as_many_alike_rows_as_the_server(steps, tmp_path):
    """A copy mirrored after every step (the archive so far: an archive that grows)
    holds the server's rows, duplicates kept, exactly once across runs."""
    from pgoutput_codec.lake import read_copy, table_path
    target = str(tmp_path / "lake")
    for step, archive, server in steps:
        mirror(archive, target)
        for t in K.TABLES:
            if os.path.isdir(table_path(target, f"public.{t}")):
                assert K.rows_of(read_copy(table_path(target, f"public.{t}"))) == server[t], (step, t)
        again = mirror(archive, target)
        assert all(r.version is None for r in again), step
    # one run over the whole archive, into a new target
    whole = str(tmp_path / "whole")
    mirror(steps[-1][1], whole)
    for t in K.TABLES:
        assert K.rows_of(read_copy(table_path(whole, f"public.{t}"))) == steps[-1][2][t], t


def test_rows_of_the_initial_copy_count_as_inserts(steps):
    """Change rows of op 'R' (rows an initial copy holds) add rows as Inserts do: the
    workload's first Inserts given as copied rows leave every table as the server's."""
    changes = decode_changes(steps[-1][1])
    first = _cut(decode_changes(steps[1][1]))
    op = changes.column("op")
    copied = pc.and_(pc.equal(op, "I"), pc.less_equal(changes.column("commit_lsn"), pa.scalar(first, pa.uint64())))
    assert pc.sum(copied.cast(pa.int8())).as_py() == 6
    changes = changes.set_column(changes.schema.get_field_index("op"), "op", pc.if_else(copied, "R", op))
    for t in K.TABLES:
        assert K.rows_of(snapshot(changes, f"public.{t}")) == steps[-1][2][t], t
        assert K.applied([], net_changes(changes, f"public.{t}")) == steps[-1][2][t], t
        alive = [r for r in history(changes, f"public.{t}").to_pylist() if r["__END_LSN"] is None]
        assert K.rows_of(alive) == steps[-1][2][t], t


@pytest.mark.parametrize("k", [2, 4, 8])
def test_a_base_with_rows_alike_counts_them(steps, k, tmp_path):
    """A base (the server's rows after step ``k``, duplicates kept) with the changes
    after it: snapshot, net changes, history and a mirror give the server's rows at the
    end."""
    from pgoutput_codec.lake import read_copy, table_path
    final = decode_changes(steps[-1][1])
    bases = {}
    lsn = _cut(decode_changes(steps[k][1]))
    for t in K.TABLES:
        base = pa.table({"k": pa.array([r[0] for r in steps[k][2][t]], pa.int32()),
                         "v": pa.array([r[1] for r in steps[k][2][t]], pa.string())})
        bases[f"public.{t}"] = base
        want = steps[-1][2][t]
        assert K.rows_of(snapshot(final, f"public.{t}", base=base, base_lsn=lsn)) == want, t
        assert K.applied([], net_changes(final, f"public.{t}", base=base, base_lsn=lsn)) == want, t
        hist = history(final, f"public.{t}", base=base, base_lsn=lsn).to_pylist()
        assert K.rows_of(r for r in hist if r["__END_LSN"] is None) == want, t
        for step, archive, server in steps[k:]:
            cut = _cut(decode_changes(archive))
            alive = [r for r in hist if r["__START_LSN"] <= cut and (r["__END_LSN"] is None or r["__END_LSN"] > cut)]
            assert K.rows_of(alive) == server[t], (step, t)
    mirror(steps[-1][1], str(tmp_path / "lake"), base=bases, base_lsn=lsn)
    for t in K.TABLES:
        assert K.rows_of(read_copy(table_path(str(tmp_path / "lake"), f"public.{t}"))) == steps[-1][2][t], t
