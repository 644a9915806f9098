"""Copied rows: the Inserts of a COPY transaction (Begin xid 0) are change rows of op 'R'
on every decoding path, tables rebuilt from them treat 'R' as an upsert by key, a base
(a table's rows as of an LSN) stands for a copy, and a table whose start is unknown is
warned about."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from copied_rows import BASE, WANT_OPS, WANT_T, T, as_archive, copy_archive, ins, txn, uncopied_archive, upd
from pgoutput_codec import ChangeDecoder, TupleColumn, Update, decode_changes
from pgoutput_codec.changes.decoder import LightChangeDecoder
from pgoutput_codec.changes import ControlPlan
from pgoutput_codec.tables import decode_table_changes, history, net_changes, snapshot, table_changes

def ops(t: pa.Table) -> list:
    return t.column("op").to_pylist()


def by_id(t: pa.Table) -> list:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("path", ["plain", "general", "chunked", "threads"])
def test_inserts_of_a_copy_transaction_are_R_rows(path, monkeypatch):
    arc = copy_archive()
    if path == "plain":
        out = decode_changes(arc, workers=1)
    elif path == "general":
        monkeypatch.setattr(ChangeDecoder, "_VECTORIZED", False)
        out = decode_changes(arc, workers=1)
    elif path == "chunked":    # transactions cut across feeds: held, then emitted
        with ChangeDecoder() as dec:
            out = pa.concat_tables([dec.feed(arc.slice(k, 3)) for k in range(0, len(arc), 3)])
    else:
        from pgoutput_codec.changes.plan import decode_changes_parallel
        out = decode_changes_parallel(arc.column("data"), arc.column("seq"), splits=3)
    assert ops(out) == WANT_OPS
    assert out.column("xid").to_pylist()[:4] == [0, 0, 0, 0]
    r = out.filter(pc.equal(out.column("op"), "R"))
    assert r.column("before").null_count == len(r) and r.column("after").null_count == 0


def test_light_and_typed_paths_give_R_rows():
    arc = copy_archive()
    light = LightChangeDecoder().feed(arc)
    assert ops(light) == WANT_OPS
    typed = decode_table_changes(arc, "public.t")
    assert ops(typed) == ["R"] * 4 + ["U", "D", "I", "R", "R", "U"]
    assert ops(table_changes(decode_changes(arc), "public.t")) == ops(typed)


def test_control_plan_gives_R_rows():
    arc = copy_archive()
    keys = arc.column("seq").to_numpy()
    plan = ControlPlan.build(arc.column("data"), keys)
    assert ops(plan.changes(arc.column("data"), keys)) == WANT_OPS
    aligned = plan.change_rows(arc.column("data"), keys)
    assert [o for o in ops(aligned) if o is not None] == WANT_OPS


def test_a_streamed_insert_is_no_R_row_and_xid_0_nowhere_else():
    """Only a transaction of xid 0 copies: every other Insert stays 'I'."""
    out = decode_changes(as_archive(txn(5, 0x100, T, ins(T, 1, "a"))))
    assert ops(out) == ["I"]


def test_tables_rebuilt_from_copied_rows_upsert_by_key():
    """A copied row meets the key of a row held (the chunk copied again at 0x300): it
    replaces it. A copied row identical to the row held makes no new version."""
    changes = decode_changes(copy_archive())
    assert by_id(snapshot(changes, "public.t")) == WANT_T
    assert by_id(snapshot(changes, "public.t", as_of_lsn=0x100)) == [{"id": i, "v": f"c{i}"} for i in range(1, 5)]
    h = history(changes, "public.t").to_pylist()
    two = [(r["v"], r["__OP"], r["__START_LSN"], r["__END_LSN"]) for r in h if r["id"] == 2]
    assert two == [("c2", "R", 0x100, 0x200), ("u2", "U", 0x200, None)]
    six = [(r["v"], r["__OP"], r["__START_LSN"], r["__END_LSN"]) for r in h if r["id"] == 6]
    assert six == [("c6", "R", 0x300, 0x400), ("u6", "U", 0x400, None)]


@pytest.mark.parametrize("cut", [0, 0x100, 0x200])
def test_net_changes_of_copied_rows(cut):
    """Copied then unchanged: an upsert of the copy; copied then updated: an upsert of
    the newest image; copied then deleted: the key's delete, as for a row inserted in
    the batch (a copy the target holds from before is removed). Applied over the
    snapshot before the batch, the batch gives the snapshot after it."""
    changes = decode_changes(copy_archive())
    later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
    net = net_changes(later, "public.t").to_pylist()
    ups = {r["id"]: r["v"] for r in net if r["__OP"] == "upsert"}
    dels = {r["id"] for r in net if r["__OP"] == "delete"}
    target = {r["id"]: r["v"] for r in snapshot(changes, "public.t", as_of_lsn=cut or None).to_pylist()} if cut \
        else {}
    for k in dels:
        target.pop(k, None)
    target.update(ups)
    assert sorted(target.items()) == [(r["id"], r["v"]) for r in WANT_T]
    if cut == 0:
        assert ups == {1: "c1", 2: "u2", 4: "c4", 5: "n5", 6: "u6"} and dels == {3}


def test_a_table_whose_start_is_unknown_is_warned_about():
    """u was never copied: its rows from before capture are not in the archive."""
    from pgoutput_codec.tables import IncompleteTableWarning
    changes = decode_changes(copy_archive())
    for fn in (snapshot, history, net_changes):
        with pytest.warns(IncompleteTableWarning, match=r"public\.u: rows that existed before capture began are "
                          r"not in the archive; capture with --snapshot or pass base="):
            fn(changes, "public.u")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fn(changes, "public.t")


@pytest.mark.parametrize("form", ["table", "parquet", "mapping"])
def test_a_base_stands_for_the_copy(form, tmp_path):
    """Base rows at 0x100 act as copied rows: snapshot, net_changes and history over
    them and the changes after equal the copy's; an unchanged TOAST value comes from
    the base's row; no warning."""
    changes = decode_changes(uncopied_archive())
    if form == "parquet":
        pq.write_table(BASE, tmp_path / "t.parquet")
        kw = dict(base=str(tmp_path / "t.parquet"), base_lsn="0/100")
    elif form == "mapping":
        kw = dict(base={"public.t": BASE, "public.other": BASE}, base_lsn={"public.t": 0x100})
    else:
        kw = dict(base=BASE, base_lsn=0x100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert by_id(snapshot(changes, "public.t", **kw)) == WANT_T
        net = net_changes(changes, "public.t", **kw)
        h = history(changes, "public.t", **kw)
    assert sorted((r["id"], r["v"], r["__OP"]) for r in net.to_pylist()) == \
        [(1, "c1", "upsert"), (2, "u2", "upsert"), (3, None, "delete"), (4, "c4", "upsert"), (5, "n5", "upsert"),
         (6, "u6", "upsert")]
    assert all(not u for u in net.column("__UNCHANGED").to_pylist())
    got = sorted((r["id"], r["v"], r["__OP"], r["__START_LSN"], r["__END_LSN"]) for r in h.to_pylist())
    assert got == [(1, "c1", "R", 0x100, None), (2, "c2", "R", 0x100, 0x200), (2, "u2", "U", 0x200, None),
                   (3, "c3", "R", 0x100, 0x200), (4, "c4", "R", 0x100, 0x500), (4, "c4", "U", 0x500, None),
                   (5, "n5", "I", 0x200, None), (6, "c6", "I", 0x400, 0x400), (6, "u6", "U", 0x400, None)]


def test_changes_at_or_below_the_base_lsn_are_in_it():
    changes = decode_changes(uncopied_archive())
    later_base = pa.table({"id": pa.array([1, 2, 4, 5], pa.int32()), "v": ["c1", "u2", "c4", "n5"]})
    assert by_id(snapshot(changes, "public.t", base=later_base, base_lsn=0x200)) == WANT_T
    with pytest.raises(ValueError, match="as of 512, after as_of_lsn 256"):
        snapshot(changes, "public.t", 0x100, base=later_base, base_lsn=0x200)
    with pytest.raises(ValueError, match="needs base_lsn"):
        snapshot(changes, "public.t", base=later_base)


def test_a_mapping_that_leaves_a_table_out_still_warns():
    from pgoutput_codec.tables import IncompleteTableWarning
    changes = decode_changes(uncopied_archive())
    with pytest.warns(IncompleteTableWarning, match=r"public\.u"):
        snapshot(changes, "public.u", base={"public.t": BASE}, base_lsn=0x100)


def _copy_rows(target, name):
    from deltalake import DeltaTable
    from pgoutput_codec.lake import table_path
    t = DeltaTable(table_path(target, name)).to_pyarrow_table()
    return sorted(((r["id"], r["v"]) for r in t.to_pylist()))


def test_mirror_of_copied_rows_and_its_warning(tmp_path):
    """The copy of t (copied in the archive) holds every row; u (never copied) is made
    with a warning, once: a later run over its copy does not warn again."""
    from pgoutput_codec.lake import mirror
    from pgoutput_codec.tables import IncompleteTableWarning
    arc = copy_archive()
    with pytest.warns(IncompleteTableWarning) as said:
        mirror(arc, tmp_path / "lake")
    assert [w.message.table for w in said if issubclass(w.category, IncompleteTableWarning)] == ["public.u"]
    assert _copy_rows(tmp_path / "lake", "public.t") == [(r["id"], r["v"]) for r in WANT_T]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = mirror(arc, tmp_path / "lake")
    assert all(r.version is None for r in runs)


def test_mirror_from_a_base(tmp_path):
    """A copy created from a base (one run, then a run with more changes: exactly
    once), and a table with a base and no change yet: its copy is the base."""
    from pgoutput_codec.lake import mirror
    arc = uncopied_archive()
    other = pa.table({"id": pa.array([7], pa.int32()), "v": ["z"]})
    base = {"public.t": BASE, "public.w": other}
    pq.write_table(BASE, tmp_path / "t.parquet")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        first = arc.slice(0, 9)          # the first transaction alone
        mirror(first, tmp_path / "lake", base={"public.t": str(tmp_path / "t.parquet"), "public.w": other},
               base_lsn=0x100, tables="public.t,public.w")
        assert _copy_rows(tmp_path / "lake", "public.t") == [(1, "c1"), (2, "u2"), (4, "c4"), (5, "n5")]
        assert _copy_rows(tmp_path / "lake", "public.w") == [(7, "z")]
        mirror(arc, tmp_path / "lake", base=base, base_lsn=0x100, tables="public.t,public.w")
        mirror(arc, tmp_path / "lake", base=base, base_lsn=0x100, tables="public.t,public.w")
    assert not [w for w in said if "capture began" in str(w.message)]
    assert _copy_rows(tmp_path / "lake", "public.t") == [(r["id"], r["v"]) for r in WANT_T]


def test_the_plan_knows_the_copied_tables_without_decoding_rows():
    arc = copy_archive()
    keys = arc.column("seq").to_numpy()
    plan = ControlPlan.build(arc.column("data"), keys)
    assert plan.copied_relations() == {T.relation_id: 0x100}
    assert plan.between(after_lsn=0x100).copied_relations() == {T.relation_id: 0x300}
    assert plan.between(after_lsn=0x300).copied_relations() == {}


def test_net_changes_by_columns_equal_the_replay_over_copied_rows():
    """The column-at-a-time net changes and the key-by-key replay agree on copied rows,
    one copied again equal to the row held too (its commit is the key's last)."""
    from pgoutput_codec.tables.net import net_by_columns, net_by_replay
    from pgoutput_codec.tables.rows import resolve, table_columns
    changes = decode_changes(copy_archive())
    rows, _ = resolve(changes, "public.t")
    cols = table_columns(changes, "public.t", _rows=rows)
    fast, slow = net_by_columns(rows, cols), net_by_replay(rows, "public.t", False, cols)
    assert fast is not None
    assert sorted(fast.to_pylist(), key=repr) == sorted(slow.to_pylist(), key=repr)


def _cli(*args):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-m", "pgoutput_codec.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=root), timeout=300, cwd=root)


