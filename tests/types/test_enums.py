"""Enums (typecatalog/enums.py): dictionary<int32, string> over the labels in sort order,
on real server values in both forms, versions of a type, and the per-value twin."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nested_types import both_forms, enum_type, outcome, registry_of
from pgoutput_codec import typecatalog as tc
from pgoutput_codec.typecatalog import ConversionError, arrow_type, convert_column
from pgoutput_codec.typecatalog.enums import NOT_A_LABEL
from pgoutput_codec.typecatalog.registry import UserType


@pytest.fixture(scope="module")
def moods(types_conn):
    cur = types_conn.cursor()
    cur.execute("DROP TYPE IF EXISTS e_mood CASCADE")
    cur.execute("CREATE TYPE e_mood AS ENUM ('sad', 'ok', 'Très \"bien\"')")
    cur.execute("ALTER TYPE e_mood ADD VALUE 'meh' BEFORE 'ok'")     # sort order is not OID order
    return registry_of(types_conn)


def test_server_values_in_both_forms(types_conn, moods):
    got = both_forms(types_conn, ["'ok'::e_mood", "'Très \"bien\"'::e_mood", "ARRAY['meh', NULL, 'sad']::e_mood[]",
                                  "'{}'::e_mood[]", "ARRAY[['ok'],['sad']]::e_mood[]"], moods)
    assert [g[1] for g in got] == ["ok", 'Très "bien"', ["meh", None, "sad"], [], [["ok"], ["sad"]]]
    assert got[0][0] == enum_type() and got[2][0] == pa.list_(enum_type())
    col = convert_column(["t", "b"], [b"ok", b"sad"], *_oid(types_conn, "e_mood"), moods)
    assert col.values.dictionary.to_pylist() == ["sad", "meh", "ok", 'Très "bien"']   # enumsortorder
    assert col.values.indices.to_pylist() == [2, 0]


def _oid(conn, name):
    return conn.execute(f"SELECT '{name}'::regtype::oid::int8").fetchone()[0], -1


def test_a_label_the_catalog_lacks_is_refused_and_the_column_stays_typed():
    reg = tc.TypeRegistry()
    reg.register_enum(70000, ["a", "b"])
    for fast in (True, False):
        col = convert_column(["t", "b", "n", "t"], [b"b", b"zz", None, b"\xff"], 70000, -1, reg, fast=fast)
        assert col.values.type == enum_type()
        assert col.values.to_pylist() == ["b", None, None, None]
        assert col.special.to_pylist() == [None, NOT_A_LABEL, None, NOT_A_LABEL]


def test_versions_share_one_dictionary():
    """An enum recorded twice in an archive's catalog (a label gone, one new): one
    dictionary, the newest labels in their order then the older ones, and a value of either
    version is read."""
    reg = tc.TypeRegistry()
    t = reg.register_enum(70000, ["new", "a"])
    t.earlier = (UserType(70000, kind="enum", labels=("a", "gone")),)
    col = convert_column(["t", "t", "t"], [b"gone", b"new", b"a"], 70000, -1, reg)
    assert col.values.dictionary.to_pylist() == ["new", "a", "gone"]
    assert col.values.to_pylist() == ["gone", "new", "a"] and col.special is None


def test_without_labels_the_values_make_the_dictionary():
    reg = tc.TypeRegistry()
    reg.register_enum(70000)
    for fast in (True, False):
        col = convert_column(["t", "n", "b", "t"], [b"x", None, b"y", b"x"], 70000, -1, reg, fast=fast)
        assert col.values.type == enum_type() and col.values.to_pylist() == ["x", None, "y", "x"]
        with pytest.raises(ConversionError, match="value 1 .*UTF-8"):
            convert_column(["t", "t"], [b"x", b"\xff"], 70000, -1, reg, fast=fast)


def test_without_a_catalog_an_enum_is_unknown():
    assert arrow_type(70000) == pa.string()
    assert convert_column(["b"], [b"ok"], 70000).values.to_pylist() == [b"ok"]


@pytest.mark.parametrize("fast", [True, False])
def test_bad_kinds_name_the_value(fast):
    reg = tc.TypeRegistry()
    reg.register_enum(70000, ["a"])
    with pytest.raises(ConversionError, match="value 2 .*kind is not n/u/t/b"):
        convert_column(["t", "n", "x"], [b"a", None, b"a"], 70000, -1, reg, fast=fast)
    with pytest.raises(ConversionError, match="value 1 .*null data"):
        convert_column(["t", "b", "x"], [b"a", None, b"a"], 70000, -1, reg, fast=fast)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("tbnux"), st.sampled_from([b"a", b"b", b"", b"\xff", b"A", None])),
                max_size=8), st.booleans())
def test_vectorized_and_per_value_agree(values, with_labels):
    reg = tc.TypeRegistry()
    reg.register_enum(70000, ["b", "a", ""] if with_labels else [])
    kinds = [k for k, _ in values]
    data = [d for _, d in values]
    assert outcome(kinds, data, 70000, reg, True) == outcome(kinds, data, 70000, reg, False)


def test_a_label_sent_in_binary_is_transcoded():
    """An enum's send form is its label's text: transcoding an archive of another client
    encoding rewrites it as a UTF-8 session receives it."""
    from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, encode_message
    from pgoutput_codec.transcode import transcode_payloads

    reg = tc.TypeRegistry()
    reg.register_enum(70000, ["café"])
    msgs = [Begin(final_lsn=10, commit_ts=0, xid=5),
            Relation(relation_id=7, namespace="public", relation_name="t", replica_identity="d",
                     columns=(RelationColumn(0, "m", 70000, -1),)),
            Insert(relation_id=7, new_tuple=(TupleColumn("b", "café".encode("latin-1")),)),
            Commit(flags=0, commit_lsn=10, end_lsn=11, commit_ts=0)]
    got, _ = transcode_payloads(pa.array([encode_message(m) for m in msgs], pa.binary()), "latin1", registry=reg)
    assert got[2].as_py() == encode_message(Insert(relation_id=7, new_tuple=(TupleColumn("b", "café".encode()),)))
