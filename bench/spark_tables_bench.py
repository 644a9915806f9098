"""Spark: one table's typed changes and its snapshot, over decode_changes' two pass-2
implementations, side by side in one run.

``impl="fields"`` (PySpark >= 4.1, FAILFAST: one UDF per field; ``table_changes`` then
chooses the table on the payload heads and types the values in the decoding step) and
``impl="map"`` (mapInArrow: change rows turned into Spark rows, back into Arrow for the
typing, then into rows again). On the first ``--rows`` messages of the ``spark_bench.py``
archive (run that first: it builds and caches the archive in ``bench/data/``), local[2]:

- pass 1: ``decode_changes`` itself (eager: control rows to the driver, plan);
- versions: the job that lists the table's Relation versions and truncates;
- ``table_changes`` + count (its own versions job included);
- ``snapshot`` + count;
- window (both implementations): ``decode_changes(after_lsn=)`` with the last tenth of
  the commits + ``count`` of every column, against the whole archive's same count (what
  an incremental job saves: pass 2 decodes only the window's rows), the same rows from
  a run resumed from the checkpoint of a run up to that tenth (``resume=``: pass 1 too
  reads only the rows from the checkpoint on), and ``snapshot(as_of_lsn=)`` at the
  middle commit + count;
- lake: the change rows written to Parquet once and read back (decode once, build tables
  later), ``table_changes`` + count and ``snapshot`` + count over them (the generic
  ``mapInArrow`` path);
- ten tables (``--tables``, default 10): the same rows with each transaction's Inserts
  moved to one of ten relation ids (ten Relations first), and ``table_changes`` + count,
  the same + ``count`` of three value columns, and ``snapshot`` + count of one of them:
  the nine other tables' rows are what Spark leaves out (``ControlPlan.row_drops``).

Each the best of ``--repeat`` runs, after one warm-up run of each implementation.
Prints a table and the map/fields ratios; writes ``bench/results/spark_tables.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ARCHIVE = ROOT / "bench" / "data" / "archive_25000tx"
RESULTS = ROOT / "bench" / "results"
TABLE = "public.bench"


def ten_tables(rows: int, tables: int) -> Path:
    """The first ``rows`` messages of ``ARCHIVE`` with transaction k's Inserts moved to
    relation id 16384 + k % ``tables`` (``public.bench``, ``public.bench1``, …), whose
    Relations come first (cached in ``bench/data``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import spark_bench
    out = ROOT / "bench" / "data" / f"tables{tables}_{rows}"
    if (out / "_DONE").exists():
        return out
    t = pq.read_table(ARCHIVE, filters=[("seq", "<", rows)]).sort_by("seq")
    data = t.column("data").combine_chunks()
    offsets = np.frombuffer(data.buffers()[1], np.int32, count=len(data) + 1)
    buf = np.frombuffer(data.buffers()[2], np.uint8).copy()
    ins = np.flatnonzero(buf[offsets[:-1]] == ord("I"))
    relid = (spark_bench.RELID + t.column("xid").to_numpy()[ins] % tables).astype(">u4").view(np.uint8)
    for k in range(4):
        buf[offsets[ins] + 1 + k] = relid.reshape(-1, 4)[:, k]
    data = pa.Array.from_buffers(pa.binary(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(buf)])
    rels = [spark_bench._relation(spark_bench.RELID + k, "bench" + (str(k) if k else "")) for k in range(tables)]
    head = pa.table({"seq": np.arange(-tables, 0, dtype=np.int64), "lsn": np.zeros(tables, np.int64),
                     "xid": np.zeros(tables, np.int64), "data": pa.array(rels, pa.binary())})
    t = pa.concat_tables([head, t.select(["seq", "lsn", "xid"]).append_column("data", data).cast(head.schema)])
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, len(t), 5, dtype=np.int64)
    for i in range(4):
        pq.write_table(t.slice(bounds[i], bounds[i + 1] - bounds[i]), out / f"part-{i}.parquet",
                       row_group_size=131072)
    (out / "_DONE").write_text("")
    return out


def _best_of(repeat: int, once) -> dict:
    """Each timed step's best over ``repeat`` runs after a warm-up run, with the counts
    ``once(lap)`` returns: it runs the steps and calls ``lap(name)`` after each, which
    takes the time since the previous lap (or the run's start); ``lap(None)`` leaves
    the step untimed."""
    best = {}
    for run in range(repeat + 1):          # the first run warms up
        laps, last = {}, [time.perf_counter()]

        def lap(name, laps=laps, last=last):
            now = time.perf_counter()
            if name is not None:
                laps[name] = now - last[0]
            last[0] = now
        counts = once(lap)
        if run:
            for k, v in laps.items():
                best[k] = min(best.get(k, v), v)
        best.update(counts)
    return best