def test_the_command_line_decodes_copied_rows_and_inspect_counts_them(tmp_path):
    """decode --changes gives 'R' rows; inspect shows per table the rows copied and the
    LSN from which it is whole (its first copy's commit), or that its start is unknown.
    Cut into files at every other row: the copy transaction spans batches."""
    import json

    from pgoutput_codec.cli.inspect import inspect_archive
    d = tmp_path / "arc"
    d.mkdir()
    arc = copy_archive()
    for k in range(0, len(arc), 2):
        pq.write_table(arc.slice(k, 2), d / f"part-{k:04d}.parquet")
    res = _cli("decode", str(d), str(tmp_path / "c.parquet"), "--changes")
    assert res.returncode == 0, res.stderr
    assert pq.read_table(tmp_path / "c.parquet").column("op").to_pylist() == WANT_OPS
    r = inspect_archive(str(d))
    assert r["by_table"] == {"public.t": {"R": 6, "U": 2, "D": 1, "I": 1}, "public.u": {"I": 1, "U": 1}}
    assert r["complete_from"] == {"public.t": "0/100", "public.u": None}
    res = _cli("inspect", str(d))
    assert res.returncode == 0, res.stderr
    line = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.startswith("public.")}
    assert line["public.t"].split() == ["public.t", "6", "1", "2", "1", "0", "0/100"], res.stdout
    assert line["public.u"].split()[1:] == ["0", "1", "1", "0", "0", "start", "unknown"], res.stdout
    assert json.loads(_cli("inspect", str(d), "--json").stdout)["complete_from"]["public.t"] == "0/100"


