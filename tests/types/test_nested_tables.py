"""Enum, composite, range and multirange columns on the table paths: ``snapshot``,
``history``, ``net_changes`` and ``mirror`` carry the dictionary, struct and list columns;
a column whose type changes (text to an enum, one enum to another: dropped and created
again) keeps each value's label."""

from __future__ import annotations

import datetime
import warnings

import deltalake
import pyarrow as pa
import pytest

from pgoutput_codec import (Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, decode_changes,
                            encode_message, history, net_changes, snapshot)
from pgoutput_codec import typecatalog as tc
from pgoutput_codec.lake import mirror


def _archive():
    reg = tc.TypeRegistry()
    reg.register_enum(70000, ["sad", "ok", "gone"], name="mood")
    reg.register_enum(70010, ["ok", "happy", "sad"], name="mood2")   # the column re-typed to it (after text)
    reg.register_composite(70020, [("a", 23, -1), ("m", 70000, -1)], name="comp")

    def cols(mood):
        return (RelationColumn(1, "id", 23, -1), RelationColumn(0, "m", mood, -1), RelationColumn(0, "c", 70020, -1),
                RelationColumn(0, "r", 3912, -1), RelationColumn(0, "mr", 4451, -1))

    def row(i, m, c, r, mr):
        return Insert(relation_id=16500, new_tuple=tuple(TupleColumn(k, v) for k, v in (
            ("t", b"%d" % i), m, c, r, mr)))

    msgs = [Begin(final_lsn=10, commit_ts=10, xid=10),
            Relation(relation_id=16500, namespace="public", relation_name="t", replica_identity="d",
                     columns=cols(25)),
            row(4, ("t", b"sad"), ("n", None), ("n", None), ("n", None)),
            row(5, ("t", b"nope"), ("n", None), ("n", None), ("n", None)),
            Relation(relation_id=16500, namespace="public", relation_name="t", replica_identity="d",
                     columns=cols(70000)),
            row(1, ("t", b"ok"), ("t", b"(1,sad)"), ("t", b"[2020-01-01,infinity)"), ("t", b"{[1,2),[5,9)}")),
            row(2, ("b", b"gone"), ("b", b"\x00\x00\x00\x02\x00\x00\x00\x17\x00\x00\x00\x04\x00\x00\x00\x05"
                                          b"\x00\x01\x11\x70\x00\x00\x00\x02ok"), ("t", b"empty"), ("t", b"{}")),
            Relation(relation_id=16500, namespace="public", relation_name="t", replica_identity="d",
                     columns=cols(70010)),
            row(3, ("t", b"happy"), ("n", None), ("t", b"(,2020-01-05)"), ("n", None)),
            Commit(commit_lsn=10, end_lsn=11, commit_ts=10)]
    arc = pa.table({"seq": pa.array(range(len(msgs)), pa.int64()),
                    "data": pa.array([encode_message(m) for m in msgs], pa.binary())})
    return decode_changes(arc), reg


_ROWS = [
    {"id": 1, "m": "ok", "m__special": None, "c": {"a": 1, "m": "sad"},
     "r": {"lower": datetime.date(2020, 1, 1), "upper": None, "lower_inc": True,
           "upper_inc": False, "empty": False}, "r__special": "upper=infinity",
     "mr": [{"lower": 1, "upper": 2, "lower_inc": True, "upper_inc": False, "empty": False},
            {"lower": 5, "upper": 9, "lower_inc": True, "upper_inc": False, "empty": False}]},
    {"id": 2, "m": "gone", "m__special": None, "c": {"a": 5, "m": "ok"}, "r__special": None, "mr": [],
     "r": {"lower": None, "upper": None, "lower_inc": False, "upper_inc": False, "empty": True}},
    {"id": 3, "m": "happy", "m__special": None, "c": None, "r__special": None, "mr": None},
    {"id": 4, "m": "sad", "m__special": None},
    {"id": 5, "m": None},
]


@pytest.mark.parametrize("how", [snapshot, history, net_changes])
def test_nested_columns_on_the_table_paths(how):
    changes, reg = _archive()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = how(changes, "public.t", registry=reg).sort_by("id")
    assert t.schema.field("m").type == pa.dictionary(pa.int32(), pa.string())
    # the newest enum's labels, then the label only the older enum had
    assert pa.chunked_array(t.column("m")).combine_chunks().dictionary.to_pylist() == ["ok", "happy", "sad", "gone"]
    assert str(t.schema.field("mr").type).startswith("list<item: struct<lower: int32")
    got = t.to_pylist()
    for want, row in zip(_ROWS, got, strict=True):
        for k, v in want.items():
            assert row.get(k) == v, (k, row)
    # text that is no label of the column's enum: null, and what was sent is kept
    assert got[4]["m__special"] == "sent as type OID 25 by an earlier definition of 'm': 'nope' is not a label" \
                                   " of its enum"


def test_nested_columns_mirrored(tmp_path):
    changes, reg = _archive()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mirror(changes, str(tmp_path), registry=reg)
    got = deltalake.DeltaTable(str(tmp_path / "public.t")).to_pyarrow_table().sort_by("id")
    assert got.column("m").to_pylist() == ["ok", "gone", "happy", "sad", None]
    assert got.column("c").to_pylist() == [{"a": 1, "m": "sad"}, {"a": 5, "m": "ok"}, None, None, None]
    assert got.column("mr").to_pylist()[1] == []
