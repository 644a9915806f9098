"""Tables from change rows of the real-server corpus and hand-built streams: snapshot,
history, net changes, typed columns, one-step decode_table_changes against the two-step
path, domains and array dimensions."""

from __future__ import annotations


import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import (
    Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn, Update, encode_message,
)
from pgoutput_codec.arrays import plain_lists
from pgoutput_codec import decode_changes
from pgoutput_codec.tables import decode_table_changes, history, net_changes, snapshot, table_changes

from arrow_values import values_equal

from change_cases import REL, SETS, TABLES, TRUTH, _apply_net, _in_order, _norm, _rows, archive, enc, registry_for, row



def test_snapshot_history_toast_and_key_change():
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), REL,
            Insert(relation_id=16400, new_tuple=row(1, "big")),
            Insert(relation_id=16400, new_tuple=row(2, "two")),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            Begin(final_lsn=2, commit_ts=1, xid=2),
            Update(relation_id=16400, old_kind="K", old_tuple=row(1, None), new_tuple=row(5, "<u>")),
            Delete(relation_id=16400, old_kind="K", old_tuple=row(2, None)),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=1)]
    ch = decode_changes(enc(msgs))
    snap = snapshot(ch, "public.t")
    assert snap.to_pylist() == [{"id": 5, "v": "big"}]          # key moved, TOAST carried
    assert snapshot(ch, "public.t", as_of_lsn=10).sort_by("id").to_pylist() == \
        [{"id": 1, "v": "big"}, {"id": 2, "v": "two"}]
    h = history(ch, "public.t").sort_by("__START_LSN")
    assert h.column("id").to_pylist() == [1, 2, 5]
    assert h.column("__END_LSN").to_pylist() == [20, 20, None]
    tc = table_changes(ch, "public.t")
    assert tc.column("unchanged").to_pylist() == [None, None, ["v"], None]
    assert tc.column("after").to_pylist()[2] == {"id": 5, "v": None}


@pytest.mark.parametrize("version,option_set", SETS)
def test_decode_table_changes_equals_the_two_step_path(version, option_set):
    """The fused path (values converted in place from the decoded messages) gives, for
    every table of every real-server archive, exactly table_changes(decode_changes(…))."""
    reg = registry_for(version)
    arc = archive(version, option_set)
    changes = decode_changes(arc, registry=reg)
    names = sorted({f"{s}.{t}" for s, t in zip(changes.column("schema").to_pylist(),
                                              changes.column("table").to_pylist(), strict=True) if t})
    assert names
    for name in names:
        want = table_changes(changes, name, registry=reg)
        got = decode_table_changes(arc, name, registry=registry_for(version))
        assert got.schema == want.schema, name
        for col in want.column_names:
            assert values_equal(got.column(col), want.column(col)), (name, col)


@pytest.mark.parametrize("version,option_set", SETS)
def test_every_single_process_path_types_the_same_table(version, option_set, tmp_path, capsys):
    """With no registry (the domain learnt from its Type message), every table of every
    real-server archive typed by table_changes(decode_changes(…)), by decode_table_changes
    and by table_changes over the change rows the command line's ``decode --changes``
    wrote, read back from Parquet, is one table."""
    from pgoutput_codec.cli import main
    arc = archive(version, option_set)
    changes = decode_changes(arc)
    src, out = tmp_path / "archive.parquet", tmp_path / "changes.parquet"
    pq.write_table(arc, src)
    assert main(["decode", str(src), str(out), "--changes"]) == 0
    written = pq.read_table(out)
    names = sorted({f"{s}.{t}" for s, t in zip(changes.column("schema").to_pylist(),
                                              changes.column("table").to_pylist(), strict=True) if t})
    for name in names:
        want = table_changes(changes, name)
        for what, got in (("decode_table_changes", decode_table_changes(arc, name)),
                          ("decode --changes", table_changes(written, name))):
            assert got.schema == want.schema, (what, name)
            for col in want.column_names:
                assert values_equal(got.column(col), want.column(col)), (what, name, col)
        if name == "public.all_types":
            assert want.column("after").type.field("c_posint").type == pa.int32()


