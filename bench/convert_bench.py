"""Micro-benchmark of typecatalog.convert_column: values/s for 1M-value columns.

    .venv/bin/python bench/convert_bench.py [--n 1000000] [--repeat 3] [--python] [--only hstore,ltree]

Columns are synthetic but in the exact text/binary forms PostgreSQL sends (int4,
text, numeric(12,2), timestamptz, date, uuid, bool, int8, float8, time, interval, bytea,
jsonb, and the extension types ltree, hstore, vector(16), halfvec(16), sparsevec,
geometry(Point,4326) ("geometry(4326)"): a column of each family of compiled converters; an
enum, a composite, ranges and a multirange: the nested families, split by compiled code);
``--python`` also times the
plain-Python converters (on 1/20 of the values, it is slow).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pgoutput_codec.typecatalog import TypeRegistry, convert_column  # noqa: E402

US_2000 = 946684800000000

#: the extension types, at OIDs of their own (a database gives them its own)
REGISTRY = TypeRegistry()
for _oid, _ext, _name in ((90001, "ltree", "ltree"), (90002, "hstore", "hstore"), (90003, "vector", "vector"),
                          (90004, "vector", "halfvec"), (90005, "vector", "sparsevec"),
                          (90006, "postgis", "geometry")):
    REGISTRY.register_base(_oid, _name, "public", _ext)
#: the user types of the nested rows: an enum, a composite (int4, text, date)
REGISTRY.register_enum(70000, ["sad", "ok", "happy", "Très bien"])
REGISTRY.register_composite(70010, [("a", 23, -1), ("b", 25, -1), ("d", 1082, -1)])


def _hstore(x: int):
    pairs = [(b"k%d" % j, b"%d" % (x * j)) for j in range(4)]
    text = b", ".join(b'"%s"=>"%s"' % kv for kv in pairs)
    send = struct.pack(">i", 4) + b"".join(struct.pack(">i", len(k)) + k + struct.pack(">i", len(v)) + v
                                          for k, v in pairs)
    return text, send


def _vectors(rng, n, dim):
    vals = rng.standard_normal((n, dim)).astype(np.float32)
    text = [b"[" + b",".join(str(v).encode() for v in row) + b"]" for row in vals]   # float32 shortest digits
    send = [struct.pack(">hh", dim, 0) + row.astype(">f4").tobytes() for row in vals]
    halves = vals.astype(np.float16)
    htext = [b"[" + b",".join(str(np.float32(v)).encode() for v in row) + b"]" for row in halves]
    hsend = [struct.pack(">hh", dim, 0) + row.astype(">f2").tobytes() for row in halves]
    return text, send, htext, hsend


def _sparse(x: int):
    idx = [x % 7, 10 + x % 5, 100]
    vals = [1.5, -2.0, float(x % 1000)]
    text = b"{" + b",".join(b"%d:%s" % (i + 1, repr(v).encode()) for i, v in zip(idx, vals, strict=True)) + b"}/1000"
    send = struct.pack(">iii", 1000, 3, 0) + struct.pack(">3i", *idx) + struct.pack(">3f", *vals)
    return text, send


def _point(x: float, y: float) -> bytes:
    return struct.pack("<BIi", 1, 0x20000001, 4326) + struct.pack("<dd", x, y)


def _numeric_send(cents: int) -> bytes:
    # numeric_send of a numeric(12,2): base-10000 digits of the scaled value
    sign = 0x4000 if cents < 0 else 0
    v = abs(cents)
    groups = []
    frac = v % 100 * 100
    ip = v // 100
    while ip:
        groups.insert(0, ip % 10000)
        ip //= 10000
    weight = len(groups) - 1
    digits = groups + ([frac] if frac else [])
    while digits and digits[-1] == 0:
        digits.pop()
    if not groups:
        weight = -1
    return struct.pack(f">hhHh{len(digits)}h", len(digits), weight, sign, 2, *digits)


def _time_text(us: int) -> bytes:
    # time_out: hh:mm:ss and the fraction without trailing zeros
    s, f = divmod(us, 10**6)
    out = b"%02d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60)
    return out + (b".%06d" % f).rstrip(b"0") if f else out


def _date_text(days: int) -> bytes:
    return str(np.datetime64(days, "D")).encode()


def _record_send(a: int, b: bytes, days: int) -> bytes:
    # record_send of (int4, text, date): count, then per attribute OID, length, send form
    return (struct.pack(">iIii", 3, 23, 4, a) + struct.pack(">Ii", 25, len(b)) + b
            + struct.pack(">Iii", 1082, 4, days - 10957))


def columns(n):
    rng = np.random.default_rng(1)
    ints = rng.integers(-2**31, 2**31 - 1, n)
    cents = rng.integers(-10**11, 10**11, n)
    ts = rng.integers(0, 50 * 365 * 86400 * 10**6, n) + US_2000
    days = rng.integers(-10000, 20000, n)
    words = [b"lorem", b"ipsum dolor", b"sit amet, consectetur", b"x" * 40]
    uuids = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    floats = rng.standard_normal(n) * 1e6
    times = rng.integers(0, 86400 * 10**6, n)
    cols = {
        "int4": (23, -1, [str(int(x)).encode() for x in ints], [struct.pack(">i", int(x)) for x in ints]),
        "text": (25, -1, [words[i % 4] for i in range(n)], [words[i % 4] for i in range(n)]),
        "numeric(12,2)": (1700, ((12 << 16) | 2) + 4, [f"{int(c) / 100:.2f}".encode() for c in cents],
                          [_numeric_send(int(c)) for c in cents]),
        "timestamptz": (1184, -1, [], [struct.pack(">q", int(t) - US_2000) for t in ts]),
        "date": (1082, -1, [], [struct.pack(">i", int(d)) for d in days]),
        "uuid": (2950, -1, [], [bytes(u) for u in uuids]),
        "bool": (16, -1, [b"t" if x & 1 else b"f" for x in ints], [b"\x01" if x & 1 else b"\x00" for x in ints]),
        "int8": (20, -1, [str(int(x) * 65537).encode() for x in ints],
                 [struct.pack(">q", int(x) * 65537) for x in ints]),
        "float8": (701, -1, [repr(float(x)).encode() for x in floats], [struct.pack(">d", float(x)) for x in floats]),
        "time": (1083, -1, [_time_text(int(u)) for u in times], [struct.pack(">q", int(u)) for u in times]),
        "interval": (1186, -1, [f"{int(d)} days ".encode() + _time_text(int(u)) for d, u in zip(days, times, strict=True)],
                     [struct.pack(">qii", int(u), int(d), 0) for d, u in zip(days, times, strict=True)]),
        "bytea": (17, -1, [b"\\x" + bytes(u).hex().encode() for u in uuids], [bytes(u) for u in uuids]),
        "jsonb": (3802, -1, [b'{"a": %d}' % int(x) for x in ints], [b'\x01{"a": %d}' % int(x) for x in ints]),
    }
    hs = [_hstore(int(x)) for x in ints]
    vt, vb, ht, hb = _vectors(rng, n, 16)
    sp = [_sparse(int(x)) for x in ints]
    pts = [_point(float(a), float(b)) for a, b in zip(floats, floats[::-1], strict=True)]
    cols.update({
        "ltree": (90001, -1, [b"Top.Science.%d" % (int(x) & 255) for x in ints],
                  [b"\x01Top.Science.%d" % (int(x) & 255) for x in ints]),
        "hstore": (90002, -1, [h[0] for h in hs], [h[1] for h in hs]),
        "vector(16)": (90003, 16, vt, vb),
        "halfvec(16)": (90004, 16, ht, hb),
        "sparsevec": (90005, -1, [v[0] for v in sp], [v[1] for v in sp]),
        "geometry(4326)": (90006, 1107460, [p.hex().upper().encode() for p in pts], pts),
    })
    labels = [b"sad", b"ok", b"happy", "Très bien".encode()]
    cols["enum"] = (70000, -1, [labels[i % 4] for i in range(n)], [labels[i % 4] for i in range(n)])
    cols["composite"] = (70010, -1, [b'(%d,"%s",%s)' % (int(x), words[i % 4], _date_text(int(d)))
                                     for i, (x, d) in enumerate(zip(ints, days, strict=True))],
                         [_record_send(int(x), words[i % 4], int(d)) for i, (x, d) in enumerate(zip(ints, days,
                                                                                               strict=True))])
    cols["int4range"] = (3904, -1, [b"[%d,%d)" % (int(x), int(x) + 10) for x in ints],
                         [b"\x02" + struct.pack(">iiii", 4, int(x), 4, int(x) + 10) for x in ints])
    cols["tstzrange"] = (3910, -1, [], [b"\x02" + struct.pack(">iqiq", 8, int(t) - US_2000, 8, int(t) - US_2000 + 10**9)
                                        for t in ts])
    cols["int4multirange"] = (4451, -1, [b"{[%d,%d),[%d,%d)}" % (int(x), int(x) + 2, int(x) + 5, int(x) + 9)
                                         for x in ints],
                              [struct.pack(">i", 2) + b"".join(struct.pack(">i", 17) + b"\x02" + struct.pack(
                                  ">iiii", 4, int(x) + a, 4, int(x) + b) for a, b in ((0, 2), (5, 9))) for x in ints])
    tsa = pa.array(ts.astype("datetime64[us]"))
    cols["timestamptz"][2].extend(
        s.encode() + b"+00" for s in pc.strftime(tsa, "%Y-%m-%d %H:%M:%S").to_pylist())
    cols["date"][2].extend(s.encode() for s in
                           pc.strftime(pa.array(days.astype("datetime64[D]")), "%Y-%m-%d").to_pylist())
    cols["uuid"][2].extend(str(uuid.UUID(bytes=bytes(u))).encode() for u in uuids)
    stamps = pc.strftime(tsa, "%Y-%m-%d %H:%M:%S").to_pylist()
    later = pc.strftime(pa.array((ts + 10**9).astype("datetime64[us]")), "%Y-%m-%d %H:%M:%S").to_pylist()
    cols["tstzrange"][2].extend(b'["%s+00","%s+00")' % (a.encode(), b.encode()) for a, b in zip(stamps, later,
                                                                                                 strict=True))
    return cols


def timeit(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python", action="store_true")
    ap.add_argument("--only", help="the columns to time, comma-separated (default: every one)")
    a = ap.parse_args()
    n = a.n
    print(f"{'column':16} {'form':6} {'compiled values/s':>18} {'python values/s':>16}")
    only = set(a.only.split(",")) if a.only else None
    for name, (oid, mod, text, binary) in columns(n).items():
        if only is not None and name not in only:
            continue
        for form, vals in (("text", text), ("binary", binary)):
            data = pa.array(vals, pa.binary())
            kinds = pa.array([form[0]] * n, pa.string())
            t = timeit(lambda k=kinds, d=data, o=oid, md=mod: convert_column(k, d, o, md, REGISTRY), a.repeat)
            py = ""
            if a.python:
                m = n // 20
                tp = timeit(lambda k=kinds[:m], d=data[:m], o=oid, md=mod: convert_column(k, d, o, md, REGISTRY,
                                                                                          fast=False), 1)
                py = f"{m / tp:16,.0f}"
            print(f"{name:16} {form:6} {n / t:18,.0f} {py}")


if __name__ == "__main__":
    main()
