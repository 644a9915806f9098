"""'t' (text) and 'j' (json) styles: lines as openGauss prints them, quoting rules,
null / unchanged-toast-datum / (no-tuple-data), bare and batched frames, XLogData."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgoutput_codec.errors import PgoutputDecodeError
from pgoutput_codec.opengauss import Column, Record, decode_batch, decode_frame
from pgoutput_codec.opengauss.encode import encode_text_frame, json_line, text_line

TS = "2024-02-05 14:46:35.203057+08"


def C(name, type_name, value, toast=False):
    return Column(name, None, value, type_name, toast)


BEGIN = Record("B", 0xCFE64D0, csn=2359, first_lsn=0xCFE64D0, xid=78109, commit_time=TS)
COMMIT = Record("C", 0xCFE6900, xid=78109, commit_time=TS)
UPDATE = Record("U", 0xCFE6500, schema="public", table="t1",
                new_tuple=(C("a", "integer", b"4"), C("b", "text", b"y")), old_tuple=(C("a", "integer", b"3"),))


def test_lines_as_the_spec_shows_them():
    assert text_line(BEGIN) == f"BEGIN CSN: 2359 first_lsn: 0/CFE64D0 xid: 78109 commit_time: {TS}"
    assert text_line(COMMIT) == f"commit xid: 78109 (at {TS})"
    assert text_line(UPDATE) == "table public t1 UPDATE: old-key: a[integer]:3 new-tuple: a[integer]:4 b[text]:'y'"
    for line in (text_line(BEGIN), text_line(COMMIT), text_line(UPDATE)):
        rec = decode_frame(line.encode(), "t").records[0]
        assert text_line(rec) == line
    assert decode_frame(text_line(UPDATE).encode(), "t").records[0] == Record(**{**UPDATE.__dict__, "lsn": None})


def test_begin_commit_minimal_forms():
    assert decode_frame(b"BEGIN CSN: 1 first_lsn: 1/2", "t").records[0] == Record("B", None, csn=1, first_lsn=(1 << 32) | 2)
    assert decode_frame(b"commit", "j").records[0] == Record("C")


@pytest.mark.parametrize("line,cols", [
    ("a[text]:'it''s'", [C("a", "text", b"it's")]),
    ("a[text]:''''", [C("a", "text", b"'")]),
    ("a[text]:'a b: c[x]:1'", [C("a", "text", b"a b: c[x]:1")]),
    ("a[boolean]:true b[boolean]:false", [C("a", "boolean", b"t"), C("b", "boolean", b"f")]),
    ("a[bit varying(4)]:B'101'", [C("a", "bit varying(4)", b"101")]),
    ("a[numeric(10,2)]:-1.50 b[integer[]]:'{1,2}'", [C("a", "numeric(10,2)", b"-1.50"), C("b", "integer[]", b"{1,2}")]),
    ('"Mixed Case"[text]:null b[text]:unchanged-toast-datum',
     [C('"Mixed Case"', "text", None), C("b", "text", None, True)]),
])
def test_literals(line, cols):
    text = "table s t INSERT: " + line
    rec = decode_frame(text.encode(), "t").records[0]
    assert list(rec.new_tuple) == cols
    assert text_line(rec) == text


def test_no_tuple_data():
    for op, tag in (("INSERT", "I"), ("UPDATE", "U"), ("DELETE", "D")):
        rec = decode_frame(f"table s t {op}: (no-tuple-data)".encode(), "t").records[0]
        assert rec == Record(tag, schema="s", table="t")


def test_json_object():
    obj = json.loads(json_line(UPDATE))
    assert obj == {"table_name": "public.t1", "op_type": "UPDATE", "columns_name": ["a", "b"],
                   "columns_type": ["integer", "text"], "columns_val": ["4", "'y'"],
                   "old_keys_name": ["a"], "old_keys_type": ["integer"], "old_keys_val": ["3"]}
    q = Record("D", 1, schema="My Schema", table='t"1', old_tuple=(C("a", "text", None),))
    line = json_line(q)
    assert json.loads(line)["table_name"] == '"My Schema"."t""1"'
    assert decode_frame(line.encode(), "j").records[0] == Record(**{**q.__dict__, "lsn": None})


@pytest.mark.parametrize("style", ["t", "j"])
@pytest.mark.parametrize("wrap", [None, (1, 2, 3)])
def test_batched_and_bare_frames(style, wrap):
    recs = [BEGIN, UPDATE, COMMIT]
    frame = encode_text_frame(recs, style=style, xlog=wrap)
    f = decode_frame(frame, style)
    assert f.records == tuple(recs) and f.xlogdata == wrap and f.end == "0"
    assert encode_text_frame(f.records, style=style, xlog=wrap) == frame
    bare = [encode_text_frame([r], style=style, batch=False, xlog=wrap) for r in recs]
    t = decode_batch(bare + [frame], style)
    rows = t.to_pylist()
    assert [r["row"] for r in rows] == [0, 1, 2, 3, 3, 3]
    assert [r["lsn"] for r in rows] == [None] * 3 + [r.lsn for r in recs]
    assert [r["type"] for r in rows] == ["B", "U", "C"] * 2
    assert rows[1]["new_tuple"][1] == {"name": "b", "type_oid": None, "type_name": "text", "value": b"y",
                                       "unchanged_toast": False}
    assert t.column("error").null_count == 6


def test_names_with_spaces_are_an_error_not_a_guess():
    """The text style prints 'table %s %s' unquoted: 'table my schema t INSERT:' splits
    two ways, so it is an error row naming the cause, not schema 'my' and table 'schema t'."""
    with pytest.raises(PgoutputDecodeError, match="names with spaces cannot be told apart"):
        decode_frame(b"table my schema t INSERT: a[integer]:1", "t")
    rows = decode_batch([b"table my schema t INSERT: a[integer]:1", b"table s t INSERT: a[integer]:1"], "t").to_pylist()
    assert rows[0]["error"] and rows[0]["table"] is None
    assert rows[1]["error"] is None and (rows[1]["schema"], rows[1]["table"]) == ("s", "t")


def test_a_long_header_is_read_in_linear_time():
    """A line of 40,000 words and no operation keyword: a backtracking pattern tried every
    split of it into schema and table (seconds); one search per keyword takes well under
    a millisecond. The bound below leaves two orders of magnitude for a loaded machine."""
    import time
    bad = ("table s t " + "x " * 40_000).encode()
    t0 = time.perf_counter()
    with pytest.raises(PgoutputDecodeError, match="expected"):
        decode_frame(bad, "t")
    assert time.perf_counter() - t0 < 0.2


@pytest.mark.parametrize("style", ["t", "j"])
def test_malformed_text_frames(style):
    frame = encode_text_frame([BEGIN, UPDATE, COMMIT], style=style)
    t = decode_batch([frame[:k] for k in range(len(frame))], style)
    last = {}
    for r in t.to_pylist():
        last[r["row"]] = r
    assert all(last[k]["error"] for k in range(len(frame)))
    bad = encode_text_frame([BEGIN], style=style)[:-4] + b"\0\0\0\x0d" + b"\0" * 8 + b"oops!" + b"\0\0\0\0"
    rows = decode_batch([bad], style).to_pylist()
    assert rows[0]["error"] is None and rows[1]["error"] and rows[1]["lsn"] == 0
    with pytest.raises(PgoutputDecodeError):
        decode_frame(bad, style)


_val = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_col = st.one_of(
    st.tuples(st.sampled_from(["a", '"B c"', "x_1"]), st.sampled_from(["text", "character varying(5)", "json"]),
              st.one_of(st.none(), _val.map(str.encode))),
    st.tuples(st.just("n"), st.sampled_from(["integer", "numeric(5,2)"]),
              st.one_of(st.none(), st.integers(-10**6, 10**6).map(lambda i: str(i).encode()))),
    st.tuples(st.just("b"), st.just("boolean"), st.sampled_from([None, b"t", b"f"])),
).map(lambda t: C(*t))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from("IUD"), st.lists(_col, min_size=1, max_size=4), st.lists(_col, max_size=2),
       st.integers(0, 2**64 - 1), st.sampled_from("tj"))
def test_hypothesis_text_round_trip(tag, new, old, lsn, style):
    rec = Record(tag, lsn, schema="s", table="t", new_tuple=tuple(new) if tag != "D" else None,
                 old_tuple=(tuple(old) or None) if tag != "I" else None)
    frame = encode_text_frame([rec], style=style)
    assert decode_frame(frame, style).records == (rec,)
