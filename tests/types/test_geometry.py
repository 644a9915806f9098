"""PostGIS geometry and geography as ISO WKB (typecatalog/geometry.py,
_codecs/geometry.pxi) on a real PostgreSQL 15 with PostGIS 3: every type PostGIS writes,
from both forms (and big-endian EWKB), equal to the server's ``ST_AsBinary``; the SRID
kept (geoarrow.wkb where the column fixes it, else each value's SRID in the column's
``srid``, the tables' ``<column>__srid``); the compiled rewrite equals its Python twin,
on mutated input too."""

from __future__ import annotations

import json
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ext_types
from pgoutput_codec.typecatalog import ConversionError, TypeRegistry, arrow_type, convert_column
from pgoutput_codec.typecatalog.geometry import GeoWKB, typmod_srid
from strategies import mutated

GEOMETRIES = [
    "POINT(1 2)", "SRID=4326;POINT(1 2)", "POINT Z (1 2 3)", "POINT M (1 2 4)", "POINT ZM (1 2 3 4)", "POINT EMPTY",
    "SRID=3857;LINESTRING(0 0, 1 1, 2 0)", "LINESTRING EMPTY", "POLYGON((0 0, 4 0, 4 4, 0 4, 0 0), (1 1, 2 1, 2 2, 1 1))",
    "POLYGON Z ((0 0 1, 1 0 1, 1 1 1, 0 0 1))", "POLYGON EMPTY", "MULTIPOINT((1 2), (3 4))", "MULTIPOINT EMPTY",
    "MULTILINESTRING((0 0, 1 1), (2 2, 3 3))", "MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))",
    "GEOMETRYCOLLECTION M (POINT M (1 2 0), LINESTRING M (0 0 1, 1 1 2), GEOMETRYCOLLECTION M (POINT M (3 4 5)))",
    "GEOMETRYCOLLECTION EMPTY", "CIRCULARSTRING(0 0, 1 1, 2 0)", "COMPOUNDCURVE(CIRCULARSTRING(0 0, 1 1, 2 0), (2 0, 3 0))",
    "CURVEPOLYGON(CIRCULARSTRING(0 0, 2 0, 2 2, 0 2, 0 0))", "MULTICURVE((0 0, 1 1), CIRCULARSTRING(0 0, 1 1, 2 0))",
    "MULTISURFACE(CURVEPOLYGON(CIRCULARSTRING(0 0, 2 0, 2 2, 0 2, 0 0)), ((5 5, 6 5, 6 6, 5 5)))",
    "POLYHEDRALSURFACE Z (((0 0 0, 0 1 0, 1 1 0, 0 0 0)), ((0 0 0, 0 1 0, 0 0 1, 0 0 0)))",
    "TIN(((0 0 0, 0 0 1, 0 1 0, 0 0 0)), ((0 0 0, 0 1 0, 1 1 0, 0 0 0)))", "TRIANGLE((0 0, 0 9, 9 0, 0 0))",
    "SRID=4326;MULTIPOLYGON ZM (((0 0 1 2, 1 0 1 2, 1 1 1 2, 0 0 1 2)))",
]

REG = TypeRegistry()
REG.register_base(70201, "geometry", "public", "postgis", "3.3.2")
REG.register_base(70202, "geography", "public", "postgis", "3.3.2")