def test_inspect_reads_when_a_copy_is_complete_from_the_files_it_was_written_with(tmp_path):
    """Files that record their copies (capture's ``copy`` metadata): a table copied in
    chunks is whole from its last chunk's commit, not its first."""
    import json

    from pgoutput_codec.archive import META_KEY
    from pgoutput_codec.cli.inspect import inspect_archive
    arc = copy_archive()
    meta = {"copy": {"kind": "chunk", "lsn": "0/300", "tables": [
        {"relid": T.relation_id, "schema": "public", "table": "t", "rows": 2, "last_key": None, "complete": True}]}}
    first = {"copy": {"kind": "chunk", "lsn": "0/100", "tables": [
        {"relid": T.relation_id, "schema": "public", "table": "t", "rows": 4, "last_key": [4], "complete": False}]}}
    d = tmp_path / "arc"
    d.mkdir()
    for k, (a, b, m) in enumerate([(0, 7, first), (7, 17, None), (17, len(arc), meta)]):
        t = arc.slice(a, b - a)
        if m is not None:
            t = t.replace_schema_metadata({META_KEY: json.dumps(m)})
        pq.write_table(t, d / f"part-{k}.parquet")
    assert inspect_archive(str(d))["complete_from"] == {"public.t": "0/300", "public.u": None}


def test_history_over_a_base_fills_each_version_by_its_own_change():
    """Two updates of a base row in one transaction, the first leaving v unchanged
    (TOAST), the second setting it: the first version holds the base's v, the second
    its own."""
    msgs = txn(9, 0x200, T, Update(relation_id=T.relation_id, new_tuple=(TupleColumn("t", b"4"),
                                                                          TupleColumn("u", None))),
               upd(T, 4, "y"))
    changes = decode_changes(as_archive(msgs))
    h = history(changes, "public.t", base=BASE, base_lsn=0x100)
    four = [(r["v"], r["__OP"], r["__START_LSN"]) for r in h.to_pylist() if r["id"] == 4]
    assert four == [("c4", "R", 0x100), ("c4", "U", 0x200), ("y", "U", 0x200)]
