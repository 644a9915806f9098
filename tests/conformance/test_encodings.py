"""Archives captured in a client encoding other than UTF-8, on real servers.

A logical decoding session receives names and text in its ``client_encoding``, which is
the database's unless the session sets it: ``psycopg``, ``pg_recvlogical`` or a
``SELECT … pg_logical_slot_get_binary_changes`` job against a LATIN1 database lands
LATIN1 bytes. The decoders read UTF-8, so they would refuse such an archive outright
("relation_name is not valid UTF-8"). Here one slot is peeked twice per option set, once
under the database's encoding and once under UTF8, and ``transcode_payloads`` must turn
the first into the second byte for byte: names, text and binary values of text types, a
streamed transaction (its Relation carries an xid), a REPLICA IDENTITY FULL old row, a
logical message (whose content PostgreSQL never converts), an enum registered from the
catalog. The decoded snapshot then equals the server's table.
"""

from __future__ import annotations

import json

import checks
import pytest

from pgoutput_codec import decode_changes, snapshot, transcode_payloads
from pgoutput_codec.errors import PgoutputDecodeError
from pgoutput_codec.transcode import TranscodeError, python_codec
from pgoutput_codec.typecatalog import TypeRegistry

# database encoding -> (schema, table, a column name, text values, an enum label)
DATABASES = {
    "LATIN1": ("sch\u00e9ma", "caf\u00e9", "\u00e9t\u00e9", ["caf\u00e9 cr\u00e8me", "\u00e0 la", "na\u00efve"],
               "\u00e9t\u00e9"),
    "EUC_JP": ("\u30b9\u30ad\u30fc\u30de", "\u8868", "\u5217", ["\u65e5\u672c\u8a9e", "\u30c6\u30b9\u30c8",
                                                                "\u3042\u3044"], "\u5b09\u3057\u3044"),
}
OPTION_SETS = {
    "text": ["proto_version", "1"],
    "binary": ["proto_version", "1", "binary", "true"],
    "stream-text": ["proto_version", "2", "streaming", "true", "messages", "true"],
    "stream-binary": ["proto_version", "2", "streaming", "true", "messages", "true", "binary", "true"],
}
PEEK = "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('enc_slot', NULL, NULL, VARIADIC %s::text[])"


@pytest.fixture(scope="module", params=sorted(DATABASES))
def encoded(pg_server, request):
    """(encoding, {option set: (rows peeked under the database's encoding, under UTF8)},
    the server's rows by id, the table's qualified name, the catalog's user types)."""
    enc = request.param
    schema, table, col, texts, label = DATABASES[enc]
    db = f"enc_{enc.lower()}"
    with pg_server.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db} ENCODING '{enc}' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
    with pg_server.connect(db) as c:
        x = c.execute
        x("SET client_encoding = 'UTF8'")
        x(f'CREATE SCHEMA "{schema}"')
        x(f"CREATE TYPE mood AS ENUM ('ok', '{label}')")
        x("CREATE DOMAIN dtext AS text")
        qual = f'"{schema}"."{table}"'
        x(f'CREATE TABLE {qual} (id int PRIMARY KEY, t text, v varchar(8), b char(4), n name, j json, jb jsonb, '
          f'ta text[], d dtext, m mood, ch "char", "{col}" int)')
        x(f"ALTER TABLE {qual} REPLICA IDENTITY FULL")       # Updates and Deletes send the old row
        x(f"CREATE PUBLICATION enc_pub FOR TABLE {qual}")
        x("SELECT pg_create_logical_replication_slot('enc_slot', 'pgoutput')")
        a, b_, z = texts
        for i, s in enumerate(texts, 1):
            x(f"INSERT INTO {qual} VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
              (i, s, s[:8], s[:2], s, json.dumps({s: i}), json.dumps({"k": s}), [s, None, "x"], s,
               label if i % 2 else "ok", "z", i))
        x(f"UPDATE {qual} SET t = %s, ta = ARRAY[%s] WHERE id = 1", (z + a, b_))
        x(f"DELETE FROM {qual} WHERE id = 2")
        x("SELECT pg_logical_emit_message(true, %s, %s)", (f"pr\u00e9fixe {a}" if enc == "LATIN1" else a, z))
        with c.transaction():   # streamed with logical_decoding_work_mem = 64kB
            x(f"INSERT INTO {qual} (id, t, jb, m) SELECT g, repeat(%s, 50), %s, %s FROM generate_series(10, 600) g",
              (a, json.dumps([b_]), label))
        x("SET logical_decoding_work_mem = '64kB'")
        peeks = {}
        for name, opts in OPTION_SETS.items():
            opts = opts + ["publication_names", "enc_pub"]
            x(f"SET client_encoding = '{enc}'")
            theirs = x(PEEK, (opts,)).fetchall()
            x("SET client_encoding = 'UTF8'")
            peeks[name] = (theirs, x(PEEK, (opts,)).fetchall())
        server_rows, _ = checks.rows_by_id(c, qual)
        registry = TypeRegistry().load_from_connection(c)
        x("SELECT pg_drop_replication_slot('enc_slot')")
    return enc, peeks, server_rows, f"{schema}.{table}", registry


