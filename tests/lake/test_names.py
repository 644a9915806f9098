"""Identifiers as PostgreSQL allows them, through every path that names a table or a
column: a table named ``café``, ``a/b``, ``50%off``, a schema ``sales.eu``, names of 60
bytes, columns ``a.b``, ``__OP``, ``Id`` beside ``ID`` — captured from a real server,
mirrored to Delta Lake (deltalake writes, deltalake reads back), run again incrementally,
and compared with the server's own rows."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

deltalake = pytest.importorskip("deltalake")
psycopg = pytest.importorskip("psycopg")

from pgoutput_codec import (decode_changes, decode_table_changes, history, mirror, net_changes,  # noqa: E402
                            snapshot, table_changes)
from pgoutput_codec.idents import parse_name, qualified_name, resolve_name  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path  # noqa: E402
from pgoutput_codec.lake.names import column_names, dir_name  # noqa: E402

CJK_SCHEMA = "数据" * 10          # 60 bytes in UTF-8, near PostgreSQL's 63
CJK_TABLE = "表格" * 10
#: (schema, table) -> the CREATE TABLE's columns; every table keyed by its first column
TABLES = {
    ("public", "café"): '(id int PRIMARY KEY, v text)',
    ("public", "a/b"): '(id int PRIMARY KEY, v text)',
    ("public", "a b"): '(id int PRIMARY KEY, v text)',
    ("public", "ü"): '(id int PRIMARY KEY, v text)',
    ("public", "50%off"): '(id int PRIMARY KEY, v text)',
    ("public", "x%41y"): '(id int PRIMARY KEY, v text)',
    ("public", "xAy"): '(id int PRIMARY KEY, v text)',
    ("public", "t~7E"): '(id int PRIMARY KEY, v text)',
    (CJK_SCHEMA, CJK_TABLE): '(id int PRIMARY KEY, v text)',
    ("sales.eu", "orders"): '(id int PRIMARY KEY, v text)',
    ("sales", "eu.orders"): '(id int PRIMARY KEY, v text)',
    ("public", 'a"b'): '(id int PRIMARY KEY, v text)',
    ("public", "orders"): '(id int PRIMARY KEY, v text)',
    ("public", "cols"): '("Id" int PRIMARY KEY, "ID" text, "a.b" text, "__OP" text, "__COMMIT_LSN" bigint, '
                        '"__UNCHANGED" text, "it\'s" text, "back`tick" text, "s.a" int)',
}


def _ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _q(schema: str, table: str) -> str:
    return f"{_ident(schema)}.{_ident(table)}"


@pytest.fixture(scope="module")
def server(pg_server):
    return pg_server


def _big(k: int) -> str:
    """Text that PostgreSQL stores out of line (TOAST): too long and too random to compress."""
    import random
    rnd = random.Random(k)
    return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(9000))


def _phase1(c):
    for (s, t), cols in TABLES.items():
        if s != "public":
            c.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(s)}")
        c.execute(f"CREATE TABLE {_q(s, t)} {cols}")
    c.execute("CREATE PUBLICATION names_pub FOR ALL TABLES")
    c.execute("SELECT pg_create_logical_replication_slot('names_slot', 'pgoutput')")
    for (s, t) in TABLES:
        if t == "cols":
            continue
        for k in range(1, 6):
            c.execute(f"INSERT INTO {_q(s, t).replace('%', '%%')} VALUES (%s, %s)", (k, f"{t} {k}"))
    for k in range(1, 6):
        # "a.b" big enough to be TOASTed: an UPDATE of another column sends it unchanged
        c.execute('INSERT INTO public.cols VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)',
                  (k, f"upper {k}", _big(k), f"op {k}", 100 + k, f"u {k}", f"q {k}", f"b {k}", k))


def _phase2(c):
    for (s, t) in TABLES:
        if t == "cols":
            continue
        c.execute(f"UPDATE {_q(s, t)} SET v = v || '!' WHERE id IN (1, 2)")
        c.execute(f"DELETE FROM {_q(s, t)} WHERE id = 3")
        c.execute(f"INSERT INTO {_q(s, t)} VALUES (9, 'nine')")
    c.execute('UPDATE public.cols SET "ID" = "ID" || \'!\', "__OP" = \'changed\' WHERE "Id" IN (1, 2)')
    c.execute('UPDATE public.cols SET "__COMMIT_LSN" = -1 WHERE "Id" = 4')
    c.execute('DELETE FROM public.cols WHERE "Id" = 3')
    c.execute('INSERT INTO public.cols VALUES (9, \'nine\', \'ab\', \'op\', 9, \'u\', \'q\', \'b\', 9)')


def _take(c) -> list:
    return [(lsn, bytes(d)) for lsn, d in c.execute(
        "SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('names_slot', NULL, NULL, "
        "'proto_version', '1', 'publication_names', 'names_pub')").fetchall()]


def _archive(msgs) -> pa.Table:
    return pa.table({"seq": pa.array(range(len(msgs)), pa.int64()), "lsn": [m[0] for m in msgs],
                     "data": pa.array([m[1] for m in msgs], pa.binary())})


def _server_rows(c, s, t) -> list:
    cur = c.execute(f"SELECT * FROM {_q(s, t)} ORDER BY 1")
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@pytest.fixture(scope="module")
def captured(server):
    """(the archive after the first workload, after both, the server's rows at each)."""
    with server.connect() as c:
        _phase1(c)
        first = _take(c)
        rows1 = {k: _server_rows(c, *k) for k in TABLES}
        _phase2(c)
        second = _take(c)
        rows2 = {k: _server_rows(c, *k) for k in TABLES}
    return _archive(first), _archive(first + second), rows1, rows2


def _sorted(t: pa.Table) -> list:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


#: a column named as another but for case, by its name in the copy (Delta's names are case-insensitive)
RENAMED = {"ID~" + __import__("hashlib").sha256(b"ID").hexdigest()[:8]: "ID"}


def _copy_rows(target, s, t) -> list:
    rows = [{RENAMED.get(c, c): v for c, v in r.items()} if t == "cols" else r
            for r in read_copy(table_path(target, qualified_name(s, t))).to_pylist()]
    key = next(iter(rows[0])) if rows else None
    return sorted(rows, key=lambda r: r[key])


@pytest.mark.parametrize("way", ["merge", "rewrite"])
def test_every_name_is_mirrored_and_kept_current(captured, tmp_path, monkeypatch, way):
    """Every table (odd names, a dotted schema, 60-byte names, odd columns) gets its own
    copy that deltalake reads back as the server's rows, after a first run and after an
    incremental one (each batch MERGEd, or rewritten whole); a run over the same archive
    again writes nothing."""
    import importlib
    m = importlib.import_module("pgoutput_codec.lake.mirror")
    monkeypatch.setattr(m, "REWRITE_SHARE", 2.0 if way == "merge" else 0.0)
    part, whole, rows1, rows2 = captured
    target = tmp_path / "lake"
    runs = mirror(part, target)
    assert sorted(r.table for r in runs) == sorted(qualified_name(s, t) for s, t in TABLES)
    for (s, t), want in rows1.items():
        assert _copy_rows(target, s, t) == want, (s, t)
    ch = decode_changes(whole)
    held = {r.table: r.commit_lsn for r in runs}["public.cols"]
    net = net_changes(ch.filter(pc.greater(ch.column("commit_lsn"), held)), "public.cols")
    assert ["a.b"] in net.column(len(net.column_names) - 5).to_pylist()     # unchanged TOAST: the copy's kept
    runs = mirror(whole, target)
    assert all(r.version is not None for r in runs)
    for (s, t), want in rows2.items():
        assert _copy_rows(target, s, t) == want, (s, t)
    dirs = [d for d in os.listdir(target) if os.path.isdir(target / d)]
    assert len(dirs) == len(TABLES)
    assert all(len(d.encode()) <= 200 and "%" not in d for d in dirs), dirs
    assert all(r.version is None for r in mirror(whole, target))


def test_an_archive_directory_run_resumes_with_every_name(captured, tmp_path):
    """An archive directory's runs (the checkpoint beside the copies names them) keep
    every copy current."""
    import pyarrow.parquet as pq
    part, whole, rows1, rows2 = captured
    src, target = tmp_path / "archive", tmp_path / "lake"
    src.mkdir()
    pq.write_table(part, src / "part-0.parquet")
    mirror(str(src), target)
    pq.write_table(whole.slice(len(part)), src / "part-1.parquet")
    mirror(str(src), target)
    for (s, t), want in rows2.items():
        assert _copy_rows(target, s, t) == want, (s, t)


def test_a_dotted_schema_is_named_quoted_or_as_a_pair(captured):
    """``"sales.eu".orders``, ``sales."eu.orders"`` and the pairs name two tables; the
    unquoted ``sales.eu.orders`` matches both and is refused; a dotted name that matches
    no table is refused too; plain names keep working."""
    _, whole, _, rows2 = captured
    ch = decode_changes(whole)
    for name in ('"sales.eu".orders', ("sales.eu", "orders")):
        assert _sorted(snapshot(ch, name)) == rows2[("sales.eu", "orders")]
        assert history(ch, name).equals(history(ch, ("sales.eu", "orders")))
        assert sorted(net_changes(ch, name).column("id").to_pylist()) == [1, 2, 3, 4, 5, 9]
    assert len(history(ch, ("sales.eu", "orders"))) > 6
    assert _sorted(snapshot(ch, 'sales."eu.orders"')) == rows2[("sales", "eu.orders")]
    with pytest.raises(ValueError, match="matches 2 tables"):
        snapshot(ch, "sales.eu.orders")
    with pytest.raises(ValueError, match="matches no table"):
        snapshot(ch, "nowhere.to.be.found")
    for name in ('"sales.eu".orders', ("sales.eu", "orders")):
        assert decode_table_changes(whole, name).equals(table_changes(ch, name))
    with pytest.raises(ValueError, match="matches 2 tables"):
        decode_table_changes(whole, "sales.eu.orders")
    assert _sorted(snapshot(ch, 'public."a""b"')) == rows2[("public", 'a"b')]
    assert _sorted(snapshot(ch, "public.café")) == rows2[("public", "café")]
    assert _sorted(snapshot(ch, "café")) == rows2[("public", "café")]
    assert _sorted(snapshot(ch, "public.a/b")) == rows2[("public", "a/b")]


def test_tables_patterns_name_dotted_schemas(captured, tmp_path):
    """``--tables`` patterns quote a dotted identifier as PostgreSQL does."""
    _, whole, _, rows2 = captured
    runs = mirror(whole, tmp_path / "lake", tables='"sales.eu".*,public."a""b"')
    assert [r.table for r in runs] == sorted(['"sales.eu".orders', 'public."a""b"'])
    runs = mirror(whole, tmp_path / "lake2", tables='sales."eu.orders"')
    assert [r.table for r in runs] == ['sales."eu.orders"']


def test_names_parse_as_postgresql_quotes_them():
    assert parse_name("public.t") == [("public", "t")]
    assert parse_name("t") == [("public", "t")]
    assert parse_name('"sales.eu".orders') == [("sales.eu", "orders")]
    assert parse_name('"a""b".c') == [('a"b', "c")]
    assert parse_name('s."x.y"') == [("s", "x.y")]
    assert parse_name("a.b.c") == [("a", "b.c"), ("a.b", "c")]
    assert parse_name(("a.b", "c")) == [("a.b", "c")]
    assert parse_name('"Weird"') == [("public", "Weird")]
    for bad in ('"open', '"a"b.c', "", "a.", ".b", '"".x'):
        with pytest.raises(ValueError):
            parse_name(bad)
    assert resolve_name("a.b.c", {("a.b", "c")}) == ("a.b", "c")
    for s, t in [("sales.eu", "orders"), ("sales", "eu.orders"), ('a"b', "c"), ("public", "café"), ("p", "x.")]:
        assert parse_name(qualified_name(s, t)) == [(s, t)]
    assert qualified_name("public", "orders") == "public.orders"


def test_directory_names_are_safe_injective_and_bounded():
    """Plain names keep the directory they always had; every other byte is escaped with
    '~' (which deltalake and URLs leave alone), so no two names share a directory; a long
    name gets a bounded one with a digest."""
    assert dir_name("public.orders") == "public.orders"
    assert dir_name("public.Order_Lines-2") == "public.Order_Lines-2"
    assert dir_name("public.café") == "public.caf~C3~A9"
    assert dir_name("public.50%off") == "public.50~25off"
    assert dir_name("public.t~7E") == "public.t~7E7E"
    assert dir_name(".pgoutput_codec.mirror.json") != ".pgoutput_codec.mirror.json"
    names = ["public.a/b", "public.a b", "public.a~2Fb", "public.a%2Fb", "public.ü", "public.u", "a.b.c",
             '"a.b".c', 'a."b.c"', qualified_name(CJK_SCHEMA, CJK_TABLE), qualified_name(CJK_SCHEMA, CJK_TABLE + "x")]
    dirs = [dir_name(n) for n in names]
    assert len(set(dirs)) == len(dirs)
    for d in dirs:
        assert len(d.encode()) <= 200 and all(ch.isascii() and (ch.isalnum() or ch in "._-~") for ch in d), d


def test_a_target_path_that_deltalake_would_read_elsewhere_is_refused(captured, tmp_path):
    """deltalake percent-decodes local paths (writes once, reads twice): a target whose
    path holds a %XX escape is refused before anything is written, naming the path; a
    '%' that escapes nothing, spaces and other punctuation are fine."""
    part, _, rows1, _ = captured
    bad = tmp_path / "x%41y" / "lake"
    with pytest.raises(ValueError, match=r"x%41y.*percent"):
        mirror(part, bad, tables="public.orders")
    assert not bad.exists()
    for ok in ("50%off lake", "a #?&+=,;@!$'() lake"):
        target = tmp_path / ok
        mirror(part, target, tables="public.orders")
        assert _copy_rows(target, "public", "orders") == rows1[("public", "orders")]


def test_deltalake_reads_a_percent_escape_in_a_local_path_elsewhere(tmp_path):
    """Why such a target is refused: deltalake writes a table under a directory holding
    ``%41`` and then looks for its log under ``A`` (given as a plain path or a quoted
    ``file://`` URI), or writes it under ``A`` (an unquoted ``file://`` URI). When this
    fails, deltalake reads such paths back: lift the refusal (``lake.names.lake_dir``)."""
    import urllib.parse
    t = pa.table({"id": [1]})
    base = tmp_path / "x%41y"
    base.mkdir()
    for k, form in enumerate((str, lambda p: "file://" + urllib.parse.quote(str(p)), lambda p: f"file://{p}")):
        where = base / f"t{k}"
        try:
            deltalake.write_deltalake(form(where), t)
            back = len(read_copy(form(where)))
        except Exception:        # deltalake's own error: the log looked for elsewhere
            back = None
        assert back is None or not (where / "_delta_log").is_dir(), k


def test_a_column_named_as_a_control_column_through_truncates_and_a_new_relation(tmp_path):
    """A table whose own columns are named __OP and __RELATION_ID: truncated within a
    batch, then dropped and created again between runs (the copy restarted by a truncate
    row of the mirror's own); the copy holds the server's rows each time."""
    from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn, Truncate, TupleColumn, encode_message

    def rel(rid):
        return Relation(relation_id=rid, namespace="public", relation_name="w", replica_identity="d",
                        columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "__OP", 25, -1),
                                 RelationColumn(0, "__RELATION_ID", 23, -1)))

    def row(*v):
        return tuple(TupleColumn("t", str(x).encode()) for x in v)

    def txn(lsn, *changes):
        return [Begin(final_lsn=lsn, commit_ts=lsn, xid=lsn), *changes,
                Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=lsn)]

    def arc(msgs):
        return pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                         "data": pa.array([encode_message(m) for m in msgs], pa.binary())})
    msgs = txn(10, rel(16500), Insert(relation_id=16500, new_tuple=row(1, "a", 7)))
    target = tmp_path / "lake"
    mirror(arc(msgs), target)
    msgs += txn(20, Truncate(relation_ids=(16500,), options=0), Insert(relation_id=16500, new_tuple=row(2, "b", 8)))
    assert [r.truncated for r in mirror(arc(msgs), target)] == [True]
    assert _copy_rows(target, "public", "w") == [{"id": 2, "__OP": "b", "__RELATION_ID": 8}]
    msgs += txn(30, rel(16600), Insert(relation_id=16600, new_tuple=row(3, "c", 9)))
    assert [r.truncated for r in mirror(arc(msgs), target)] == [True]
    assert _copy_rows(target, "public", "w") == [{"id": 3, "__OP": "c", "__RELATION_ID": 9}]


