"""What redoing the server's ``ALTER COLUMN … TYPE`` costs (pgoutput_codec/casts.py):
values/s of ``cast_value`` over 1M-value columns, beside Arrow's own cast of the same
values where Arrow has one (what a decoder without these rules would do, wrong where
they differ).

    .venv/bin/python bench/casts_bench.py [--n 1000000] [--repeat 3]

Only the values sent before an ``ALTER`` go through a cast, once per snapshot or typed
read: the vectorized rules run at Arrow's speed; a float into a numeric, json into
jsonb and anything into an interval's or a timestamptz's text go value by value (each
rare). Writes bench/results/casts.json.
"""

from __future__ import annotations

import argparse
import decimal
import json
import os
import sys

import numpy as np
import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from pgoutput_codec.typecatalog.casts import cast_value  # noqa: E402
from pgoutput_codec.testing import best  # noqa: E402


def cases(n: int) -> list:
    """(name, values, source (OID, typmod), target (OID, typmod), Arrow type)."""
    r = np.random.default_rng(7)
    mils = r.integers(-10**11, 10**11, n)
    floats = r.normal(0, 1e4, n)
    us = r.integers(0, 30 * 365 * 86_400 * 10**6, n) + 946_684_800 * 10**6
    num = lambda p, s: ((p << 16) | s) + 4   # noqa: E731
    dec = pa.array([decimal.Decimal(int(m)).scaleb(-3) for m in mils], pa.decimal128(12, 3))
    return [
        ("numeric(12,3) -> numeric(12,1)", dec, (1700, num(12, 3)), (1700, num(12, 1)), pa.decimal128(12, 1)),
        ("numeric(12,3) -> int8", dec, (1700, num(12, 3)), (20, -1), pa.int64()),
        ("float8 -> int4", pa.array(floats), (701, -1), (23, -1), pa.int32()),
        ("int8 -> float8", pa.array(mils), (20, -1), (701, -1), pa.float64()),
        ("timestamp -> timestamp(0)", pa.array(us, pa.timestamp("us")), (1114, -1), (1114, 0), pa.timestamp("us")),
        ("timestamp -> timestamptz (Europe/Berlin)", pa.array(us, pa.timestamp("us")), (1114, -1), (1184, -1),
         pa.timestamp("us", tz="UTC")),
        ("text -> char(12)", pa.array([f"v{int(m) % 10**9}" for m in mils]), (25, -1), (1042, 16), pa.string()),
        ("float8 -> numeric(12,2) (one by one)", pa.array(floats), (701, -1), (1700, num(12, 2)),
         pa.decimal128(12, 2)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    print(f"{'cast':42} {'casts.py values/s':>18} {'Arrow cast values/s':>20}")
    for name, arr, src, dst, to in cases(a.n):
        zone = "Europe/Berlin" if "Berlin" in name else None
        t = best(lambda x=arr, s=src, d=dst, o=to, z=zone: cast_value(x, s, d, o, timezone=z), a.repeat)
        try:
            ta = best(lambda x=arr, o=to: x.cast(o), a.repeat)
            arrow = f"{a.n / ta:20,.0f}"
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            ta, arrow = None, f"{'refuses':>20}"
        rows.append({"cast": name, "values_per_s": a.n / t, "arrow_values_per_s": a.n / ta if ta else None})
        print(f"{name:42} {a.n / t:18,.0f} {arrow}")
    out = {"n": a.n, "repeat": a.repeat, "load_before": load0, "load_after": os.getloadavg(), "casts": rows}
    with open(os.path.join(HERE, "results", "casts.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(f"load average before {load0}, after {os.getloadavg()}")


if __name__ == "__main__":
    main()
