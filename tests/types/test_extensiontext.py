"""citext, ltree (ltree, lquery, ltxtquery) and the isn types read as strings
(typecatalog/extensiontext.py, _codecs/extensiontext.pxi), on a real PostgreSQL 15 with
Debian's contrib."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest

import ext_types
from pgoutput_codec.typecatalog import ConversionError, arrow_type, convert_column

EXPRS = ["'AbC é'::citext", "'a.b_c.D'::ltree", "''::ltree", "'*.a|b.c*{1,2}'::lquery",
         "'a & !b | c@*'::ltxtquery", "'978-0-393-04002-9'::isbn13", "'0-393-04002-X'::isbn",
         "'0036000291452'::ean13", "'036000291452'::upc", "'1436-4522'::issn", "'9771436452008'::issn13",
         "'M-060-11561-5'::ismn", "'979-0-060-11561-5'::ismn13"]


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_values_equal_the_servers_text(contrib_conn, fast):
    reg = ext_types.registry(contrib_conn)
    for expr, (oid, mod, text, sent) in zip(EXPRS, ext_types.forms(contrib_conn, EXPRS), strict=True):
        want = contrib_conn.execute(f"SELECT ({expr})::text").fetchone()[0]
        assert arrow_type(oid, mod, reg) == pa.string()
        got = convert_column(["t", "n"], [text, None], oid, mod, reg, fast=fast).values.to_pylist()
        assert got == [want, None], expr
        if "isn" not in expr and sent is not None:
            assert convert_column(["b"], [sent], oid, mod, reg, fast=fast).values.to_pylist() == [want], expr
        if expr.split("::")[1] in ("ltree", "lquery", "ltxtquery"):
            assert sent[:1] == b"\x01"          # ltree_send: version 1, then the text
        elif expr.endswith("::citext"):
            assert sent == text
        else:
            assert sent is None, expr           # the isn types have no send function


def test_pgoutput_sends_the_isn_types_as_text_in_binary_mode(contrib_conn):
    got, raw = ext_types.replicated(
        contrib_conn, "ext_text", "CREATE TABLE ext_text (id int PRIMARY KEY, c citext, l ltree, q lquery, x ltxtquery,"
        " i isbn13, e ean13, u upc)",
        ["INSERT INTO ext_text VALUES (1, 'Straße', 'Top.Science', '*.Science', 'Sci* & !x', '978-0-393-04002-9',"
         " '0036000291452', '036000291452'), (2, NULL, '', NULL, NULL, NULL, NULL, NULL)"])
    want = [dict(zip(("c", "l", "q", "x", "i", "e", "u"), r, strict=True)) for r in contrib_conn.execute(
        "SELECT c::text, l::text, q::text, x::text, i::text, e::text, u::text FROM ext_text ORDER BY id")]
    for mode in ("text", "binary"):
        for col in want[0]:
            assert got[mode].schema.field(col).type == pa.string(), (mode, col)
            assert got[mode].column(col).to_pylist() == [w[col] for w in want], (mode, col)
    first = raw["binary"].filter(pa.compute.equal(raw["binary"].column("op"), "I")).slice(0, 1).to_pylist()[0]
    kinds = {c["name"]: v["kind"] for c, v in zip(first["columns"], first["after"], strict=True)}
    assert kinds["i"] == kinds["e"] == kinds["u"] == "t"        # no send function: text
    assert kinds["c"] == kinds["l"] == "b"


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_malformed_values_are_refused_naming_the_value(contrib_conn, fast):
    reg = ext_types.registry(contrib_conn)
    (ltree, _, _, _), (isbn, _, _, _) = ext_types.forms(contrib_conn, ["'a'::ltree", "'978-0-393-04002-9'::isbn13"])
    for oid, kind, bad, why in ((ltree, "b", b"\x02a.b", "version byte 1"), (ltree, "b", b"", "version byte 1"),
                                (ltree, "t", b"a\xff", "(?i)utf-8"), (isbn, "b", b"978", "no send form")):
        with pytest.raises(ConversionError, match=why) as e:
            convert_column(["t", kind], [b"ok", bad], oid, -1, reg, fast=fast)
        assert e.value.index == 1


def test_arrays_of_extension_strings(contrib_conn):
    reg = ext_types.registry(contrib_conn)
    rows = ext_types.forms(contrib_conn, ["ARRAY['A'::citext, NULL]", "ARRAY['a.b'::ltree, '']", "ARRAY['0-393-04002-X'::isbn]"])
    want = [["A", None], ["a.b", ""], ["0-393-04002-X"]]
    for (oid, mod, text, sent), w in zip(rows, want, strict=True):
        assert arrow_type(oid, mod, reg) == pa.list_(pa.string())
        for kind, raw in (("t", text), ("b", sent)):
            if raw is not None:
                assert convert_column([kind], [raw], oid, mod, reg).values.to_pylist() == [w], kind