def test_a_copy_is_found_by_any_name_of_its_table(captured, tmp_path):
    """table_path takes the names snapshot takes; an unquoted dotted name is the one copy
    it may name, refused where it may name two, and names no copy where there is none."""
    part, _, _, _ = captured
    target = tmp_path / "lake"
    mirror(part, target, tables='"sales.eu".orders')
    path = table_path(target, '"sales.eu".orders')
    assert table_path(target, ("sales.eu", "orders")) == path == table_path(target, "sales.eu.orders")
    assert os.path.basename(path) == "~22sales.eu~22.orders"
    assert not os.path.isdir(table_path(target, "nowhere.to.be"))
    mirror(part, target, tables='sales."eu.orders"')
    with pytest.raises(ValueError, match="matches 2 tables"):
        table_path(target, "sales.eu.orders")


def _one_table_archive(columns, *rows):
    """An archive of one transaction inserting ``rows`` into public.w (``columns``:
    names, the first the key; every value text), then updating the first row's last column."""
    from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, Update, encode_message
    rel = Relation(relation_id=16700, namespace="public", relation_name="w", replica_identity="d",
                   columns=tuple(RelationColumn(1 if j == 0 else 0, c, 25, -1) for j, c in enumerate(columns)))

    def tup(vals):
        return tuple(TupleColumn("t", str(v).encode()) for v in vals)
    msgs = [Begin(final_lsn=10, commit_ts=10, xid=10), rel, *[Insert(relation_id=16700, new_tuple=tup(r)) for r in rows],
            Commit(commit_lsn=10, end_lsn=11, commit_ts=10),
            Begin(final_lsn=20, commit_ts=20, xid=20),
            Update(relation_id=16700, new_tuple=tup([*rows[0][:-1], "changed"])),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=20)]
    return pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                     "data": pa.array([encode_message(m) for m in msgs], pa.binary())})


