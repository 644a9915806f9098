"""Ranges and multiranges (typecatalog/ranges.py), user-defined ones on real server values
in both forms (the built-in ones: types_data's cases in test_catalog.py), quoted bounds,
special bounds, and the compiled split against its plain-Python twin."""

from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nested_types import both_forms, outcome, registry_of
from pgoutput_codec.typecatalog import ConversionError, arrow_type, convert_column
from pgoutput_codec.typecatalog.ranges import parse_text_multirange, parse_text_range
from strategies import mutated


def _r(lo, hi, li=True, ui=False, empty=False):
    return {"lower": lo, "upper": hi, "lower_inc": li, "upper_inc": ui, "empty": empty}


@pytest.fixture(scope="module")
def user_ranges(types_conn):
    cur = types_conn.cursor()
    cur.execute("DROP TYPE IF EXISTS r_float, r_text CASCADE")
    cur.execute("CREATE TYPE r_float AS RANGE (subtype = float8)")
    cur.execute("CREATE TYPE r_text AS RANGE (subtype = text, collation = \"C\")")
    return registry_of(types_conn)


def test_user_defined_ranges_in_both_forms(types_conn, user_ranges):
    got = both_forms(types_conn, [
        "'[1.5,2]'::r_float", "'(,-Infinity]'::r_float", "'empty'::r_float",
        "r_text('a \"b\"', 'z,\\)')", "r_text('', NULL, '[)')",
        "'{[1,2],(3,)}'::r_float_multirange", "'{}'::r_text_multirange",
        "ARRAY['[1,2)'::r_float, NULL]", "ARRAY['{(1,2)}'::r_float_multirange]",
    ], user_ranges)
    assert got[0][1] == _r(1.5, 2.0, True, True)
    assert got[1][1] == _r(None, float("-inf"), False, True)    # float8's -Infinity is a value, not a special
    assert got[2][1] == _r(None, None, False, False, True)
    assert got[3][1] == _r('a "b"', "z,\\)")
    assert got[4][1] == _r("", None)
    assert got[5][1] == [_r(1.0, 2.0, True, True), _r(3.0, None, False, False)]
    assert got[6][1] == []
    assert got[7][1] == [_r(1.0, 2.0), None]
    assert got[8][1] == [[_r(1.0, 2.0, False, False)]]
    oid = types_conn.execute("SELECT 'r_float'::regtype::oid::int8").fetchone()[0]
    assert got[0][0] == arrow_type(oid, -1, user_ranges) == pa.struct(
        [("lower", pa.float64()), ("upper", pa.float64()), ("lower_inc", pa.bool_()), ("upper_inc", pa.bool_()),
         ("empty", pa.bool_())])


def test_special_bounds_are_bounds_with_a_note(types_conn):
    """A date ``infinity`` bound is a bound: null with the note, not an unbounded side."""
    got = both_forms(types_conn, ["'[-infinity,infinity]'::daterange", "'(,infinity)'::tsrange",
                                  "'{[2020-01-01,infinity)}'::datemultirange"], None)
    assert got[0][1] == _r(None, None, True, True) and got[0][2] == "lower=-infinity;upper=infinity"
    assert got[1][1] == _r(None, None, False, False) and got[1][2] == "upper=infinity"
    assert got[2][1] == [_r(dt.date(2020, 1, 1), None)] and got[2][2] == "0=upper=infinity"


def test_text_parsers():
    assert parse_text_range(b'["a\\"b",""""]') == (0x02 | 0x04, b'a"b', b'"')
    assert parse_text_range(b"(,)") == (0x08 | 0x10, None, None)
    assert parse_text_multirange(b'{[1,2),("a,}",)}') == [b"[1,2)", b'("a,}",)']


_SEEDS = [b"[1,5)", b"empty", b"(,5]", b'["1",)', b"\x02\x00\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x05",
          b"\x01", b"\x18", b"{[1,3),[5,7)}", b"{}",
          struct.pack(">ii", 1, 13) + b"\x02\x00\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x05"]


@st.composite
def _mutated(draw):
    raw = draw(mutated(_SEEDS, b'[](),{}"\\ 0e\x00\xff'))
    return draw(st.sampled_from([3904, 4451, 3905, 6150])), draw(st.sampled_from("tb")), raw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
@example((3904, "t", b'["1'))
@example((4451, "t", b"{[1,3)"))
@example((4451, "b", b"\x00\x00\x00\x01\x7f\xff\xff\xff"))
def test_compiled_and_python_agree_on_mutations(case):
    oid, kind, raw = case
    kinds, data = ["n", kind, "t"], [None, raw, b"{}" if oid in (4451, 3905) else b"empty"]
    assert outcome(kinds, data, oid, None, True) == outcome(kinds, data, oid, None, False)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("oid,kind,raw,why", [
    (3904, "t", b"1,5", "must start with"), (3904, "t", b"[1;5)", "no ','"), (3904, "t", b"[1,5)x", "after the"),
    (3904, "b", b"", "empty range send form"), (3904, "b", b"\x02\x00\x00", "length missing"),
    (3904, "b", b"\x02\x00\x00\x00\x09\x00", "bad range bound length"), (3904, "t", b"[x,5)", "lower bound"),
    (4451, "t", b"{[1,2)", "without"), (4451, "b", b"\x00\x00\x00\x02", "bad multirange range count"),
    (4451, "t", b"{[1,2);[3,4)}", "separated"),
])
def test_bad_values_name_the_value(fast, oid, kind, raw, why):
    with pytest.raises(ConversionError, match=f"value 1 .*{why}"):
        convert_column(["n", kind], [None, raw], oid, fast=fast)


def test_sliced_columns_split_as_whole_ones():
    kinds = pa.array(["t", "n", "b", "t", "t"], pa.string())
    data = pa.array([b"[1,2)", None, b"\x01", b"(,3]", b"empty"], pa.binary())
    whole = convert_column(kinds, data, 3904)
    for a, b in ((1, 4), (2, 3), (0, 5)):
        part = convert_column(kinds.slice(a, b), data.slice(a, b), 3904)
        assert part.values.to_pylist() == whole.values.to_pylist()[a:a + b]
    col = convert_column(kinds.slice(3, 2), pa.array([b"{[1,2)}", b"{}"]).slice(0, 2), 4451)
    assert col.values.to_pylist() == [[_r(1, 2)], []]
