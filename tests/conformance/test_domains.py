"""Domains, arrays of several dimensions and times of day on real servers (15, 16, 18).

pgoutput sends a Type message ahead of a Relation whose column has a type that is not
built in, with the column type's OID and the namespace and name of its *base* type
(``logicalrep_write_typ`` calls ``getBaseType``): a domain over ``int4`` comes as
(domain OID, ``pg_catalog``, ``int4``), a domain over ``int4[]`` as (its OID, …, ``_int4``).
Seen here on every server: an array of a domain comes as (array OID, ``public``,
``_d_posint``), its own name, which says nothing of the domain's base; its binary values
carry the domain's OID as element type. A domain's typmod (``numeric(10,2)``) is not sent.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

import checks
import pyarrow as pa
import pytest

from pgoutput_codec import decode_changes, snapshot, table_changes
from pgoutput_codec.typecatalog import TypeRegistry

SLOT, PUB = "domains_slot", "domains_pub"
DDL = [
    "CREATE DOMAIN d_posint AS int4 CHECK (VALUE > 0)",
    "CREATE DOMAIN d_intarr AS int4[]",
    "CREATE DOMAIN d_num AS numeric(10,2)",
    "CREATE TABLE domains (id int PRIMARY KEY, p d_posint, pa d_posint[], ia d_intarr, m d_num, ia2 int[][], "
    "tm time, tz timetz)",
]
INSERT = ("INSERT INTO domains VALUES "
          "(1, 7, '{1,2}', '{{1,2},{3,4}}', 12.5, '{{1,2},{3,4}}', '23:59:59.999999', '01:02:03+05:30'), "
          "(2, 2147483647, '{}', '{}', -0.01, '{{5,6}}', '24:00:00', '00:00:00-12'), "
          "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")


@pytest.fixture(scope="module")
def domains(pg_server):
    """(archive in text values, archive in binary values, the catalog's registry)."""
    with pg_server.connect() as conn:
        x = conn.execute
        for sql in DDL:
            x(sql)
        x(f"CREATE PUBLICATION {PUB} FOR TABLE domains")
        x(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")
        try:
            x(INSERT)
            x("UPDATE domains SET p = 8, ia2 = '{{7,8},{9,10}}' WHERE id = 1")
            peeks = {binary: x(f"SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('{SLOT}', NULL, NULL, "
                               "'proto_version', '1', 'publication_names', %s, 'binary', %s)",
                               (PUB, binary)).fetchall() for binary in ("false", "true")}
            registry = TypeRegistry().load_from_connection(conn)
        finally:
            x(f"SELECT pg_drop_replication_slot('{SLOT}')")
            x(f"DROP PUBLICATION {PUB}")
            x("DROP TABLE domains")
            x("DROP DOMAIN d_posint, d_intarr, d_num")
    return checks.archive_of(peeks["false"]), checks.archive_of(peeks["true"]), registry


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_domains_read_as_their_base_types_without_the_catalog(domains, binary):
    archive = domains[binary]
    changes = decode_changes(archive)
    named = {c["name"]: (c["type_namespace"] or "pg_catalog", c["type_name"])
             for c in changes.column("columns")[0].as_py()}
    assert named["p"] == ("pg_catalog", "int4") and named["ia"] == ("pg_catalog", "_int4")
    assert named["m"] == ("pg_catalog", "numeric") and named["pa"] == ("public", "_d_posint")
    assert named["ia2"][1] is None and named["tm"][1] is None     # built in: no Type message
    snap = snapshot(changes, "public.domains").sort_by("id")
    want_types = {"p": pa.int32(), "ia": pa.list_(pa.list_(pa.int32())), "ia2": pa.list_(pa.list_(pa.int32())),
                  "m": pa.string(), "tm": pa.time64("us"), "tz": pa.string(),
                  "pa": pa.binary() if binary else pa.string()}   # an array of a domain: the catalog's to say
    for c, t in want_types.items():
        assert snap.schema.field(c).type == t, c
    assert snap.column("p").to_pylist() == [8, 2147483647, None]
    assert snap.column("ia").to_pylist() == [[[1, 2], [3, 4]], [], None]
    assert snap.column("ia2").to_pylist() == [[[7, 8], [9, 10]], [[5, 6]], None]
    assert snap.column("m").to_pylist() == ["12.50", "-0.01", None]
    assert snap.column("tm").cast(pa.int64()).to_pylist() == [86_399_999_999, 86_400_000_000, None]
    assert snap.column("tz").to_pylist() == ["01:02:03+05:30", "00:00:00-12", None]
    if binary:   # the array of the domain names the domain as its element type
        oid = {c["name"]: c["type_oid"] for c in changes.column("columns")[0].as_py()}["p"]
        assert int.from_bytes(snap.column("pa")[0].as_py()[8:12], "big") == oid
    # the changes typed the same way, the Update's image too
    after = table_changes(changes, "public.domains").column("after").combine_chunks()
    assert after.type.field("p").type == pa.int32() and after.field("p").to_pylist() == [7, 2147483647, None, 8]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_the_catalog_types_arrays_of_domains_and_their_typmods(domains, binary):
    archive, registry = domains[binary], domains[2]
    snap = snapshot(decode_changes(archive), "public.domains", registry=registry).sort_by("id")
    assert snap.schema.field("pa").type == pa.list_(pa.int32())
    assert snap.column("pa").to_pylist() == [[1, 2], [], None]
    assert snap.schema.field("m").type == pa.decimal128(10, 2)
    assert snap.column("m").to_pylist() == [Decimal("12.50"), Decimal("-0.01"), None]
    assert snap.column("tm").to_pylist()[0] == datetime.time(23, 59, 59, 999999)
