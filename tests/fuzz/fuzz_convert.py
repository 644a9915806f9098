#!/usr/bin/env python
"""atheris fuzz harness for the column converters: the compiled converter of every type
that has one (``_convert.pyx``) against the Python parsers, text and binary values.

A crash is: any exception other than ``ConversionError`` from either, one raising where
the other converts, errors at different value indexes, results that differ (values,
types or special markers; temporal values as their storage integers, floats as their
bits), an Arrow result that fails ``validate(full=True)``, a segfault.

    python tests/fuzz/fuzz_convert.py -max_total_time=60 [corpus_dir ...] [libFuzzer flags]

Input layout: byte 0 picks the type (the types with a compiled converter, then their
array types, then the extension types with one and their arrays, at OIDs a registry
gives them, then the nested types: an enum, a composite, the built-in ranges and
multiranges, arrays of them, split by ``_codecs/composites.pxi`` / ``ranges.pxi``
against their plain-Python twins), byte 1 the form (bit 0: binary, bit 1: mixed kinds by value, bit 2: a
typmod — numeric(10,2), varchar(5), timestamp(3) — bits 3-4: values read through an
index); the rest is the values, separated by ``SEP``.
"""

from __future__ import annotations

import os
import struct
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the import paths)

with atheris.instrument_imports(include=["pgoutput_codec"]):
    import numpy as np
    import pyarrow as pa

    from pgoutput_codec.typecatalog import ConversionError, TypeRegistry, convert_column
    from pgoutput_codec.typecatalog.facts import BY_EXTENSION, TYPES

from arrow_values import plain  # noqa: E402  (after sys.path set-up)

SEP = b"\xfe\xfd"
FAST = [t for t in TYPES if t.fast]
#: the extension types with a compiled converter, at OIDs 90000 + k (their arrays 91000 + k)
REGISTRY = TypeRegistry()
EXT = {}
for _k, _t in enumerate(t for t in BY_EXTENSION.values() if t.fast):
    REGISTRY.register_base(90000 + _k, _t.name, "public", _t.extension, None, 91000 + _k)
    EXT[_t.name] = 90000 + _k
#: the nested types: an enum, a composite (with an enum, a range and an array in it); the
#: built-in ranges and multiranges; arrays of them
REGISTRY.register_enum(70000, ["sad", "ok", ""], array_oid=70001)
REGISTRY.register_composite(70010, [("a", 23, -1), ("b", 25, -1), ("d", 1082, -1), ("m", 70000, -1),
                                    ("r", 3904, -1), ("x", 1007, -1)], array_oid=70011)
NESTED = [70000, 70001, 70010, 70011, 3904, 3905, 3912, 3910, 4451, 6150, 4535]
OIDS = ([t.oid for t in FAST] + [t.array_oid for t in FAST] + sorted(EXT.values())
        + [o + 1000 for o in sorted(EXT.values())] + NESTED)
TYPMOD = {1700: ((10 << 16) | 2) + 4, 1043: 5 + 4, 1042: 5 + 4, 1114: 3, 1184: 3, 1083: 3, 1186: 3,
          EXT["geometry"]: 1107460, EXT["vector"]: 3}


def _has_time(t) -> bool:
    return pa.types.is_time(t) or (pa.types.is_list(t) and _has_time(t.value_type))


def _outcome(kinds, data, oid, mod, index, fast):
    try:
        col = convert_column(kinds, data, oid, mod, REGISTRY, fast=fast, index=index)
    except ConversionError as e:
        return ("error", e.index)
    # (a time of 24:00:00 is PostgreSQL's last time, one past Arrow's range: docs/limits.md)
    col.values.validate(full=not _has_time(col.values.type))
    if col.special is not None:
        col.special.validate(full=True)
    if col.srid is not None:      # a geometry's SRIDs, where its column's typmod fixes none
        col.srid.validate(full=True)
    return ("ok", str(col.values.type), plain(col.values),
            col.special.to_pylist() if col.special is not None else None,
            col.srid.to_pylist() if col.srid is not None else None)


