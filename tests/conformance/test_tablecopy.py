"""Copied tables as the server's own pgoutput sends them, on real servers (15, 16, 18).

Each server gets tables of many types and shapes (a TOASTed value, arrays, a domain, an
enum, a type without a binary send function, dropped and generated columns, a composite
key in another order than the columns, REPLICA IDENTITY FULL and USING INDEX, partitioned
tables published via their root and not, a column list with a row filter); a slot created
before the rows are inserted is peeked in text and in binary mode. The Relation payload
of ``published_tables`` and the Insert payloads of ``copy_rows`` must be byte-equal to
what the server sent.
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgoutput_codec.pgoutput._copyrows import CopyInserts
from pgoutput_codec.cli.tablecopy import copy_rows, copy_statement, copy_transaction_messages, published_tables
from pgoutput_codec.errors import CopyStreamError
from pgoutput_codec.pgoutput.messages import Begin, Commit
from pgoutput_codec import decode_message

DB = "tablecopy"
PUBS = "tc_pub_main,tc_pub_root,tc_pub_filter,tc_pub_filter2,tc_pub_gen"

SCHEMA = r"""
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE tc_types (
    id int PRIMARY KEY, dropped int, t text, n numeric(12,3), nn numeric, arr int[], tarr text[], b bool,
    ba bytea, i inet, ts timestamptz, j jsonb, d posint, e mood, big text, f float8, r real, dt date,
    iv interval, u uuid, acl aclitem, c varchar(10), ch char(3), tsv tsvector, pt point, ea mood[], e2 mood,
    gen int GENERATED ALWAYS AS (id * 2) STORED);
