"""pgvector's vector, halfvec and sparsevec (typecatalog/vectors.py, _codecs/vectors.pxi)
on a real PostgreSQL 18 (else 16) with pgvector: both forms equal the server's own
``::real[]``, the compiled converters equal their Python twins, on mutated input too."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ext_types
from arrow_values import plain
from pgoutput_codec.typecatalog import ConversionError, TypeRegistry, arrow_type, convert_column
from pgoutput_codec.typecatalog.vectors import SPARSE
from strategies import mutated

VECTORS = ["'[1,2.5,-3e-10]'", "'[1e38,0.1,-0]'", "'[3.4028235e38,1.17549435e-38,1e-45]'",
           "(SELECT array_agg(i / 7.0)::vector FROM generate_series(1, 1000) i)"]
HALFVECS = ["'[1,2.5,65504]'", "'[0.1,0.3333,-6e-08,6.1035156e-05]'",
            "(SELECT array_agg(i / 7.0)::halfvec FROM generate_series(1, 1000) i)"]
SPARSEVECS = ["'{1:1.5,3:2}/5'", "'{}/3'", "'{16000:-1e-10}/16000'",
              "(SELECT array_agg(CASE WHEN i % 3 = 0 THEN i ELSE 0 END)::vector::sparsevec"
              " FROM generate_series(1, 500) i)"]

REG = TypeRegistry()
for _oid, _name in ((70101, "vector"), (70102, "halfvec"), (70103, "sparsevec")):
    REG.register_base(_oid, _name, "public", "vector", "0.8.5")


def bits(col):
    """A vector column as comparable values (floats as their bits)."""
    if pa.types.is_struct(col.type):
        return list(zip(col.is_valid().to_pylist(), col.field("dim").to_pylist(), col.field("indices").to_pylist(),
                        plain(col.field("values")), strict=True))
    if col.type.value_type == pa.float16():
        return [None if v is None else np.asarray(v, np.float16).view(np.uint16).tolist()
                for v in col.to_numpy(zero_copy_only=False)]
    return plain(col)


def _server(vector_conn, exprs, sqltype, real):
    """(oid, typmod, texts, sends, the server's own values) of ``exprs``::``sqltype``."""
    rows = ext_types.forms(vector_conn, [f"({e})::{sqltype}" for e in exprs])
    want = [vector_conn.execute(f"SELECT ({e})::{sqltype}{real}").fetchone()[0] for e in exprs]
    return rows[0][0], rows[0][1], [r[2] for r in rows], [r[3] for r in rows], want


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_vector_and_halfvec_equal_the_servers_real_arrays(vector_conn, fast):
    reg = ext_types.registry(vector_conn)
    for exprs, sqltype, arrow in ((VECTORS, "vector", pa.float32()), (HALFVECS, "halfvec", pa.float16())):
        oid, mod, texts, sends, want = _server(vector_conn, exprs, sqltype, "::real[]")
        assert arrow_type(oid, mod, reg) == pa.list_(arrow)
        expect = pa.array([np.array(w, np.float32).astype(arrow.to_pandas_dtype()) for w in want] + [None],
                          pa.list_(arrow))
        for kind, vals in (("t", texts), ("b", sends)):
            col = convert_column([kind] * len(vals) + ["n"], vals + [None], oid, mod, reg, fast=fast).values
            col.validate(full=True)
            assert bits(col) == bits(expect), (sqltype, kind)


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_sparsevec_equals_the_servers_dense_values(vector_conn, fast):
    reg = ext_types.registry(vector_conn)
    oid, mod, texts, sends, dense = _server(vector_conn, SPARSEVECS, "sparsevec", "::vector::real[]")
    assert arrow_type(oid, mod, reg) == SPARSE
    assert texts[0] == b"{1:1.5,3:2}/5"           # the text form counts from 1
    for kind, vals in (("t", texts), ("b", sends)):
        col = convert_column([kind] * len(vals) + ["n"], vals + [None], oid, mod, reg, fast=fast).values
        col.validate(full=True)
        got = col.to_pylist()
        assert got[-1] is None
        for g, d in zip(got, dense, strict=False):     # indices from 0, as the send form and pgvector's clients
            assert g["dim"] == len(d)
            assert g["indices"] == [i for i, x in enumerate(d) if x != 0]
            assert np.array(g["values"], np.float32).tolist() == np.array([x for x in d if x != 0], np.float32).tolist()


def test_pgoutput_text_and_binary(vector_conn):
    got, _ = ext_types.replicated(
        vector_conn, "ext_vec", "CREATE TABLE ext_vec (id int PRIMARY KEY, v vector(3), h halfvec(2), s sparsevec(4))",
        ["INSERT INTO ext_vec VALUES (1, '[1,-2.5,3e-7]', '[0.5,-1]', '{2:7}/4'), (2, NULL, NULL, '{}/4')"])
    want = vector_conn.execute("SELECT v::real[], h::real[], s::vector::real[] FROM ext_vec ORDER BY id").fetchall()
    for mode in ("text", "binary"):
        t = got[mode]
        assert t.schema.field("v").type == pa.list_(pa.float32()) and t.schema.field("s").type == SPARSE
        assert t.column("v").to_pylist() == [np.array(w[0], np.float32).tolist() if w[0] else None for w in want]
        assert t.column("h").to_pylist() == [w[1] for w in want]
        assert t.column("s").to_pylist() == [{"dim": 4, "indices": [1], "values": [7.0]},
                                             {"dim": 4, "indices": [], "values": []}], mode


BAD = [(70101, "t", b"[1,2", "enclosed"), (70101, "t", b"[1,,2]", "float"), (70101, "t", b"[1,]", "float"),
       (70101, "t", b"[1e39]", "range"), (70101, "b", b"\x00\x01\x00", "header"),
       (70101, "b", b"\x00\x02\x00\x00\x00\x00\x00\x00", "length"), (70101, "b", b"\xff\xff\x00\x00", "negative"),
       (70101, "b", b"\x00\x00\x00\x01", "unused"), (70102, "t", b"[65520]", "halfvec"),
       (70102, "b", b"\x00\x01\x00\x00\x00", "length"), (70103, "t", b"{1:1}", "/dimensions"),
       (70103, "t", b"{1:1}/-3", "/dimensions"), (70103, "t", b"{0:1}/3", "index out of range"),
       (70103, "t", b"{4:1}/3", "rise strictly"), (70103, "t", b"{2:1,1:1}/3", "rise strictly"),
       (70103, "t", b"{1:1,1:2}/3", "rise strictly"), (70103, "t", b"{1}/3", "index:value"),
       (70103, "t", b"1:1/3", "enclosed"), (70103, "t", b"{1:x}/3", "float"),
       (70103, "b", struct.pack(">iii", 3, 1, 0) + struct.pack(">if", 3, 1), "rise strictly"),
       (70103, "b", struct.pack(">iii", 3, -1, 0), "negative"), (70103, "b", struct.pack(">iii", 3, 1, 0), "length"),
       (70103, "b", struct.pack(">iii", 3, 0, 1), "unused"), (70103, "b", struct.pack(">iii", -3, 0, 0), "negative")]


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("oid,kind,raw,why", BAD)
def test_malformed_values_are_refused_naming_the_value(oid, kind, raw, why, fast):
    ok = {70101: b"[1]", 70102: b"[1]", 70103: b"{}/1"}[oid] if kind == "t" else \
        {70101: b"\0\0\0\0", 70102: b"\0\0\0\0", 70103: bytes(12)}[oid]
    with pytest.raises(ConversionError, match=why) as e:
        convert_column([kind, kind], [ok, raw], oid, -1, REG, fast=fast)
    assert e.value.index == 1


_SEEDS = {70101: [b"[1,2.5,-3e-10]", b"[]", b"\x00\x02\x00\x00?\x80\x00\x00\x7f\xc0\x00\x01"],
          70102: [b"[1,2.5,65504]", b"[NaN,-Infinity]", b"\x00\x02\x00\x00<\x00\x7e\x01"],
          70103: [b"{1:1.5,3:2}/5", b"{}/3", struct.pack(">iiiiiff", 5, 2, 0, 0, 2, 1.5, 2.0)]}


@st.composite
def _mutated(draw):
    oid = draw(st.sampled_from(sorted(_SEEDS)))
    raw = draw(mutated(_SEEDS[oid], b"0123456789-+.eE,:/[]{} \x00\xff"))
    return oid, draw(st.sampled_from("tb")), raw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
@example((70102, "t", b"[65519.99]"))        # rounds to the largest half, not to infinity
@example((70103, "t", b"{1:1,}/3"))
def test_compiled_and_python_twins_agree_on_mutations(case):
    oid, kind, raw = case
    results = []
    for fast in (True, False):
        try:
            col = convert_column(["n", kind, kind], [None, raw, raw], oid, -1, REG, fast=fast)
            col.values.validate(full=True)
            results.append(("ok", bits(col.values)))
        except ConversionError as e:
            results.append(("error", e.index))
    assert results[0] == results[1], (oid, kind, raw)


def test_arrays_of_vectors(vector_conn):
    reg = ext_types.registry(vector_conn)
    rows = ext_types.forms(vector_conn, ["ARRAY['[1,2.5]'::vector, NULL, '[3]']", "ARRAY['[0.5]'::halfvec]",
                                  "ARRAY['{2:1.5}/3'::sparsevec]"])
    want = [[[1.0, 2.5], None, [3.0]], [[0.5]], [{"dim": 3, "indices": [1], "values": [1.5]}]]
    for (oid, mod, text, sent), w in zip(rows, want, strict=True):
        for kind, raw in (("t", text), ("b", sent)):
            col = convert_column([kind], [raw], oid, mod, reg).values
            assert col.type == arrow_type(oid, mod, reg) and col.to_pylist() == [w], kind
