"""Composites (typecatalog/composites.py): a struct of the attributes typed recursively,
on real server values in both forms (nested, arrays of them, domains over them), the
versions of a type, and the compiled split against its plain-Python twin."""

from __future__ import annotations

import datetime as dt
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nested_types import both_forms, forms, outcome, registry_of
from pgoutput_codec import typecatalog as tc
from pgoutput_codec.typecatalog import ConversionError, arrow_type, convert_column
from pgoutput_codec.typecatalog.composites import parse_binary_record, parse_text_record
from pgoutput_codec.typecatalog.registry import UserType
from strategies import mutated

_UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def comps(types_conn):
    cur = types_conn.cursor()
    cur.execute("DROP TYPE IF EXISTS c_outer, c_inner, c_mood CASCADE")
    cur.execute("DROP DOMAIN IF EXISTS c_inner_dom")
    cur.execute("CREATE TYPE c_mood AS ENUM ('sad', 'ok')")
    cur.execute("CREATE TYPE c_inner AS (a int, b text, d date, m c_mood, n numeric(6,2))")
    cur.execute("CREATE DOMAIN c_inner_dom AS c_inner")
    cur.execute("CREATE TYPE c_outer AS (i c_inner, is_ c_inner[], t timestamptz, x int8[])")
    return registry_of(types_conn)


def test_server_values_in_both_forms(types_conn, comps):
    got = both_forms(types_conn, [
        "ROW(1, 'a \"b\" \\ c,(x)', NULL, 'ok', 1.5)::c_inner",
        "ROW(NULL, '', 'infinity', NULL, NULL)::c_inner",
        "ROW(ROW(2, 'z', '2020-02-29', 'sad', -3), ARRAY[ROW(3, NULL, NULL, NULL, NULL)::c_inner, NULL],"
        " '2020-01-01 00:00+00', '{1,NULL}')::c_outer",
        "ROW(7, 'd', NULL, NULL, NULL)::c_inner_dom",
        "ARRAY[ROW(1, 'q', NULL, 'ok', 2)::c_inner, ROW(NULL, NULL, NULL, NULL, NULL)::c_inner]",
        "ROW(NULL, NULL, NULL, NULL)::c_outer",
    ], comps)
    inner = {"a": 1, "b": 'a "b" \\ c,(x)', "d": None, "m": "ok", "n": pytest.approx(1.5)}
    assert got[0][1] == inner
    assert got[1][1] == {"a": None, "b": "", "d": None, "m": None, "n": None} and got[1][2] == "d=infinity"
    assert got[2][1] == {"i": {"a": 2, "b": "z", "d": dt.date(2020, 2, 29), "m": "sad", "n": pytest.approx(-3)},
                         "is_": [{"a": 3, "b": None, "d": None, "m": None, "n": None}, None],
                         "t": dt.datetime(2020, 1, 1, tzinfo=_UTC), "x": [1, None]}
    assert got[3][1]["a"] == 7                                  # a domain over a composite is the composite
    assert got[4][1][1] == {"a": None, "b": None, "d": None, "m": None, "n": None}
    assert got[5][1] == {"i": None, "is_": None, "t": None, "x": None}
    oid = types_conn.execute("SELECT 'c_outer'::regtype::oid::int8").fetchone()[0]
    assert got[2][0] == arrow_type(oid, -1, comps)
    assert str(got[0][0]) == ("struct<a: int32, b: string, d: date32[day], m: dictionary<values=string, "
                              "indices=int32, ordered=0>, n: decimal128(6, 2)>")


def test_the_parsers_read_what_the_server_writes(types_conn, comps):
    (_, _, text, send), = forms(types_conn, ["ROW(1, 'a \"b\" \\ c', NULL, 'ok', '')::c_inner"
                                             .replace(", '')", ", NULL)")])
    assert parse_text_record(text) == [b"1", b'a "b" \\ c', None, b"ok", None]
    assert [a for _, a in parse_binary_record(send)] == [b"\x00\x00\x00\x01", b'a "b" \\ c', None, b"ok", None]


