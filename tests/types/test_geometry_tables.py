"""A geometry or geography column whose typmod fixes no SRID has its values' SRIDs in a
typed ``<column>__srid`` (int32) beside it on every table path — ``snapshot``,
``history``, ``net_changes``, the typed change rows and a Delta ``mirror`` — decided by
the column's type (a column of nulls has it too); a column whose typmod fixes the SRID
has none (its geoarrow.wkb type says it)."""

from __future__ import annotations

import struct
import warnings

import deltalake
import pyarrow as pa
import pytest

from pgoutput_codec import (Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, Update, decode_changes,
                            encode_message, history, net_changes, snapshot, table_changes)
from pgoutput_codec import typecatalog as tc
from pgoutput_codec.lake import mirror
from pgoutput_codec.typecatalog.geometry import GeoWKB

GEOMETRY, GEOGRAPHY = 70201, 70202
POINT_4326 = 1107460      # geometry(Point,4326)


def _point(x, y, srid=None):
    """(EWKB hex as the text form sends it, ISO WKB as ST_AsBinary gives it)."""
    word = 1 | (0x20000000 if srid is not None else 0)
    ewkb = struct.pack("<BI", 1, word) + (struct.pack("<i", srid) if srid is not None else b"") + \
        struct.pack("<dd", x, y)
    return ewkb.hex().upper().encode(), struct.pack("<BIdd", 1, 1, x, y)


P3857, P0, P4326, P4269 = _point(1, 2, 3857), _point(3, 4), _point(5, 6, 4326), _point(7, 8, 4269)


def _archive():
    reg = tc.TypeRegistry()
    reg.register_base(GEOMETRY, "geometry", "public", "postgis", "3.3.2")
    reg.register_base(GEOGRAPHY, "geography", "public", "postgis", "3.3.2")
    cols = (RelationColumn(1, "id", 23, -1), RelationColumn(0, "g", GEOMETRY, -1),
            RelationColumn(0, "p", GEOMETRY, POINT_4326), RelationColumn(0, "y", GEOGRAPHY, -1),
            RelationColumn(0, "e", GEOMETRY, -1))

    def tup(i, g, p, y):
        return tuple(TupleColumn(*v) for v in (("t", b"%d" % i), g, p, y, ("n", None)))

    def t(v):
        return ("t", v[0]) if v is not None else ("n", None)
    msgs = [Begin(final_lsn=10, commit_ts=10, xid=10),
            Relation(relation_id=16600, namespace="public", relation_name="geo", replica_identity="d", columns=cols),
            Insert(relation_id=16600, new_tuple=tup(1, t(P3857), t(P4326), t(P4326))),
            Insert(relation_id=16600, new_tuple=tup(2, t(P0), t(None), t(P4269))),
            Insert(relation_id=16600, new_tuple=tup(3, t(None), t(None), t(None))),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=10),
            Begin(final_lsn=20, commit_ts=20, xid=11),
            Update(relation_id=16600, new_tuple=tup(2, t(P4326), t(P4326), t(P0))),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=20)]
    arc = pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                    "data": pa.array([encode_message(m) for m in msgs], pa.binary())})
    return decode_changes(arc), reg


#: id -> (g, g__srid, y, y__srid) as the table holds them at the end
_END = {1: (P3857[1], 3857, P4326[1], 4326), 2: (P4326[1], 4326, P0[1], 0), 3: (None, None, None, None)}


def _check_columns(t):
    names = t.column_names
    for c in ("g", "y", "e"):
        assert names.index(c + "__srid") == names.index(c) + 1, names
        assert t.schema.field(c + "__srid").type == pa.int32()
    assert "p__srid" not in names and not any(n.endswith("__special") for n in names), names
    assert t.schema.field("p").type == GeoWKB("EPSG:4326")


@pytest.mark.parametrize("how", [snapshot, net_changes])
def test_srid_companions_in_snapshot_and_net_changes(how):
    changes, reg = _archive()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = how(changes, "public.geo", registry=reg).sort_by("id")
    _check_columns(t)
    got = {r["id"]: (r["g"], r["g__srid"], r["y"], r["y__srid"]) for r in t.to_pylist()}
    assert got == _END
    assert t.column("e__srid").null_count == len(t)     # a column of nulls has its companion all the same


def test_srid_companions_in_history_and_change_rows():
    changes, reg = _archive()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = history(changes, "public.geo", registry=reg)
    _check_columns(h)
    assert sorted((r["id"], r["g__srid"], r["y__srid"]) for r in h.to_pylist()) == \
        [(1, 3857, 4326), (2, 0, 4269), (2, 4326, 0), (3, None, None)]
    rows = table_changes(changes, "public.geo", registry=reg)
    after = rows.column("after").combine_chunks()
    assert [f.name for f in after.type] == ["id", "g", "g__srid", "p", "y", "y__srid", "e", "e__srid"]
    assert [(a["g__srid"], a["y__srid"]) for a in after.to_pylist()] == [(3857, 4326), (0, 4269), (None, None),
                                                                        (4326, 0)]


def test_srid_companions_mirrored(tmp_path):
    changes, reg = _archive()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mirror(changes, str(tmp_path), registry=reg)
    got = deltalake.DeltaTable(str(tmp_path / "public.geo")).to_pyarrow_table().sort_by("id")
    assert got.schema.field("g__srid").type == pa.int32() and "p__srid" not in got.column_names
    assert {r["id"]: (r["g"], r["g__srid"], r["y"], r["y__srid"]) for r in got.to_pylist()} == _END
    assert got.column("e__srid").null_count == len(got)


def test_an_unchanged_toast_geometry_keeps_its_srid():
    reg = tc.TypeRegistry()
    reg.register_base(GEOMETRY, "geometry", "public", "postgis", "3.3.2")
    cols = (RelationColumn(1, "id", 23, -1), RelationColumn(0, "g", GEOMETRY, -1), RelationColumn(0, "n", 23, -1))

    def tup(g, n):
        return (TupleColumn("t", b"1"), TupleColumn(*g), TupleColumn("t", n))
    msgs = [Begin(final_lsn=10, commit_ts=10, xid=10),
            Relation(relation_id=16600, namespace="public", relation_name="geo", replica_identity="d", columns=cols),
            Insert(relation_id=16600, new_tuple=tup(("t", P3857[0]), b"1")),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=10),
            Begin(final_lsn=20, commit_ts=20, xid=11),
            Update(relation_id=16600, new_tuple=tup(("u", None), b"2")),    # a large geometry, TOASTed, unchanged
            Commit(commit_lsn=20, end_lsn=21, commit_ts=20)]
    changes = decode_changes(pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                                       "data": pa.array([encode_message(m) for m in msgs], pa.binary())}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for how in (snapshot, net_changes):
            assert [(r["g"], r["g__srid"], r["n"]) for r in how(changes, "public.geo", registry=reg).to_pylist()] \
                == [(P3857[1], 3857, 2)], how.__name__
        assert [(r["g__srid"], r["n"]) for r in history(changes, "public.geo", registry=reg).to_pylist()] == \
            [(3857, 1), (3857, 2)]