def _line(label: str, best: dict) -> None:
    print(f"{label} " + "  ".join(f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}"
                                  for k, v in best.items()), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tables", type=int, default=10)
    args = ap.parse_args()
    if not (ARCHIVE / "_DONE").exists():
        sys.exit(f"no archive at {ARCHIVE}: run bench/spark_bench.py first (it builds it)")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p]])
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from pgoutput_codec.spark import HAS_ARROW_UDF, decode_changes, snapshot, table_changes
    from pgoutput_codec.spark.changes import checkpoint_of
    from pgoutput_codec.spark.tablerows import table_info
    spark = (SparkSession.builder.master("local[2]").appName("pgoutput_codec-tables-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.files.maxPartitionBytes", str(32 << 20)).config("spark.driver.memory", "3g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(ARCHIVE)).where(F.col("seq") < args.rows)
    impls = ["fields", "map"] if HAS_ARROW_UDF else ["map"]
    res = {}
    for impl in impls:
        def first(lap, impl=impl):
            ch = decode_changes(df, order_by="seq", sort=False, impl=impl)
            lap("pass1")
            table_info(ch, TABLE)
            lap("versions")
            n = table_changes(ch, TABLE).count()
            lap("table_changes")
            m = snapshot(ch, TABLE).count()
            lap("snapshot")
            return {"rows": n, "snapshot_rows": m}
        res[impl] = _best_of(args.repeat, first)
        _line(f"{impl:7s}", res[impl])
    # the commit LSNs, from the Commit payloads alone
    from pgoutput_codec import decode_batch
    commits = df.where(F.substring("data", 1, 1) == F.lit(b"C")).select("data").toArrow().column(0)
    lsns = sorted(decode_batch(commits.combine_chunks()).field("commit_lsn").to_pylist())
    after, middle = lsns[len(lsns) * 9 // 10], lsns[len(lsns) // 2]

    def count_all(ch):
        return ch.agg(*[F.count(c) for c in ch.columns]).first()[0]

    # where yesterday's run (up to that tenth) left off: not timed
    cp = checkpoint_of(decode_changes(df, order_by="seq", sort=False, until_lsn=after))
    for impl in impls:
        def window(lap, impl=impl):
            whole = count_all(decode_changes(df, order_by="seq", sort=False, impl=impl))
            lap("whole_count_all")
            tail = count_all(decode_changes(df, order_by="seq", sort=False, impl=impl, after_lsn=after))
            lap("last_tenth_count_all")
            resumed = count_all(decode_changes(df, order_by="seq", sort=False, impl=impl, resume=cp))
            lap("resumed_count_all")
            half = snapshot(decode_changes(df, order_by="seq", sort=False, impl=impl), TABLE, as_of_lsn=middle).count()
            lap("snapshot_as_of_middle")
            if resumed != tail:
                raise AssertionError(f"resumed run gave {resumed} rows, after_lsn {tail}")
            return {"whole_rows": whole, "last_tenth_rows": tail, "snapshot_as_of_middle_rows": half,
                    "resume_from_key": cp.from_key}
        res[impl]["window"] = _best_of(args.repeat, window)
        _line(f"{impl:7s} window:", res[impl]["window"])
    many = spark.read.parquet(str(ten_tables(args.rows, args.tables)))
    one = f"public.bench{args.tables // 2}"
    values = [f"after.c{i}" for i in (1, 5, 9)]
    for impl in impls:
        def tables(lap, impl=impl):
            ch = decode_changes(many, order_by="seq", sort=False, impl=impl)
            lap(None)   # pass 1: not timed here
            n = table_changes(ch, one).count()
            lap("table_changes")
            table_changes(ch, one).agg(*[F.count(c) for c in values]).first()
            lap("table_changes_3_values")
            m = snapshot(ch, one).count()
            lap("snapshot")
            return {"rows": n, "snapshot_rows": m}
        res[impl][f"one_of_{args.tables}_tables"] = _best_of(args.repeat, tables)
        _line(f"{impl:7s} one of {args.tables} tables:", res[impl][f"one_of_{args.tables}_tables"])
    # the lake: change rows decoded once, kept as Parquet, read back (cached in bench/data)
    lake_dir = ARCHIVE.parent / f"changes_{args.rows}"
    if not (lake_dir / "_SUCCESS").exists():
        decode_changes(df, order_by="seq", sort=False).write.mode("overwrite").parquet(str(lake_dir))
    lake = spark.read.parquet(str(lake_dir))

    def from_lake(lap):
        n = table_changes(lake, TABLE).count()
        lap("table_changes")
        m = snapshot(lake, TABLE).count()
        lap("snapshot")
        return {"rows": n, "snapshot_rows": m}
    res["lake"] = _best_of(args.repeat, from_lake)
    _line("lake   ", res["lake"])
    if len(impls) == 2:
        res["map_over_fields"] = {k: res["map"][k] / res["fields"][k]
                                  for k in ("pass1", "versions", "table_changes", "snapshot")}
        print("map / fields: " + "  ".join(f"{k} {v:.2f}x" for k, v in res["map_over_fields"].items()))
    res.update(rows_in=args.rows, load=os.getloadavg(), when=time.strftime("%Y-%m-%d %H:%M:%S"))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "spark_tables.json").write_text(json.dumps(res, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