def test_one_input(data: bytes):
    if len(data) < 2:
        return
    oid = OIDS[data[0] % len(OIDS)]
    form = data[1]
    values = data[2:].split(SEP)
    kind = "b" if form & 1 else "t"
    kinds = [("t" if i % 2 else "b") if form & 2 else kind for i in range(len(values))] + ["n", "u"]
    raw = values + [None, None]
    elem = oid if oid in TYPMOD or oid in NESTED else next((t.oid for t in FAST if t.array_oid == oid), oid)
    elem = oid - 1000 if oid - 1000 in EXT.values() else elem
    mod = TYPMOD.get(elem, -1) if form & 4 else -1
    index = None
    if form & 24:   # values read in place through an index: reversed, with nulls (-1)
        index = np.array([-1 if i % 3 == 2 else i for i in reversed(range(len(raw)))], np.int64)
    kinds, raw = pa.array(kinds, pa.string()), pa.array(raw, pa.binary())
    fast = _outcome(kinds, raw, oid, mod, index, True)
    slow = _outcome(kinds, raw, oid, mod, index, False)
    if fast != slow:
        raise AssertionError(f"type {oid} typmod {mod} form {form}: compiled {fast!r} != Python {slow!r}")


def seeds() -> list:
    samples = {
        16: [b"t", b"\x01"], 17: [b"\\x00ff", b"ab"], 20: [b"9223372036854775807", b"\x00" * 8],
        21: [b"-32768", b"\x7f\xff"], 23: [b"123", b"\x00\x00\x00\x07"], 25: [b"abc", b"\xc3\xa9"],
        26: [b"4294967295", b"\xff\xff\xff\xff"], 700: [b"1.5", b"NaN"], 701: [b"-Infinity", b"1e-05"],
        1700: [b"-12345.67", bytes.fromhex("0003000140000003000109291a7c")],
        1082: [b"2020-02-29", b"0044-03-15 BC", b"\x00\x00\x00\x01"],
        1083: [b"24:00:00", b"12:34:56.000001"], 1114: [b"2020-06-01 17:30:00.5", b"infinity"],
        1184: [b"2020-06-01 17:30:00.123+05:30", b"0044-03-15 12:00:00-03:30:52 BC"],
        1186: [b"1 year 2 mons -3 days +04:05:06.789", b"-00:00:01"],
        2950: [b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", bytes(range(16))],
        3802: [b'\x01{"a": 1}', b'{"a": 1}'],
    }
    ext = {
        "ltree": [b"Top.Science", b"\x01a.b"], "isbn13": [b"978-0-393-04002-9"],
        "hstore": [b'"a"=>"1", "b"=>NULL', b"\x00\x00\x00\x01\x00\x00\x00\x01a\xff\xff\xff\xff"],
        "vector": [b"[1,2.5,-3e-10]", b"\x00\x01\x00\x00?\x80\x00\x00"],
        "halfvec": [b"[1,65504]", b"\x00\x01\x00\x00<\x00"],
        "sparsevec": [b"{1:1.5,3:2}/5", b"\x00\x00\x00\x05" + bytes(8)],
        "geometry": [b"0101000020E6100000000000000000F03F0000000000000040",
                     bytes.fromhex("0104000060110F0000010000000101000040000000000000F03F00000000000000400000000000000840")],
    }
    samples.update({EXT[name]: vals for name, vals in ext.items()})
    out = []
    for oid, vals in samples.items():
        pick = OIDS.index(oid)
        for form in (0, 1, 4, 8):
            out.append(bytes([pick, form]) + SEP.join(vals))
        arr = OIDS.index(oid + 1000 if oid in EXT.values() else next(t.array_oid for t in FAST if t.oid == oid))
        out.append(bytes([arr, 0]) + b"{" + b",".join(vals[:1]) + b",NULL}" + SEP + b"{{" + vals[0] + b"}}")
    nested = {
        70000: [b"ok", b"", b"zz"], 70001: [b'{sad,"",NULL}', b"{{ok},{sad}}"],
        70010: [b'(1,"a ""b"" \\\\ c",infinity,ok,"[1,3)","{1,NULL}")', b"(,,,,,)",
                struct.pack(">iIii", 2, 23, 4, 7) + struct.pack(">Ii", 3904, 1) + b"\x01"],
        70011: [b'{"(1,x,,,empty,{})",NULL}'],
        3904: [b"[1,5)", b"empty", b"(,5]", b"\x02" + struct.pack(">iiii", 4, 1, 4, 5)],
        3905: [b'{"[1,2)",NULL,empty}'], 3912: [b"[-infinity,2020-01-01)", b"\x18"],
        3910: [b'["2020-01-01 00:00:00+00",)'], 4451: [b"{[1,3),[5,7)}", b"{}", struct.pack(">i", 0)],
        6150: [b'{"{[1,2)}"}'], 4535: [b"{[2020-01-01,infinity)}"],
    }
    for oid, vals in nested.items():
        for form in (0, 1, 8):
            out.append(bytes([OIDS.index(oid), form]) + SEP.join(vals))
    return out


if __name__ == "__main__":
    harness.main(sys.argv, "convert", seeds, test_one_input)
