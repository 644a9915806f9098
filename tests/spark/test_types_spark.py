"""Composites, ranges, multiranges, enums, hstore, pgvector and PostGIS on Spark: their Arrow
types as Spark's (nested, nulls at every level, through Spark's Arrow conversion and
back), and an archive whose files carry its type catalog typed on Spark with no
registry — by ``decode_changes`` over its files, the ``pgoutput`` data source and the
mirror — as one process types it with the catalog's registry."""

from __future__ import annotations

import datetime as dt
import pathlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402

from pgoutput_codec import (Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            Update, encode_message)
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import decode_changes, snapshot, table_changes  # noqa: E402
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark.catalogs import CATALOG_FIELD_KEY, dataframe_catalog, spark_registry  # noqa: E402
from pgoutput_codec.spark.sources import HAS_DATASOURCE, register  # noqa: E402
from pgoutput_codec.spark.tablerows import TIME_TYPE, _value_spark_type, conform, nested_end_of_day  # noqa: E402
from pgoutput_codec.typecatalog.geometry import GeoWKB  # noqa: E402
from pgoutput_codec.tables import snapshot as snapshot_1  # noqa: E402
from pgoutput_codec.tables import table_changes as table_changes_1  # noqa: E402
from pgoutput_codec.tables import table_columns  # noqa: E402
from pgoutput_codec.typecatalog.catalog import CATALOG_KEY, Catalog  # noqa: E402
from pgoutput_codec.typecatalog.registry import TypeRegistry  # noqa: E402

from change_corpus import CONNECT, _conformed, collect  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


_TIME = None if CONNECT else TIME_TYPE
_RANGE = pa.struct([("lower", pa.date32()), ("upper", pa.date32()), ("lower_inc", pa.bool_()),
                    ("upper_inc", pa.bool_()), ("empty", pa.bool_())])
_SPARSE = pa.struct([("dim", pa.int32()), ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float32()))])


def _values() -> pa.Table:
    """Every new Arrow type, nulls at each level, as the catalog types them."""
    d1, d2 = dt.date(2020, 1, 1), dt.date(2021, 6, 30)
    comp = pa.array([{"n": 7, "at": dt.time(1, 2, 3), "iv": pa.MonthDayNano([1, 2, 3000]), "mood": "sad"}, None,
                     {"n": None, "at": None, "iv": None, "mood": None},
                     {"n": -1, "at": dt.time(23, 59), "iv": None, "mood": "happy"}],
                    pa.struct([("n", pa.int32()), ("at", pa.time64("us")), ("iv", pa.month_day_nano_interval()),
                               ("mood", pa.string())]))
    comp = pa.StructArray.from_arrays([comp.field(0), comp.field(1), comp.field(2), comp.field(3).dictionary_encode()],
                                      names=["n", "at", "iv", "mood"], mask=comp.is_null())
    rng = pa.array([{"lower": d1, "upper": d2, "lower_inc": True, "upper_inc": False, "empty": False}, None,
                    {"lower": None, "upper": None, "lower_inc": False, "upper_inc": False, "empty": True},
                    {"lower": None, "upper": d2, "lower_inc": False, "upper_inc": False, "empty": False}], _RANGE)
    return pa.table({
        "mood": pa.array(["happy", None, "sad", "happy"]).dictionary_encode(),
        "comp": comp,
        "comps": pa.ListArray.from_arrays(pa.array([0, 2, 2, 2, 4]), comp, mask=pa.array([False, True, False, False])),
        "span": rng,
        "spans": pa.ListArray.from_arrays(pa.array([0, 2, 2, 3, 4]), rng),
        "tags": pa.array([[("a", "1"), ("b", None)], None, [], [("k", "v")]], pa.map_(pa.string(), pa.string())),
        "half": pa.array([[1.5, -2.0], None, [], [None, 65504.0]], pa.list_(pa.float16())),
        "sparse": pa.array([{"dim": 5, "indices": [0, 3], "values": [1.0, 2.5]}, None,
                            {"dim": 3, "indices": [], "values": []}, None], _SPARSE),
        "geom": pa.ExtensionArray.from_storage(GeoWKB("EPSG:4326"), pa.array([b"\x01\x01\x00\x00\x00" + bytes(16), None,
                                                                           b"", b"\x00"])),
    })


