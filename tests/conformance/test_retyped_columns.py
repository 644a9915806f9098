"""Columns whose type changes within the archive (``ALTER TABLE … ALTER COLUMN … TYPE``), on real servers.

pgoutput sends nothing for the ``ALTER``; the table's next change comes with a new
Relation giving the column its new type, and the rows rewritten by the ``ALTER`` are not
decoded. So one column of one table holds values sent under several types, and, in
binary mode, in several encodings (``int4`` is 4 bytes, ``int8`` 8). Read by the newest
type, an ``int4`` read as ``int8`` would fail and the whole column come out raw
(binary), and text ``'x1'`` read as ``int4`` likewise. Each value is read by the type
it was sent under and cast to the column's: the snapshot equals the
server's table, except where PostgreSQL rewrote a value by a ``USING`` expression the
archive never saw (text ``'abc'`` to ``int4`` by ``length``): that value is null with
``__special`` holding what was sent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import re

import checks
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pgoutput_codec import decode_changes, decode_table_changes, history, net_changes, snapshot, table_changes
from pgoutput_codec.typecatalog import TypeRegistry

SLOT, PUB = "retype_slot", "retype_pub"
OLD_COLUMNS = [("id", 23), ("i", 23), ("f", 700), ("s", 25), ("ts", 1114), ("n", 23), ("code", 25),
               ("word", 25)]
NEW_TYPES = {"id": 20, "i": 20, "f": 701, "s": 1043, "ts": 1184, "n": 1700, "code": 23, "word": 23}
# rows 1-4 inserted under the old types; row 1 changed before the ALTER, 2 after it, 3
# and 4 not at all (their values are the ones sent under the old types)
UNTOUCHED = (3, 4)


def _get(conn, slot, pub, binary: bool) -> list:
    opts = ["proto_version", "1", "publication_names", pub] + (["binary", "true"] if binary else [])
    return conn.execute(f"SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('{slot}', NULL, NULL, "
                        "VARIADIC %s::text[])", (opts,)).fetchall()


@contextlib.contextmanager
def _published(conn, table: str, slot: str, pub: str):
    """``table`` (made by the caller) in a publication with a slot, all three dropped after."""
    x = conn.execute
    x(f"CREATE PUBLICATION {pub} FOR TABLE {table}")
    x(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    try:
        yield
    finally:
        x(f"SELECT pg_drop_replication_slot('{slot}')")
        x(f"DROP PUBLICATION {pub}")
        x(f"DROP TABLE {table}")


@pytest.fixture(scope="module", params=["text", "binary"])
def retyped(pg_server, request):
    """(archive, the server's final rows by id, its column names)."""
    binary = request.param == "binary"
    with pg_server.connect() as conn:
        x = conn.execute
        x("SET TimeZone = 'UTC'")   # timestamp -> timestamptz is read in the session's zone
        x("CREATE TABLE retyped (id int PRIMARY KEY, i int, f real, s text, ts timestamp, n int, code text, "
          "word text)")
        with _published(conn, "retyped", SLOT, PUB):
            x("INSERT INTO retyped SELECT g, g * 1000000, g + 0.5, 's' || g, "
              "timestamp '2024-01-02 03:04:05.25' + g * interval '1 day', g * 7, (g * 11)::text, "
              "repeat('w', g) FROM generate_series(1, 4) g")
            x("UPDATE retyped SET i = -5, word = 'changed' WHERE id = 1")
            x("ALTER TABLE retyped ALTER COLUMN id TYPE bigint, ALTER COLUMN i TYPE bigint, "
              "ALTER COLUMN f TYPE double precision, ALTER COLUMN s TYPE varchar(10), "
              "ALTER COLUMN ts TYPE timestamptz, ALTER COLUMN n TYPE numeric(12, 2), "
              "ALTER COLUMN code TYPE int USING code::int, ALTER COLUMN word TYPE int USING length(word)")
            x("UPDATE retyped SET i = 5000000000, f = 0.1, n = 2.5 WHERE id = 2")
            x("INSERT INTO retyped VALUES (5, 6, 7.25, 'five', '2025-05-05 05:05:05+00', 1.25, 55, 5)")
            x("DELETE FROM retyped WHERE id = 4 AND false")   # nothing: row 4 stays as sent
            rows = _get(conn, SLOT, PUB, binary)
            final, names = checks.rows_by_id(conn, "retyped")
    return checks.archive_of(rows), final, names


def test_the_server_sends_each_value_under_the_type_of_its_time(retyped):
    """What the server sends: the Relation of the first change after the ALTER gives the
    new types; the rows the ALTER rewrote are not sent."""
    archive, _, _ = retyped
    changes = decode_changes(archive)
    lists = [[(c["name"], c["type_oid"]) for c in cols] for cols in changes.column("columns").to_pylist()]
    assert lists[:5] == [OLD_COLUMNS] * 5
    assert lists[5:] == [[(name, NEW_TYPES[name]) for name, _ in OLD_COLUMNS]] * 2
    assert changes.column("op").to_pylist() == ["I"] * 4 + ["U", "U", "I"]


def test_the_snapshot_is_the_servers_table(retyped):
    """Every value read by the type it was sent under and cast to the column's: the
    snapshot equals the server's table (its types too), but for ``word``, which the
    server rewrote by ``length(word)``: the values sent as text are null, with the text
    in ``word__special``."""
    archive, final, names = retyped
    changes = decode_changes(archive)
    snap = snapshot(changes, "public.retyped").sort_by("id")
    types = {f.name: f.type for f in snap.schema}
    assert types["id"] == types["i"] == pa.int64() and types["f"] == pa.float64() and types["code"] == pa.int32()
    assert types["ts"] == pa.timestamp("us", "UTC") and pa.types.is_decimal(types["n"])
    got = {r["id"]: r for r in snap.to_pylist()}
    assert sorted(got) == sorted(final)
    for rid, want in final.items():
        row = got[rid]
        for name in names:
            if name == "word" and rid in (1, *UNTOUCHED):
                text = "changed" if rid == 1 else "w" * rid
                assert row["word"] is None and repr(text) in row["word__special"], (rid, row)
            else:
                assert row[name] == want[name], (rid, name, row[name], want[name])
                assert type(row[name]) is type(want[name]), (rid, name)
    assert [r["word__special"] for r in snap.to_pylist() if r["id"] not in (1, *UNTOUCHED)] == [None, None]
    assert isinstance(got[5]["n"], decimal.Decimal) and got[3]["ts"] == dt.datetime(
        2024, 1, 5, 3, 4, 5, 250000, tzinfo=dt.timezone.utc)


def test_table_changes_history_and_net_changes_read_each_value_by_its_type(retyped):
    """table_changes (and decode_table_changes, equal) type the values of every change by
    the type they were sent under: the Inserts before the ALTER carry the int4 ``i``
    values as int64; history's versions alive at the end are the snapshot; net_changes
    of the changes after the first commit, applied to the snapshot then, give it."""
    archive, final, _ = retyped
    changes = decode_changes(archive)
    typed = table_changes(changes, "public.retyped")
    assert decode_table_changes(archive, "public.retyped").equals(typed)
    after = typed.column("after").to_pylist()
    assert [a["i"] for a in after] == [1000000, 2000000, 3000000, 4000000, -5, 5000000000, 6]
    assert [a["code"] for a in after] == [11, 22, 33, 44, 11, 22, 55]
    assert [a["f"] for a in after[:4]] == [1.5, 2.5, 3.5, 4.5]
    before = typed.column("before").to_pylist()
    assert before[:5] == [None] * 5        # REPLICA IDENTITY DEFAULT, no key changed
    snap = snapshot(changes, "public.retyped")
    hist = history(changes, "public.retyped")
    alive = hist.filter(pc.is_null(hist.column("__END_LSN"))).select(snap.column_names)
    assert alive.sort_by("id").equals(snap.sort_by("id"))
    first = changes.column("commit_lsn")[0].as_py()
    later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(first, pa.uint64())))
    net = net_changes(later, "public.retyped")
    assert net.column("__OP").to_pylist() == ["upsert"] * 3 and net.column("id").to_pylist() == [1, 2, 5]
    copy = {r["id"]: r for r in snapshot(changes, "public.retyped", as_of_lsn=first).to_pylist()}
    for r in net.to_pylist():
        copy[r["id"]] = {k: v for k, v in r.items() if not k.startswith("__")}
    want = {r["id"]: r for r in snap.to_pylist()}
    assert {k: {c: v for c, v in r.items() if c in want[k]} for k, r in copy.items()} == want


