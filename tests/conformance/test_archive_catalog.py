"""The type catalog an archive carries, on real servers (15, 16, 18).

What the servers were seen to send (every version alike): after ``ALTER TYPE … ADD
ATTRIBUTE`` on a composite a table column uses, the next change of the table comes after
the Type messages of its user types and its Relation again, all naming the same type OIDs
as before: nothing names a new type, so capture finds the change by the digest of the
recorded types' catalog rows it checks once per poll. An enum dropped and created again
(the column dropped and added again) comes with a Type and a Relation naming the new OID:
capture takes a version there. In a streamed transaction the Relation comes inside each of
its stream blocks, with the transaction's xid before it.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import threading
import time
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pgoutput_codec as pgc
from pgoutput_codec.archive import CATALOG_KEY, archive_catalog, read_archive_parts
from pgoutput_codec.cli.main import main
from pgoutput_codec.typecatalog import Catalog, TypeRegistry, arrow_type, catalog_from_connection, read_catalog

capture_module = importlib.import_module("pgoutput_codec.cli.capture")

DB = "catalog_db"


@pytest.fixture
def db(pg_server):
    """A database of its own, dropped after the test (with its slots)."""
    with pg_server.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
        c.execute(f"CREATE DATABASE {DB}")
    try:
        yield pg_server
    finally:
        with pg_server.connect() as c:
            c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = %s",
                      (DB,))
            c.execute(f"DROP DATABASE {DB}")


def _dsn(srv):
    return " ".join(f"{k}={v}" for k, v in srv.conninfo(DB).items())


def _oid(c, name):
    return c.execute("SELECT %s::regtype::oid::int8", (name,)).fetchone()[0]


def test_catalog_from_connection_reads_the_published_types_transitively(db):
    with db.connect(DB) as c:
        x = c.execute
        ext = x("SELECT name FROM pg_available_extensions WHERE name IN ('hstore', 'citext')").fetchall()
        ext = sorted(n for (n,) in ext)
        if db.major == 15:          # (Debian's contrib is there; the wheel's servers may lack it)
            assert ext == ["citext", "hstore"]
        for name in ext:
            x(f"CREATE EXTENSION {name}")
        x("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        x("ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'")       # (sort order, not OID order)
        x("CREATE DOMAIN price AS numeric(10,2) CHECK (VALUE >= 0)")
        x("CREATE TYPE inner_t AS (a int, b mood, c price[])")
        x("ALTER TYPE inner_t ADD ATTRIBUTE gone int")
        x("ALTER TYPE inner_t DROP ATTRIBUTE gone")
        x("CREATE TYPE outer_t AS (i inner_t, t varchar(5))")
        x("CREATE TYPE floatrange AS RANGE (subtype = float8, multirange_type_name = floatmulti)")
        x("CREATE TYPE unused AS ENUM ('x')")
        extra = ", h hstore, ci citext[]" if ext else ""
        x(f"CREATE TABLE t (id int PRIMARY KEY, o outer_t[], r floatrange, m floatmulti{extra})")
        x("CREATE TABLE other (id int PRIMARY KEY, u unused)")
        x("CREATE PUBLICATION p FOR TABLE t")
        cat = catalog_from_connection(c, "p")
        every = catalog_from_connection(c)
        oids = {n: _oid(c, n) for n in ("mood", "price", "inner_t", "outer_t", "floatrange", "floatmulti",
                                        "outer_t[]", "price[]", "mood[]", "unused")}
        if ext:
            oids.update(hstore=_oid(c, "hstore"), citext=_oid(c, "citext"), citexts=_oid(c, "citext[]"))
        now = x("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    assert len(cat) == 1 and 0 < cat.latest.lsn <= pgc.parse_lsn(now)
    by = {t["oid"]: t for t in cat.latest.types}
    assert oids["unused"] not in by and oids["unused"] in {t["oid"] for t in every.latest.types}
    assert by[oids["mood"]]["labels"] == ["sad", "meh", "ok", "happy"] and by[oids["mood"]]["kind"] == "enum"
    assert by[oids["price"]]["kind"] == "domain" and by[oids["price"]]["base_oid"] == 1700
    assert by[oids["price"]]["base_typmod"] == (10 << 16 | 2) + 4
    assert by[oids["inner_t"]]["attributes"] == [["a", 23, -1], ["b", oids["mood"], -1], ["c", oids["price[]"], -1]]
    assert by[oids["outer_t"]]["attributes"] == [["i", oids["inner_t"], -1], ["t", 1043, 9]]
    assert by[oids["outer_t[]"]] | {} == {**by[oids["outer_t[]"]], "kind": "array", "base_oid": oids["outer_t"]}
    assert by[oids["price[]"]]["base_oid"] == oids["price"] and by[oids["mood[]"]]["kind"] == "array"
    assert (by[oids["floatrange"]]["kind"], by[oids["floatrange"]]["base_oid"]) == ("range", 701)
    assert (by[oids["floatmulti"]]["kind"], by[oids["floatmulti"]]["base_oid"]) == \
        ("multirange", oids["floatrange"])
    if ext:
        for name in ("hstore", "citext"):
            t = by[oids[name]]
            assert (t["kind"], t["name"], t["extension"]) == ("base", name, name) and t["extension_version"]
        assert by[oids["citexts"]]["base_oid"] == oids["citext"]
    assert not {t["oid"] for t in cat.latest.types} & {23, 25, 1043, 1700, 701}    # built-ins are not recorded
    reg = cat.registry()
    assert arrow_type(oids["price[]"], -1, reg) == pa.list_(pa.decimal128(10, 2))
    # load_from_connection reads the same definitions
    with db.connect(DB) as c:
        loaded = TypeRegistry().load_from_connection(c)
    assert loaded.types[oids["mood"]].labels == ("sad", "meh", "ok", "happy")
    assert loaded.types[oids["inner_t"]].attributes == reg.types[oids["inner_t"]].attributes


def _schema_messages(out):
    """(lsn, 'Y'/'R', type OIDs named, in a stream block) of every Type and Relation
    message of an archive."""
    seen, in_stream = [], False
    for p in read_archive_parts(out):
        t = p.read()
        for lsn, d in zip(t.column("lsn").to_pylist(), t.column("data").to_pylist(), strict=True):
            in_stream = {b"S": True, b"E": False}.get(d[:1], in_stream)
            if d[:1] in (b"Y", b"R"):
                m = pgc.decode_message(d, in_stream=in_stream)
                seen.append((lsn, m.type, [m.type_oid] if m.type == "Y" else [c.type_oid for c in m.columns],
                             in_stream))
    return seen


def test_capture_records_a_version_at_start_on_a_new_type_and_on_a_changed_one(db, tmp_path, monkeypatch):
    out = str(tmp_path / "arch")
    with db.connect(DB) as c:
        x = c.execute
        x("CREATE TYPE mood AS ENUM ('sad', 'ok')")
        x("CREATE TYPE pt AS (x int, y int)")
        x("CREATE DOMAIN price AS numeric(10,2)")
        x("CREATE TABLE t (id int PRIMARY KEY, m mood, p pt, v price)")
        x("CREATE PUBLICATION p FOR TABLE t")
        x("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
        mood1, pt, price = _oid(c, "mood"), _oid(c, "pt"), _oid(c, "price")
    taken = []
    take = capture_module._Run.take_catalog

    def spy(run, lsn, oids=()):
        taken.append(sorted(oids))
        return take(run, lsn, oids)

    monkeypatch.setattr(capture_module._Run, "take_catalog", spy)
    files = lambda: len(glob.glob(os.path.join(out, "part-*.parquet")))     # noqa: E731

    def landed(n):
        deadline = time.monotonic() + 30
        while files() < n:
            assert time.monotonic() < deadline, "capture landed no file"
            time.sleep(0.02)

    done = {}
    th = threading.Thread(target=lambda: done.update(capture_module.capture(
        _dsn(db), "s", "p", out, proto=2, streaming=True, binary=True, poll_interval=0.02, stop_after=25,
        log=lambda m: None)))
    th.start()
    try:
        with db.connect(DB) as c:
            x = c.execute
            x("INSERT INTO t VALUES (1, 'ok', '(1,2)', 1.5)")
            landed(1)
            x("ALTER TYPE pt ADD ATTRIBUTE z int")
            x("INSERT INTO t VALUES (2, 'sad', '(3,4,5)', 2.5)")
            landed(2)
        with db.connect(DB, autocommit=False) as c:     # one transaction, streamed (> 64kB)
            x = c.execute
            x("ALTER TABLE t DROP COLUMN m")
            x("DROP TYPE mood")
            x("CREATE TYPE mood AS ENUM ('meh', 'fine', 'great')")
            x("ALTER TABLE t ADD COLUMN m mood")
            x("INSERT INTO t VALUES (3, '(6,7,8)', 3.5, 'great')")
            x("INSERT INTO t SELECT g, ROW(g, g, g)::pt, 0.5, 'fine' FROM generate_series(10, 3000) g")
            mood2 = _oid(c, "mood")
            c.commit()
            landed(3)
    finally:
        th.join()
    assert done["files"] == 3
    # at start; after ALTER TYPE (the digest: no message named a new type); at the new enum
    assert taken == [[], [], [mood2]]
    relations = [(set(oids), streamed) for _, kind, oids, streamed in _schema_messages(out) if kind == "R"]
    # the ALTER TYPE: the Relation sent again, naming the types it named before; the new
    # enum's inside the streamed transaction (once in each of its stream blocks)
    assert relations[:2] == [({23, mood1, pt, price}, False)] * 2
    assert len(relations) > 2 and set(map(frozenset, (r for r, _ in relations[2:]))) == {
        frozenset({23, pt, price, mood2})} and all(streamed for _, streamed in relations[2:])
    versions = []
    for p in read_archive_parts(out):
        v = Catalog.from_json(pq.read_schema(p.path).metadata[CATALOG_KEY]).versions
        versions.append([sorted(t["name"] for t in x.types if t["kind"] != "array") for x in v])
    # each file: the version in force at its first row and the ones taken while it was read
    assert [len(v) for v in versions] == [1, 2, 2]
    cat = archive_catalog(out)
    assert len(cat) == 3 and [v.lsn for v in cat.versions] == sorted(v.lsn for v in cat.versions)
    reg = cat.registry()
    assert [a[0] for a in reg.types[pt].attributes] == ["x", "y", "z"]
    assert [[a[0] for a in e.attributes] for e in reg.types[pt].earlier] == [["x", "y"]]
    assert reg.types[mood1].labels == ("sad", "ok") and reg.types[mood2].labels == ("meh", "fine", "great")
    assert reg.types[pt].earlier[0].lsn < reg.types[pt].lsn

    # no registry given: the archive's catalog types the domain's typmod (a Type message
    # does not send it) on every one-process path
    first = sorted(glob.glob(os.path.join(out, "part-*.parquet")))[0]
    want = pa.decimal128(10, 2)
    changes = pgc.decode_changes(pq.read_table(first))
    assert CATALOG_KEY in changes.schema.metadata
    assert pgc.snapshot(changes, "t").schema.field("v").type == want
    assert pgc.snapshot(changes.replace_schema_metadata({}), "t").schema.field("v").type == pa.string()
    assert pgc.decode_table_changes(pq.read_table(first), "t").schema.field("after").type.field("v").type == want
    for kept in (changes.filter(pa.array([True] * len(changes))), pa.concat_tables([changes, changes.slice(0, 0)])):
        assert pgc.history(kept, "t").schema.field("v").type == want
        assert pgc.net_changes(kept, "t").schema.field("v").type == want
    assert pgc.snapshot(changes, "t")["v"].to_pylist() == [Decimal("1.50")]     # (the first file's)
    # the caller's registry wins
    mine = TypeRegistry()
    mine.register_domain(_oid_of_column(changes, "v"), 20)
    assert pgc.snapshot(changes, "t", registry=mine).schema.field("v").type == pa.int64()

    # the command line: inspect tells what the archive records; decode --changes keeps it
    # in its output; mirror types with it
    from pgoutput_codec.cli.inspect import format_inspect, inspect_archive
    seen = inspect_archive(out)["types"]
    assert seen["versions"] == 3 and seen["kinds"] == {"array": 4, "composite": 1, "domain": 1, "enum": 2}
    assert "types     8 recorded in 3 versions (array 4, composite 1, domain 1, enum 2)" in \
        format_inspect(inspect_archive(out))
    main(["decode", "--changes", out, str(tmp_path / "ch.parquet")])
    back = pq.read_table(tmp_path / "ch.parquet")
    assert Catalog.from_json(back.schema.metadata[CATALOG_KEY]) == cat
    assert pgc.snapshot(back, "t").schema.field("v").type == want
    # the composite read with the definition each value was sent under, the new enum by its labels
    whole = pgc.snapshot(back, "t")
    assert whole.schema.field("p").type == pa.struct([("x", pa.int32()), ("y", pa.int32()), ("z", pa.int32())])
    assert whole.schema.field("m").type == pa.dictionary(pa.int32(), pa.string())
    assert len(whole) == 3 + 2991
    assert whole.filter(pc.less(whole["id"], 10)).select(["id", "p", "m"]).to_pylist() == [
        {"id": 1, "p": {"x": 1, "y": 2, "z": None}, "m": None}, {"id": 2, "p": {"x": 3, "y": 4, "z": 5}, "m": None},
        {"id": 3, "p": {"x": 6, "y": 7, "z": 8}, "m": "great"}]
    pgc.mirror(back, str(tmp_path / "lake_of_rows"))     # (change rows as Parquet gives them back: cast)
    from deltalake import DeltaTable
    assert DeltaTable(str(tmp_path / "lake_of_rows" / "public.t")).to_pyarrow_table().schema.field("v").type == want
    assert main(["mirror", out, str(tmp_path / "lake")]) == 0
    lake = DeltaTable(str(tmp_path / "lake" / "public.t")).to_pyarrow_table()
    assert lake.schema.field("v").type == want and sorted(lake["v"].to_pylist())[-3:] == \
        [Decimal("1.50"), Decimal("2.50"), Decimal("3.50")]


def _oid_of_column(changes, column):
    cols = changes.column("columns")[0].as_py()
    return next(c["type_oid"] for c in cols if c["name"] == column)


def test_catalog_command_and_an_archive_captured_elsewhere(db, tmp_path, capsys):
    with db.connect(DB) as c:
        x = c.execute
        x("CREATE DOMAIN price AS numeric(10,2)")
        x("CREATE TABLE t (id int PRIMARY KEY, v price, vs price[])")
        x("CREATE PUBLICATION p FOR TABLE t")
        x("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
        x("INSERT INTO t VALUES (1, 1.5, '{2.25}')")
        rows = x("SELECT lsn::text, xid::text::int8, data FROM pg_logical_slot_peek_binary_changes('s', NULL, NULL, "
                 "'proto_version', '1', 'publication_names', 'p')").fetchall()
    # an archive of no catalog: a COPY of the slot's rows, as users export them
    arch = tmp_path / "export.parquet"
    pq.write_table(pa.table({"seq": pa.array(range(len(rows)), pa.int64()), "lsn": [r[0] for r in rows],
                             "xid": [r[1] for r in rows],
                             "data": pa.array([bytes(r[2]) for r in rows], pa.binary())}), arch)
    assert archive_catalog(str(arch)) is None
    cfile = tmp_path / "types.json"
    assert main(["catalog", "--dsn", _dsn(db), "--publication", "p", "--out", str(cfile)]) == 0
    assert "types at LSN" in capsys.readouterr().out
    assert {t["name"] for t in json.loads(cfile.read_text())["versions"][0]["types"]} == {"price", "_price"}
    want = pa.decimal128(10, 2)
    plain = pgc.decode_changes(pq.read_table(arch))
    assert pgc.snapshot(plain, "t").schema.field("vs").type == pa.string()
    typed = pgc.snapshot(plain, "t", registry=read_catalog(cfile).registry())
    assert typed.schema.field("vs").type == pa.list_(want) and typed["vs"].to_pylist() == [[Decimal("2.25")]]
    main(["decode", "--changes", str(arch), str(tmp_path / "ch.parquet"), "--catalog", str(cfile)])
    assert pgc.snapshot(pq.read_table(tmp_path / "ch.parquet"), "t").schema.field("vs").type == pa.list_(want)
    assert main(["mirror", str(arch), str(tmp_path / "lake"), "--catalog", str(cfile)]) == 0
    from deltalake import DeltaTable
    assert DeltaTable(str(tmp_path / "lake" / "public.t")).to_pyarrow_table().schema.field("v").type == want
    # a bad file, a missing publication: one line saying so
    (tmp_path / "bad.json").write_text("{}")
    assert main(["decode", "--changes", str(arch), str(tmp_path / "c2.parquet"), "--catalog",
                 str(tmp_path / "bad.json")]) == 1
    assert "--catalog" in capsys.readouterr().err
    assert main(["catalog", "--dsn", _dsn(db), "--publication", "nope", "--out", str(cfile)]) == 1
    assert "publication 'nope' does not exist" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "c2.parquet")


def test_capture_goes_on_when_the_catalog_cannot_be_read(db, tmp_path, monkeypatch, capsys):
    """A catalog the server refuses (a privilege, a SQL_ASCII database's names that are not
    UTF-8) costs the files their catalog, never the capture; it is read again later."""
    out = str(tmp_path / "arch")
    with db.connect(DB) as c:
        c.execute("CREATE TABLE t (id int PRIMARY KEY)")
        c.execute("CREATE PUBLICATION p FOR TABLE t")
        c.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
        c.execute("INSERT INTO t VALUES (1)")
    refused = [1]
    read = capture_module.catalog_from_connection

    def once_refused(*a, **k):
        if refused:
            refused.pop()
            raise ValueError("refused for the test")
        return read(*a, **k)

    monkeypatch.setattr(capture_module, "catalog_from_connection", once_refused)
    st = capture_module.capture(_dsn(db), "s", "p", out, poll_interval=0.02, stop_after=2, log=lambda m: None)
    assert st["files"] == 1
    assert "cannot read the type catalog (refused for the test)" in capsys.readouterr().err
    first = read_archive_parts(out)[0]
    assert CATALOG_KEY in pq.read_schema(first.path).metadata     # (read again at the poll that found rows)
    assert len(archive_catalog(out)) == 1
