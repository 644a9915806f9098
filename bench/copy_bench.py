"""Copying a table into an archive: ``copy_rows`` against the floor, on a real server.

A table of N rows of ten columns (bigint key, int, bigint, float8, numeric, text, text,
timestamptz, bool, date) on a throwaway PostgreSQL (the newest ``testing.pgserver``
finds). Timed in one run, after a warm-up copy (the table in the server's cache), each the best
of ``--repeat`` rounds of the four:
  (floor) ``COPY (SELECT ... ORDER BY id) TO STDOUT (FORMAT csv)`` read by psycopg, parsed
          by ``pyarrow.csv`` and written to Parquet (zstd), a row group per 4 MB read;
  (raw)   the same COPY (text format) read by psycopg, written as it comes, one binary value
          per row, to Parquet: what reading the stream and writing a file cost alone;
  (text)  ``copy_rows(binary=False)``: Insert payloads, written to Parquet in the columns of
          a captured file (seq, lsn, lsn_ordinal, xid, data), as capture writes them;
  (binary) the same with ``binary=True`` (COPY BINARY).
Prints seconds, rows/s, MB/s of the COPY stream and each against the floor, and the peak
RSS growth of each. Writes bench/results/copy.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pgoutput_codec.cli.tablecopy import copy_rows, published_tables  # noqa: E402
from pgoutput_codec.testing import pgserver  # noqa: E402

RESULTS = Path(__file__).parent / "results"
CHUNK = 4 << 20
LSN = "0/16B3748"
SCHEMA = pa.schema([
    pa.field("seq", pa.int64()), pa.field("lsn", pa.string()), pa.field("lsn_ordinal", pa.int32()),
    pa.field("xid", pa.int64()), pa.field("data", pa.binary()),
])
COLUMNS = "id, a, b, f, n, t1, t2, ts, flag, d"


def rss() -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) * 1024


def setup(conn, n):
    conn.execute("CREATE TABLE bench (id bigint PRIMARY KEY, a int, b bigint, f float8, n numeric(12,2), "
                 "t1 text, t2 text, ts timestamptz, flag bool, d date)")
    conn.execute("INSERT INTO bench SELECT g, g % 1000, g * 7919, g / 7.0, (g % 100000) / 100.0, "
                 "'value' || lpad((g % 100000)::text, 5, '0'), md5(g::text), "
                 "'2024-01-01 00:00:00+00'::timestamptz + g * interval '1 second', g % 3 = 0, "
                 f"'2000-01-01'::date + (g % 10000)::int FROM generate_series(1::bigint, {int(n)}) g")
    conn.execute("VACUUM ANALYZE bench")
    conn.execute("CREATE PUBLICATION bench_pub FOR TABLE bench")


def floor_csv(conn, out):
    """COPY CSV -> pyarrow.csv -> Parquet."""
    names = [c.strip() for c in COLUMNS.split(",")]
    opts = pcsv.ReadOptions(column_names=names)
    conv = pcsv.ConvertOptions(column_types={"n": pa.decimal128(12, 2), "ts": pa.timestamp("us", "UTC")})
    stream = 0
    writer = None
    buf = bytearray()

    def flush():
        nonlocal writer
        table = pcsv.read_csv(io.BytesIO(buf), read_options=opts, convert_options=conv)
        if writer is None:
            writer = pq.ParquetWriter(out, table.schema, compression="zstd")
        writer.write_table(table)

    with conn.transaction(), conn.cursor() as cur, \
            cur.copy(f"COPY (SELECT {COLUMNS} FROM bench ORDER BY id) TO STDOUT (FORMAT csv)") as copy:
        for data in copy:
            buf += data
            if len(buf) >= CHUNK:
                stream += len(buf)
                flush()
                buf.clear()
        stream += len(buf)
        if buf:
            flush()
    writer.close()
    return stream


def floor_raw(conn, out):
    """COPY text -> Parquet, one binary value per row, no parsing."""
    stream = 0
    rows = []
    size = 0
    with pq.ParquetWriter(out, pa.schema([pa.field("line", pa.binary())]), compression="zstd") as writer, \
            conn.transaction(), conn.cursor() as cur, \
            cur.copy(f"COPY (SELECT {COLUMNS} FROM bench ORDER BY id) TO STDOUT") as copy:
        for data in copy:
            rows.append(bytes(data))
            size += len(data)
            if size >= CHUNK:
                writer.write_table(pa.table({"line": pa.array(rows, pa.binary())}))
                stream += size
                rows, size = [], 0
        if rows:
            writer.write_table(pa.table({"line": pa.array(rows, pa.binary())}))
            stream += size
    return stream


def copied(conn, out, binary):
    """copy_rows -> Parquet in a captured file's columns."""
    with conn.transaction():
        (table,) = published_tables(conn, "bench_pub")
    seq = 0
    with pq.ParquetWriter(out, SCHEMA, compression="zstd") as writer, conn.transaction():
        for arr, _key in copy_rows(conn, table, binary=binary):
            n = len(arr)
            lsn = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([LSN])).cast(pa.string())
            writer.write_table(pa.table([
                pa.array(np.arange(seq, seq + n, dtype=np.int64)), lsn,
                pa.array(np.arange(seq, seq + n, dtype=np.int32)), pa.array(np.zeros(n, np.int64)), arr,
            ], schema=SCHEMA))
            seq += n
    return seq