@pytest.fixture(scope="module")
def server_values(contrib_conn):
    """Per geometry: (oid, text form, send form, big-endian EWKB, ST_AsBinary, ST_SRID)."""
    out = []
    for g in GEOMETRIES:
        (oid, _, text, sent), = ext_types.forms(contrib_conn, [f"'{g}'::geometry"])
        xdr, iso, srid = contrib_conn.execute(f"SELECT ST_AsEWKB('{g}'::geometry, 'XDR'), ST_AsBinary('{g}'::geometry),"
                                      f" ST_SRID('{g}'::geometry)").fetchone()
        out.append((oid, text, sent, bytes(xdr), bytes(iso), srid))
    return out


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_every_geometry_type_equals_st_asbinary(contrib_conn, server_values, fast):
    reg = ext_types.registry(contrib_conn)
    oid = server_values[0][0]
    assert arrow_type(oid, -1, reg) == pa.binary()
    want = [v[4] for v in server_values]
    srids = [v[5] for v in server_values]
    assert 0 in srids and {4326, 3857} <= set(srids)
    for kind, i in (("t", 1), ("b", 2), ("b", 3)):      # text, send form, big-endian EWKB
        col = convert_column([kind] * len(want) + ["n"], [v[i] for v in server_values] + [None], oid, -1, reg,
                             fast=fast)
        col.values.validate(full=True)
        assert col.values.to_pylist() == want + [None], kind
        assert col.special is None
        assert col.srid.type == pa.int32() and col.srid.to_pylist() == srids + [None]


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_a_typmod_srid_makes_the_column_geoarrow_wkb(contrib_conn, fast):
    reg = ext_types.registry(contrib_conn)
    rows = ext_types.forms(contrib_conn, ["'SRID=4326;POINT(1 2)'::geometry(Point,4326)",
                                  "'SRID=2154;POINT Z (1 2 3)'::geometry(PointZ,2154)",
                                  "'LINESTRING(1 2, 3 4)'::geography", "'SRID=4269;POINT(1 2)'::geography",
                                  "'POINT(1 2)'::geography(Point)"])
    iso = [bytes(r[0]) for r in contrib_conn.execute(
        "SELECT ST_AsBinary(g) FROM (VALUES ('SRID=4326;POINT(1 2)'::geometry), ('POINT Z (1 2 3)'),"
        " ('LINESTRING(1 2, 3 4)'), ('POINT(1 2)'), ('POINT(1 2)')) v(g)").fetchall()]
    # a geography without typmod holds any geodetic SRID: binary, each value's SRID beside it
    crs = ["EPSG:4326", "EPSG:2154", None, None, "EPSG:4326"]
    srids = [None, None, 4326, 4269, None]
    for (oid, mod, text, sent), w, c, srid in zip(rows, iso, crs, srids, strict=True):
        t = arrow_type(oid, mod, reg)
        if c is None:
            assert t == pa.binary()
        else:
            assert isinstance(t, GeoWKB) and t.crs == c and t.extension_name == "geoarrow.wkb"
            assert json.loads(t.__arrow_ext_serialize__()) == {"crs": c}
        for kind, raw in (("t", text), ("b", sent)):
            col = convert_column([kind], [raw], oid, mod, reg, fast=fast)
            assert col.values.type == t and (col.values.storage if c else col.values).to_pylist() == [w]
            assert col.special is None
            assert (col.srid.to_pylist() if col.srid is not None else None) == (None if c else [srid])


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_a_value_whose_srid_its_column_type_contradicts_is_noted(fast):
    # geometry(Point,4326) holding an EWKB of SRID 3857 (PostGIS refuses to store one)
    raw = bytes.fromhex("0101000020110F0000000000000000F03F0000000000000040")
    col = convert_column(["b", "b", "n"], [raw, bytes.fromhex("0101000020E6100000" + "00" * 16), None], 70201,
                         1107460, REG, fast=fast)
    assert col.values.type == GeoWKB("EPSG:4326") and col.srid is None
    assert col.special.to_pylist() == ["srid=3857", None, None]


def test_postgis_typmod_srid():
    assert typmod_srid(1107460) == 4326 and typmod_srid(-1) == 0


def test_geoarrow_types_differ_by_crs_and_are_hashable():
    a, b = GeoWKB("EPSG:4326"), GeoWKB("EPSG:3857")
    assert a == GeoWKB("EPSG:4326") and a.equals(GeoWKB("EPSG:4326")) and hash(a) == hash(GeoWKB("EPSG:4326"))
    assert a != b and not a.equals(b) and a != pa.binary()
    assert not pa.schema([("g", a)]).equals(pa.schema([("g", b)]))
    assert {a: 1}.get(b) is None


def test_pgoutput_text_and_binary(contrib_conn):
    got, _ = ext_types.replicated(
        contrib_conn, "ext_geo", "CREATE TABLE ext_geo (id int PRIMARY KEY, g geometry, p geometry(Point,4326), y geography)",
        ["INSERT INTO ext_geo VALUES (1, 'SRID=3857;POINT(1 2)', 'SRID=4326;POINT(5 6)', 'POINT(7 8)'),"
         " (2, 'CIRCULARSTRING(0 0, 1 1, 2 0)', NULL, 'SRID=4269;POINT(1 1)'), (3, NULL, NULL, NULL)"])
    want = contrib_conn.execute("SELECT ST_AsBinary(g), ST_AsBinary(p), ST_AsBinary(y) FROM ext_geo ORDER BY id").fetchall()
    for mode in ("text", "binary"):
        t = got[mode]
        assert t.schema.field("g").type == pa.binary() and t.schema.field("y").type == pa.binary()
        assert t.schema.field("p").type.crs == "EPSG:4326"
        for j, c in enumerate("gpy"):
            col = t.column(c).combine_chunks()
            vals = (col.storage if isinstance(col, pa.ExtensionArray) else col).to_pylist()
            assert vals == [None if w[j] is None else bytes(w[j]) for w in want], (mode, c)
        # each value's SRID in a typed companion beside its column, none for p (its type says it)
        names = t.column_names
        assert names.index("g__srid") == names.index("g") + 1 and names.index("y__srid") == names.index("y") + 1
        assert t.schema.field("g__srid").type == pa.int32()
        assert t.column("g__srid").to_pylist() == [3857, 0, None]
        assert t.column("y__srid").to_pylist() == [4326, 4269, None]
        assert not {"p__srid", "g__special", "p__special", "y__special"} & set(names)