def test_history_names_its_own_columns_apart_from_the_tables():
    """A table whose columns bear history's names (__OP, __START_LSN, and ___OP, the
    first name __OP would take): history's own columns take a name no column of the
    table bears (``_`` before it, as often as needed), the table's keep theirs."""
    arc = _one_table_archive(["id", "__OP", "___OP", "__START_LSN"], ["1", "a", "b", "c"])
    h = history(decode_changes(arc), "public.w")
    assert h.column_names == ["id", "__OP", "___OP", "__START_LSN", "____OP", "___START_LSN", "__START_AT",
                              "__END_LSN", "__END_AT"]
    rows = sorted(h.to_pylist(), key=lambda r: r["___START_LSN"])
    assert [(r["id"], r["__OP"], r["___OP"], r["__START_LSN"], r["____OP"], r["___START_LSN"], r["__END_LSN"])
            for r in rows] == [("1", "a", "b", "c", "I", 10, 20), ("1", "a", "b", "changed", "U", 20, None)]


def test_history_of_a_real_table_with_a_column_named_op(captured):
    """The captured table's own __OP column beside history's, named apart."""
    _, whole, _, rows2 = captured
    h = history(decode_changes(whole), "public.cols")
    assert h.column_names[-5:] == ["___OP", "__START_LSN", "__START_AT", "__END_LSN", "__END_AT"]
    current = sorted((r for r in h.to_pylist() if r["__END_LSN"] is None), key=lambda r: r["Id"])
    assert [{k: v for k, v in r.items() if k in rows2[("public", "cols")][0]} for r in current] == \
        rows2[("public", "cols")]
    assert {r["___OP"] for r in h.to_pylist()} == {"I", "U"}