def timed(fn, *args):
    base = rss()
    t = time.perf_counter()
    res = fn(*args)
    return time.perf_counter() - t, res, rss() - base


RUNS = [("floor (COPY csv -> pyarrow.csv -> Parquet)", floor_csv, ()),
        ("raw (COPY text lines -> Parquet)", floor_raw, ()),
        ("copy_rows text -> Parquet", copied, (False,)),
        ("copy_rows binary -> Parquet", copied, (True,))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="rounds of the four runs; each figure is its best")
    args = ap.parse_args(argv)
    spec = pgserver.first_available()
    with pgserver.PgServer(spec) as srv, srv.connect() as conn, tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        setup(conn, args.n)
        print(f"PostgreSQL {srv.version}: {args.n:,} rows loaded in {time.perf_counter() - t0:.1f} s, "
              f"load {os.getloadavg()[0]:.2f}")
        floor_raw(conn, os.path.join(tmp, "warm.parquet"))      # the table in the server's cache
        runs = {}
        # round robin, best of each: the machine's other work falls on every run alike
        for _ in range(args.repeat):
            for i, (name, fn, extra) in enumerate(RUNS):
                path = os.path.join(tmp, f"{i}.parquet")
                seconds, res, grew = timed(fn, conn, path, *extra)
                if "copy_rows" in name:
                    assert res == args.n, (name, res)
                r = runs.setdefault(name, {"seconds": seconds, "rss_growth": grew})
                r["seconds"] = min(r["seconds"], seconds)
                r["rss_growth"] = max(r["rss_growth"], grew)
                r["file_bytes"] = os.path.getsize(path)
                if "copy_rows" not in name:
                    r["stream_bytes"] = res
        stream = runs["floor (COPY csv -> pyarrow.csv -> Parquet)"]["stream_bytes"]
        base = runs["floor (COPY csv -> pyarrow.csv -> Parquet)"]["seconds"]
        print(f"{'':46} {'seconds':>8} {'rows/s':>11} {'× floor':>8} {'file MB':>8} {'RSS +MB':>8}")
        for name, r in runs.items():
            print(f"{name:46} {r['seconds']:8.2f} {args.n / r['seconds']:11,.0f} {r['seconds'] / base:8.2f} "
                  f"{r['file_bytes'] / 1e6:8.1f} {r['rss_growth'] / 1e6:8.1f}")
        text = runs["copy_rows text -> Parquet"]["seconds"] / base
        binary = runs["copy_rows binary -> Parquet"]["seconds"] / base
        verdict = "met" if max(text, binary) <= 1.5 else "NOT met"
        print(f"copy_rows costs {text:.2f}× the floor (text), {binary:.2f}× (binary); "
              f"COPY csv stream {stream / 1e6:.0f} MB (target ≤ 1.5×: {verdict})")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "copy.json").write_text(json.dumps({
            "rows": args.n, "server": srv.version, "cores": os.cpu_count(), "python": platform.python_version(),
            "runs": runs, "text_vs_floor": text, "binary_vs_floor": binary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
