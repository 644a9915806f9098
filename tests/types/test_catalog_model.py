"""The archive's type catalog as a model: its JSON, its versions, the registry made of it,
and how change rows carry it (no server: tests/conformance/test_archive_catalog.py reads
real ones)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgoutput_codec.archive import CATALOG_KEY, ArchiveError, archive_catalog
from pgoutput_codec.typecatalog import (Catalog, TypeRegistry, arrow_type, read_catalog, registry_of, with_catalog,
                                        write_catalog)

MOOD_V1 = {"oid": 16400, "namespace": "public", "name": "mood", "kind": "enum", "labels": ["sad", "ok"]}
MOOD_V2 = {**MOOD_V1, "labels": ["sad", "ok", "happy"]}
PRICE = {"oid": 16410, "namespace": "public", "name": "price", "kind": "domain", "base_oid": 1700,
         "base_typmod": (10 << 16 | 2) + 4}
POINT_V1 = {"oid": 16420, "namespace": "public", "name": "pt", "kind": "composite",
            "attributes": [["x", 23, -1], ["y", 23, -1]]}
POINT_V2 = {**POINT_V1, "attributes": [["x", 23, -1], ["y", 23, -1], ["z", 16410, -1]]}


def _two_versions():
    return Catalog([(0x16B3748, [MOOD_V1, PRICE, POINT_V1], "UTC"),
                    (0x16C0000, [MOOD_V2, PRICE, POINT_V2], "Europe/Berlin")])


def test_json_round_trip_and_lsn_text():
    cat = _two_versions()
    d = json.loads(cat.to_json())
    assert d["format"] == 1 and [v["lsn"] for v in d["versions"]] == ["0/16B3748", "0/16C0000"]
    assert d["versions"][0]["types"][0] == {**MOOD_V1, "attributes": [], "base_oid": None, "base_typmod": -1,
                                            "extension": None, "extension_version": None}
    assert Catalog.from_json(cat.to_json()) == cat
    assert Catalog.from_json(cat.to_json().encode()) == cat


def test_merge_keeps_equal_versions_once_in_lsn_order():
    cat = _two_versions()
    later, earlier = Catalog([cat.versions[1]]), Catalog([cat.versions[0]])
    assert later.merge(earlier) == cat
    assert cat.merge(cat) == cat and len(cat.merge(later)) == 2


def test_registry_newest_definition_and_earlier_ones():
    reg = _two_versions().registry()
    mood = reg.types[16400]
    assert mood.kind == "enum" and mood.labels == ("sad", "ok", "happy") and mood.lsn == 0x16C0000
    assert [(e.labels, e.lsn) for e in mood.earlier] == [(("sad", "ok"), 0x16B3748)]
    pt = reg.types[16420]
    assert [a[0] for a in pt.attributes] == ["x", "y", "z"] and len(pt.earlier) == 1
    price = reg.types[16410]
    assert price.earlier == () and price.lsn == 0x16B3748     # recorded twice alike: one definition
    assert arrow_type(16410, -1, reg) == pa.decimal128(10, 2)
    assert reg.timezone == "Europe/Berlin"
    assert Catalog([(1, [], "localtime")]).registry().timezone is None      # (the server machine's own)


def test_a_callers_registry_wins_oid_by_oid():
    over = TypeRegistry(timezone="Asia/Tokyo")
    over.register_domain(16410, 20)                 # price as an int8 domain
    over.add_type_message(16400, "public", "mood")  # a name only: defines nothing
    reg = _two_versions().registry(over=over)
    assert arrow_type(16410, -1, reg) == pa.int64()
    assert reg.types[16400].labels == ("sad", "ok", "happy")
    assert reg.timezone == "Asia/Tokyo"
    assert over.types[16410].lsn is None and 16420 not in over.types      # the caller's is left alone


@pytest.mark.parametrize("text, says", [
    ("[]", "no 'versions'"),
    ('{"format": 2, "versions": []}', "format 2"),
    ('{"format": 1, "versions": [{"lsn": "zz", "types": []}]}', "not an LSN"),
    ('{"format": 1, "versions": [{"lsn": "0/1", "types": [{"oid": 1, "kind": "blob"}]}]}', "kind 'blob'"),
    ('{"format": 1, "versions": [{"lsn": "0/1", "types": [{"oid": 1, "kind": "domain"}]}]}', "no base_oid"),
    ('{"format": 1, "versions": [{"lsn": "0/1", "types": [{"kind": "enum"}]}]}', "no 'oid'"),
    ("{", "not JSON"),
])
def test_a_bad_catalog_is_refused_saying_why(text, says):
    with pytest.raises(ValueError, match=says):
        Catalog.from_json(text)


def test_catalog_file(tmp_path):
    path = tmp_path / "types.json"
    write_catalog(path, _two_versions())
    assert read_catalog(path) == _two_versions()
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json: not a type catalog"):
        read_catalog(tmp_path / "bad.json")


def test_change_rows_carry_the_catalog():
    rows = pa.table({"a": [1, 2]})
    assert registry_of(rows) is None and with_catalog(rows, None) is rows
    carried = with_catalog(rows, _two_versions())
    assert CATALOG_KEY in carried.schema.metadata
    for kept in (carried.filter(pa.array([True, False])), carried.slice(1), pa.concat_tables([carried, carried]),
                 carried.take([1, 0])):
        assert registry_of(kept).types[16400].labels == ("sad", "ok", "happy")
    mine = TypeRegistry()
    mine.register_domain(16410, 20)
    assert arrow_type(16410, -1, registry_of(carried, mine)) == pa.int64()
    assert arrow_type(16410, -1, registry_of(carried)) == pa.decimal128(10, 2)
    # (the types are built once for every table typed: each registry its own dict)
    one = registry_of(carried)
    one.register_domain(99999, 20)
    assert 99999 not in registry_of(carried).types
    cat = _two_versions()
    cat.registry().register_domain(16410, 20)       # (in place: the catalog's own are apart)
    assert arrow_type(16410, -1, cat.registry()) == arrow_type(16410, -1, cat.shared_registry()) == \
        pa.decimal128(10, 2)


def test_archive_catalog_merges_every_files_footer(tmp_path):
    cat = _two_versions()
    for i, v in enumerate(cat.versions):
        t = pa.table({"seq": pa.array([i], pa.int64()), "data": pa.array([b"B"], pa.binary())})
        pq.write_table(t.replace_schema_metadata({CATALOG_KEY: Catalog([v]).to_json().encode()}),
                       tmp_path / f"part-{i}.parquet")
    pq.write_table(pa.table({"seq": pa.array([5], pa.int64()), "data": pa.array([b"B"], pa.binary())}),
                   tmp_path / "part-5.parquet")     # a file with none
    assert archive_catalog(str(tmp_path)) == cat
    assert archive_catalog(str(tmp_path / "part-5.parquet")) is None
    t = pa.table({"seq": pa.array([9], pa.int64()), "data": pa.array([b"B"], pa.binary())})
    pq.write_table(t.replace_schema_metadata({CATALOG_KEY: b"{oops"}), tmp_path / "part-9.parquet")
    with pytest.raises(ArchiveError, match="part-9.parquet: its type catalog .* is unreadable"):
        archive_catalog(str(tmp_path))


def test_change_rows_cast_back_from_spark_types_keep_the_catalog():
    from pgoutput_codec.tables.rows import as_change_rows
    rows = pa.table({"commit_lsn": pa.array([5], pa.decimal128(20, 0)), "op": ["I"]})
    carried = as_change_rows(with_catalog(rows, _two_versions()))
    assert carried.schema.field("commit_lsn").type == pa.uint64()
    assert registry_of(carried).types[16400].labels == ("sad", "ok", "happy")


def test_a_change_decoder_fed_archive_tables_gives_rows_carrying_their_catalog():
    from pgoutput_codec import ChangeDecoder
    from pgoutput_codec.pgoutput.encode import encode_message
    from pgoutput_codec.pgoutput.messages import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn
    rel = Relation(relation_id=1, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(flags=1, name="m", type_oid=16400, type_modifier=-1),))
    msgs = [Begin(final_lsn=10, commit_ts=0, xid=5), rel,
            Insert(relation_id=1, new_tuple=(TupleColumn("t", b"ok"),)),
            Commit(flags=0, commit_lsn=10, end_lsn=11, commit_ts=0)]
    archive = pa.table({"data": pa.array([encode_message(m) for m in msgs], pa.binary())})
    v1, v2 = (Catalog([v]) for v in _two_versions().versions)
    with ChangeDecoder() as dec:
        assert registry_of(dec.feed(archive)) is None
    with ChangeDecoder() as dec:
        first = dec.feed(with_catalog(archive.slice(0, 0), v1))
        assert registry_of(first).types[16400].labels == ("sad", "ok")
        rows = dec.feed(with_catalog(archive, v2))
    assert len(rows) == 1 and registry_of(rows).types[16400].labels == ("sad", "ok", "happy")
    assert len(registry_of(rows).types[16400].earlier) == 1