def test_one_refused_value_keeps_its_column_typed():
    """An int4 column whose middle value is out of range (2147483648): that value is null
    with its own ``__special`` (the refusal), the others keep the column's type and no
    note — from table_changes, decode_table_changes and snapshot, text and binary."""
    rel = Relation(relation_id=16500, namespace="public", relation_name="r", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "a", 23, -1)))
    for kind, vals in (("t", [b"1", b"2147483648", b"3"]), ("b", [b"\0\0\0\1", b"\0\0\1", b"\0\0\0\3"])):
        msgs = enc([Begin(final_lsn=1, commit_ts=0, xid=5), rel]
                   + [Insert(relation_id=16500, new_tuple=(TupleColumn("t", str(i).encode()), TupleColumn(kind, v)))
                      for i, v in enumerate(vals)] + [Commit(commit_lsn=1, end_lsn=2, commit_ts=0)])
        ch = decode_changes(msgs)
        for got in (table_changes(ch, "public.r").column("after").flatten(),
                    decode_table_changes(msgs, "public.r").column("after").flatten(),
                    snapshot(ch, "public.r").columns):
            a, special = got[1], got[2]
            assert a.type == pa.int32() and a.to_pylist() == [1, None, 3], kind
            assert special.to_pylist()[0::2] == [None, None] and special[1].as_py().startswith("refused: "), kind


def test_tables_from_change_rows_with_spark_types():
    """Spark's change rows written to Parquet come back with Spark's types (decimal(20,0)
    LSNs, int64 ids, int16 flags, naive nanosecond timestamps): the table functions take
    them as their own rows. An xid passes as given (openGauss's are 64-bit: never
    narrowed); a value that does not fit is refused, never wrapped. (tests/spark checks
    the same over Parquet Spark wrote.)"""
    def spark_like(t):
        if pa.types.is_uint64(t):
            return pa.decimal128(20, 0)
        if pa.types.is_uint32(t):
            return pa.int64()
        if pa.types.is_uint8(t):
            return pa.int16()
        if pa.types.is_timestamp(t):
            return pa.timestamp("ns")
        if pa.types.is_list(t) or pa.types.is_list_view(t):
            return pa.list_(pa.field("element", spark_like(t.value_type)))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, spark_like(f.type)) for f in t])
        return t
    changes = decode_changes(archive("16.14", "v2_streaming"))
    at = changes.schema.get_field_index("columns")      # (a list view is no list to cast)
    lake = changes.set_column(at, "columns", plain_lists(changes["columns"]))
    lake = lake.cast(pa.schema([pa.field(f.name, spark_like(f.type)) for f in changes.schema]))
    names = sorted({f"{s}.{t}" for s, t in zip(changes.column("schema").to_pylist(),
                                              changes.column("table").to_pylist(), strict=True) if t})
    def same(a, b):
        return a.schema == b.schema and _in_order(a) == _in_order(b)
    for name in names:
        assert same(snapshot(lake, name, as_of_lsn=pc.max(changes["commit_lsn"]).as_py()), snapshot(changes, name))
        for f in (history, net_changes):
            assert same(f(lake, name), f(changes, name)), (name, f.__name__)
        got = table_changes(lake, name)
        assert got.column("xid").type == pa.int64() and got.column("seq").equals(table_changes(changes, name)["seq"])
    wide = changes.set_column(changes.schema.get_field_index("xid"), "xid",
                              pc.add(changes["xid"].cast(pa.uint64()), pa.scalar(2**40, pa.uint64())))
    assert pc.min(table_changes(wide, names[0])["xid"]).as_py() > 2**40
    bad = lake.set_column(lake.schema.get_field_index("commit_lsn"), "commit_lsn",
                          pa.array([-1] * len(lake), pa.int64()).cast(pa.decimal128(20, 0)))
    with pytest.raises(ValueError, match="not change rows"):
        snapshot(bad, names[0])