@pytest.mark.parametrize("optset", sorted(OPTION_SETS))
def test_the_rewrite_is_what_a_utf8_session_receives(encoded, optset):
    enc, peeks, _, _, registry = encoded
    theirs, utf8 = peeks[optset]
    payloads = [bytes(d) for _, d in theirs]
    assert len(theirs) == len(utf8) and payloads != [bytes(d) for _, d in utf8]
    tags = {p[:1] for p in payloads}
    if optset.startswith("stream"):
        assert {b"S", b"E", b"c", b"M"} <= tags     # streamed for real, with the message
    got, report = transcode_payloads(payloads, enc, registry=registry)
    want = [bytes(d) for _, d in utf8]
    diff = [i for i, (g, w) in enumerate(zip(got.to_pylist(), want, strict=True)) if g != w]
    assert not diff, (diff[:3], [payloads[i][:80] for i in diff[:3]])
    assert report.rows == len(payloads) == report.rewritten + report.kept and not report.left_as_sent
    assert report.rewritten > 591 if optset.startswith("stream") else report.rewritten > 5   # 591 streamed Inserts


@pytest.mark.parametrize("optset", ["text", "stream-binary"])
def test_the_snapshot_of_the_rewrite_equals_the_servers_table(encoded, optset):
    enc, peeks, server_rows, qual, registry = encoded
    theirs, _ = peeks[optset]
    archive = checks.archive_of(theirs)
    with pytest.raises(PgoutputDecodeError, match="not valid UTF-8"):
        decode_changes(archive)                          # what every decoder said before
    data, _ = transcode_payloads(archive.column("data"), enc, registry=registry)
    archive = archive.set_column(archive.column_names.index("data"), "data", data)
    got = {r["id"]: r for r in snapshot(decode_changes(archive), qual, registry=registry).to_pylist()}
    assert sorted(got) == sorted(server_rows)
    for k, want in server_rows.items():
        row = got[k]
        for name in ("t", "v", "b", "n", "ta", "d", "m"):
            assert row[name] == want[name], (k, name)
        for name in ("j", "jb"):
            assert (None if row[name] is None else json.loads(row[name])) == want[name], (k, name)


def test_a_payload_it_cannot_rewrite_is_named_or_left_as_sent(encoded):
    """EUC_JP has byte sequences that are no character (a lead byte, then a space); LATIN1
    has none (every byte is one), so there a payload cut inside its text is refused."""
    enc, peeks, _, _, registry = encoded
    theirs, _ = peeks["text"]
    payloads = [bytes(d) for _, d in theirs]
    value = DATABASES[enc][3][0].encode(python_codec(enc))
    i = next(i for i, p in enumerate(payloads) if p[:1] == b"I" and value in p)
    k = payloads[i].index(value)
    broken = list(payloads)
    if enc == "EUC_JP":
        broken[i] = payloads[i][:k + 1] + b" " + payloads[i][k + 2:]
    else:
        broken[i] = payloads[i][:k + len(value) - 1]
    with pytest.raises(TranscodeError, match=f"archive row {i}") as e:
        transcode_payloads(broken, enc, registry=registry)
    assert e.value.row == i
    got, report = transcode_payloads(broken, enc, registry=registry, errors="keep")
    assert got.to_pylist()[i] == broken[i] and [r for r, _ in report.left_as_sent] == [i]
    assert report.rows == len(broken) == report.rewritten + report.kept


#: Every name PostgreSQL reads as an encoding (its pg_encname_tbl: official names and
#: aliases), spelled as users type them, plus a few it refuses. Listed here, not taken
#: from transcode._PG_ALIASES, so that an alias the table lacks fails.
PG_NAMES = (
    "abc alt big5 euccn eucjis2004 eucjp euckr euctw gb18030 gbk iso88591 iso885910 iso885913 iso885914 "
    "iso885915 iso885916 iso88592 iso88593 iso88594 iso88595 iso88596 iso88597 iso88598 iso88599 johab koi8 "
    "koi8r koi8u latin1 latin10 latin2 latin3 latin4 latin5 latin6 latin7 latin8 latin9 mskanji muleinternal "
    "shiftjis shiftjis2004 sjis sqlascii tcvn tcvn5712 uhc unicode utf8 vscii win win1250 win1251 win1252 "
    "win1253 win1254 win1255 win1256 win1257 win1258 win866 win874 win932 win936 win949 win950 windows1250 "
    "windows1251 windows1252 windows1253 windows1254 windows1255 windows1256 windows1257 windows1258 "
    "windows866 windows874 windows932 windows936 windows949 windows950 "
    "ISO-8859-2 Windows-1252 Shift_JIS EUC_TW UTF-8 KOI8-U cp1252 utf16 iso8859"
).split()
#: Encodings the server knows that no archive here can be rewritten from (each refused).
REFUSED = {"SQL_ASCII", "EUC_TW", "MULE_INTERNAL"}


def test_an_encoding_is_read_by_every_name_the_server_reads_it_by(pg_server):
    """``--encoding`` takes the names the server takes (``windows1252``, ``unicode``,
    ``iso88592``), and reads ``shiftjis`` as PostgreSQL's SJIS, code page 932, not as
    Python's shift_jis."""
    from pgoutput_codec.transcode import pg_encoding_name

    with pg_server.connect() as c:
        server = {n: c.execute("SELECT pg_encoding_to_char(pg_char_to_encoding(%s))", (n,)).fetchone()[0]
                  for n in PG_NAMES}
    assert server["unicode"] == "UTF8" and server["cp1252"] == ""    # the list is read as we think
    for name, canonical in server.items():
        if not canonical:
            continue        # not PostgreSQL's: Python's codec names stay accepted as they are
        if canonical in REFUSED:
            with pytest.raises(ValueError):
                python_codec(name)
            continue
        assert (pg_encoding_name(name), python_codec(name)) == (canonical, python_codec(canonical)), name