ALTER TABLE tc_types DROP COLUMN dropped;
CREATE TABLE tc_comp (a text, b int, v text, PRIMARY KEY (b, a));
CREATE TABLE tc_full (x int, y text);
ALTER TABLE tc_full REPLICA IDENTITY FULL;
CREATE TABLE tc_ident (id int PRIMARY KEY, code text NOT NULL, note text);
CREATE UNIQUE INDEX tc_ident_code ON tc_ident (code);
ALTER TABLE tc_ident REPLICA IDENTITY USING INDEX tc_ident_code;
CREATE TABLE tc_proot (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE tc_proot_a PARTITION OF tc_proot FOR VALUES IN ('a');
CREATE TABLE tc_proot_b PARTITION OF tc_proot FOR VALUES IN ('b');
CREATE TABLE tc_pleaf (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE tc_pleaf_1 PARTITION OF tc_pleaf FOR VALUES FROM (0) TO (100);
CREATE TABLE tc_pleaf_2 PARTITION OF tc_pleaf FOR VALUES FROM (100) TO (1000);
CREATE TABLE tc_filt (id int PRIMARY KEY, name text, secret text, score int);
CREATE TABLE tc_gen (id int PRIMARY KEY, v int, g int GENERATED ALWAYS AS (v + 1) STORED);
CREATE TABLE tc_keyless_list (id int PRIMARY KEY, v text, w text);
CREATE SCHEMA "tc s";
CREATE TABLE "tc s"."Odd Tab" ("K ""q"" k" int, "Vé" text, PRIMARY KEY ("Vé", "K ""q"" k"));
CREATE PUBLICATION tc_pub_main FOR TABLE tc_types, tc_comp, tc_full, tc_ident, tc_pleaf, "tc s"."Odd Tab";
CREATE PUBLICATION tc_pub_root FOR TABLE tc_proot WITH (publish_via_partition_root = true);
CREATE PUBLICATION tc_pub_filter FOR TABLE tc_filt (id, name, score) WHERE (score % 2 = 0),
    tc_keyless_list (w, v) WITH (publish = 'insert');
CREATE PUBLICATION tc_pub_filter2 FOR TABLE tc_filt (id, name, score) WHERE (score > 25) WITH (publish = 'insert');
"""

TEXTS = ["plain", "tab\there", "new\nline", "cr\rret", "back\\slash", "\\N", "", "héllo ✓ 𝄞",
         "\b\f\v\x01\x7f", "ends with backslash \\", "quote ' \" {x}", "\\.", "a\tb\\tc\\\\d"]

INSERTS = r"""
INSERT INTO tc_types (id, t, n, nn, arr, tarr, b, ba, i, ts, j, d, e, big, f, r, dt, iv, u, acl, c, ch, tsv, pt, ea)
SELECT g, %(t)s, 12345.678 * g, 'NaN', ARRAY[g, NULL, -g], ARRAY['a b', NULL, 'c"d', %(t)s, 'NULL'],
       g %% 2 = 0, decode('00ff5c0a09' || lpad(to_hex(g), 4, '0'), 'hex'), '192.168.0.1/24', '2024-02-29 12:34:56.789+01',
       jsonb_build_object('a', jsonb_build_array(1, %(t)s::text), 'n', null), g, 'happy', NULL, 0.1 * g, 1.5e-7,
       '2000-01-01'::date + g, '1 year 2 mons 3 days 04:05:06.7', md5(g::text)::uuid, 'postgres=arw/postgres',
       'vc' || g, 'x', to_tsvector('simple', 'the quick ' || %(t)s), point(g, -g), ARRAY['ok', NULL]::mood[]
FROM generate_series(%(lo)s::int, %(hi)s::int) g
"""


@pytest.fixture(scope="module")
def copied(pg_server):
    """The server's messages for the rows (text and binary peeks), a connection to the
    database, and the server's major version."""
    with pg_server.connect() as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB}")
        admin.execute(f"CREATE DATABASE {DB}")
    conn = pg_server.connect(dbname=DB)
    try:
        conn.execute(SCHEMA)
        gen = "WITH (publish_generated_columns = stored)" if pg_server.major >= 18 else ""
        if pg_server.major >= 18:   # a virtual generated column is never published
            conn.execute("ALTER TABLE tc_gen ADD COLUMN gv int GENERATED ALWAYS AS (v * 3) VIRTUAL")
        conn.execute(f"CREATE PUBLICATION tc_pub_gen FOR TABLE tc_gen {gen}")
        conn.execute("SELECT pg_create_logical_replication_slot('tc_slot', 'pgoutput')")
        try:
            g = 0
            for t in TEXTS:
                g += 1
                conn.execute(INSERTS, {"t": t, "lo": g, "hi": g})
            conn.execute(INSERTS, {"t": "many", "lo": g + 1, "hi": g + 40})
            conn.execute("INSERT INTO tc_types (id) VALUES (1000)")                     # all NULL
            conn.execute("INSERT INTO tc_types (id, big, f, ts, nn) VALUES (1001, (SELECT string_agg(md5(x::text), '') "
                         "FROM generate_series(1, 8000) x), '-Infinity', 'infinity', '-0.000100')")   # TOASTed
            conn.execute("INSERT INTO tc_types (id, f, r) VALUES (1002, 'NaN', '1e30'), (1003, 1e300, -0)")
            for b in range(5):
                for a in sorted(["z", "a\tb", "m", "é"], key=str.encode):   # key order: the copy's
                    conn.execute("INSERT INTO tc_comp VALUES (%s, %s, %s)", (a, b, f"{a}{b}"))
            conn.execute("INSERT INTO tc_full VALUES (1, 'x'), (1, 'x'), (NULL, NULL), (2, 'tab\there')")
            conn.execute("INSERT INTO tc_ident SELECT g, 'code' || (100 - g), 'n' || g FROM generate_series(1, 20) g")
            conn.execute("INSERT INTO tc_proot SELECT g, CASE WHEN g % 3 = 0 THEN 'a' ELSE 'b' END, 'v' || g "
                         "FROM generate_series(1, 30) g")
            conn.execute("INSERT INTO tc_pleaf SELECT g * 7, 'v' || g FROM generate_series(1, 40) g")
            conn.execute("INSERT INTO tc_filt SELECT g, 'name' || g, 'secret', g FROM generate_series(1, 30) g")
            conn.execute("INSERT INTO tc_gen SELECT g, g * 10 FROM generate_series(1, 10) g")
            conn.execute("INSERT INTO tc_keyless_list SELECT g, 'v' || g, 'w' || g FROM generate_series(1, 10) g")
            conn.execute("""INSERT INTO "tc s"."Odd Tab" SELECT g % 4, v FROM generate_series(1, 12) g,
                            LATERAL (SELECT 'v\t' || (g / 4)) x(v) ORDER BY 2, 1""")
            peeks = {}
            for binary in (False, True):
                opts = ["proto_version", "1", "publication_names", PUBS] + (["binary", "true"] if binary else [])
                rows = conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes('tc_slot', NULL, NULL, "
                                    "VARIADIC %s::text[])", (opts,)).fetchall()
                rels, inserts, types = {}, {}, []
                for (data,) in rows:
                    data = bytes(data)
                    if data[:1] == b"Y":
                        types.append(data)
                    elif data[:1] == b"R":
                        # the Type messages of a relation's user-defined types come right before it
                        rels[int.from_bytes(data[1:5], "big")] = (tuple(types), data)
                        types = []
                    elif data[:1] == b"I":
                        inserts.setdefault(int.from_bytes(data[1:5], "big"), []).append(data)
                peeks[binary] = (rels, inserts)
        finally:
            conn.execute("SELECT pg_drop_replication_slot('tc_slot')")
        yield conn, peeks, pg_server.major
    finally:
        conn.close()


def _tables(conn):
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return {t.table: t for t in published_tables(conn, PUBS)}


def _payloads(conn, table, binary, **kw):
    with conn.transaction():
        return [p for arr, _ in copy_rows(conn, table, binary=binary, **kw) for p in arr.to_pylist()]


def test_published_tables_are_what_pgoutput_sends(copied):
    conn, peeks, major = copied
    tables = _tables(conn)
    assert sorted(tables) == ["Odd Tab", "tc_comp", "tc_filt", "tc_full", "tc_gen", "tc_ident", "tc_keyless_list",
                              "tc_pleaf_1", "tc_pleaf_2", "tc_proot", "tc_types"]
    # pgoutput also describes a partition whose changes it sends as its root's (pgoutput.c
    # maybe_send_schema); no change names it, so a copy has no use for it
    parts = {r for (r,) in conn.execute("SELECT relid::bigint FROM pg_partition_tree('tc_proot') WHERE isleaf")}
    for binary in (False, True):
        rels, _ = peeks[binary]
        assert sorted(set(rels) - parts) == sorted(t.relid for t in tables.values())
        for t in tables.values():
            assert (t.type_messages, t.relation_message) == rels[t.relid], (t.table, binary)
    types = tables["tc_types"]
    assert [c.name for c in types.columns][:3] == ["id", "t", "n"] and "gen" not in [c.name for c in types.columns]
    assert [c.name for c in types.columns if c.is_key] == ["id"]
    assert not types.has_send[[c.name for c in types.columns].index("acl")]   # aclitem: no send function
    # posint (sent as its base type int4), mood, mood[], mood again
    assert [m[:1] for m in types.type_messages] == [b"Y"] * 4 and types.type_messages[0][5:] == b"\0int4\0"
    assert tables["tc_comp"].primary_key == ("b", "a")
    assert tables["tc_full"].primary_key is None and all(c.is_key for c in tables["tc_full"].columns)
    assert [c.name for c in tables["tc_ident"].columns if c.is_key] == ["code"]
    assert tables["tc_ident"].primary_key == ("id",)
    assert tables["tc_proot"].kind == "p" and tables["tc_proot"].primary_key == ("id", "region")
    assert [c.name for c in tables["tc_filt"].columns] == ["id", "name", "score"]
    assert tables["tc_filt"].row_filter == "(((score % 2) = 0)) OR ((score > 25))"
    assert [c.name for c in tables["tc_keyless_list"].columns] == ["v", "w"]
    assert tables["tc_keyless_list"].primary_key == ("id",)
    assert tables["Odd Tab"].schema == "tc s" and tables["Odd Tab"].primary_key == ("Vé", 'K "q" k')
    assert [c.name for c in tables["tc_gen"].columns] == (["id", "v", "g"] if major >= 18 else ["id", "v"])


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_copied_rows_are_the_inserts_pgoutput_sends(copied, binary):
    conn, peeks, _ = copied
    _, inserts = peeks[binary]
    tables = _tables(conn)
    for t in tables.values():
        got = _payloads(conn, t, binary)
        want = inserts[t.relid]
        if t.primary_key is None:
            got, want = sorted(got), sorted(want)
        assert len(got) == len(want), t.table
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g == w, (t.table, i, decode_message(g), decode_message(w))
    assert any(len(p) > 100_000 for p in _payloads(conn, tables["tc_types"], binary))     # the TOASTed row


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_chunks_after_a_key_cover_every_row_once(copied, binary):
    conn, _, _ = copied
    tables = _tables(conn)
    for name, size in [("tc_types", 7), ("tc_comp", 3), ("tc_proot", 4), ("tc_ident", 20), ("tc_keyless_list", 3),
                       ("Odd Tab", 5)]:
        t = tables[name]
        whole = _payloads(conn, t, binary)
        chunks, key = [], None
        while True:
            with conn.transaction():
                batches = list(copy_rows(conn, t, binary=binary, after_key=key, max_rows=size, batch_bytes=300))
            rows = [bytes(p) for arr, _ in batches for p in arr.to_pylist()]
            if not rows:
                break
            assert len(rows) <= size
            chunks += rows
            key = batches[-1][1]
            assert isinstance(key, tuple) and len(key) == len(t.primary_key)
        assert chunks == whole, name
    with pytest.raises(ValueError, match="no primary key"):
        _payloads(conn, tables["tc_full"], binary, max_rows=1)


def test_a_copy_stopped_early_leaves_the_transaction_usable(copied):
    """Closing the iterator cancels the COPY; the caller's transaction (its exported snapshot)
    goes on, as a copy job that stops a table early needs."""
    conn, _, _ = copied
    t = _tables(conn)["tc_types"]
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        before = conn.execute("SELECT count(*) FROM tc_types").fetchone()
        it = copy_rows(conn, t, binary=False, batch_bytes=100)
        first, _ = next(it)
        it.close()
        assert conn.execute("SELECT count(*) FROM tc_types").fetchone() == before
        assert _payloads(conn, t, False)[:len(first)] == first.to_pylist()


def _raw_copy(conn, table, binary):
    stmt, kinds, n_fields, key_fields = copy_statement(conn, table, binary=binary)
    with conn.transaction(), conn.cursor() as cur, cur.copy(stmt) as copy:
        data = b"".join(bytes(d) for d in copy)
    return data, kinds, n_fields, key_fields


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_broken_copy_stream_is_refused_with_its_offset(copied, binary):
    conn, _, _ = copied
    t = _tables(conn)["tc_types"]
    data, kinds, n_fields, key_fields = _raw_copy(conn, t, binary)
    whole, _ = CopyInserts(t.relid, binary, n_fields, kinds, key_fields).feed(data, final=True)
    assert len(whole) == 57
    rng = random.Random(5)
    cuts = sorted(set(rng.sample(range(len(data)), 300)) | set(range(25)))
    for cut in cuts:
        dec = CopyInserts(t.relid, binary, n_fields, kinds, key_fields)
        if not binary and (cut == 0 or data[cut - 1] == 10):
            # the text format has no end marker: a stream cut after a row is whole rows
            # (the protocol's CopyDone and CommandComplete say where a stream ends)
            arr, _ = dec.feed(data[:cut], final=True)
            assert arr.to_pylist() == whole.to_pylist()[:len(arr)]
            continue
        with pytest.raises(CopyStreamError, match=r"at byte \d+") as e:
            dec.feed(data[:cut], final=True)
        assert 0 <= e.value.offset <= cut
    # pieces of any size give the same payloads as the whole stream
    for piece in (1, 7, 4096):
        dec = CopyInserts(t.relid, binary, n_fields, kinds, key_fields)
        got, rest = [], b""
        for i in range(0, len(data), piece):
            arr, used = dec.feed(rest + data[i:i + piece])
            rest = (rest + data[i:i + piece])[used:]
            got += arr.to_pylist()
        arr, _ = dec.feed(rest, final=True)
        assert got + arr.to_pylist() == whole.to_pylist()
    # bytes changed anywhere: an error naming an offset, or rows (a changed value); never a crash
    for _ in range(300):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.choice([0, 9, 10, 92, 0xFF, rng.randrange(256)])
        try:
            arr, _ = CopyInserts(t.relid, binary, n_fields, kinds, key_fields).feed(bytes(bad), final=True)
            arr.validate(full=True)
        except CopyStreamError as e:
            assert 0 <= e.offset <= len(bad)


def test_malformed_streams_say_what_is_wrong():
    sig = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
    cases = [
        (False, b"1\t2\t3\n", "row 1 has more than 2 fields, at byte 4"),
        (False, b"1\t2\n1\n", "row 2 has 1 fields, not 2, at byte 5"),
        (False, b"1\tab\\\n", "row 1 field 2 ends with a backslash that escapes nothing, at byte 4"),
        (False, b"1\t2\n3\t4", "ends inside row 2 (no newline after its last 3 bytes), at byte 4"),
        (True, b"PGCOPY\n\xfe\r\n\x00", "signature is not PGCOPY"),
        (True, sig + struct.pack("!hi", 3, 1), "row 1 has 3 fields, not 2, at byte 19"),
        (True, sig + struct.pack("!hi", 2, -2), "row 1 field 1 has length -2, at byte 21"),
        (True, sig + struct.pack("!hii", 2, 100, 0), "row 1 field 1 (it wants 100 more bytes, 4 left), at byte 25"),
        (True, sig + struct.pack("!hii", 2, -1, -1), "ends inside row 2 (it wants 2 more bytes, 0 left), at byte 29"),
        (True, sig + struct.pack("!hh", -1, 0), "2 bytes follow the trailer, at byte 21"),
    ]
    for binary, data, msg in cases:
        dec = CopyInserts(1, binary, 2, b"tt")
        with pytest.raises(CopyStreamError) as e:
            dec.feed(data, final=True)
        assert msg in str(e.value), (data, str(e.value))


def test_copy_transaction_frame():
    begin, commit = copy_transaction_messages(0x16B3748, 789)
    assert decode_message(begin) == Begin(final_lsn=0x16B3748, commit_ts=789, xid=0)
    assert decode_message(commit) == Commit(flags=0, commit_lsn=0x16B3748, end_lsn=0x16B3748, commit_ts=789)


def _rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_large_table_is_copied_in_bounded_memory(copied, binary):
    conn, _, _ = copied
    if conn.execute("SELECT to_regclass('tc_large')").fetchone()[0] is None:
        conn.execute("CREATE TABLE tc_large (id int PRIMARY KEY, v text)")
        conn.execute("ALTER TABLE tc_large ALTER COLUMN v SET STORAGE EXTERNAL")
        conn.execute("INSERT INTO tc_large SELECT g, repeat(md5(g::text), 32) FROM generate_series(1, 200000) g")
        conn.execute("CREATE PUBLICATION tc_pub_large FOR TABLE tc_large")
    with conn.transaction():
        (t,) = published_tables(conn, "tc_pub_large")
    base = peak = _rss()
    rows = size = 0
    key = None
    with conn.transaction():
        for arr, batch_key in copy_rows(conn, t, binary=binary):
            rows += len(arr)
            key = batch_key
            size += arr.nbytes
            peak = max(peak, _rss())
    assert rows == 200000 and key == ("200000",)
    assert size > 200_000_000
    assert peak - base < 100 << 20, f"RSS grew {(peak - base) >> 20} MB copying {size >> 20} MB"


_ESCAPES = {0x5C: b"\\\\", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x0B: b"\\v"}


def _copy_text(rows):
    """A text COPY stream as copyto.c CopyAttributeOutText writes it."""
    return b"".join(b"\t".join(b"\\N" if v is None else b"".join(_ESCAPES.get(c, bytes((c,))) for c in v)
                               for v in row) + b"\n" for row in rows)


def _copy_binary(rows):
    out = [b"PGCOPY\n\xff\r\n\x00", struct.pack("!ii", 0, 0)]
    for row in rows:
        out.append(struct.pack("!h", len(row)))
        out += [struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v for v in row]
    return b"".join(out + [struct.pack("!h", -1)])


@given(st.integers(1, 5).flatmap(lambda n: st.lists(st.lists(st.none() | st.binary(max_size=12), min_size=n,
                                                             max_size=n), max_size=8)),
       st.booleans(), st.lists(st.integers(1, 40), min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_any_rows_in_pieces_give_their_inserts(rows, binary, pieces):
    """Rows of any bytes (every escape, NULLs, empty values) as COPY writes them, fed in
    pieces of any size, give exactly the Inserts of their values and the last row's key."""
    n = len(rows[0]) if rows else 2
    data = _copy_binary(rows) if binary else _copy_text(rows)
    dec = CopyInserts(77, binary, n, (b"b" if binary else b"t") * (n - 1) + b"t", (n - 1,))
    got, rest, i, k = [], b"", 0, 0
    while i < len(data):
        step = pieces[k % len(pieces)]
        arr, used = dec.feed(rest + data[i:i + step])
        arr.validate(full=True)
        rest = (rest + data[i:i + step])[used:]
        got += arr.to_pylist()
        i, k = i + step, k + 1
    arr, _ = dec.feed(rest, final=True)
    got += arr.to_pylist()
    kinds = [b"b" if binary else b"t"] * (n - 1) + [b"t"]
    assert got == [b"I" + struct.pack("!IcH", 77, b"N", n) + b"".join(
        b"n" if v is None else kd + struct.pack("!i", len(v)) + v for v, kd in zip(row, kinds, strict=True))
        for row in rows]
    assert dec.rows == len(rows) and dec.offset == len(data)
    assert dec.last_key == ((rows[-1][-1],) if rows else None)