@pytest.mark.parametrize("version,option_set", SETS)
def test_net_changes_applied_to_the_earlier_snapshot_give_the_later_one(version, option_set):
    """For every table of every real archive, cut at several commits: the snapshot as of
    the cut, with the net changes of the rest applied by key (upserts keeping the
    target's unchanged-TOAST values, deletes, truncates), is the whole snapshot."""
    from pgoutput_codec.tables import net_changes, table_columns
    reg = registry_for(version)
    changes = decode_changes(archive(version, option_set), registry=reg)
    names = sorted({f"{s}.{t}" for s, t in zip(changes.column("schema").to_pylist(),
                                              changes.column("table").to_pylist(), strict=True) if t})
    lsns = sorted(set(changes.column("commit_lsn").to_pylist()))
    ops = set()
    for name in names:
        cols = table_columns(changes, name)
        keycols = [c["name"] for c in cols if c["flags"] & 1] or [c["name"] for c in cols]
        want = _norm(_rows(snapshot(changes, name, registry=reg)))
        for cut in (lsns[len(lsns) // 4], lsns[len(lsns) // 2], lsns[-2]):
            later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
            net = net_changes(later, name, registry=reg)
            ops |= set(net.column("__OP").to_pylist()) if "__OP" in net.column_names else set()
            got = _apply_net(snapshot(changes, name, as_of_lsn=cut, registry=reg), net, keycols)
            assert got == want, (name, cut)
    assert {"upsert", "delete"} <= ops, ops


def test_a_row_older_than_the_changes_found_after_identity_full():
    """A case of the random-archive test (seed 11185): a row older than the changes moves
    4 -> 6 under DEFAULT with its TOAST value v unchanged ('u': unknown here), then the
    identity becomes FULL and an Update names the row by (6, 'big', 1), every column
    inline. A replay keying the held row (6, <unknown>, 1) would not find it, and the
    snapshot and net changes would keep a row 6 the server no longer has."""
    from pgoutput_codec.tables import net_changes
    cols = (RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1), RelationColumn(0, "n", 23, -1))
    dflt = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d", columns=cols)
    full = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="f",
                    columns=tuple(RelationColumn(1, c.name, c.type_oid, c.type_modifier) for c in cols))
    msgs = [Begin(final_lsn=10, commit_ts=0, xid=1), dflt,
            Update(relation_id=16400, old_kind="K", old_tuple=row(4, None, None), new_tuple=row(6, "<u>", 1)),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            Begin(final_lsn=20, commit_ts=1, xid=2), full,
            Update(relation_id=16400, old_kind="O", old_tuple=row(6, "big", 1), new_tuple=row(8, "big", 2)),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=1)]
    changes = decode_changes(enc(msgs))
    assert snapshot(changes, "public.t").to_pylist() == [{"id": 8, "v": "big", "n": 2}]
    h = history(changes, "public.t")
    assert h.select(["id", "__END_LSN"]).to_pylist() == [{"id": 6, "__END_LSN": 20}, {"id": 8, "__END_LSN": None}]
    net = net_changes(changes, "public.t")
    assert sorted((r["id"], r["__OP"]) for r in net.to_pylist()) == [(4, "delete"), (6, "delete"), (8, "upsert")]


def test_net_changes_keyed_by_the_identity_a_truncate_was_sent_under():
    """A case of the random-archive test (seed 3779): the table truncated under DEFAULT,
    then ALTERed to FULL, every row change after it sent under FULL
    (tests/identity_moves.py's truncated_then_full, checked against PostgreSQL 15/16/18
    in tests/conformance/test_identity_change.py). The Truncate's Relation is an
    identity in force over the changes (a copy made under it is keyed by id), and
    Spark's versions job counts it: net changes naming rows by the FULL key from the row
    changes alone would give an upsert and a delete of one id for the Update of v, and a
    MERGE on id would remove the row."""
    import identity_moves as IM
    msgs, final = IM.messages(IM.SCENARIOS["truncated_then_full"])
    changes = decode_changes(pa.table({"seq": list(range(len(msgs))),
                                       "data": pa.array([encode_message(m) for m in msgs])}))
    name = f"public.{IM.TABLE}"
    ops = changes.column("op").to_pylist()
    cut = changes.column("commit_lsn")[ops.index("T") - 1].as_py()
    later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
    net = net_changes(later, name).to_pylist()
    assert [(r["__OP"], r["id"]) for r in net] == [("truncate", None), ("upsert", 4), ("delete", 5)]
    assert [(r["id"], r["v"], r["u"]) for r in net if r["__OP"] == "upsert"] == final
    # after the Truncate, FULL is the only identity: rows are named by the whole row
    after = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(later.column("commit_lsn")[0])))
    net = net_changes(after, name).to_pylist()
    assert all(r[c] is not None for r in net if r["__OP"] == "delete" for c in IM.NAMES)


