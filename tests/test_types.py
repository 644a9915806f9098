"""Type catalog tests on real server bytes.

Every case of ``types_data.CASES`` is fetched from a throwaway PostgreSQL (``types_server``)
in text form and in binary send form, exactly the bytes pgoutput puts in 't' and 'b'
TupleData columns; both must convert to the same Arrow value, the compiled converters
must agree with the Python ones, and ``EXPECTED`` pins values computed independently.
A logical-replication test checks real pgoutput payloads (binary 'true' and 'false'),
including an enum and a domain learned through the registry.
"""

from __future__ import annotations

import decimal
import math
import os
import struct
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import types_data
import types_server
from arrow_values import plain
from pgoutput_codec import typecatalog as tc
from pgoutput_codec.typecatalog import ConversionError, arrow_type, convert_column, convert_value
from pgoutput_codec.typecatalog.registry import resolve


@pytest.fixture(scope="module")
def server():
    try:
        srv = types_server.start()
    except types_server.ServerUnavailable as e:
        pytest.skip(f"no PostgreSQL for type tests: {e}")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def conn(server):
    c = server.connect()
    yield c
    c.close()


def fetch(conn, sqltype, literals, settings):
    """[(type_oid, typmod, text_bytes, binary_bytes)] for ``(lit)::sqltype``."""
    cur = conn.cursor()
    for k, v in settings.items():
        cur.execute("SELECT set_config(%s, %s, false)", (k, v))
    try:
        q = "SELECT " + ", ".join(f"({lit})::{sqltype}" for lit in literals)
        out = []
        cur.execute(q, binary=False)
        rt = cur.pgresult
        text = [(rt.ftype(i), rt.fmod(i), rt.get_value(0, i)) for i in range(rt.nfields)]
        cur.execute(q, binary=True)
        rb = cur.pgresult
        for i, (oid, mod, t) in enumerate(text):
            assert rb.ftype(i) == oid
            out.append((oid, mod, t, rb.get_value(0, i)))
        return out
    finally:
        cur.execute("RESET ALL")


# ------------------------------------------------------------------ comparison helpers

def assert_same(a: tc.ConvertedColumn, b: tc.ConvertedColumn):
    assert a.values.type == b.values.type
    assert plain(a.values) == plain(b.values)
    sa = a.special.to_pylist() if a.special is not None else None
    sb = b.special.to_pylist() if b.special is not None else None
    assert sa == sb


def _expected_eq(got, want):
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return got == want and type(got) is type(want)


# ------------------------------------------------------------------ per-type agreement

@pytest.mark.parametrize("case", types_data.CASES, ids=[c[0] for c in types_data.CASES])
def test_text_and_binary_agree(conn, case):
    name, sqltype, literals, gucs = case
    rows = fetch(conn, sqltype, literals, gucs)
    oid, mod = rows[0][0], rows[0][1]
    assert all(r[0] == oid and r[1] == mod for r in rows)
    texts = [r[2] for r in rows]
    bins = [r[3] for r in rows]
    kinds_t = ["n" if t is None else "t" for t in texts]
    kinds_b = ["n" if b is None else "b" for b in bins]
    ct = convert_column(kinds_t, texts, oid, mod)
    cb = convert_column(kinds_b, bins, oid, mod)
    assert_same(ct, cb)
    assert ct.values.type == arrow_type(oid, mod, ndim=ct.values.type.num_fields and _depth(ct.values.type))
    # compiled and Python converters agree on both forms
    assert_same(ct, convert_column(kinds_t, texts, oid, mod, fast=False))
    assert_same(cb, convert_column(kinds_b, bins, oid, mod, fast=False))
    # mixed kinds in one column, with 'u' and 'n'
    mixed_k = [("t" if i % 2 else "b") if t is not None else "n" for i, t in enumerate(texts)] + ["u", "n"]
    mixed_d = [(t if i % 2 else b) for i, (t, b) in enumerate(zip(texts, bins, strict=True))] + [None, None]
    cm = convert_column(mixed_k, mixed_d, oid, mod)
    assert plain(cm.values)[:-2] == plain(ct.values)
    assert cm.values[-1].is_valid is False and cm.values[-2].is_valid is False
    # pinned values
    for i in range(len(literals)):
        if (name, i) in types_data.EXPECTED:
            want = types_data.EXPECTED[(name, i)]
            for kind, raw in (("t", texts[i]), ("b", bins[i])):
                got = convert_value(kind, raw, oid, mod)
                if isinstance(got, tuple):
                    got = got[0]
                assert _expected_eq(got, want), (kind, raw, got, want)
        sp = types_data.EXPECTED_SPECIAL.get((name, i))
        got_sp = ct.special[i].as_py() if ct.special is not None else None
        if sp is not None or got_sp is not None:
            assert got_sp == sp, (i, texts[i])


