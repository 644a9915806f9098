"""mirror's incremental runs against deltalake alone, in one run.

Builds a table of N rows (int8 key, int4, a 24-byte text) as an archive of Inserts,
mirrors it into a Delta copy, then times incremental runs that update 1% and 0.1% of the
rows, their keys spread at random or clustered among the newest rows (an append-mostly
table). Each run starts from a copy of the same base. Against, on the same rows:
  merge   — deltalake's own MERGE of the changed rows on the key (no decoding, no net
            changes: the floor of a MERGE, mirror's part taken out);
  append  — deltalake's own append of the changed rows (no MERGE, no decoding);
  rewrite — the whole table written again (the snapshot, mode="overwrite").
Once with the copy in deltalake's default files and once in files of --file-size bytes
(2 MB: 14 files), where a MERGE of clustered keys rewrites one file.
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
from pgoutput_codec.lake import mirror, read_copy, table_path

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


def _runs(work: Path, n: int, file_size, lsn: int) -> tuple[float, list]:
    from deltalake import DeltaTable
    base = work / f"base-{file_size}"
    arc, lsn = archive(range(n), 0, lsn, "I")
    t = time.perf_counter()
    mirror(arc, base, file_size=file_size)
    t_initial = time.perf_counter() - t
    snapshot = read_copy(table_path(base, NAME))
    rng = random.Random(1)
    rows = []
    for share in (0.01, 0.001):
        k = max(1, int(n * share))
        for layout, ids in (("spread", sorted(rng.sample(range(n), k))), ("clustered", range(n - k, n))):
            inc, _ = archive(ids, 1, lsn, "U")
            target = work / f"run-{file_size}-{share}-{layout}"
            shutil.copytree(base, target)
            t = time.perf_counter()
            got = mirror(inc, target)
            t_mirror = time.perf_counter() - t
            assert got[0].upserts == k, got
            changed = read_copy(table_path(target, NAME)).take(pa.array(list(ids)))
            merge_dir = work / f"merge-{file_size}-{share}-{layout}"
            shutil.copytree(table_path(base, NAME), merge_dir)
            t = time.perf_counter()
            (DeltaTable(str(merge_dir)).merge(changed, predicate="t.id = s.id", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
            t_merge = time.perf_counter() - t
            floor_dir = work / f"floor-{file_size}-{share}-{layout}"
            shutil.copytree(table_path(base, NAME), floor_dir)
            t = time.perf_counter()
            write_deltalake(str(floor_dir), changed, mode="append")
            t_floor = time.perf_counter() - t
            t = time.perf_counter()
            write_deltalake(str(work / f"rewrite-{file_size}-{share}-{layout}"), snapshot, mode="overwrite")
            t_rewrite = time.perf_counter() - t
            rows.append(dict(file_size=file_size, share=share, layout=layout, changed=k, mirror_s=t_mirror,
                             merge_s=t_merge, floor_s=t_floor, rewrite_s=t_rewrite))
    return t_initial, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--file-size", type=int, default=2_000_000, help="the bounded copy's target file size, bytes")
    args = ap.parse_args(argv)
    n = args.n
    work = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    try:
        initial, rows = {}, []
        for file_size in (None, args.file_size):
            initial[file_size], more = _runs(work, n, file_size, 1 << 32)
            rows += more
        print(f"{n:,} rows; first mirror {initial[None]:.2f} s (default files), {initial[args.file_size]:.2f} s "
              f"({args.file_size:,}-byte files); incremental runs (load {os.getloadavg()[0]:.2f}):")
        print(f"{'files':>10} {'changed':>8} {'keys':>10} {'mirror s':>9} {'merge s':>8} {'append s':>9} "
              f"{'rewrite s':>10} {'× merge':>8} {'× rewrite':>10} {'merge × rewrite':>16}")
        for r in rows:
            print(f"{r['file_size'] or 'default':>10} {r['changed']:>8,} {r['layout']:>10} {r['mirror_s']:9.3f} "
                  f"{r['merge_s']:8.3f} {r['floor_s']:9.3f} {r['rewrite_s']:10.3f} {r['mirror_s'] / r['merge_s']:8.2f} "
                  f"{r['mirror_s'] / r['rewrite_s']:10.2f} {r['merge_s'] / r['rewrite_s']:16.2f}")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "mirror.json").write_text(json.dumps({
            "n": n, "initial_s": {str(k): v for k, v in initial.items()}, "runs": rows,
            "python": platform.python_version(), "load": os.getloadavg()[0]}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