def test_net_changes_say_where_unchanged_toast_values_are():
    """An update that sends a TOAST value as unchanged, the row inserted before the batch:
    the target keeps its value — from the old key's row when the key changed."""
    from pgoutput_codec.tables import net_changes
    first = [Begin(final_lsn=1, commit_ts=0, xid=1), REL,
             Insert(relation_id=16400, new_tuple=row(1, "big")), Insert(relation_id=16400, new_tuple=row(2, "two")),
             Insert(relation_id=16400, new_tuple=row(3, "three")), Commit(commit_lsn=10, end_lsn=11, commit_ts=0)]
    second = [Begin(final_lsn=2, commit_ts=1, xid=2), REL,
              Update(relation_id=16400, old_kind="K", old_tuple=row(1, None), new_tuple=row(5, "<u>")),
              Update(relation_id=16400, old_kind="K", old_tuple=row(5, None), new_tuple=row(6, "<u>")),
              Update(relation_id=16400, new_tuple=row(2, "<u>")),
              Delete(relation_id=16400, old_kind="K", old_tuple=row(3, None)),
              Commit(commit_lsn=20, end_lsn=21, commit_ts=1)]
    ch = decode_changes(enc(first + second))
    net = net_changes(ch.filter(pc.greater(ch.column("commit_lsn"), 10)), "public.t").sort_by("id")
    assert net.select(["id", "__OP", "__UNCHANGED", "__UNCHANGED_FROM"]).to_pylist() == [
        {"id": 1, "__OP": "delete", "__UNCHANGED": [], "__UNCHANGED_FROM": None},
        {"id": 2, "__OP": "upsert", "__UNCHANGED": ["v"], "__UNCHANGED_FROM": None},
        {"id": 3, "__OP": "delete", "__UNCHANGED": [], "__UNCHANGED_FROM": None},
        {"id": 5, "__OP": "delete", "__UNCHANGED": [], "__UNCHANGED_FROM": None},
        {"id": 6, "__OP": "upsert", "__UNCHANGED": ["v"], "__UNCHANGED_FROM": {"id": 1}}]
    got = _apply_net(snapshot(ch, "public.t", as_of_lsn=10), net, ["id"])
    assert got == _norm(snapshot(ch, "public.t").to_pylist()) == _norm([{"id": 2, "v": "two"}, {"id": 6, "v": "big"}])


def test_net_changes_name_a_key_a_row_left_unsaid():
    """An Update under DEFAULT that changes u, the column of the identity that comes
    after it (tests/identity_moves.py's no_common_key_toast, checked against PostgreSQL
    15/16/18 in tests/conformance/test_identity_change.py), sends no old key: the row
    leaves its newest key unsaid. The net changes of a batch that holds the row's earlier
    image name that key gone, so a MERGE on u into a copy made before the batch removes
    it (net changes leaving that key out would leave the copy the row under its old key
    as well)."""
    import identity_moves as IM
    msgs, final = IM.messages(IM.SCENARIOS["no_common_key_toast"])
    changes = decode_changes(pa.table({"seq": list(range(len(msgs))),
                                       "data": pa.array([encode_message(m) for m in msgs])}))
    name = f"public.{IM.TABLE}"
    first = changes.column("commit_lsn")[0].as_py()
    later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(first, pa.uint64())))
    net = net_changes(later, name).to_pylist()
    assert [(r["__OP"], r["id"]) for r in net if r["u"] == "s"] == [("delete", None)]
    assert [(r["__OP"], r["id"], r["v"]) for r in net if r["u"] == "s2"] == [("upsert", 6, "f2")]
    copy = {r["u"]: (r["id"], r["v"], r["u"]) for r in snapshot(changes, name, as_of_lsn=first).to_pylist()}
    for r in net:
        if r["__OP"] == "delete":
            copy.pop(r["u"], None)
        else:
            copy[r["u"]] = (r["id"], r["v"], r["u"])
    assert [r for r in copy.values() if r[0] == 6] == [r for r in final if r[0] == 6]


@pytest.mark.parametrize("binary", [False, True])
def test_a_column_whose_type_changed_is_read_by_the_type_each_value_was_sent_under(binary):
    """``ALTER COLUMN … TYPE`` in the archive (tests/altered_columns.py; the servers'
    messages in tests/conformance/test_retyped_columns.py): each value is read by the
    type its Relation gave the column and cast to the newest. Read by the newest, in
    binary mode the int4 ``i`` values would fail as int8 and the column come out raw, and
    the Update of row 2 (its int8 key) would miss the row inserted under int4, so the
    snapshot would hold row 2 twice. A text value the new int type cannot hold is null,
    with what was sent in ``__special``; decode_table_changes equals table_changes."""
    import altered_columns
    msgs = altered_columns.retyped(binary)
    values = pa.array([encode_message(m) for m in msgs], pa.binary())
    changes = decode_changes(values)
    name = "public.retyped"
    typed = table_changes(changes, name)
    assert decode_table_changes(values, name).equals(typed)
    after = typed.column("after").combine_chunks()
    assert after.type.field("i").type == pa.int64() and after.type.field("word").type == pa.int32()
    assert after.field("i").to_pylist() == [1000, 2000, 3000, 5_000_000_000, 6]
    assert after.field("code").to_pylist() == [11, 22, 33, 22, 44]
    assert after.field("word__special").to_pylist()[:3] == [
        f"sent as type OID 25 by an earlier definition of 'word': {'w' * k!r} does not convert to int32 "
        f"(Failed to parse string: '{'w' * k}' as a scalar of type int32)" for k in (1, 2, 3)]
    snap = snapshot(changes, name).sort_by("id")
    assert [(r["id"], r["i"], r["code"], r["word"]) for r in snap.to_pylist()] == altered_columns.RETYPED_FINAL
    assert {r["id"]: r["f"] for r in snap.to_pylist()} == altered_columns.RETYPED_F
    hist = history(changes, name)
    alive = hist.filter(pc.is_null(hist.column("__END_LSN"))).select(snap.column_names).sort_by("id")
    assert alive.equals(snap) and len(hist) == 5
    first = changes.column("commit_lsn")[0].as_py()
    later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(first, pa.uint64())))
    net = net_changes(later, name)
    assert net.column("__OP").to_pylist() == ["upsert", "upsert"] and net.column("id").to_pylist() == [2, 4]