# ------------------------------------------------------------------ the server's casts

#: (old type, new type [USING …], values): what ``ALTER COLUMN … TYPE`` makes of a value
#: an Arrow cast refuses or makes otherwise (pgoutput_codec/casts.py)
CASTS = [
    ("numeric(12,3)", "numeric(12,1)", ["1.25", "1.35", "-1.25", "2.449", "-0.05"]),
    ("numeric", "int", ["2.5", "-2.5", "3.5", "1.49"]),
    ("numeric(10,2)", "bigint", ["2.5", "-2.5"]),
    ("numeric", "numeric(8,2)", ["1.255", "'NaN'", "123456.785", "-0.005"]),
    ("double precision", "int", ["2.5", "3.5", "-2.5", "0.5"]),
    ("real", "smallint", ["2.5", "3.5"]),
    ("double precision", "numeric(10,2)", ["1.005", "2.675", "0.125", "-0.125", "'NaN'"]),
    ("real", "numeric(10,3)", ["1.0005", "0.1"]),
    ("double precision", "numeric", ["0.1", "1e20", "1.5e-7", "-0.0"]),
    ("int", "real", ["16777217"]),
    ("bigint", "double precision", ["9007199254740993"]),
    ("numeric", "real", ["1.0000001"]),
    ("timestamp(6)", "timestamp(0)", ["'2024-01-01 00:00:00.5'", "'1999-12-31 23:59:59.5'",
                                      "'1969-12-31 23:59:59.5'", "'1960-01-01 00:00:00.5'",
                                      "'2024-01-01 00:00:00.499999'"]),
    ("timestamptz(6)", "timestamptz(2)", ["'2024-01-01 00:00:00.125+00'", "'2024-01-01 00:00:00.135+00'",
                                          "'1999-12-31 23:59:59.995+00'"]),
    ("time(6)", "time(1)", ["'12:00:00.25'", "'12:00:00.35'", "'23:59:59.99'"]),
    ("interval", "interval(0)", ["'1.5 seconds'", "'-2.5 seconds'"]),
    ("interval", "interval hour", ["'1 day 2 hours 3 minutes 4.5 seconds'", "'-1 day -2 hours -3 minutes'"]),
    ("interval", "interval year", ["'1 year 5 months 3 days'", "'-1 year -5 months'"]),
    ("interval", "interval day to second(1)", ["'1 day 00:00:01.25'", "'-00:00:01.25'"]),
    ("interval", "interval minute to second(0)", ["'3 days 00:01:01.5'"]),
    ("text", "char(3)", ["'ab'", "'abc'", "'a  '"]),
    ("varchar(5)", "char(5)", ["'ab'"]),
    ("char(5)", "varchar(5)", ["'ab'"]),
    ("char(5)", "text", ["'ab'"]),
    ("boolean", "text", ["true", "false"]),
    ("inet", "text", ["'1.2.3.4'", "'10.0.0.0/8'", "'::1'"]),
    ("double precision", "text", ["1e20", "1e-7", "0.1", "'NaN'", "'-Infinity'", "1e15", "123456789012345.6",
                                  "1e-5", "-0.0"]),
    ("real", "text", ["0.1", "1e6", "123456", "1.5e-5"]),
    ("timestamp", "text", ["'2024-01-01 00:00:00.5'", "'2024-01-01 00:00:10'"]),
    ("interval", "text", ["'-1 year 2 mons -3 days 04:05:06.5'", "'0'", "'1 mon -00:00:01'"]),
    ("numeric(12,3)", "text", ["1.25"]),
    ("time", "text", ["'12:00:00'", "'12:00:00.5'", "'24:00:00'"]),
    ("bytea", "text", ["'\\x6869'", "''"]),
    ("uuid", "text", ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"]),
    ("text", "int USING c{i}::int", ["' 12 '", "'+7'"]),
    ("text", "numeric(6,2) USING c{i}::numeric(6,2)", ["'1.255'", "' 2.5 '", "'1e2'", "'NaN'"]),
    ("numeric(10,4)[]", "numeric(10,1)[]", ["'{1.25,2.35}'", "'{}'", "'{-0.05,NULL}'"]),
    ("int", "boolean USING c{i}::boolean", ["0", "5", "-1"]),
    ("text", "boolean USING c{i}::boolean", ["' yes '", "'of'", "'0'", "'T'"]),
    ("timestamp", "time", ["'1969-12-31 23:59:59.5'", "'2024-01-01 12:00:00.25'"]),
    ("timestamp", "date", ["'1969-12-31 23:59:59.5'", "'2024-01-01 00:00:00'"]),
    ("json", "jsonb", ["""'{"b":1, "a":2, "aa": [1,2,{"z":null}], "a": 3}'""", "'1e2'", "'-0'", "'1.50'",
                       """'"a\\u00e9\\n\\t/\\\\x\\u0001"'""", "'[ true , false,null ]'", "'{}'",
                       """'{"bb":1,"a":1,"c":1,"ab":1}'""", "'-1.0e+1'"]),
    ("time(6) with time zone", "time(1) with time zone", ["'23:59:59.99+02'", "'12:00:00.25-05:30'",
                                                          "'01:02:03+00'"]),
    ("time with time zone", "time", ["'12:00:00.25-05:30'", "'23:59:59.999999+14'"]),
    ("text", "jsonb USING c{i}::jsonb", ["""'{"k": {"y": 1, "x": [ ]}}'""", """'  "\\ud83d\\ude00"  '""",
                                         "'0.1E-3'"]),
]
CAST_SLOT, CAST_PUB = "cast_slot", "cast_pub"


#: casts a session's TimeZone decides, run in America/New_York: an ambiguous time of the
#: fall back, one the spring forward skips, one before standard time (LMT -04:56:02)
ZONED = [
    ("timestamp", "timestamptz", ["'2018-11-04 01:30'", "'2018-03-11 02:30'", "'1850-01-01 00:00'",
                                  "'2024-07-01 12:00:00.5'"]),
    ("timestamptz", "timestamp", ["'2018-11-04 05:30+00'", "'2018-11-04 06:30+00'", "'1850-01-01 00:00+00'"]),
    ("date", "timestamptz", ["'2018-11-04'", "'2018-03-11'"]),
    ("timestamptz", "date", ["'2018-11-04 03:30+00'", "'2018-11-05 05:30+00'"]),
    ("timestamptz", "time", ["'2018-11-04 05:30+00'", "'2024-07-01 03:59:59.5+00'"]),
    ("timestamptz", "text", ["'2018-11-04 05:30+00'", "'2018-11-04 06:30:00.25+00'", "'1850-01-01 00:00+00'"]),
    ("timestamp(6)", "timestamptz(0)", ["'2018-11-04 01:30:00.5'"]),
]


def _alter_and_rewrite(pg_server, casts, binary: bool, zone: str):
    """(the archive up to the first change after one ALTER of every column, the same
    archive with every row the ALTER rewrote updated after it, a registry loaded from
    the session): the second's last images are the server's own bytes of the rewritten
    values, under the new types."""
    rows = max(len(v) for _, _, v in casts)
    with pg_server.connect() as conn:
        x = conn.execute
        x(f"SET TimeZone = '{zone}'")
        x("CREATE TABLE casts (id int PRIMARY KEY, " + ", ".join(f"c{i} {old}" for i, (old, _, _) in
                                                                 enumerate(casts)) + ")")
        with _published(conn, "casts", CAST_SLOT, CAST_PUB):
            for r in range(rows):
                x(f"INSERT INTO casts VALUES ({r}, " + ", ".join(
                    vals[r] if r < len(vals) else "NULL" for _, _, vals in casts) + ")")
            x("ALTER TABLE casts " + ", ".join(f"ALTER COLUMN c{i} TYPE {new.format(i=i)}"
                                               for i, (_, new, _) in enumerate(casts)))
            x(f"INSERT INTO casts (id) VALUES ({rows})")
            before = _get(conn, CAST_SLOT, CAST_PUB, binary)
            x(f"UPDATE casts SET id = id WHERE id < {rows}")
            after = _get(conn, CAST_SLOT, CAST_PUB, binary)
            registry = TypeRegistry().load_from_connection(conn)
    return checks.archive_of(before), checks.archive_of(before + after), registry


@pytest.fixture(scope="module", params=["text", "binary"])
def server_casts(pg_server, request):
    return _alter_and_rewrite(pg_server, CASTS, request.param == "binary", "UTC")


@pytest.fixture(scope="module", params=["text", "binary"])
def zoned_casts(pg_server, request):
    return _alter_and_rewrite(pg_server, ZONED, request.param == "binary", "America/New_York")


def _assert_same_columns(mine, server, casts):
    assert mine.column_names == server.column_names
    assert len(mine) == max(len(v) for _, _, v in casts) + 1
    for i, (old, new, vals) in enumerate(casts):
        for name in (f"c{i}", f"c{i}__special"):
            if name not in mine.column_names:
                continue
            a, b = mine.column(name), server.column(name)
            assert a.type == b.type, (old, new, name)
            assert a.cast(pa.int64()).equals(b.cast(pa.int64())) if pa.types.is_time(a.type) else a.equals(b), (
                old, new, name, a.to_pylist()[:len(vals)], b.to_pylist()[:len(vals)])


def test_a_value_sent_before_the_alter_is_what_the_server_s_cast_made_of_it(server_casts):
    """Every value sent under the old type, read by it and cast, equals what the server
    sends for the same row under the new type after its rewrite: numerics rounded half
    away from zero (``numeric(12,3)`` 1.250 is 1.3 in ``numeric(12,1)``, 2.5 is 3 as an
    int), floats half to even into integers and by their 15 or 6 digits into numerics
    (1.005 is 1.01), integers to the nearest float, timestamp, time and interval
    precisions and fields, ``char(n)``'s padding, and the text forms of an ``… TYPE
    text``. Arrow's own casts would refuse most of them (null, with a note) or truncate."""
    early, late, _ = server_casts
    mine = snapshot(decode_changes(early), "public.casts").sort_by("id")
    server = snapshot(decode_changes(late), "public.casts").sort_by("id")
    _assert_same_columns(mine, server, CASTS)
    assert mine.column("c0").to_pylist()[:5] == [decimal.Decimal(v) for v in ("1.3", "1.4", "-1.3", "2.4", "-0.1")]
    assert mine.column("c4").to_pylist()[:4] == [2, 4, -2, 0]


def test_the_server_sends_the_rewritten_rows_under_the_new_types(server_casts):
    """The reference above is the server's: after the ALTER every Update carries the
    Relation's new types, and each column's values there are typed by them."""
    _, late, _ = server_casts
    changes = decode_changes(late)
    ops = changes.column("op").to_pylist()
    rows = max(len(v) for _, _, v in CASTS)
    assert ops == ["I"] * (rows + 1) + ["U"] * rows
    newest = changes.column("columns")[len(ops) - 1].as_py()
    assert [c["name"] for c in newest] == ["id"] + [f"c{i}" for i in range(len(CASTS))]


def test_timestamps_meet_timestamptz_on_the_alter_session_s_clock(zoned_casts):
    """``timestamp`` ↔ ``timestamptz`` (and ``date``, ``time``, ``text``) are cast in the
    ``ALTER`` session's ``TimeZone``, which ``TypeRegistry.load_from_connection`` reads
    (``registry.timezone``): a time the fall back repeats is standard time, one the
    spring forward skips reads by the offset before it, 1850 by local mean time, and a
    timestamptz's text carries the zone's offset. Without the zone they are read in UTC,
    and differ (the README's Limits said so)."""
    early, late, registry = zoned_casts
    assert registry.timezone == "America/New_York"
    mine = snapshot(decode_changes(early), "public.casts", registry=registry).sort_by("id")
    server = snapshot(decode_changes(late), "public.casts", registry=registry).sort_by("id")
    _assert_same_columns(mine, server, ZONED)
    assert mine.column("c5").to_pylist()[:3] == ["2018-11-04 01:30:00-04", "2018-11-04 01:30:00.25-05",
                                                 "1849-12-31 19:03:58-04:56:02"]
    in_utc = snapshot(decode_changes(early), "public.casts").sort_by("id")
    assert [in_utc.column(f"c{i}").equals(server.column(f"c{i}")) for i in range(len(ZONED))] == [False] * len(ZONED)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_key_the_alter_rounded_finds_its_row(pg_server, binary):
    """A key whose type's scale shrinks is rounded by the rewrite: the Update after the
    ALTER names the row by the rounded key (1.3 for 1.250), and the snapshot finds the
    row inserted before it, as the server's table has one row per key. Arrow's own cast
    would refuse it, leave the key null, and the row be held twice."""
    with pg_server.connect() as conn:
        x = conn.execute
        x("CREATE TABLE rkey (id numeric(12,3) PRIMARY KEY, v int)")
        with _published(conn, "rkey", CAST_SLOT, CAST_PUB):
            x("INSERT INTO rkey VALUES (1.250, 1), (2.449, 2), (-0.050, 3)")
            x("ALTER TABLE rkey ALTER COLUMN id TYPE numeric(12,1)")
            x("UPDATE rkey SET v = v * 10 WHERE id IN (1.3, -0.1)")
            x("DELETE FROM rkey WHERE id = 2.4")
            rows = _get(conn, CAST_SLOT, CAST_PUB, binary)
            final = sorted(x("SELECT id, v FROM rkey").fetchall())
    snap = snapshot(decode_changes(checks.archive_of(rows)), "public.rkey")
    assert sorted((r["id"], r["v"]) for r in snap.to_pylist()) == final
    assert final == [(decimal.Decimal("-0.1"), 30), (decimal.Decimal("1.3"), 10)]


def test_a_session_zone_arrow_cannot_place_is_said_not_guessed(pg_server):
    """A POSIX rule (``UTC+3``, which PostgreSQL reads as three hours *west*, or
    ``<+03>-03``) is no zone Arrow's database places (nor is a server machine's
    ``localtime``, which this server refuses to be SET to): load_from_connection warns
    and leaves ``timezone`` unset (UTC), rather than read the values on another clock;
    an IANA name is kept."""
    with pg_server.connect() as conn:
        for zone, kept in (("UTC+3", None), ("<+03>-03", None), ("Asia/Kolkata", "Asia/Kolkata")):
            conn.execute(f"SET TimeZone = '{zone}'")
            if kept is None:
                with pytest.warns(UserWarning, match=re.escape(f"TimeZone '{zone}' is not a zone Arrow")):
                    reg = TypeRegistry().load_from_connection(conn)
            else:
                reg = TypeRegistry().load_from_connection(conn)
            assert reg.timezone == kept
        assert TypeRegistry(timezone="Europe/Berlin").load_from_connection(conn).timezone == "Europe/Berlin"