def _depth(t):
    d = 0
    while pa.types.is_list(t):
        d += 1
        t = t.value_type
    return d or 1


def test_text_form_is_what_pgoutput_parses_back(conn):
    """For the string-represented types, the binary form renders the server's own text."""
    for name, sqltype, literals, gucs in types_data.CASES:
        rows = fetch(conn, sqltype, literals, gucs)
        r = resolve(rows[0][0], rows[0][1])
        if r.conv in ("inet", "macaddr", "money", "bit", "pg_lsn", "point", "timetz", "char", "uuid") \
                or r.conv.startswith("range:") or (r.conv == "numeric" and rows[0][1] == -1):
            for oid, mod, t, b in rows:
                if t is not None:
                    assert convert_value("b", b, oid, mod) == t.decode(), (name, t, b)


def test_numeric_typmod_types():
    assert arrow_type(1700, ((10 << 16) | 2) + 4) == pa.decimal128(10, 2)
    assert arrow_type(1700, ((50 << 16) | 10) + 4) == pa.decimal256(50, 10)
    assert arrow_type(1700, ((100 << 16) | 10) + 4) == pa.string()
    assert arrow_type(1700, -1) == pa.string()
    assert tc.numeric_typmod(((5 << 16) | (-2 & 0x7FF)) + 4) == (5, -2)


# ------------------------------------------------------------------ the catalog itself

def test_catalog_matches_server(conn):
    cur = conn.cursor()
    oids = [t.oid for t in tc.TYPES]
    cur.execute("SELECT oid::int8, typname, typarray::int8 FROM pg_type WHERE oid = ANY(%s)", (oids,))
    rows = {oid: (name, arr) for oid, name, arr in cur.fetchall()}
    for t in tc.TYPES:
        name, arr = rows[t.oid]
        assert t.name == name and t.array_oid == arr, (t, name, arr)


def test_compiled_module_loaded():
    if os.environ.get("PGOUTPUT_CODEC_NO_EXTENSIONS"):
        pytest.skip("pure-Python mode")
    convert_column(["t"], [b"1"], 23)
    assert sys.modules["pgoutput_codec.typecatalog._convert"].__file__.endswith((".so", ".pyd"))


# ------------------------------------------------------------------ errors

BAD = [
    (23, "t", b"12x"), (23, "t", b"2147483648"), (23, "b", b"\x00\x01"), (21, "t", b""), (16, "t", b"true"),
    (701, "t", b"1.5 "), (701, "b", b"\x00" * 4), (1082, "t", b"2020-02-30"), (1082, "t", b"2020-13-01"),
    (1114, "t", b"2020-01-01T00:00:00"), (1184, "t", b"2020-01-01 00:00:00"), (1083, "t", b"25:00:00"),
    (1700, "t", b"1.234"), (1700, "t", b"1e5"), (1700, "b", b"\x00\x01"), (2950, "t", b"not-a-uuid"),
    (2950, "b", b"\x00" * 15), (17, "t", b"\\x0"), (17, "t", b"\\xzz"), (3802, "b", b"\x02{}"),
    (25, "t", b"\xff\xfe"), (1186, "b", b"\x00" * 15), (1007, "t", b"{1,2"), (1007, "b", b"\x00\x00\x00\x01"),
]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("oid,kind,raw", BAD)
def test_bad_values_raise_with_index(oid, kind, raw, fast):
    mod = ((10 << 16) | 2) + 4 if oid == 1700 else -1
    with pytest.raises(ConversionError) as ei:
        convert_column(["n", "u", kind], [None, None, raw], oid, mod, fast=fast)
    e = ei.value
    assert e.index == 2 and e.type_oid == oid and e.kind == kind
    assert f"value 2 ({e.type_name}, type OID {oid}" in str(e)


def test_bad_kind_and_null_data():
    with pytest.raises(ConversionError, match="kind"):
        convert_column(["x"], [b"1"], 23)
    with pytest.raises(ConversionError, match="null data"):
        convert_column(["t"], [None], 23)
    with pytest.raises(ValueError):
        convert_column(["t", "t"], [b"1"], 23)