@pytest.mark.parametrize("version", sorted(TRUTH))
def test_a_domain_reads_as_its_base_type_without_a_catalog(version):
    """The Type message of a domain names its base type: the change rows carry that name
    with the column, and every table function reads the domain's values as the base type
    (int4 → int32), text and binary alike, with no registry given."""
    t = next(t for t in TABLES if t["server_version"] == version and t["table"] == "all_types")
    at = t["column_names"].index("c_posint")
    want = sorted((r[0], None if r[at] is None else int(r[at])) for r in t["rows"])
    for option_set in ("v1_text", "v1_binary_messages"):
        changes = decode_changes(archive(version, option_set))
        cols = changes.filter(pc.equal(changes["table"], "all_types"))["columns"][0].as_py()
        named = {c["name"]: (c["type_namespace"], c["type_name"]) for c in cols}
        assert named["c_posint"] in (("", "int4"), ("pg_catalog", "int4")), named["c_posint"]
        assert named["c_int4"] == (None, None) and named["c_mood"][1] == "mood"
        snap = snapshot(changes, "public.all_types")
        assert snap.schema.field("c_posint").type == pa.int32(), option_set
        assert sorted(zip(snap["id"].to_pylist(), snap["c_posint"].to_pylist(), strict=True)) == \
            [(int(i), v) for i, v in want], option_set
        for typed in (table_changes(changes, "public.all_types"),
                      decode_table_changes(archive(version, option_set), "public.all_types")):
            assert typed.schema.field("after").type.field("c_posint").type == pa.int32(), option_set
        # change rows written without type names (plain column lists) still read, untyped domain
        plain = changes.set_column(changes.schema.get_field_index("columns"), "columns",
                                   pa.array([None if c is None else [{k: v[k] for k in
                                             ("flags", "name", "type_oid", "type_modifier")} for v in c]
                                             for c in changes["columns"].to_pylist()],
                                            pa.list_(pa.struct([("flags", pa.uint8()), ("name", pa.string()),
                                                                ("type_oid", pa.uint32()),
                                                                ("type_modifier", pa.int32())]))))
        assert snapshot(plain, "public.all_types")["c_posint"].type in (pa.string(), pa.binary())


@pytest.mark.parametrize("version", sorted(TRUTH))
def test_value_ndims_reads_what_the_array_parsers_find(version):
    """value_ndims (the first bytes alone: Spark's typing pass reads it) gives every array
    value of the corpus the number of dimensions its parser finds, text and binary, and
    -1 where there is no value."""
    from pgoutput_codec.typecatalog.arrays import parse_binary_array, parse_text_array, value_ndims
    from pgoutput_codec.typecatalog.registry import resolve
    checked = 0
    for option_set in ("v1_text", "v1_binary_messages"):
        rows = decode_changes(archive(version, option_set))
        rows = rows.filter(pc.equal(rows["table"], "all_types"))
        cols = rows["columns"][0].as_py()
        for j, c in enumerate(cols):
            r = resolve(c["type_oid"], c["type_modifier"], registry_for(version))
            if r.conv != "array":
                continue
            vals = [t[j] for t in rows["after"].to_pylist()]
            kinds = pa.array([v["kind"] for v in vals], pa.string())
            data = pa.array([v["data"] for v in vals], pa.binary())
            want = [(parse_binary_array if v["kind"] == "b" else parse_text_array)(v["data"], r)[1]
                    if v["kind"] in ("t", "b") else -1 for v in vals]
            assert value_ndims(kinds, data).tolist() == want, c["name"]
            assert value_ndims(kinds.slice(1), data.slice(1)).tolist() == want[1:], c["name"]
            checked += len(vals)
    assert checked > 100
