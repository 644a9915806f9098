"""Typed change decoding vs message decoding, on the same archive.

Builds N ten-column Insert messages (int4 key + 9 text columns, 100 per transaction,
one Relation) with the encoder and times, in one run:
  (1) decode_batch            — messages (the Cython core);
  (2) decode_changes          — committed change rows (raw values, lossless);
  (3) decode_changes + table_changes — typed rows of the table, in two steps;
  (4) decode_table_changes — the same typed rows in one step (no generic change rows:
      values converted in place from the decoded messages).
Prints changes/s and the ratios to (1); the target is typed change decoding ≤ 3× (1),
checked on (4), the typed path (3) reported next to it.
Writes bench/results/changes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import pyarrow as pa

from pgoutput_codec import (
    Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, decode_batch, encode_message,
)
from pgoutput_codec import decode_changes
from pgoutput_codec.tables import decode_table_changes, table_changes
from pgoutput_codec.testing import best

RESULTS = Path(__file__).parent / "results"


def build(n: int, per_txn: int = 100) -> pa.Array:
    cols = (RelationColumn(1, "id", 23, -1),) + tuple(RelationColumn(0, f"c{i}", 25, -1) for i in range(9))
    rel = encode_message(Relation(relation_id=16384, namespace="public", relation_name="bench",
                                  replica_identity="d", columns=cols))
    out, lsn = [], 1 << 32
    for t in range(0, n, per_txn):
        out.append(encode_message(Begin(final_lsn=lsn + per_txn, commit_ts=t, xid=1000 + t // per_txn)))
        if t == 0:
            out.append(rel)
        for i in range(t, min(n, t + per_txn)):
            vals = (TupleColumn("t", str(i).encode()),) + tuple(
                TupleColumn("t", b"value%05d" % ((i * 7 + k) % 100000)) for k in range(9))
            out.append(encode_message(Insert(relation_id=16384, new_tuple=vals)))
        out.append(encode_message(Commit(commit_lsn=lsn + per_txn, end_lsn=lsn + per_txn + 1, commit_ts=t)))
        lsn += per_txn + 2
    return pa.array(out, pa.binary())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    arr = build(args.n)
    mb = arr.buffers()[2].size / 1e6
    t1 = best(lambda: decode_batch(arr), args.repeat)
    t2 = best(lambda: decode_changes(arr), args.repeat)
    changes = decode_changes(arr)
    t3 = best(lambda: table_changes(decode_changes(arr), "public.bench"), args.repeat)
    t4 = best(lambda: decode_table_changes(arr, "public.bench"), args.repeat)
    assert len(changes) == args.n
    assert decode_table_changes(arr, "public.bench").equals(table_changes(changes, "public.bench"))
    rows = [("decode_batch (messages)", t1), ("decode_changes (raw changes)", t2),
            ("decode_changes + table_changes (typed)", t3), ("decode_table_changes (typed, one step)", t4)]
    print(f"{args.n} ten-column inserts, {len(arr)} messages, {mb:.1f} MB, load {os.getloadavg()[0]:.2f}")
    print(f"{'':42} {'changes/s':>12} {'MB/s':>8} {'× batch':>8}")
    for name, t in rows:
        print(f"{name:42} {args.n / t:12,.0f} {mb / t:8.0f} {t / t1:8.2f}")
    verdict = "met" if t4 <= 3 * t1 else "NOT met"
    print(f"typed change decoding costs {t4 / t1:.2f}× message decoding in one step, {t3 / t1:.2f}× in two "
          f"(target ≤ 3×: {verdict})")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "changes.json").write_text(json.dumps({
        "n": args.n, "messages": len(arr), "payload_mb": mb,
        "seconds": {name: t for name, t in rows},
        "changes_per_s": {name: args.n / t for name, t in rows},
        "typed_over_batch": t4 / t1, "typed_two_step_over_batch": t3 / t1, "target": 3.0,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "pyarrow": pa.__version__,
                    "load": os.getloadavg()[0]},
        "date": time.strftime("%Y-%m-%d"),
    }, indent=2))


if __name__ == "__main__":
    main()
