"""Benchmark of the openGauss 'b' style decoder (PROTOCOL.md §4).

Builds >= 200,000 ten-column Insert records as 'b' batches with the encoder, times
``pgoutput_codec.opengauss.decode_batch``, prints records/s and MB/s and, when the
pgoutput batch decoder is importable, times it on the equivalent ten-column pgoutput
Insert messages and prints the ratio. Results go to ``bench/results/opengauss.json``.

Usage: ``.venv/bin/python bench/opengauss_bench.py [--records N] [--batch N] [--repeat N]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pgoutput_codec.opengauss import Column, Record, decode_batch  # noqa: E402
from pgoutput_codec.opengauss.encode import encode_frame, encode_record  # noqa: E402


def og_batches(n_records, per_batch):
    cols = tuple(Column(f"col{i}", 25, b"value-%02d-abcdefgh" % i) for i in range(10))
    rec = encode_record(Record("I", 0x1000, schema="public", table="bench_t", new_tuple=cols))
    frames = []
    left = n_records
    while left:
        k = min(per_batch, left)
        frames.append(encode_frame([rec] * k))
        left -= k
    return pa.array(frames, pa.binary())


def pg_messages(n_records):
    import pgoutput_codec as pc
    msg = pc.encode_message(pc.Insert(relation_id=16384, new_tuple=tuple(
        pc.TupleColumn("t", b"value-%02d-abcdefgh" % i) for i in range(10))))
    return pa.array([msg] * n_records, pa.binary())


def best_of(fn, repeat):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000, help="records per 'b' batch")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "opengauss.json"))
    a = ap.parse_args()

    arr = og_batches(a.records, a.batch)
    nbytes = arr.buffers()[2].size
    secs, table = best_of(lambda: decode_batch(arr), a.repeat)
    assert table.num_rows == a.records and table.column("error").null_count == a.records
    res = {
        "records": a.records, "records_per_batch": a.batch, "input_bytes": nbytes,
        "opengauss_seconds": secs, "opengauss_records_per_s": a.records / secs,
        "opengauss_mb_per_s": nbytes / secs / 1e6,
        "python": platform.python_version(), "machine": platform.machine(),
    }
    print(f"openGauss 'b': {a.records} records in {len(arr)} batches, {nbytes / 1e6:.1f} MB: "
          f"{secs * 1e3:.1f} ms, {res['opengauss_records_per_s'] / 1e6:.2f} M records/s, "
          f"{res['opengauss_mb_per_s']:.0f} MB/s")
    try:
        import pgoutput_codec
        pg_decode = pgoutput_codec.decode_batch
        pg = pg_messages(a.records)
    except Exception as e:  # the pgoutput batch decoder is written elsewhere
        print(f"pgoutput decode_batch not available: {type(e).__name__}: {e}")
        res["pgoutput"] = None
    else:
        pg_bytes = pg.buffers()[2].size
        pg_secs, _ = best_of(lambda: pg_decode(pg), a.repeat)
        res.update(pgoutput_seconds=pg_secs, pgoutput_records_per_s=a.records / pg_secs,
                   pgoutput_mb_per_s=pg_bytes / pg_secs / 1e6, ratio_opengauss_to_pgoutput=secs / pg_secs)
        print(f"pgoutput Insert: {pg_secs * 1e3:.1f} ms, {a.records / pg_secs / 1e6:.2f} M records/s, "
              f"{pg_bytes / pg_secs / 1e6:.0f} MB/s; openGauss/pgoutput time ratio {secs / pg_secs:.2f} "
              f"(target <= 1.5)")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