def test_the_new_arrow_types_as_spark_types():
    t = _values().schema
    got = {f.name: _value_spark_type(f.type, TIME_TYPE) for f in t}
    assert got["mood"] == T.StringType()   # the labels; their order is the catalog's
    assert got["comp"] == T.StructType([
        T.StructField("n", T.IntegerType()), T.StructField("at", TIME_TYPE or T.LongType()),
        T.StructField("iv", T.StructType([T.StructField("months", T.IntegerType()),
                                          T.StructField("days", T.IntegerType()),
                                          T.StructField("microseconds", T.LongType())])),
        T.StructField("mood", T.StringType())])
    assert got["comps"] == T.ArrayType(got["comp"])
    rng = T.StructType([T.StructField("lower", T.DateType()), T.StructField("upper", T.DateType()),
                        *[T.StructField(n, T.BooleanType()) for n in ("lower_inc", "upper_inc", "empty")]])
    assert got["span"] == rng and got["spans"] == T.ArrayType(rng)
    assert got["tags"] == T.MapType(T.StringType(), T.StringType())
    assert got["half"] == T.ArrayType(T.FloatType())   # no half float in Spark: widened, exactly
    assert got["sparse"] == T.StructType([T.StructField("dim", T.IntegerType()),
                                          T.StructField("indices", T.ArrayType(T.IntegerType())),
                                          T.StructField("values", T.ArrayType(T.FloatType()))])
    assert got["geom"] == T.BinaryType()
    # the CRS stays with the column; spark_type (the decoders' schemas) maps the same
    meta = ST.field_metadata(t.field("geom").type)
    assert meta["crs"] == "EPSG:4326" and meta[ST.EXTENSION_NAME] == "geoarrow.wkb"
    assert ST.spark_field(t.field("geom")).metadata == meta
    assert ST.spark_field(pa.field("g", pa.list_(t.field("geom").type))).metadata == meta
    assert ST.spark_type(t.field("tags").type) == got["tags"]
    assert ST.spark_type(t.field("half").type) == got["half"]


def test_nested_values_with_nulls_cross_into_spark_and_back(spark):
    t = _values()
    schema = T.StructType([T.StructField(f.name, _value_spark_type(f.type, _TIME)) for f in t.schema])
    target = ST.arrow_schema_for(schema)
    sent = pa.table([conform(t.column(f.name), t.column(f.name).type, f.type) for f in target], schema=target)

    def echo(batches):   # (a closure: the workers cannot import this module)
        for _ in batches:
            yield from sent.to_batches()

    got = collect(spark.range(1, numPartitions=1).mapInArrow(echo, schema))
    for c in sent.column_names:
        assert got.column(c).to_pylist() == sent.column(c).to_pylist(), c
    # and what the values are, for those Spark widens or decodes
    assert got.column("mood").to_pylist() == ["happy", None, "sad", "happy"]
    assert got.column("half").to_pylist() == [[1.5, -2.0], None, [], [None, 65504.0]]
    assert got.column("tags").to_pylist()[0] == [("a", "1"), ("b", None)]
    assert got.column("comps").to_pylist()[1] is None and got.column("comps").to_pylist()[2] == []


def test_a_time_spark_cannot_hold_inside_a_composite_is_named_in_its_special():
    eod = pa.array([86_400_000_000, 5, 86_400_000_000, None], pa.int64()).cast(pa.time64("us"))
    comp = pa.StructArray.from_arrays([pa.array([1, 2, 3, 4], pa.int32()), eod], names=["n", "at"],
                                      mask=pa.array([False, False, True, False]))
    items = pa.ListArray.from_arrays(pa.array([0, 2, 2, 4]), comp)
    assert nested_end_of_day(comp, None).to_pylist() == ["at=24:00:00", None, None, None]
    assert nested_end_of_day(items, pa.array(["NaN", None, None])).to_pylist() == ["NaN;0=at=24:00:00", None, None]
    assert nested_end_of_day(items.slice(1), None) is None   # (the third composite is null)
    if TIME_TYPE is not None:   # and the value Spark gets there is null
        target = ST.arrow_type_for(_value_spark_type(comp.type, TIME_TYPE))
        assert conform(comp, comp.type, target).field(1).to_pylist()[:2] == [None, dt.time(0, 0, 0, 5)]


# --------------------------------------------------------------------------- an archive with its catalog

_REL = 16500
#: type OIDs of the archive's user types
MOOD, MOODS, ITEM, ITEMS, FLOATRANGE, FLOATMULTI, POSDATE = 20001, 20002, 20004, 20005, 20006, 20007, 20003
HSTORE, VECTOR, HALFVEC, SPARSEVEC, GEOMETRY, CITEXT = 20010, 20011, 20012, 20013, 20014, 20015