def test_sliced_inputs():
    kinds = pa.array(["t", "b", "t", "n", "t"])
    data = pa.array([b"1", struct.pack(">i", 2), b"3", None, b"5"], pa.binary())
    got = convert_column(kinds[1:], data[1:], 23).values
    assert got.to_pylist() == [2, 3, None, 5]


# ------------------------------------------------------------------ registry: enum, domain, unknown

def test_unknown_type_text_and_binary():
    assert convert_column(["t", "n"], [b"(1,2)", None], 999999).values.type == pa.string()
    col = convert_column(["b", "t"], [b"\x01\x02", b"xy"], 999999)
    assert col.values.type == pa.binary() and col.values.to_pylist() == [b"\x01\x02", b"xy"]


def test_registry_enum_domain_array():
    reg = tc.TypeRegistry()
    reg.add_type_message(70000, "public", "mood")
    reg.register_enum(70000, ["sad", "ok"], array_oid=70001)
    reg.register_domain(70002, 1700, ((10 << 16) | 2) + 4, name="price")
    reg.register_domain(70003, 70002, name="price2")
    assert arrow_type(70000, -1, reg) == pa.string()
    assert convert_value("b", b"sad", 70000, -1, reg) == "sad"
    assert arrow_type(70001, -1, reg) == pa.list_(pa.string())
    assert arrow_type(70003, -1, reg) == pa.decimal128(10, 2)
    assert str(convert_value("t", b"1.50", 70003, -1, reg)) == "1.50"


def _parse_pgoutput(payload, rels):
    """Just enough pgoutput (v1, no streaming) for the test: R, Y and I messages."""
    def cstr(p):
        e = payload.index(b"\0", p)
        return payload[p:e].decode(), e + 1
    tag = payload[:1]
    if tag == b"R":
        relid, = struct.unpack_from(">I", payload, 1)
        _, p = cstr(5)
        _, p = cstr(p)
        p += 1
        ncols, = struct.unpack_from(">h", payload, p)
        p += 2
        cols = []
        for _ in range(ncols):
            p += 1
            cname, p = cstr(p)
            toid, tmod = struct.unpack_from(">Ii", payload, p)
            p += 8
            cols.append((cname, toid, tmod))
        rels[relid] = cols
        return None
    if tag == b"Y":
        oid, = struct.unpack_from(">I", payload, 1)
        nsp, p = cstr(5)
        name, p = cstr(p)
        return ("Y", oid, nsp, name)
    if tag == b"I":
        relid, = struct.unpack_from(">I", payload, 1)
        assert payload[5:6] == b"N"
        ncols, = struct.unpack_from(">h", payload, 6)
        p, vals = 8, []
        for _ in range(ncols):
            k = payload[p:p + 1].decode()
            p += 1
            if k in "tb":
                n, = struct.unpack_from(">i", payload, p)
                vals.append((k, payload[p + 4:p + 4 + n]))
                p += 4 + n
            else:
                vals.append((k, None))
        assert p == len(payload)
        return ("I", relid, vals)
    return None


