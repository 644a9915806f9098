"""Many tables against one table holding the same changes: what a mirror costs per table.

The archives (``pgoutput_codec.testing.archives``, exact pgoutput wire bytes): ``--rows``
rows (int8 key, int4, text, numeric(12,2), timestamptz) inserted, then 10% of them
updated and 5% deleted, spread over N tables (N = ``--tables``, default 10, 100, 1,000),
and the one-table archive: the very same changes in one table (the same at every N).
Each written as a Parquet archive directory. One run measures, each the best of
``--repeat`` runs into a fresh target (one process: its four figures in turns; Spark:
each after one run untimed, so that a figure is not the first to meet the JIT):

one process
  ``pgoutput_codec.mirror(archive dir, target)``, and ``mirror`` of its change rows decoded
  beforehand (the tables' own cost: split, net changes, writes), against its floor: ``deltalake.write_deltalake``
  of the same final tables (each table's rows after the last commit, built by the
  generator, no decoding) into fresh directories, one after the other; and against the
  same work with ours taken out (read+w): the archive's files read by pyarrow as the
  mirror reads them, then the floor's writes. Then the same mirror of the archive and the
  same floors each as a fresh process, timed whole (what a user's job pays: start-up,
  imports and an allocator that has not yet grown; the package's bytecode compiled, as
  an installed wheel has it).

Spark ``local[2]``
  ``spark.decode_changes`` + ``spark.mirror`` (the whole run a user makes), N tables against
  the one-table archive. Two floors beside it: (nowrite) the same pass with the writes
  taken out: ``decode_changes``, the tables' groups and the one shuffle, each group's net
  changes on its executor, nothing written; (pass) the same with the net changes taken
  out too (each group's rows only counted: what the shuffle and the hand-over of the
  groups cost); (writes) ``write_deltalake`` of the final
  tables in a Spark job of as many tasks as the mirror's pass (the rows shipped in the
  tasks): the writes alone, in the same executors; (alone) Spark's part with ours taken
  out: the archive read, its rows shuffled into N groups (by ``seq``) and handed to a
  Python ``mapInArrow`` that cuts and counts the groups, no decoding; (alone+w) the whole
  mirror with ours taken out: the same pass, each group's final table (broadcast) written
  by deltalake in the task holding the group.

Standalone cluster (``pgoutput_codec.testing.sparkcluster``, two workers of one core, each
pinned to its CPU, the package shipped)
  the largest N's Spark mirror and its floors in an application given one core, then
  one given two: the speed-up.

Targets: one process within 2x of its floor; Spark N tables within 2x of the one-table
run at every N; 1 -> 2 workers >= 1.6x on the largest N. Prints a table; writes
``bench/results/tables.json``. Run when the machine is quiet (the load is recorded).
Usage: ``python bench/tables_bench.py [--rows 100000] [--tables 10,100,1000] [--repeat 1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import pyarrow as pa  # noqa: E402

from pgoutput_codec.testing import best  # noqa: E402
from pgoutput_codec.testing.archives import many_tables, write_archive  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ONE = "one"


class _Fresh:
    """Fresh directories under ``root``: ``next()`` gives a new one each call."""

    def __init__(self, root: Path, prefix: str):
        self.root, self.prefix, self.n = root, prefix, 0

    def __call__(self) -> Path:
        self.n += 1
        p = self.root / f"{self.prefix}-{self.n}"
        shutil.rmtree(p, ignore_errors=True)
        return p


def _ipc(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


def _write_tables(items):
    """A task's share of the writes floor: (directory, Arrow IPC bytes of a table's final rows)."""
    from deltalake import write_deltalake
    n = 0
    for path, data in items:
        write_deltalake(path, pa.ipc.open_stream(data).read_all())
        n += 1
    yield n


class _NetOnly:
    """The body of the pass with the write taken out: each group's net changes, counted
    (``net=False``: the group's rows counted, nothing computed)."""

    def __init__(self, net: bool = True):
        self.net = net

    def __call__(self, name: str, rows: pa.Table):
        from pgoutput_codec.tables import net_changes
        n = len(rows)
        if self.net:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                n = len(net_changes(rows, name))
        yield pa.RecordBatch.from_pylist([{"table": name, "rows": n}],
                                         schema=pa.schema([("table", pa.string()), ("rows", pa.int64())]))


class _Counted:
    """The body of Spark's pass with ours taken out: a task's archive rows, sorted by
    group, cut where the group changes and counted (no decoding)."""

    def __call__(self, batches):
        import numpy as np
        groups = rows = 0
        last = None
        for b in batches:
            g = b.column(b.schema.get_field_index("__group")).to_numpy(zero_copy_only=False)
            if not len(g):
                continue
            groups += int(np.count_nonzero(g[1:] != g[:-1])) + (g[0] != last)
            last, rows = g[-1], rows + len(g)
        yield pa.RecordBatch.from_pylist([{"groups": groups, "rows": rows}],
                                         schema=pa.schema([("groups", pa.int64()), ("rows", pa.int64())]))


class _Written:
    """The whole mirror with ours taken out: :class:`_Counted`'s groups, each group's
    final table (``blobs``, a broadcast of {group: Arrow IPC bytes}) written by deltalake
    under ``root`` by the task that holds the group's rows, once."""

    def __init__(self, blobs, root: str):
        self.blobs, self.root = blobs, root

    def __call__(self, batches):
        import numpy as np
        from deltalake import write_deltalake
        written = rows = 0
        seen = set()
        for b in batches:
            g = b.column(b.schema.get_field_index("__group")).to_numpy(zero_copy_only=False)
            if not len(g):
                continue
            for k in np.unique(g).tolist():
                if k not in seen:
                    seen.add(k)
                    blob = self.blobs.value.get(k)
                    if blob is not None:
                        write_deltalake(f"{self.root}/{k}", pa.ipc.open_stream(blob).read_all())
                        written += 1
            rows += len(g)
        yield pa.RecordBatch.from_pylist([{"groups": len(seen), "rows": rows, "written": written}],
                                         schema=pa.schema([("groups", pa.int64()), ("rows", pa.int64()),
                                                           ("written", pa.int64())]))


# ---------------------------------------------------------------- one process

def one_process(case: dict, work: Path, repeat: int) -> dict:
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    from pgoutput_codec import mirror
    fresh = _Fresh(work, f"onep-{case['label']}")

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = mirror(str(case["path"]), fresh())
        assert len(runs) == case["tables"] and sum(r.upserts for r in runs) == case["live"], runs[:3]

    floors = _Fresh(work, f"onep-floor-{case['label']}")

    def floor():
        root = floors()
        for name, rows in case["committed"].items():
            write_deltalake(str(root / name), rows)

    def read_floor():      # the same work with ours taken out: the archive read, the tables written
        for f in _archive_files(case["path"]):
            pq.ParquetFile(f).read()
        floor()

    from pgoutput_codec import decode_changes
    changes = decode_changes(pq.read_table(case["path"]))

    def from_rows():     # the archive decoded beforehand: the tables' own cost
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = mirror(changes, fresh())
        assert len(runs) == case["tables"], runs[:3]

    # in turns (mirror, from rows, floor, read floor, again): a change of the machine's load
    # between them weighs on each alike, and each figure is its best turn
    turns = [(best(run, 1, warmup=False), best(from_rows, 1, warmup=False), best(floor, 1, warmup=False),
              best(read_floor, 1, warmup=False)) for _ in range(repeat)]
    m, r, f, rf = (min(t[k] for t in turns) for k in range(4))
    out = {"mirror_s": m, "rows_s": r, "floor_s": f, "ratio": m / f, "rows_ratio": r / f,
           "read_floor_s": rf, "read_ratio": m / rf}
    out.update(fresh_processes(case, work, repeat))
    return out


#: the whole job as a user runs it, in a process of its own: the mirror of the archive
_MIRROR_JOB = "import sys, warnings; warnings.simplefilter('ignore'); import pgoutput_codec; " \
              "pgoutput_codec.mirror(sys.argv[1], sys.argv[2])"
#: its floor, in a process of its own: deltalake writing the final tables (Arrow IPC files)
_FLOOR_JOB = "import os, sys, pyarrow as pa; from deltalake import write_deltalake\n" \
             "for f in sorted(os.listdir(sys.argv[1])):\n" \
             "    write_deltalake(os.path.join(sys.argv[2], f[:-6]), pa.ipc.open_file(os.path.join(sys.argv[1], f)).read_all())"
#: the same work with ours taken out, in a process of its own: the archive files read as
#: the mirror reads them, then the floor's writes
_READ_FLOOR_JOB = "import os, sys, pyarrow.parquet as pq\n" \
                  "for f in sorted(os.listdir(sys.argv[3])):\n" \
                  "    pq.ParquetFile(os.path.join(sys.argv[3], f)).read()\n" + _FLOOR_JOB


def fresh_processes(case: dict, work: Path, repeat: int) -> dict:
    """The mirror of the archive and its floor each run as a new process, timed whole
    (start-up and imports included), in turns: the job as a user runs it, beside the
    figures of one long process above."""
    import subprocess
    import time
    tables = work / f"committed-{case['label']}"
    if not tables.exists():
        tables.mkdir()
        for name, rows in case["committed"].items():
            with pa.OSFile(str(tables / f"{name}.arrow"), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as w:
                w.write_table(rows)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # the package's bytecode compiled, as an installed wheel has it (deltalake's and
    # pyarrow's are): a checkout under PYTHONDONTWRITEBYTECODE=1 compiles every module
    # at each start
    import compileall
    compileall.compile_dir(str(ROOT / "pgoutput_codec"), quiet=1)
    mirrors, floors = _Fresh(work, f"fresh-{case['label']}"), _Fresh(work, f"fresh-floor-{case['label']}")
    read_floors = _Fresh(work, f"fresh-read-floor-{case['label']}")

    def timed(code, *args):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, env=env)
        return time.perf_counter() - t0

    def floor_run():
        root = floors()
        root.mkdir()
        return timed(_FLOOR_JOB, tables, root)

    def read_floor_run():
        root = read_floors()
        root.mkdir()
        return timed(_READ_FLOOR_JOB, tables, root, case["path"])

    turns = [(timed(_MIRROR_JOB, case["path"], mirrors()), floor_run(), read_floor_run()) for _ in range(repeat)]
    m, f, rf = (min(t[k] for t in turns) for k in range(3))
    return {"fresh_mirror_s": m, "fresh_floor_s": f, "fresh_ratio": m / f, "fresh_read_floor_s": rf,
            "fresh_read_ratio": m / rf}


def _archive_files(path) -> list:
    return sorted(str(p) for p in Path(path).glob("*.parquet"))


# ---------------------------------------------------------------- Spark

def _local_session():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p]])
    from pyspark.sql import SparkSession
    s = (SparkSession.builder.master("local[2]").appName("pgoutput_codec-tables-bench")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "2g").config("spark.python.worker.reuse", "true")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def _cluster_session(url: str, cores: int):
    from pyspark.sql import SparkSession

    from pgoutput_codec.spark import ship
    s = (ship(SparkSession.builder.master(url)).appName(f"pgoutput_codec-tables-bench-{cores}")
         .config("spark.cores.max", str(cores)).config("spark.executor.cores", "1")
         .config("spark.executor.memory", "1g").config("spark.driver.memory", "2g")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
         .config("spark.python.worker.reuse", "true")
         .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def spark_runs(spark, case: dict, work: Path, repeat: int) -> dict:
    """The Spark mirror of ``case`` and its floors, in session ``spark``."""
    from pgoutput_codec.spark import decode_changes, mirror
    from pgoutput_codec.spark.pertable import group_partitions, over_tables, table_groups
    from pyspark.sql import types as T
    df = spark.read.parquet(str(case["path"]))
    fresh = _Fresh(work, f"spark-{case['label']}-{spark.sparkContext.appName}")

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = mirror(decode_changes(df, order_by="seq"), fresh())
        assert len(runs) == case["tables"] and sum(r.upserts for r in runs) == case["live"], runs[:3]

    out = {"mirror_s": best(run, repeat)}
    schema = T.StructType([T.StructField("table", T.StringType()), T.StructField("rows", T.LongType())])

    def nowrite(net=True):
        groups, names = table_groups(decode_changes(df, order_by="seq"))
        got = over_tables(groups, _NetOnly(net), schema, group_partitions(spark, names)).collect()
        assert len(got) == case["tables"]

    written = _Fresh(work, f"spark-floor-{case['label']}-{spark.sparkContext.appName}")
    blobs = [(name, _ipc(rows)) for name, rows in case["committed"].items()]
    n_parts = group_partitions(spark, [n for n, _ in blobs])

    def writes():
        root = written()
        items = [(str(root / name), data) for name, data in blobs]
        done = spark.sparkContext.parallelize(items, n_parts).mapPartitions(_write_tables).collect()
        assert sum(done) == len(items)

    counted = T.StructType([T.StructField("groups", T.LongType()), T.StructField("rows", T.LongType())])
    from pyspark.sql import functions as F
    # the archive's rows shuffled into N groups (by seq), each group's rows together and in order
    grouped = (df.withColumn("__group", (F.col("seq") % case["tables"]).cast("int"))
               .repartition(n_parts, "__group").sortWithinPartitions("__group", "seq"))

    def spark_alone():      # the archive read, shuffled into the groups, handed to Python: no decoding
        got = grouped.mapInArrow(_Counted(), counted).collect()
        assert sum(r["rows"] for r in got) == case["messages"]

    by_group = spark.sparkContext.broadcast({k: data for k, (_, data) in enumerate(blobs)})
    alone_root = _Fresh(work, f"spark-alone-{case['label']}-{spark.sparkContext.appName}")
    wrote = T.StructType([*counted.fields, T.StructField("written", T.LongType())])

    def spark_alone_writes():   # and each group's final table written where its rows are: ours all taken out
        got = grouped.mapInArrow(_Written(by_group, str(alone_root())), wrote).collect()
        assert sum(r["written"] for r in got) == len(blobs) and sum(r["rows"] for r in got) == case["messages"]

    out["pass_s"] = best(lambda: nowrite(False), repeat)
    out["spark_s"] = best(spark_alone, repeat)
    out["spark_writes_s"] = best(spark_alone_writes, repeat)
    by_group.destroy()
    out["nowrite_s"] = best(nowrite, repeat)
    out["writes_s"] = best(writes, repeat)
    out["partitions"] = n_parts
    return out


def _busy(cpu: int, memory: bool) -> None:
    """A fixed amount of work pinned to ``cpu``: Python arithmetic, or copying 32 MiB
    arrays (memory bound: past the caches)."""
    import numpy as np
    os.sched_setaffinity(0, {cpu})
    if memory:
        a = np.ones(32 << 20, np.uint8)
        b = np.empty_like(a)
        for _ in range(150):
            np.copyto(b, a)
    else:
        x = 0
        for i in range(20_000_000):
            x += i * i


def machine_ceiling(repeat: int = 5) -> dict:
    """What two CPUs give at most here: the work of :func:`_busy` done twice at once, one
    process pinned to each CPU, against once on one CPU, as throughput (2.0: two
    CPUs are twice one), each time the two runs paired; the median of ``repeat``."""
    import multiprocessing as mp

    import numpy as np
    ctx = mp.get_context("fork")

    a, b = sorted(os.sched_getaffinity(0))[:2]

    def timed(cpus, memory):
        ps = [ctx.Process(target=_busy, args=(c, memory)) for c in cpus]
        t0 = time.perf_counter()
        for p in ps:
            p.start()
        for p in ps:
            p.join()
        if any(p.exitcode != 0 for p in ps):
            raise RuntimeError(f"a busy process on CPUs {cpus} failed")
        return time.perf_counter() - t0
    out = {}
    for memory, key in ((False, "cpu"), (True, "memory")):
        timed([a], memory)      # (the pages of a first run)
        out[key] = float(np.median([2 * timed([a], memory) / timed([a, b], memory) for _ in range(repeat)]))
    return out


def cluster_runs(case: dict, work: Path, repeat: int) -> dict:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pgoutput_codec.testing.sparkcluster import StandaloneCluster
    out = {}
    with StandaloneCluster(workers=2, cores=1, memory="2g", pin=True) as c:
        out["pinned"] = c.pin
        if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) >= 2:    # (daemons up, no application)
            out["machine"] = machine_ceiling()
        for cores in (1, 2):
            spark = _cluster_session(c.url, cores)
            try:
                spark_runs(spark, case["warm"], work, 1)      # warm: executors, Python workers
                r = spark_runs(spark, case, work, repeat)
                r["executors"] = len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1
                out[cores] = r
            finally:
                spark.stop()
    out["speedup"] = {k: out[1][k] / out[2][k] for k in ("mirror_s", "pass_s", "nowrite_s", "writes_s", "spark_s",
                                                         "spark_writes_s")}
    return out