_BASE = [
    {"oid": MOOD, "namespace": "public", "name": "mood", "kind": "enum", "labels": ["sad", "ok", "happy"]},
    {"oid": MOODS, "namespace": "public", "name": "_mood", "kind": "array", "base_oid": MOOD},
    {"oid": POSDATE, "namespace": "public", "name": "posdate", "kind": "domain", "base_oid": 1082},
    {"oid": FLOATRANGE, "namespace": "public", "name": "floatrange", "kind": "range", "base_oid": 701},
    {"oid": FLOATMULTI, "namespace": "public", "name": "floatmultirange", "kind": "multirange",
     "base_oid": FLOATRANGE},
    {"oid": ITEMS, "namespace": "public", "name": "_item", "kind": "array", "base_oid": ITEM},
    *[{"oid": o, "namespace": "public", "name": n, "kind": "base", "extension": x, "extension_version": v}
      for o, n, x, v in ((HSTORE, "hstore", "hstore", "1.8"), (VECTOR, "vector", "vector", "0.8.0"),
                         (HALFVEC, "halfvec", "vector", "0.8.0"), (SPARSEVEC, "sparsevec", "vector", "0.8.0"),
                         (GEOMETRY, "geometry", "postgis", "3.3.2"), (CITEXT, "citext", "citext", "1.6"))],
]
#: the composite gains an attribute between the two files
_ITEM_1 = {"oid": ITEM, "namespace": "public", "name": "item", "kind": "composite",
           "attributes": [["n", 23, -1], ["at", POSDATE, -1]]}
_ITEM_2 = {**_ITEM_1, "attributes": [["n", 23, -1], ["at", POSDATE, -1], ["mood", MOOD, -1], ["t", 1083, -1]]}
#: geometry(Point, 4326): its SRID fixed by its typmod
POINT_4326 = (4326 << 8) | (1 << 2)

COLUMNS = [("id", 23, -1), ("mood", MOOD, -1), ("moods", MOODS, -1), ("day", POSDATE, -1), ("item", ITEM, -1),
           ("items", ITEMS, -1), ("span", 3912, -1), ("fspan", FLOATRANGE, -1), ("fspans", FLOATMULTI, -1),
           ("tags", HSTORE, -1), ("vec", VECTOR, -1), ("half", HALFVEC, -1), ("sparse", SPARSEVEC, -1),
           ("geom", GEOMETRY, POINT_4326), ("shape", GEOMETRY, -1), ("name", CITEXT, -1)]
_POINT = "0101000020E6100000000000000000F03F0000000000000040"    # POINT(1 2), SRID 4326, as text output
_MERCATOR = "0101000020110F000000000000000008400000000000001040"  # POINT(3 4), SRID 3857
_PLAIN = "010100000000000000000014400000000000001840"               # POINT(5 6), no SRID
ROWS_1 = [
    ["1", "happy", "{sad,happy}", "2024-02-29", '(7,2024-01-01)', '{"(1,2020-01-01)",NULL}', "[2020-01-01,2021-06-30)",
     "[1.5,2.5)", "{[1,2),(3,4]}", '"a"=>"1", "b"=>NULL', "[1,2,3]", "[1.5,-2]", "{1:1.5,3:2}/5", _POINT, _MERCATOR, "Alice"],
    ["2", None, "{}", None, '(,)', "{}", "empty", "(,5]", "{}", "", "[0.25]", "[65504]", "{}/3", None, None, None],
    ["3", "sad", None, "1999-12-31", None, None, None, None, None, None, None, None, None, None, None, "bob"],
]
ROWS_2 = [
    ["4", "ok", "{ok,NULL}", "2001-01-01", '(8,2001-01-02,sad,24:00:00)', '{"(2,,happy,12:00:00)"}', "(,2020-01-01)",
     "[0,)", "{[0,1]}", '"k"=>"v"', "[-1,0.5]", "[0.5]", "{2:-1}/4", _POINT, _PLAIN, "Carol"],
]


def _text(v):
    return TupleColumn("n", None) if v is None else TupleColumn("t", v.encode())


def _messages(rows_of_txns, relation_first, lsn):
    out = []
    if relation_first:
        out.append(Relation(relation_id=_REL, namespace="public", relation_name="typed", replica_identity="d",
                            columns=tuple(RelationColumn(1 if n == "id" else 0, n, oid, m) for n, oid, m in COLUMNS)))
    for changes in rows_of_txns:
        lsn += 0x1000
        out.append(Begin(final_lsn=lsn + 0x800, commit_ts=800_000_000_000_000 + lsn, xid=lsn >> 8))
        out += changes
        out.append(Commit(commit_lsn=lsn + 0x800, end_lsn=lsn + 0x900, commit_ts=800_000_000_000_000 + lsn))
    return out