def test_logical_replication_payloads(conn):
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS tt; DROP TYPE IF EXISTS mood; DROP DOMAIN IF EXISTS price")
    cur.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    cur.execute("CREATE DOMAIN price AS numeric(10,2) CHECK (VALUE >= 0)")
    cur.execute("CREATE TABLE tt (id int PRIMARY KEY, m mood, ms mood[], p price, ts timestamptz, d date,"
                " n numeric, a text[], b bytea, j jsonb, iv interval, u uuid, t timetz)")
    cur.execute("CREATE PUBLICATION pub_types FOR TABLE tt")
    cur.execute("SELECT pg_create_logical_replication_slot('types_slot', 'pgoutput')")
    try:
        cur.execute("SET TimeZone = 'America/St_Johns'")
        cur.execute("""INSERT INTO tt VALUES
            (1, 'happy', '{sad,ok}', 12.5, '2020-06-01 12:00+00', '2020-01-01', 'NaN', '{"a,b",NULL,"NULL"}',
             '\\x00ff', '{"k": [1, 2]}', '1 mon -2 days 03:00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '10:00+02'),
            (2, NULL, '{}', 0, 'infinity', '-infinity', '-1.5e-3', '[0:1]={x,y}', '', 'null', '-00:00:01',
             NULL, '00:00-14')""")
        results = {}
        for binary in ("true", "false"):
            cur.execute("SELECT data FROM pg_logical_slot_peek_binary_changes('types_slot', NULL, NULL,"
                        " 'proto_version', '1', 'publication_names', 'pub_types', 'binary', %s)", (binary,))
            rels, inserts, ymsgs = {}, [], []
            for (payload,) in cur.fetchall():
                m = _parse_pgoutput(bytes(payload), rels)
                if m and m[0] == "I":
                    inserts.append(m)
                elif m:
                    ymsgs.append(m)
            results[binary] = (rels, inserts, ymsgs)
        cur.execute("RESET TimeZone")
        cur.execute("SELECT 'price'::regtype::oid::int8, 'mood'::regtype::oid::int8, '_mood'::regtype::oid::int8")
        price_oid, mood_oid, moods_oid = cur.fetchone()
        reg = tc.TypeRegistry().load_from_connection(conn)
        converted = {}
        for binary, (rels, inserts, ymsgs) in results.items():
            # Type messages: a domain is announced under its base type's name ("" = pg_catalog)
            assert {(y[1], y[2], y[3]) for y in ymsgs} == {
                (price_oid, "", "numeric"), (mood_oid, "public", "mood"), (moods_oid, "public", "_mood")}
            only_y = tc.TypeRegistry()
            for y in ymsgs:
                reg.add_type_message(y[1], y[2], y[3])
                only_y.add_type_message(y[1], y[2], y[3])
            # from Type messages alone: the domain is an unconstrained numeric (no typmod
            # is sent), the enum is unknown (text string, or raw bytes in binary mode)
            assert arrow_type(price_oid, -1, only_y) == pa.string()
            assert arrow_type(moods_oid, -1, only_y) == pa.list_(pa.string())
            cols = rels[inserts[0][1]]
            cc = {}
            for ci, (cname, toid, tmod) in enumerate(cols):
                kinds = [ins[2][ci][0] for ins in inserts]
                data = [ins[2][ci][1] for ins in inserts]
                if binary == "true" and cname not in ("m",):
                    assert "b" in kinds or all(k == "n" for k in kinds), cname
                cc[cname] = convert_column(kinds, data, toid, tmod, reg)
            converted[binary] = cc
        for cname in converted["true"]:
            assert_same(converted["true"][cname], converted["false"][cname])
        c = converted["true"]
        assert c["m"].values.to_pylist() == ["happy", None]
        assert c["ms"].values.to_pylist() == [["sad", "ok"], []]
        assert c["p"].values.type == pa.decimal128(10, 2)
        assert [str(x) for x in c["p"].values.to_pylist()] == ["12.50", "0.00"]
        assert c["ts"].special.to_pylist() == [None, "infinity"]
        assert c["d"].special.to_pylist() == [None, "-infinity"]
        assert c["n"].values.to_pylist() == ["NaN", "-0.0015"]
        assert c["a"].values.to_pylist() == [["a,b", None, "NULL"], ["x", "y"]]
        assert c["a"].special.to_pylist() == [None, "[0:1]"]
        assert c["b"].values.to_pylist() == [b"\x00\xff", b""]
        assert c["t"].values.to_pylist() == ["10:00:00+02", "00:00:00-14"]
        assert c["iv"].values.to_pylist()[1] == pa.MonthDayNano([0, 0, -1_000_000_000])
    finally:
        cur.execute("SELECT pg_drop_replication_slot('types_slot')")
        cur.execute("DROP PUBLICATION pub_types")


# ------------------------------------------------------------------ compiled vs Python on mutated input