# ---------------------------------------------------------------- cases

def _case(label: str, tables: int, rows: int, work: Path, one_table: bool = False) -> dict:
    plan = many_tables(tables, rows, one_table=one_table)
    path = write_archive(plan.archive, work / f"archive-{label}", files=4)
    committed = plan.committed()
    live = sum(len(t) for t in committed.values())
    return {"label": label, "tables": len(plan.names), "rows": rows, "path": path, "committed": committed,
            "live": live, "messages": len(plan.archive),
            "change_rows": sum(plan.change_rows.values())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--tables", default="10,100,1000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--no-cluster", action="store_true")
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.tables.split(",")]
    load0 = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="tables-bench-"))
    try:
        cases = [_case(ONE, 1, args.rows, work, one_table=True)] + [_case(str(n), n, args.rows, work) for n in ns]
        warm = _case("warm", 4, 2_000, work)
        for c in cases:
            c["warm"] = warm
        res = {"rows": args.rows, "cases": {c["label"]: {k: c[k] for k in ("tables", "messages", "change_rows", "live")}
                                            for c in cases}}
        one_process(warm, work, 1)
        for c in cases:
            res["cases"][c["label"]]["one_process"] = one_process(c, work, args.repeat)
            print(f"one process {c['label']}: {res['cases'][c['label']]['one_process']}", flush=True)
        if not args.no_spark:
            spark = _local_session()
            try:
                spark_runs(spark, warm, work, 1)
                for c in cases:
                    res["cases"][c["label"]]["spark"] = r = spark_runs(spark, c, work, args.repeat)
                    print(f"spark local[2] {c['label']}: {r}", flush=True)
            finally:
                spark.stop()
        if not args.no_cluster:
            big = cases[-1]
            res["cluster"] = {"label": big["label"], **cluster_runs(big, work, args.repeat)}
        res["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "load_before": load0,
                          "load_after": os.getloadavg()}
        _print(res)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "tables.json").write_text(json.dumps(res, indent=1, default=str))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _print(res: dict) -> None:
    cases = res["cases"]
    one = cases[ONE]
    print(f"\n{res['rows']:,} rows inserted, 10% updated, 5% deleted; load {res['machine']['load_before'][0]:.1f} → "
          f"{res['machine']['load_after'][0]:.1f}")
    print(f"{'tables':>7} {'changes':>8} | {'mirror s':>8} {'rows s':>7} {'floor s':>8} {'×floor':>7} {'rows ×':>7}"
          f" {'read+w s':>8} {'×':>5} | {'fresh s':>7} {'floor s':>7} {'×floor':>7} {'read+w s':>8} {'×':>5} |"
          f" {'spark s':>8} {'×one':>6} {'pass s':>7} {'nowrite s':>9} {'writes s':>8} {'×writes':>8} {'alone s':>7}"
          f" {'alone+w s':>9} {'×':>5}")
    for label, c in cases.items():
        p = c["one_process"]
        line = f"{c['tables'] if label != ONE else '1 (one)':>7} {c['change_rows']:>8,} | {p['mirror_s']:8.2f} " \
               f"{p['rows_s']:7.2f} {p['floor_s']:8.2f} {p['ratio']:7.2f} {p['rows_ratio']:7.2f}" \
               f" {p['read_floor_s']:8.2f} {p['read_ratio']:5.2f} |" \
               f" {p['fresh_mirror_s']:7.2f} {p['fresh_floor_s']:7.2f} {p['fresh_ratio']:7.2f}" \
               f" {p['fresh_read_floor_s']:8.2f} {p['fresh_read_ratio']:5.2f} |"
        s = c.get("spark")
        if s:
            line += f" {s['mirror_s']:8.2f} {s['mirror_s'] / one['spark']['mirror_s']:6.2f} {s['pass_s']:7.2f} " \
                    f"{s['nowrite_s']:9.2f} " \
                    f"{s['writes_s']:8.2f} {s['mirror_s'] / s['writes_s']:8.2f} {s['spark_s']:7.2f}" \
                    f" {s['spark_writes_s']:9.2f} {s['mirror_s'] / s['spark_writes_s']:5.2f}"
        print(line)
    cl = res.get("cluster")
    if cl:
        a, b = cl[1], cl[2]
        print(f"\ncluster, {cl['label']} tables, pinned {cl['pinned']}: executors {a['executors']} / {b['executors']}")
        print(f"{'measure':28s} {'1 core s':>9s} {'2 cores s':>9s} {'speed-up':>9s}")
        keys = (("mirror_s", "decode_changes + mirror"), ("pass_s", "the pass, groups counted"),
                ("nowrite_s", "the pass, net changes"), ("writes_s", "the writes alone"),
                ("spark_s", "Spark alone, no decoding"), ("spark_writes_s", "Spark alone, and the writes"))
        for k, lab in keys:
            print(f"{lab:28s} {a[k]:9.2f} {b[k]:9.2f} {cl['speedup'][k]:8.2f}x")
        if cl.get("machine"):
            print(f"the machine, two processes each pinned to a CPU against one: Python arithmetic "
                  f"{cl['machine']['cpu']:.2f}x, copying memory {cl['machine']['memory']:.2f}x")


if __name__ == "__main__":
    main()
