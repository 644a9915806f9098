"""mirror's incremental runs against deltalake alone, in one run.

Builds a table of N rows (int8 key, int4, a 24-byte text) as an archive of Inserts,
mirrors it into a Delta copy, then times incremental runs that update 1% and 0.1% of the
rows, their keys spread at random or clustered among the newest rows (an append-mostly
table). Each run starts from a copy of the same base. Against, on the same rows:
  floor   — deltalake's own append of the changed rows (no MERGE, no decoding);
  rewrite — the whole table written again (the snapshot, mode="overwrite").
Prints seconds and the ratios; writes bench/results/mirror.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from pgoutput_codec import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, Update, encode_message
from pgoutput_codec.lake import mirror, table_path

RESULTS = Path(__file__).parent / "results"
NAME = "public.bench"
REL = Relation(relation_id=16384, namespace="public", relation_name="bench", replica_identity="d",
               columns=(RelationColumn(1, "id", 20, -1), RelationColumn(0, "n", 23, -1),
                        RelationColumn(0, "s", 25, -1)))


def _row(i: int, gen: int) -> tuple:
    return (TupleColumn("t", str(i).encode()), TupleColumn("t", str((i * 7 + gen) % 1_000_000).encode()),
            TupleColumn("t", b"row %08d generation %03d" % (i, gen)))


def archive(ids, gen: int, lsn: int, op, per_txn: int = 1000) -> tuple[pa.Table, int]:
    """The changes of rows ``ids`` (Insert or Update ``op``) in transactions of
    ``per_txn``, after a Relation, from commit LSN ``lsn`` on: (archive table, next LSN)."""
    out = [encode_message(REL)]
    ids = list(ids)
    for t in range(0, len(ids), per_txn):
        out.append(encode_message(Begin(final_lsn=lsn, commit_ts=t, xid=1 + lsn % 1_000_000)))
        for i in ids[t:t + per_txn]:
            m = Insert(relation_id=16384, new_tuple=_row(i, gen)) if op == "I" else \
                Update(relation_id=16384, new_tuple=_row(i, gen))
            out.append(encode_message(m))
        out.append(encode_message(Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=t)))
        lsn += 10
    return pa.table({"seq": pa.array(range(len(out)), pa.int64()), "data": pa.array(out, pa.binary())}), lsn


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--file-size", type=int, default=None, help="the copy's target file size, bytes")
    args = ap.parse_args(argv)
    n = args.n
    work = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    try:
        base = work / "base"
        arc, lsn = archive(range(n), 0, 1 << 32, "I")
        t = time.perf_counter()
        mirror(arc, base, file_size=args.file_size)
        t_initial = time.perf_counter() - t
        from deltalake import DeltaTable
        snapshot = DeltaTable(table_path(base, NAME)).to_pyarrow_table()
        rng = random.Random(1)
        rows = []
        for share in (0.01, 0.001):
            k = max(1, int(n * share))
            for layout, ids in (("spread", sorted(rng.sample(range(n), k))), ("clustered", range(n - k, n))):
                inc, _ = archive(ids, 1, lsn, "U")
                target = work / f"run-{share}-{layout}"
                shutil.copytree(base, target)
                t = time.perf_counter()
                got = mirror(inc, target)
                t_mirror = time.perf_counter() - t
                assert got[0].upserts == k, got
                changed = snapshot.take(pa.array(list(ids)))   # the rows as mirror wrote them, their size
                floor_dir = work / f"floor-{share}-{layout}"
                shutil.copytree(table_path(base, NAME), floor_dir)
                t = time.perf_counter()
                write_deltalake(str(floor_dir), changed, mode="append")
                t_floor = time.perf_counter() - t
                t = time.perf_counter()
                write_deltalake(str(work / f"rewrite-{share}-{layout}"), snapshot, mode="overwrite")
                t_rewrite = time.perf_counter() - t
                rows.append(dict(share=share, layout=layout, changed=k, mirror_s=t_mirror, floor_s=t_floor,
                                 rewrite_s=t_rewrite))
        print(f"{n:,} rows mirrored in {t_initial:.2f} s; incremental runs (load {os.getloadavg()[0]:.2f}):")
        print(f"{'changed':>10} {'keys':>10} {'mirror s':>9} {'append s':>9} {'rewrite s':>10} "
              f"{'× append':>9} {'× rewrite':>10}")
        for r in rows:
            print(f"{r['changed']:>10,} {r['layout']:>10} {r['mirror_s']:9.2f} {r['floor_s']:9.2f} "
                  f"{r['rewrite_s']:10.2f} {r['mirror_s'] / r['floor_s']:9.1f} {r['mirror_s'] / r['rewrite_s']:10.2f}")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "mirror.json").write_text(json.dumps({
            "n": n, "file_size": args.file_size, "initial_s": t_initial, "runs": rows,
            "python": platform.python_version(),
            "load": os.getloadavg()[0]}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