_SEEDS = {
    23: [b"123", b"-2147483648", b"\x00\x00\x00\x07"],
    20: [b"9223372036854775807", b"\x00" * 8],
    701: [b"1.5", b"-Infinity", b"NaN", b"1e-05"],
    1700: [b"-12345.67", b"NaN", bytes.fromhex("0003000140000003000109291a7c")],
    1082: [b"2020-02-29", b"0044-03-15 BC", b"infinity", b"\x00\x00\x00\x01"],
    1184: [b"2020-06-01 17:30:00.123+05:30", b"0044-03-15 12:00:00-03:30:52 BC", b"infinity"],
    1114: [b"2020-06-01 17:30:00.5", b"294276-12-31 23:59:59.999999"],
    1083: [b"24:00:00", b"12:34:56.000001"],
    1186: [b"1 year 2 mons -3 days +04:05:06.789", b"-00:00:01", b"infinity"],
    2950: [b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", bytes(range(16))],
    17: [b"\\x00ff", b"\\x", b"ab"],
    3802: [b'\x01{"a": 1}', b'{"a": 1}'],
    16: [b"t", b"f", b"\x01"],
}


@st.composite
def _mutated(draw):
    oid = draw(st.sampled_from(sorted(_SEEDS)))
    raw = bytearray(draw(st.sampled_from(_SEEDS[oid])))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.integers(0, 2))
        pos = draw(st.integers(0, len(raw)))
        if op == 0 and raw:
            del raw[min(pos, len(raw) - 1)]
        elif op == 1:
            raw.insert(pos, draw(st.sampled_from(b"0123456789-+:. eEBCx\x00\xff")))
        elif raw:
            raw[min(pos, len(raw) - 1)] = draw(st.integers(0, 255))
    kind = draw(st.sampled_from("tb"))
    return oid, kind, bytes(raw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
# drawn by CI at random: a numeric whose dscale (0) hides digits it carries
@example((1700, "b", bytes.fromhex("0003000140000000000109291a7c")))
@example((1700, "b", bytes.fromhex("0003000140004000000109291a7c")))
@example((1083, "t", b"12:34:66.000001"))    # 66 seconds: the Python twin must not carry them over
@example((1186, "t", b""))                   # no field: not an interval (the compiled one gave 0)
@example((1186, "t", b"1 day 04:05:0604:05:06"))   # two time parts, run together
def test_compiled_and_python_agree_on_mutations(case):
    oid, kind, raw = case
    mod = ((10 << 16) | 2) + 4 if oid == 1700 else -1
    results = []
    for fast in (True, False):
        try:
            col = convert_column(["n", kind], [None, raw], oid, mod, fast=fast)
            results.append(("ok", plain(col.values), col.special.to_pylist() if col.special is not None else None))
        except ConversionError as e:
            results.append(("error", e.index))
    assert results[0] == results[1], (oid, kind, raw)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("oid,text,want", [
    (700, b"1e39", None), (700, b"-1e39", None), (700, b"1e-50", None), (701, b"1e400", None),
    (701, b"-1e-400", None), (700, b"1e-40", 9.99994610111476e-41), (700, b"0e-400", 0.0),
    (700, b"3.4028235e38", 3.4028234663852886e+38), (701, b"Infinity", math.inf),
])
def test_a_float_text_out_of_range_is_an_error_not_infinity_or_zero(fast, oid, text, want):
    """float4in/float8in refuse a finite text that overflows to infinity or underflows to
    zero (a denormal is a value): so do the converters, instead of a silently different
    number (they gave inf and 0.0)."""
    if want is None:
        with pytest.raises(ConversionError, match="out of range for type"):
            convert_column(["t"], [text], oid, fast=fast)
    else:
        assert convert_column(["t"], [text], oid, fast=fast).values.to_pylist() == [want]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("dscale,want,text", [
    (3, None, "-12345.678"),                # more fraction digits than numeric(10,2) holds
    (2, decimal.Decimal("-12345.67"), "-12345.67"),
    (1, decimal.Decimal("-12345.60"), "-12345.6"),
    (0, decimal.Decimal("-12345.00"), "-12345"),
])
def test_a_binary_numeric_drops_the_digits_its_dscale_hides(fast, dscale, want, text):
    """numeric_recv truncates (toward zero, never rounds) the digits a send form carries
    beyond its dscale, then fits the column's typmod; a server never sends such a form, but
    a mutated or hand-made payload must read as the server would read it, in both twins."""
    raw = bytes.fromhex("00030001" "4000") + dscale.to_bytes(2, "big") + bytes.fromhex("000109291a7c")
    mod = ((10 << 16) | 2) + 4
    if want is None:
        with pytest.raises(ConversionError, match="value 0"):
            convert_column(["b"], [raw], 1700, mod, fast=fast)
    else:
        assert convert_column(["b"], [raw], 1700, mod, fast=fast).values.to_pylist() == [want]
    assert convert_column(["b"], [raw], 1700, -1, fast=fast).values.to_pylist() == [text]
    for bad in (-1, 0x4000):
        with pytest.raises(ConversionError, match="value 0"):
            convert_column(["b"], [raw[:6] + bad.to_bytes(2, "big", signed=True) + raw[8:]], 1700, mod, fast=fast)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("oid,text,ok", [
    (1083, b"24:00:00", True), (1083, b"12:34:60", True), (1083, b"12:34:61", False),
    (1083, b"12:60:00", False), (1083, b"25:00:00", False),
    (1114, b"2020-01-01 24:00:00", True), (1114, b"2020-01-01 24:00:00.5", False),
    (1114, b"2020-01-01 25:00:00", False), (1114, b"2020-01-01 12:60:00", False),
    (1114, b"2020-01-01 12:00:61", False), (1184, b"2020-01-01 12:00:61+00", False),
    (1082, b"0001-01-01 BC", True), (1082, b"0000-01-01", False), (1082, b"0000-01-01 BC", False),
    (1186, b"1 day 30:00:00", True), (1186, b"30:61:00", False),
])
def test_clock_fields_are_bounded_as_the_server_bounds_them(fast, oid, text, ok):
    """datetime.c: minutes to 59, a leap second 60, a clock to 24:00:00 (an interval's hours
    are not bounded), and no year 0 in AD/BC notation. Both twins refuse the same values."""
    if ok:
        assert convert_column(["t"], [text], oid, -1, fast=fast).values.null_count == 0
    else:
        with pytest.raises(ConversionError, match="value 0"):
            convert_column(["t"], [text], oid, -1, fast=fast)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("text", [b"04:05:06.8\n", b"1 years +04:05:06.8\n", b"1 years\n", b"2 days\t"])
def test_an_interval_ending_in_a_newline_is_refused_by_both_twins(fast, text):
    """Fields of an interval are separated by spaces: any other trailing whitespace makes
    the value malformed, alike in the compiled and the Python parser."""
    with pytest.raises(ConversionError, match="value 0"):
        convert_column(["t"], [text], 1186, -1, fast=fast)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("days,ok", [
    (2**31 - 2, False), (2**31 - 10957, False), (2**31 - 1 - 10957, True),
    (-2**31 + 1, True), (0, True),
])
def test_a_binary_date_beyond_date32_is_an_error_naming_the_value(fast, days, ok):
    """A binary date counts days from 2000-01-01; shifted to 1970 it can leave int32. Both
    twins refuse it as the value's error, never as a column-wide Arrow failure."""
    raw = struct.pack(">i", days)
    if ok:
        v = convert_column(["b"], [raw], 1082, -1, fast=fast).values
        assert v.cast(pa.int32()).to_pylist() == [days + 10957]
    else:
        with pytest.raises(ConversionError, match="value 0.*date32 range") as ei:
            convert_column(["b"], [raw], 1082, -1, fast=fast)
        assert ei.value.index == 0


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("text,ok", [
    (b"1220615931261785:00:00", False),                # hours * 3.6e9 would wrap int64
    (b"768614336404564650 years 768614336404564650 years", False),   # years * 12 would wrap
    (b"2147483647 years", False), (b"2147483648 days", False), (b"-2147483649 mons", False),
    (b"1073741824 mons 1073741824 mons", False),      # each field fits, the sum does not
    (b"2562048:00:00", False),                         # beyond int64 nanoseconds
    (b"2147483647 mons", True), (b"-2147483648 days", True), (b"178956970 years 7 mons", True),
    (b"-2562047:47:16.854775", True),                  # the last time part Arrow holds
])
def test_an_interval_beyond_arrow_is_an_error_not_a_wrapped_value(fast, text, ok):
    """Interval fields are checked before they are scaled or summed: a value Arrow's
    month_day_nano cannot hold is an error naming the value, never a wrapped number."""
    if ok:
        v = convert_column(["t"], [text], 1186, -1, fast=fast).values
        assert v.to_pylist() == convert_column(["t"], [text], 1186, -1, fast=not fast).values.to_pylist()
    else:
        with pytest.raises(ConversionError, match="value 0.*(out of int32|overflows int64)"):
            convert_column(["t"], [text], 1186, -1, fast=fast)


@pytest.mark.parametrize("oid,kind,vals", [
    (23, "t", [b"1", b"-7", b"2147483647", None]),
    (25, "t", [b"abc", b"", "é".encode(), None]),
    (1700, "t", [b"1.50", b"NaN", b"-2", None]),
    (1184, "t", [b"2024-01-02 03:04:05+05:30", b"infinity", b"1999-12-31 23:59:59.5+00", None]),
    (17, "t", [b"\\x00ff", b"\\x", b"\\xdead", None]),
    (16, "b", [b"\x01", b"\x00", b"\x01", None]),
    (1007, "t", [b"{1,2}", b"{NULL}", b"{}", None]),           # int4[]: the Python converters
])
def test_convert_at_index_equals_take_then_convert(oid, kind, vals):
    """``index=`` reads values in place (change rows' tuple children); it must give what
    gathering the values first and converting them gives, with -1 as null."""
    kinds = pa.array(["n" if v is None else kind for v in vals], pa.string())
    data = pa.array(vals, pa.binary())
    index = np.array([2, -1, 0, 3, 1, 1, -1, 2], dtype=np.int64)
    take = pa.array(index, pa.int64(), mask=index < 0)
    want = convert_column(pc.fill_null(kinds.take(take), "n"), data.take(take), oid, -1)
    got = convert_column(kinds, data, oid, -1, index=index)
    assert got.values.equals(want.values)
    assert (got.special is None) == (want.special is None)
    if got.special is not None:
        assert got.special.equals(want.special)


def test_convert_at_index_failure_names_the_value():
    kinds = pa.array(["t", "t", "t"], pa.string())
    data = pa.array([b"1", b"x", b"3"], pa.binary())
    with pytest.raises(ConversionError, match="x"):
        convert_column(kinds, data, 23, -1, index=np.array([0, 2, 1], dtype=np.int64))
    with pytest.raises(IndexError):
        convert_column(kinds, data, 23, -1, index=np.array([3], dtype=np.int64))


def test_convert_columns_keeps_good_columns_when_one_fails():
    """Columns converted together: a bad value fails its own column only."""
    kinds = pa.array(["t"] * 6, pa.string())
    data = pa.array([b"1", b"2024-01-01", b"2", b"not a date", b"3", b"2024-02-29"], pa.binary())
    ints, dates = np.array([0, 2, 4]), np.array([1, 3, 5])
    out = tc.convert_columns(kinds, data, [(23, -1), (1082, -1)], indexes=[ints, dates])
    assert out[0].values.to_pylist() == [1, 2, 3]
    assert isinstance(out[1], ConversionError) and out[1].index == 1


@pytest.mark.parametrize("text,ok", [
    (b"-9223372036854775808", True), (b"9223372036854775807", True),
    (b"9223372036854775808", False), (b"-9223372036854775809", False), (b"-922337203685477581", True),
])
def test_int8_text_bounds(text, ok):
    if ok:
        assert convert_value("t", text, 20) == int(text)
    else:
        with pytest.raises(ConversionError):
            convert_value("t", text, 20)


def test_convert_columns_with_shared_row_offsets():
    """``(offsets, k)`` indexes (columns sharing one row layout) equal full index arrays."""
    kinds = pa.array(["t", "t", "n", "t", "t", "t"], pa.string())
    data = pa.array([b"1", b"a", None, b"b", b"3", b"c"], pa.binary())
    offsets = np.array([0, -1, 2, 4], dtype=np.int64)
    shared = tc.convert_columns(kinds, data, [(23, -1), (25, -1)], indexes=[(offsets, 0), (offsets, 1)])
    full = tc.convert_columns(kinds, data, [(23, -1), (25, -1)],
                              indexes=[np.array([0, -1, 2, 4]), np.array([1, -1, 3, 5])])
    assert shared[0].values.to_pylist() == full[0].values.to_pylist() == [1, None, None, 3]
    assert shared[1].values.to_pylist() == full[1].values.to_pylist() == ["a", None, "b", "c"]
    with pytest.raises(IndexError):
        tc.convert_columns(kinds, data, [(23, -1)], indexes=[(offsets, 2)])


@pytest.mark.parametrize("tail", [0, 1, 40])
def test_short_text_values_every_length_and_position(tail):
    """Text values of 0-20 bytes with a non-ASCII or an invalid byte at every position:
    the 16-byte fast path (two overlapping loads, fixed copy) agrees with strict UTF-8,
    also for values at the very end of the data buffer (``tail``: bytes after them)."""
    vals = []
    for n in range(21):
        vals.append(b"a" * n)
        for at in range(max(n - 1, 0)):
            vals.append(b"a" * at + "é".encode() + b"a" * (n - at - 2))
    vals.append(b"x" * tail)
    got = convert_column(pa.array(["t"] * len(vals)), pa.array(vals, pa.binary()), 25, -1).values.to_pylist()
    assert got == [v.decode() for v in vals]
    for n in range(1, 21):
        for at in range(n):
            bad = b"a" * at + b"\xff" + b"a" * (n - at - 1)
            for pair in ([b"ok", bad], [bad, b"ok" * 10]):   # last in the buffer, and not
                with pytest.raises(ConversionError, match="UTF-8"):
                    convert_column(pa.array(["t", "t"]), pa.array(pair, pa.binary()), 25, -1)


def test_indexed_text_output_grows_past_its_estimate():
    """Indexed variable-width columns start from the child's average value size and grow:
    a long-valued column next to a short-valued one, and uuids (36 text bytes from 16)."""
    n = 3000
    short, long_ = [b"s"] * n, [("ü" * 400 + str(i)).encode() for i in range(n)]
    uu = [bytes(range(16))] * n
    data = [v for row in zip(short, long_, uu, strict=True) for v in row]
    kinds = pa.array(["t", "t", "b"] * n)
    base = np.arange(0, 3 * n, 3, dtype=np.int64)
    out = tc.convert_columns(kinds, pa.array(data, pa.binary()), [(25, -1), (25, -1), (2950, -1)],
                             indexes=[(base, 0), (base, 1), (base, 2)])
    assert out[0].values.to_pylist() == ["s"] * n
    assert out[1].values.to_pylist() == [v.decode() for v in long_]
    assert out[2].values.to_pylist() == ["00010203-0405-0607-0809-0a0b0c0d0e0f"] * n


_DEEP_ARRAYS = r'''
import json, struct, sys
import pyarrow as pa
from pgoutput_codec import (Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, decode_changes,
                            decode_table_changes, encode_message, snapshot)
deep = lambda d: b"{" * d + b"1" + b"}" * d
seven = struct.pack(">iiI", 7, 0, 23) + struct.pack(">ii", 1, 1) * 7 + struct.pack(">ii", 4, 5)
tables = {"w": [("t", deep(10000)), ("t", deep(7)), ("t", b"{{1,2}}"), ("b", seven),
                ("t", b"[0:0][1:1][1:1][1:1][1:1][1:1][1:1]=" + deep(7))],
          "v": [("t", deep(10000))]}
msgs = [Begin(final_lsn=10, commit_ts=10, xid=10)]
for rid, (name, values) in enumerate(tables.items(), 16500):
    msgs.append(Relation(relation_id=rid, namespace="public", relation_name=name, replica_identity="d",
                         columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "a", 1007, -1))))
    msgs += [Insert(relation_id=rid, new_tuple=(TupleColumn("t", str(i).encode()), TupleColumn(k, v)))
             for i, (k, v) in enumerate(values)]
msgs.append(Commit(commit_lsn=10, end_lsn=11, commit_ts=10))
data = [encode_message(m) for m in msgs]
arc = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
out = {}
for name in tables:
    snap = snapshot(decode_changes(arc), "public." + name).sort_by("id")
    after = decode_table_changes(arc, "public." + name).column("after").combine_chunks()
    for how, cols in (("snapshot", dict(zip(snap.column_names, snap.columns))),
                      ("decode_table_changes", dict(zip([f.name for f in after.type], after.flatten())))):
        out[name + " " + how] = {"type": str(cols["a"].type), "a": cols["a"].to_pylist(),
                                 "special": cols["a__special"].to_pylist() if "a__special" in cols else None}
print(json.dumps(out, default=repr))
'''


def test_arrays_deeper_than_six_dimensions_are_refused_per_value(tmp_path):
    """PostgreSQL arrays have at most 6 dimensions (MAXDIM): a text array nested deeper (up
    to 10,000 braces, a few KB), or a bounds prefix naming 7, is refused like a binary one
    whose header says 7: that value is null with its reason, the column's other arrays typed
    as theirs; the process never crashes (run in a subprocess so that a crash fails here)."""
    import json
    import subprocess

    script = tmp_path / "deep.py"
    script.write_text(_DEEP_ARRAYS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    got = json.loads(done.stdout)
    assert len(got) == 4
    for how, t in got.items():
        typed = [[1, 2]] if how.startswith("w") else None
        assert t["type"] == ("list<item: list<item: int32>>" if typed else "list<item: int32>"), how
        want = [None, None, typed, None, None] if typed else [None]
        assert t["a"] == want, how
        for v, note in zip(want, t["special"], strict=True):
            if v is not None:
                assert note is None, how
            else:
                assert note.startswith("refused: ") and "more than 6 dimensions" in note, (how, note)


def test_a_list_depth_beyond_six_dimensions_is_refused(tmp_path):
    """``ndim=`` asks for lists that deep: more than PostgreSQL's 6 dimensions is a
    ValueError naming the limit, for the type and for a column (even one of nulls only),
    not a type Arrow crashes on (run in a subprocess so that a crash fails here)."""
    import subprocess

    code = ("import pytest\n"
            "from pgoutput_codec.typecatalog import arrow_type, convert_column\n"
            "assert str(arrow_type(1007, ndim=6)).count('list') == 6\n"
            "for call in (lambda: arrow_type(1007, ndim=7), lambda: convert_column(['n'], [None], 1007, ndim=10000)):\n"
            "    with pytest.raises(ValueError, match='at most 6 dimensions'):\n"
            "        call()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