def _renamed_archive(*phases):
    """An archive of public.w (key ``k``, text columns), one transaction per phase: its
    Relation (``columns``: names after ``k``) and an insert of row ``key`` (every column
    the text of the key)."""
    from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, encode_message
    msgs = []
    for j, (columns, key) in enumerate(phases):
        lsn = 10 * (j + 1)
        rel = Relation(relation_id=16800, namespace="public", relation_name="w", replica_identity="d",
                       columns=(RelationColumn(1, "k", 23, -1), *(RelationColumn(0, c, 25, -1) for c in columns)))
        msgs += [Begin(final_lsn=lsn, commit_ts=lsn, xid=lsn), rel,
                 Insert(relation_id=16800, new_tuple=tuple(TupleColumn("t", str(key).encode())
                                                           for _ in range(len(columns) + 1))),
                 Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=lsn)]
    return pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                     "data": pa.array([encode_message(m) for m in msgs], pa.binary())})


def test_a_column_renamed_only_in_case_is_mirrored_run_after_run(tmp_path):
    """RENAME COLUMN id TO "ID" between runs: the copy keeps ``id`` (null from the rename
    on, as for a dropped column) and holds ``ID`` under the one distinct name the case
    clash rule gives it, the same each run; renamed back, ``id`` holds values again."""
    import hashlib
    target = tmp_path / "lake"
    first = [(["id"], 1)]
    mirror(_renamed_archive(*first), target)
    renamed = first + [(["ID"], 2)]
    mirror(_renamed_archive(*renamed), target)
    again = renamed + [(["ID"], 3)]
    mirror(_renamed_archive(*again), target)
    moved = "ID~" + hashlib.sha256(b"ID").hexdigest()[:8]
    assert _copy_rows(target, "public", "w") == [{"k": 1, "id": None, moved: None},
                                                 {"k": 2, "id": None, moved: "2"},
                                                 {"k": 3, "id": None, moved: "3"}]
    back = again + [(["id"], 4)]
    mirror(_renamed_archive(*back), target)
    assert _copy_rows(target, "public", "w")[-1] == {"k": 4, "id": "4", moved: None}


def test_columns_keep_their_names_unless_two_are_alike_but_for_case():
    """A batch's columns keep their names in the copy (companions too, beside columns the
    copy holds and the batch no longer sends) while no two are alike but for case; of two
    alike, the copy's or the first keeps its name, the other is named apart, its
    companions after it."""
    import hashlib

    def apart(n):
        return f"{n}~{hashlib.sha256(n.encode()).hexdigest()[:8]}"
    for names, held in [(["id", "Name", "geom", "geom__srid"], []), (["id", "n"], ["id", "n", "gone"]),
                        (["a", "a__special"], ["A__x", "b"]), ([], ["x"]), (["x__srid"], [])]:
        assert column_names(names, held) == {n: n for n in names}
    assert column_names(["ID", "id"], []) == {"ID": "ID", "id": apart("id")}
    assert column_names(["ID", "ID__srid"], ["id"]) == {"ID": apart("ID"), "ID__srid": apart("ID") + "__srid"}
    assert column_names(["a", "b"], ["A"]) == {"a": apart("a"), "b": "b"}