def _archive_file(path, messages, seq0, catalog: Catalog | None):
    data = [encode_message(m) for m in messages]
    t = pa.table({"seq": pa.array(range(seq0, seq0 + len(data)), pa.int64()),
                  "lsn": pa.array([f"0/{0x3000000 + 16 * (seq0 + i):X}" for i in range(len(data))]),
                  "data": pa.array(data, pa.binary())})
    if catalog is not None:
        t = t.replace_schema_metadata({CATALOG_KEY: catalog.to_json().encode()})
    pq.write_table(t, path)
    return len(data)


@pytest.fixture(scope="module")
def typed_archive(tmp_path_factory):
    """Two files of one table of every new type, each with the catalog in force over its
    rows (the composite gains an attribute in the second); and the catalog of both."""
    d = tmp_path_factory.mktemp("typed_archive")
    first = Catalog([(0x2000000, [*_BASE, _ITEM_1])])
    second = Catalog([(0x3F00000, [*_BASE, _ITEM_2])])
    txns_1 = [[Insert(relation_id=_REL, new_tuple=tuple(map(_text, r))) for r in ROWS_1],
              [Update(relation_id=_REL, new_tuple=tuple(map(_text, ["2", *ROWS_1[0][1:]])))]]
    # row 1 again, its geometry unchanged TOAST: carried with its __srid
    unchanged = tuple(TupleColumn("u", None) if c[0] == "shape" else _text(v) for c, v in zip(COLUMNS, ROWS_1[0],
                                                                                                strict=True))
    txns_2 = [[Insert(relation_id=_REL, new_tuple=tuple(map(_text, r))) for r in ROWS_2],
              [Delete(relation_id=_REL, old_kind="K", old_tuple=(_text("3"),) + (_text(None),) * (len(COLUMNS) - 1))],
              [Update(relation_id=_REL, new_tuple=unchanged)]]
    n = _archive_file(d / "part-0000.parquet", _messages(txns_1, True, 0x3000000), 0, first)
    _archive_file(d / "part-0001.parquet", _messages(txns_2, False, 0x4000000), n, second)
    return d, first.merge(second)


def _one_process(directory):
    """The archive's change rows, one process."""
    return decode_changes_1(pa.concat_tables([pq.read_table(p) for p in sorted(directory.glob("*.parquet"))]))


def _same_values(got: pa.Table, want: pa.Table, ids):
    got, want = got.sort_by("id"), want.sort_by("id")
    assert got.column("id").to_pylist() == ids
    for c in want.column_names:
        assert got.column(c).to_pylist() == want.column(c).to_pylist(), c