def test_a_value_is_read_with_the_definition_of_its_shape(types_conn):
    """A composite that gains an attribute: the struct is the union of both definitions; a
    value sent before (fewer attributes) is read with the older one, its new attribute
    null; in the send form the attribute type OIDs pick the definition too."""
    cur = types_conn.cursor()
    cur.execute("DROP TYPE IF EXISTS c_grow CASCADE")
    cur.execute("CREATE TYPE c_grow AS (a int, b text)")
    old = forms(types_conn, ["ROW(1, '7')::c_grow"])[0]
    reg_old = registry_of(types_conn)
    cur.execute("ALTER TYPE c_grow DROP ATTRIBUTE b, ADD ATTRIBUTE c date, ADD ATTRIBUTE b int8")
    new = forms(types_conn, ["ROW(2, '2020-01-01', 5)::c_grow"])[0]
    reg = registry_of(types_conn)
    oid = old[0]
    reg.types[oid].earlier = (reg_old.types[oid],)
    want = [{"a": 1, "b": 7, "c": None}, {"a": 2, "b": 5, "c": dt.date(2020, 1, 1)}]
    assert str(arrow_type(oid, -1, reg)) == "struct<a: int32, b: int64, c: date32[day]>"
    for fast in (True, False):
        # the count picks the definition, and b is read as text then cast to the newest type
        for kinds, values in ((["t", "t"], [old[2], new[2]]), (["b", "b"], [old[3], new[3]])):
            col = convert_column(kinds, values, oid, -1, reg, fast=fast)
            assert col.values.to_pylist() == want and col.special is None
        col = convert_column(["t", "b"], [b"(1,x)", new[3]], oid, -1, reg, fast=fast)
        assert col.values.to_pylist() == [{"a": 1, "b": None, "c": None}, want[1]]
        assert col.special.to_pylist()[0].startswith("b=refused: ") and "'x'" in col.special.to_pylist()[0]
        col = convert_column(["t", "b", "t"], [b"(1,3,4,5)", new[3], b"(1)"], oid, -1, reg, fast=fast, refuse=True)
        assert col.values.to_pylist()[:2] == [None, want[1]]
        assert col.special.to_pylist()[0].startswith("refused: composite value of 4 attributes")


def test_two_definitions_of_one_count_in_the_send_form():
    reg = tc.TypeRegistry()
    t = reg.register_composite(70000, [("a", 23, -1), ("b", 20, -1)])
    t.earlier = (UserType(70000, kind="composite", attributes=(("a", 23, -1), ("c", 25, -1))),)
    old = struct.pack(">iIi", 2, 23, 4) + struct.pack(">i", 1) + struct.pack(">Ii", 25, 2) + b"hi"
    new = struct.pack(">iIi", 2, 23, 4) + struct.pack(">i", 1) + struct.pack(">Ii", 20, 8) + struct.pack(">q", 9)
    for fast in (True, False):
        col = convert_column(["b", "b", "t"], [old, new, b"(3,4)"], 70000, -1, reg, fast=fast)
        assert col.values.to_pylist() == [{"a": 1, "c": "hi", "b": None}, {"a": 1, "c": None, "b": 9},
                                          {"a": 3, "c": None, "b": 4}]     # text: the newest


_SEEDS = [b'(1,"a ""b"" \\\\ c",,ok,1.50)', b"(,,,,)", b'(,"",infinity,,)',
          struct.pack(">iIii", 5, 23, 4, 7) + struct.pack(">Ii", 25, 1) + b"x" + struct.pack(">Ii", 1082, -1)
          + struct.pack(">Ii", 0, -1) + struct.pack(">Ii", 1700, -1)]


@st.composite
def _mutated(draw):
    raw = draw(mutated(_SEEDS, b'(),"\\ 0a\x00\xff'))
    return draw(st.sampled_from("tb")), raw


def _registry():
    reg = tc.TypeRegistry()
    reg.register_enum(70001, ["sad", "ok"])
    reg.register_composite(70000, [("a", 23, -1), ("b", 25, -1), ("d", 1082, -1), ("m", 70001, -1),
                                   ("n", 1700, (6 << 16 | 2) + 4)])
    return reg


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
@example(("t", b'(1,"x\\'))
@example(("b", b"\x00\x00\x00\x01\x00\x00\x00\x17\x7f\xff\xff\xff"))
def test_compiled_and_python_agree_on_mutations(case):
    kind, raw = case
    reg = _registry()
    kinds, data = ["n", kind, "t"], [None, raw, b"(1,,,,)"]
    assert outcome(kinds, data, 70000, reg, True) == outcome(kinds, data, 70000, reg, False)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("kind,raw,why", [
    ("t", b"1,2", "must start with"), ("t", b"(1,2", "ends inside"), ("t", b"(1)x", "after the composite"),
    ("b", b"\x00\x00", "shorter than its count"), ("b", b"\xff\xff\xff\xff", "negative attribute count"),
    ("b", b"\x00\x00\x00\x01\x00\x00\x00\x17\x00\x00\x00\x09\x00", "shorter than its attributes|bad attribute"),
    ("t", b"(x,,,,)", "attribute a"),
])
def test_bad_values_name_the_value(fast, kind, raw, why):
    with pytest.raises(ConversionError, match=f"value 1 .*({why})"):
        convert_column(["t", kind], [b"(1,,,,)", raw], 70000, -1, _registry(), fast=fast)


def test_refused_values_keep_the_column_typed():
    col = convert_column(["t", "t", "b"], [b"(1,,,,)", b"(", b"\x00"], 70000, -1, _registry(), refuse=True)
    assert col.values.type == arrow_type(70000, -1, _registry())
    assert col.values.to_pylist()[0]["a"] == 1 and col.values.to_pylist()[1:] == [None, None]
    assert all(s.startswith("refused: ") for s in col.special.to_pylist()[1:])