BAD = [("t", b"0101", "shorter"), ("t", b"010", "hex"), ("t", b"01 01", "hex"), ("b", b"\x02\x01\0\0\0", "byte order"),
       ("b", b"\x01\x0d\0\0\0", "type"), ("b", b"\x01\x12\0\0\0", "type"), ("b", b"\x01\x01\0\0\0" + bytes(15), "coordinates"),
       ("b", b"\x01\x01\0\0\0" + bytes(17), "longer"), ("b", b"\x01\x01\0\0\x20", "SRID"),
       ("b", b"\x01\x02\0\0\0\xff\xff\xff\xff", "coordinates"), ("b", b"\x01\x03\0\0\0\x01\0\0\0", "counts"),
       ("b", b"\x01\x04\0\0\0\x01\0\0\0\x01\x01\0\0\x20\0\0\0\0" + bytes(16), "nested"),
       ("b", b"\x01\x07\0\0\0\x01\0\0\0" * 40, "deeper")]


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("kind,raw,why", BAD)
def test_malformed_values_are_refused_naming_the_value(kind, raw, why, fast):
    ok = b"0101000000000000000000F03F0000000000000040"
    if kind == "b":
        ok = bytes.fromhex(ok.decode())
    with pytest.raises(ConversionError, match=why) as e:
        convert_column([kind, kind], [ok, raw], 70201, -1, REG, fast=fast)
    assert e.value.index == 1


_SEEDS = [bytes.fromhex("0101000020E6100000000000000000F03F0000000000000040"),
          bytes.fromhex("0104000060110F0000010000000101000040000000000000F03F00000000000000400000000000000840"),
          b"\x00\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x01" + struct.pack(">dd", 1, 2),
          b"\x01\x07\x00\x00\x00\x02\x00\x00\x00\x01\x01\x00\x00\x00" + struct.pack("<dd", 1, 2)
          + b"\x01\x07\x00\x00\x00\x00\x00\x00\x00"]


@st.composite
def _mutated(draw):
    raw = draw(mutated(_SEEDS, b"\x00\x01\x02\x07\x20\x40\x80\xff"))
    kind = draw(st.sampled_from("tb"))
    return kind, raw.hex().encode() if kind == "t" else raw, draw(st.sampled_from([-1, 1107460]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_compiled_and_python_twins_agree_on_mutations(case):
    kind, raw, mod = case
    results = []
    for fast in (True, False):
        try:
            col = convert_column(["n", kind, kind], [None, raw, raw], 70201, mod, REG, fast=fast)
            col.values.validate(full=True)
            results.append(("ok", col.values.type, col.values.to_pylist(),
                            col.special.to_pylist() if col.special is not None else None,
                            col.srid.to_pylist() if col.srid is not None else None))
        except ConversionError as e:
            results.append(("error", e.index))
    assert results[0] == results[1], (kind, raw)


def test_arrays_of_geometries(contrib_conn):
    reg = ext_types.registry(contrib_conn)
    (oid, mod, text, sent), = ext_types.forms(contrib_conn, ["ARRAY['POINT(1 2)'::geometry, NULL, 'SRID=3857;POINT(3 4)']"])
    want = [bytes(x) for x in contrib_conn.execute("SELECT ST_AsBinary('POINT(1 2)'::geometry),"
                                           " ST_AsBinary('POINT(3 4)'::geometry)").fetchone()]
    assert arrow_type(oid, mod, reg) == pa.list_(pa.binary())
    for kind, raw in (("t", text), ("b", sent)):
        for fast in (True, False):
            col = convert_column([kind], [raw], oid, mod, reg, fast=fast)
            assert col.values.to_pylist() == [[want[0], None, want[1]]], kind
            # an element's SRID has no companion column: a marker by its index
            assert col.special.to_pylist() == ["2=srid=3857"] and col.srid is None


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_a_geometry_in_a_composite_says_its_srid_by_attribute(contrib_conn, fast):
    contrib_conn.execute("DROP TYPE IF EXISTS geo_pair; CREATE TYPE geo_pair AS (g geometry, n int)")
    reg = ext_types.registry(contrib_conn)
    (oid, mod, text, sent), = ext_types.forms(contrib_conn, ["ROW('SRID=3857;POINT(3 4)'::geometry, 1)::geo_pair"])
    want = bytes(contrib_conn.execute("SELECT ST_AsBinary('POINT(3 4)'::geometry)").fetchone()[0])
    for kind, raw in (("t", text), ("b", sent)):
        col = convert_column([kind, "n"], [raw, None], oid, mod, reg, fast=fast)
        assert col.values.to_pylist() == [{"g": want, "n": 1}, None], kind
        assert col.special.to_pylist() == ["g=srid=3857", None] and col.srid is None
