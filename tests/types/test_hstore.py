"""hstore as map<string, string> (typecatalog/hstore.py, _codecs/hstore.pxi), on a real
PostgreSQL 15 with Debian's contrib: both forms equal the server's own pairs (akeys,
avals), the compiled split equals its Python twin, on mutated input too."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ext_types
from pgoutput_codec.typecatalog import ConversionError, TypeRegistry, arrow_type, convert_column
from strategies import mutated

HSTORES = ["''", "'a=>1'", """$$a=>1, "b c"=>NULL, "q\\"\\\\"=>"", x=>"NULL", ""=>x$$""",
           "$$\"é ü\"=>\"日本\", k=>\"a,b=>c\"$$",
           "SELECT hstore(array_agg('k' || i), array_agg(i::text)) FROM generate_series(1, 300) i"]

OID = 70001
REG = TypeRegistry()
REG.register_base(OID, "hstore", "public", "hstore", "1.8")


@pytest.fixture(scope="module")
def server_values(contrib_conn):
    """(text forms, send forms, the server's pairs) of HSTORES."""
    texts, sends, pairs = [], [], []
    for h in HSTORES:
        (oid, mod, t, b), = ext_types.forms(contrib_conn, [f"({h})::hstore"])
        texts.append(t)
        sends.append(b)
        k, v = contrib_conn.execute(f"SELECT akeys(x), avals(x) FROM (SELECT ({h})::hstore) s(x)").fetchone()
        pairs.append(list(zip(k, v, strict=True)))
    return texts, sends, pairs


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_both_forms_equal_the_servers_pairs(contrib_conn, server_values, fast):
    texts, sends, pairs = server_values
    reg = ext_types.registry(contrib_conn)
    oid = contrib_conn.execute("SELECT 'hstore'::regtype::oid::int8").fetchone()[0]
    assert arrow_type(oid, -1, reg) == pa.map_(pa.string(), pa.string())
    for kind, vals in (("t", texts), ("b", sends)):
        col = convert_column([kind] * len(vals) + ["n"], vals + [None], oid, -1, reg, fast=fast).values
        col.validate(full=True)
        assert col.to_pylist() == pairs + [None], kind
        assert col.type.key_field.nullable is False


def test_pgoutput_text_and_binary(contrib_conn):
    got, _ = ext_types.replicated(
        contrib_conn, "ext_hstore", "CREATE TABLE ext_hstore (id int PRIMARY KEY, h hstore)",
        ["""INSERT INTO ext_hstore VALUES (1, $$a=>1, b=>NULL, "\\\\"=>"\\""$$), (2, ''), (3, NULL)"""])
    want = [None if k is None else list(zip(k, v, strict=True))
            for k, v in contrib_conn.execute("SELECT akeys(h), avals(h) FROM ext_hstore ORDER BY id").fetchall()]
    for mode in ("text", "binary"):
        assert got[mode].column("h").type == pa.map_(pa.string(), pa.string())
        assert got[mode].column("h").to_pylist() == want, mode


BAD = [("t", b'"a"=>"1","b"=>"2"', "', '"), ("t", b'"a"="1"', "'=>'"), ("t", b'a=>"1"', '\'"\''),
       ("t", b'"a"=>"1', "unterminated"), ("t", b'"a\\', "unterminated"), ("t", b'"a"=>NUL', "'\"'"),
       ("t", b'"\xff"=>NULL', "(?i)utf-8"), ("b", b"\x00\x00\x00", "shorter"),
       ("b", b"\xff\xff\xff\xff", "negative pair count"), ("b", b"\x00\x00\x00\x01\xff\xff\xff\xff", "null key"),
       ("b", b"\x00\x00\x00\x01\x00\x00\x00\x05ab", "shorter"),
       ("b", b"\x00\x00\x00\x01\x00\x00\x00\x01a\xff\xff\xff\xfe", "negative value length"),
       ("b", b"\x00\x00\x00\x00\x00", "longer"), ("b", b"\x7f\xff\xff\xff", "shorter")]


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("kind,raw,why", BAD)
def test_malformed_values_are_refused_naming_the_value(kind, raw, why, fast):
    with pytest.raises(ConversionError, match=why) as e:
        convert_column([kind, kind, kind], [b"" if kind == "t" else b"\0\0\0\0", raw, raw], OID, -1, REG, fast=fast)
    assert e.value.index == 1


_SEEDS = [b'"a"=>"1", "b c"=>NULL, "q\\"\\\\"=>""', b"", b'"k"=>"NULL"',
          b'\x00\x00\x00\x02\x00\x00\x00\x01a\x00\x00\x00\x011\x00\x00\x00\x01b\xff\xff\xff\xff']


@st.composite
def _mutated(draw):
    raw = draw(mutated(_SEEDS, b'"\\=>, NULab\x00\x01\xff'))
    return draw(st.sampled_from("tb")), raw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_compiled_split_and_python_twin_agree_on_mutations(case):
    kind, raw = case
    results = []
    for fast in (True, False):
        try:
            col = convert_column(["n", kind, kind], [None, raw, raw], OID, -1, REG, fast=fast)
            col.values.validate(full=True)
            results.append(("ok", col.values.to_pylist()))
        except ConversionError as e:
            results.append(("error", e.index))
    assert results[0] == results[1], (kind, raw)


def test_arrays_of_hstore(contrib_conn):
    reg = ext_types.registry(contrib_conn)
    (oid, mod, text, sent), = ext_types.forms(contrib_conn, ["ARRAY[$$a=>1, \"b\\\\\"=>NULL$$::hstore, NULL, '']"])
    assert arrow_type(oid, mod, reg) == pa.list_(pa.map_(pa.string(), pa.string()))
    for kind, raw in (("t", text), ("b", sent)):
        assert convert_column([kind], [raw], oid, mod, reg).values.to_pylist() == [
            [[("a", "1"), ("b\\", None)], None, []]], kind
