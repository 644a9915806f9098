"""Scale-out on a real Spark cluster: one executor against two, the package shipped.

A standalone cluster on 127.0.0.1 (``pgoutput_codec.testing.sparkcluster``): a master and
two workers of one core, each worker pinned to its own CPU (``taskset``, unless
``--no-pin``), the executors' Python from the environment ``ship`` packs. The same
queries run in an application limited to one core (``spark.cores.max=1``: one executor on
one worker) and in one with two (an executor on each worker), each the best of
``--repeat`` warm runs:

(a) ``sum(length(data))``: Spark reading the archive, no code of ours: the floor of the
    speed-up this machine allows (the driver, the master and the JVMs' own threads
    share the same CPUs);
(c) ``from_pgoutput`` + an aggregate of three fields (as ``spark_bench.py``'s (c));
(d) ``decode_changes(order_by="seq", sort=False)`` + count, split into pass 1 and the
    plan (on the driver: the control rows collected, the plan built, the same work
    whatever the executors) and pass 2 (the count, on the executors).

The archive is ``spark_bench.py``'s (``bench/data/``, 5 M messages in 8 Parquet files).
Usage: ``python bench/cluster_bench.py [--messages 5000000] [--repeat 3]``; prints a table
and writes ``bench/results/cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from spark_bench import PER_TXN, _best, build_archive  # noqa: E402

from pgoutput_codec.testing.sparkcluster import StandaloneCluster  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def _session(url: str, cores: int):
    from pyspark.sql import SparkSession

    from pgoutput_codec.spark import ship
    s = (ship(SparkSession.builder.master(url)).appName(f"pgoutput_codec-cluster-bench-{cores}")
         .config("spark.cores.max", str(cores)).config("spark.executor.cores", "1")
         .config("spark.executor.memory", "2g").config("spark.driver.memory", "3g")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.files.maxPartitionBytes", str(32 << 20))
         .config("spark.python.worker.reuse", "true")
         .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def run(url: str, cores: int, path: Path, repeat: int) -> dict:
    from pyspark.sql import functions as F

    from pgoutput_codec.spark import decode_changes, from_pgoutput
    spark = _session(url, cores)
    try:
        df = spark.read.parquet(str(path))
        n = df.count()
        n_changes = json.loads((path / "_DONE").read_text())["transactions"] * PER_TXN
        split = []

        def scan():
            return df.agg(F.sum(F.length("data"))).first()[0]

        def decode():
            m = df.select(from_pgoutput("data").alias("m"))
            return m.agg(F.count(F.when(F.col("m.type") == "I", 1)), F.max("m.relation_id"),
                         F.max("m.commit_lsn")).first()

        def changes():
            t0 = time.perf_counter()
            out = decode_changes(df, order_by="seq", lsn="lsn", sort=False)   # pass 1 + plan
            t1 = time.perf_counter()
            got = out.count()
            split.append((t1 - t0, time.perf_counter() - t1))
            assert got == n_changes, (got, n_changes)
            return got

        res = {"cores": cores, "messages": n,
               "partitions": df.rdd.getNumPartitions()}
        for k, fn in (("a", scan), ("c", decode), ("d", changes)):
            fn()   # warm: executors up, Python workers started, the archive in the page cache
            secs, _ = _best(fn, repeat)
            res[k] = {"seconds": secs, "messages_per_s": n / secs}
        # the driver's entry is one of them
        res["executors"] = len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1
        best = min(split[1:], key=sum)
        res["d"]["pass1_and_plan_s"], res["d"]["pass2_s"] = best
        return res
    finally:
        spark.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-pin", action="store_true", help="let the workers use every CPU")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = build_archive(args.messages)
    load0 = os.getloadavg()
    with StandaloneCluster(workers=2, cores=1, memory="3g", pin=not args.no_pin) as c:
        print(f"cluster {c.url}: 2 workers x 1 core, pinned: {c.pin}; load {load0}", flush=True)
        one = run(c.url, 1, path, args.repeat)
        two = run(c.url, 2, path, args.repeat)
        pinned = c.pin
    ratios = {k: one[k]["seconds"] / two[k]["seconds"] for k in "acd"}
    ratios["d_pass2"] = one["d"]["pass2_s"] / two["d"]["pass2_s"]
    labels = {"a": "(a) scan sum(length(data)): the floor", "c": "(c) from_pgoutput + aggregate",
              "d": "(d) decode_changes + count"}
    print(f"\n{one['messages']} messages, {one['partitions']} partitions; executors: {one['executors']} / "
          f"{two['executors']}")
    print(f"{'measure':42s} {'1 core s':>9s} {'2 cores s':>9s} {'speed-up':>9s}")
    for k, lab in labels.items():
        print(f"{lab:42s} {one[k]['seconds']:9.2f} {two[k]['seconds']:9.2f} {ratios[k]:8.2f}x")
    for j, lab in ((0, "    (d) pass 1 (control rows) + plan"), (1, "    (d) pass 2 (the count)")):
        key = ("pass1_and_plan_s", "pass2_s")[j]
        r = one["d"][key] / two["d"][key]
        print(f"{lab:42s} {one['d'][key]:9.2f} {two['d'][key]:9.2f} {r:8.2f}x")
    out = {"one_core": one, "two_cores": two, "ratios": ratios, "pinned": pinned,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_before": load0, "load_after": os.getloadavg()}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cluster.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
