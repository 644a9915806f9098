"""The Arrow types of composites, ranges, multiranges, enums, hstore, pgvector and PostGIS
in a Delta copy (:func:`pgoutput_codec.lake.to_delta`): what Delta cannot hold (a
dictionary, float16, an extension type) as its values, float32 and its storage; structs,
maps and lists of structs as they are. Written by deltalake (a plain write and a MERGE),
read back by pyarrow alone over the files the Delta log names."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

deltalake = pytest.importorskip("deltalake")

from pgoutput_codec.lake import delta_type, to_delta  # noqa: E402
from pgoutput_codec.typecatalog.geometry import GeoWKB  # noqa: E402


_RANGE = pa.struct([("lower", pa.date32()), ("upper", pa.date32()), ("lower_inc", pa.bool_()),
                    ("upper_inc", pa.bool_()), ("empty", pa.bool_())])
_ENUM = pa.dictionary(pa.int32(), pa.string())
_SPARSE = pa.struct([("dim", pa.int32()), ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float32()))])


def _table() -> tuple[pa.Table, list]:
    """Five rows of every new type (nulls at each level), and the rows as Delta holds them."""
    d1, d2 = dt.date(2020, 1, 1), dt.date(2021, 6, 30)
    comp = pa.array([{"n": 7, "at": dt.time(1, 2, 3), "mood": "sad"}, None, {"n": None, "at": None, "mood": None},
                     {"n": 2**32 - 1, "at": dt.time(23, 59), "mood": "happy"}, {"n": 0, "at": None, "mood": "ok"}],
                    pa.struct([("n", pa.uint32()), ("at", pa.time64("us")), ("mood", pa.string())]))
    comp = pa.StructArray.from_arrays([comp.field(0), comp.field(1), comp.field(2).dictionary_encode()],
                                      names=["n", "at", "mood"], mask=comp.is_null())
    rng = pa.array([{"lower": d1, "upper": d2, "lower_inc": True, "upper_inc": False, "empty": False}, None,
                    {"lower": None, "upper": None, "lower_inc": False, "upper_inc": False, "empty": True},
                    {"lower": None, "upper": d2, "lower_inc": False, "upper_inc": False, "empty": False}, None], _RANGE)
    cols = {
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "mood": pa.array(["happy", None, "sad", "happy", "ok"]).dictionary_encode(),
        "comp": comp,
        "comps": pa.ListArray.from_arrays(pa.array([0, 2, 2, 2, 3, 5]), pa.concat_arrays([comp, comp.slice(0, 1)])),
        "span": rng,
        "spans": pa.ListArray.from_arrays(pa.array([0, 2, 2, 3, 3, 4]), pa.concat_arrays([rng, rng.slice(0, 1)]),
                                          mask=pa.array([False, False, False, True, False])),
        "tags": pa.array([[("a", "1"), ("b", None)], None, [], [("k", "v")], [("x", "")]], pa.map_(pa.string(), pa.string())),
        "half": pa.array([[1.5, -2.0], None, [], [None, 65504.0], [0.25]], pa.list_(pa.float16())),
        "sparse": pa.array([{"dim": 5, "indices": [0, 3], "values": [1.0, 2.5]}, None,
                            {"dim": 3, "indices": [], "values": []}, {"dim": 1, "indices": [0], "values": [1.0]},
                            None], _SPARSE),
        "geom": pa.ExtensionArray.from_storage(GeoWKB("EPSG:4326"), pa.array([b"\x01\x01\x00\x00\x00" + bytes(16), None,
                                                                           b"\x00", b"", b"\x01"])),
    }
    t = pa.table(cols)
    want = [{k: v for k, v in r.items()} for r in t.to_pylist()]
    for r in want:   # Delta's: times as µs since midnight, uint32 as int64, extension as bytes
        for c in [r["comp"], *(r["comps"] or ())]:
            if c is not None and c["at"] is not None:
                c["at"] = (c["at"].hour * 3600 + c["at"].minute * 60 + c["at"].second) * 1_000_000
    return t, want


def test_delta_types_of_the_nested_and_extension_types():
    t, _ = _table()
    got = {f.name: delta_type(f.type) for f in t.schema}
    assert got["mood"] == pa.string()
    assert got["comp"] == pa.struct([("n", pa.int64()), ("at", pa.int64()), ("mood", pa.string())])
    assert got["comps"] == pa.list_(got["comp"])
    assert got["span"] == _RANGE and got["spans"] == pa.list_(_RANGE)
    assert got["tags"] == pa.map_(pa.string(), pa.string())
    assert got["half"] == pa.list_(pa.float32())
    assert got["sparse"] == _SPARSE
    assert got["geom"] == pa.binary()


@pytest.mark.parametrize("sliced", [False, True])
def test_nested_columns_are_written_to_delta_and_read_back_by_pyarrow(tmp_path, sliced):
    t, want = _table()
    if sliced:   # list and map offsets past 0, nulls among them
        t, want = t.slice(1, 4), want[1:]
    copy = pa.table({c: to_delta(t.column(c)) for c in t.column_names})
    assert copy.schema == pa.schema([pa.field(f.name, delta_type(f.type)) for f in t.schema])
    path = str(tmp_path / "copy")
    deltalake.write_deltalake(path, copy.slice(0, 2))
    # the rest by a MERGE (an upsert on id), as a mirror writes its copies
    (deltalake.DeltaTable(path).merge(copy, "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    back = ds.dataset(deltalake.DeltaTable(path).file_uris(), format="parquet").to_table()
    assert len(back) == len(want)
    rows = sorted(back.to_pylist(), key=lambda r: r["id"])
    for r in rows:   # pyarrow reads a Parquet map as (key, value) pairs
        r["tags"] = None if r["tags"] is None else [tuple(p) for p in r["tags"]]
    assert rows == want


class _Tagged(pa.ExtensionType):
    """Extension types of one name over different storage."""

    def __init__(self, storage):
        super().__init__(storage, "pgoutput_codec.test.tagged")

    def __arrow_ext_serialize__(self):
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls(storage_type)


def test_delta_types_asked_again_give_the_same_answer():
    """delta_type keeps its answers by type: asked again, in any order, each type gets what
    it got first, extension types of one name over other storage (alone and inside
    structs, lists, maps) theirs."""
    t, _ = _table()
    cases = [(pa.uint32(), pa.int64()), (pa.time64("us"), pa.int64()), (pa.string(), pa.string()),
             (pa.struct([("n", pa.uint8())]), pa.struct([("n", pa.int16())])),
             (pa.decimal256(40, 2), pa.string()), (pa.timestamp("us", tz="UTC"), pa.timestamp("us", tz="UTC")),
             (_Tagged(pa.uint32()), pa.int64()), (_Tagged(pa.string()), pa.string()),
             (pa.struct([("x", _Tagged(pa.uint16()))]), pa.struct([("x", pa.int32())])),
             (pa.struct([("x", _Tagged(pa.float16()))]), pa.struct([("x", pa.float32())])),
             (pa.list_(_Tagged(pa.uint8())), pa.list_(pa.int16())), (pa.list_(_Tagged(pa.int8())), pa.list_(pa.int8())),
             (pa.map_(pa.string(), _Tagged(pa.uint64())), pa.map_(pa.string(), pa.decimal128(20, 0)))]
    first = [delta_type(f.type) for f in t.schema]
    for _ in range(3):
        for typ, want in cases:
            assert delta_type(typ) == want, typ
        assert [delta_type(f.type) for f in t.schema] == first