def test_an_archive_s_catalog_types_its_table_on_spark_with_no_registry(spark, typed_archive, tmp_path):
    directory, catalog = typed_archive
    ch = decode_changes(spark.read.parquet(str(directory)), order_by="seq")
    # the change rows carry the catalog of both files, whatever Spark does to them next
    assert dataframe_catalog(ch) == catalog
    assert dataframe_catalog(ch.select("columns", "op").where("op = 'I'")) == catalog
    reg = spark_registry(ch)
    assert reg.types[ITEM].attributes == tuple(tuple(a) for a in _ITEM_2["attributes"])
    assert [tuple(a) for a in reg.types[ITEM].earlier[0].attributes] == [tuple(a) for a in _ITEM_1["attributes"]]
    snap = snapshot(ch, "public.typed")
    got = collect(snap)
    single = _one_process(directory)
    want = snapshot_1(single, "public.typed", registry=reg)
    assert want.column("day").type == pa.date32()   # the domain typed by the catalog, no Type message sent
    _same_values(got, _conformed(want, table_columns(single, "public.typed"), reg), [1, 2, 4])
    # each family in its Spark shape, and what Spark cannot hold said in __special
    kinds = {f.name: type(f.dataType).__name__ for f in snap.schema.fields if not f.name.endswith("__special")}
    assert kinds == {"id": "IntegerType", "mood": "StringType", "moods": "ArrayType", "day": "DateType",
                     "item": "StructType", "items": "ArrayType", "span": "StructType", "fspan": "StructType",
                     "fspans": "ArrayType", "tags": "MapType", "vec": "ArrayType", "half": "ArrayType",
                     "sparse": "StructType", "geom": "BinaryType", "shape": "BinaryType", "shape__srid": "IntegerType",
                     "name": "StringType"}
    assert snap.schema["item"].dataType.names == ["n", "at", "mood", "t"]   # every attribute any version had
    assert snap.schema["geom"].metadata["crs"] == "EPSG:4326" and not snap.schema["shape"].metadata
    # a geometry column whose typmod fixes no SRID: each value's SRID in its typed __srid
    assert snap.columns.index("shape__srid") == snap.columns.index("shape") + 1 and "geom__srid" not in snap.columns
    rows = {r["id"]: r for r in got.select(["id", "item", "item__special", "shape__srid",
                                            "shape__special"]).to_pylist()}
    assert rows[1]["item"]["mood"] is None and rows[4]["item"]["mood"] == "sad"   # by the version of each
    assert rows[1]["shape__srid"] == 3857 and rows[1]["shape__special"] is None
    if snap.schema["item"].dataType["t"].dataType != T.LongType():   # Spark's time ends before 24:00:00
        assert rows[4]["item"]["t"] is None and rows[4]["item__special"] == "t=24:00:00"
    else:
        assert rows[4]["item"]["t"] == 86_400_000_000 and rows[4]["item__special"] is None
    # a registry given wins OID by OID; the archive's other types stay
    mine = TypeRegistry()
    mine.register_enum(MOOD, ["happy", "ok", "sad", "glad"], name="mood")
    over = spark_registry(ch, mine)
    assert over.types[MOOD].labels == ("happy", "ok", "sad", "glad") and over.types[POSDATE].base_oid == 1082
    # change rows Spark writes to a lake keep it in their schema, and the footers say it too
    ch.write.parquet(str(tmp_path / "lake"))
    back = spark.read.parquet(str(tmp_path / "lake"))
    assert CATALOG_FIELD_KEY in back.schema["columns"].metadata
    assert dataframe_catalog(back) == catalog
    # typed from there (one mapInArrow over the change rows) as from the archive
    again = collect(snapshot(back, "public.typed"))
    for c in got.column_names:
        assert again.sort_by("id").column(c).to_pylist() == got.sort_by("id").column(c).to_pylist(), c
    # a DataFrame with no file behind it and no such metadata has none: registry= is the way
    bare = spark.createDataFrame([(1, [])], "id int, columns array<struct<name: string, type_oid: bigint>>")
    assert dataframe_catalog(bare) is None and spark_registry(bare, mine) is mine


@pytest.mark.skipif(not HAS_DATASOURCE, reason="Python data sources need PySpark >= 4.0")
def test_the_data_source_carries_the_archive_s_catalog(spark, typed_archive):
    directory, catalog = typed_archive
    register(spark)
    ch = spark.read.format("pgoutput").options(output="changes", order_by="seq").load(str(directory))
    assert dataframe_catalog(ch) == catalog
    # a stream's change rows carry the catalog of the files there when it starts
    stream = spark.readStream.format("pgoutput").options(output="changes", order_by="seq").load(str(directory))
    assert dataframe_catalog(stream) == catalog
    got = collect(table_changes(ch, "public.typed").where("op = 'I'").select("after.*"))
    reg = catalog.registry()
    single = _one_process(directory)
    one = table_changes_1(single, "public.typed", registry=reg)
    after = pa.Table.from_struct_array(one.filter(pc.equal(one.column("op"), "I")).column("after").combine_chunks())
    _same_values(got, _conformed(after, table_columns(single, "public.typed"), reg), [1, 2, 3, 4])


def test_the_mirror_and_write_snapshots_on_spark_type_an_archive_by_its_catalog(spark, typed_archive, tmp_path):
    deltalake = pytest.importorskip("deltalake")
    import pyarrow.dataset as ds

    from pgoutput_codec.lake import to_delta
    from pgoutput_codec.spark import mirror, write_snapshots

    directory, catalog = typed_archive
    want = snapshot_1(_one_process(directory), "public.typed", registry=catalog.registry())
    want = pa.table({c: to_delta(want.column(c)) for c in want.column_names})
    runs = mirror(decode_changes(spark.read.parquet(str(directory)), order_by="seq"), tmp_path / "lake")
    assert [r.table for r in runs] == ["public.typed"]
    path = tmp_path / "lake" / "public.typed"
    got = ds.dataset(deltalake.DeltaTable(str(path)).file_uris(), format="parquet").to_table()
    _same_values(got.select(want.column_names), want, [1, 2, 4])
    written = write_snapshots(decode_changes(spark.read.parquet(str(directory)), order_by="seq"), tmp_path / "snaps")
    got = pq.read_table(pathlib.Path(written[0].path) / "part-00000.parquet")
    _same_values(got.select(want.column_names), want, [1, 2, 4])
