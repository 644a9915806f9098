"""The driver's share of Spark's ``decode_changes``: ``ControlPlan.build`` over the
control rows of an archive of small transactions (one Insert each: two control rows per
transaction, the worst ratio of control rows to changes an OLTP archive has).

Times, in one run, each in a fresh process (so that its peak RSS is its own):
  (1) the array walk of plain transactions (the default);
  (2) the Python walk of the same rows (what streamed, two-phase or interleaved
      transactions take; ``chunks.VECTORIZED_WALK`` off);
  (3) the Python walk in one chunk, never letting go of finished transactions (what the
      chunked walk saves; ``chunks.WALK_CHUNK`` unbounded);
  (4) a protocol v2+ archive: the same transactions with a streamed one (two chunks and
      its Stream Commit) after every 1 000, by default — the Python walk takes the
      streams' rows and the array walk the runs of plain transactions between them;
  (5) that archive through the Python walk alone (what cutting the walk at the streams
      saves every chunk holding a stream row).
Prints seconds, µs and peak bytes per transaction, and (2)/(1), (5)/(4). Writes
bench/results/plan.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
import numpy as np, pyarrow as pa
import pgoutput_codec.changes as P
import pgoutput_codec.changes.chunks as W
from pgoutput_codec import (Begin, Commit, Relation, RelationColumn, StreamCommit, StreamStart, StreamStop,
                            encode_message)
n, vectorized, chunk, every = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])
rel = encode_message(Relation(relation_id=1, namespace="public", relation_name="t", replica_identity="d",
                              columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1))))
rows, keys, streamed = [rel], [0], 0
for i in range(n):
    lsn = (1 << 32) + 64 * i
    # order keys as in the archive: each transaction's Insert (not a control row) sits
    # between its Begin and its Commit, each stream chunk's between Start and Stop
    if every and i % every == every - 1:
        xid = 10**8 + i
        for first in (True, False):
            rows += [encode_message(StreamStart(xid=xid, first_segment=first)), encode_message(StreamStop())]
            keys += [keys[-1] + 1, keys[-1] + 3]
        rows.append(encode_message(StreamCommit(xid=xid, flags=0, commit_lsn=lsn, end_lsn=lsn + 4, commit_ts=i)))
        keys.append(keys[-1] + 1)
        streamed += 1
        lsn += 32
    rows.append(encode_message(Begin(final_lsn=lsn, commit_ts=i, xid=1000 + i)))
    rows.append(encode_message(Commit(commit_lsn=lsn, end_lsn=lsn + 8, commit_ts=i)))
    keys += [keys[-1] + 1, keys[-1] + 3]
values = pa.array(rows, pa.binary())
keys = np.array(keys, np.int64)
del rows
W.VECTORIZED_WALK, W.WALK_CHUNK = vectorized, chunk
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
plan = P.ControlPlan.build(values, keys)
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
assert len(plan.commit_slots) == n + streamed
print(json.dumps({"seconds": dt, "peak_bytes": peak * 1024}))
"""


def run(n: int, vectorized: bool, chunk: int, every: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n), "1" if vectorized else "0", str(chunk), str(every)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--streamed-every", type=int, default=1000,
                    help="cases (4), (5): a streamed transaction after every N plain ones")
    args = ap.parse_args()
    n, every = args.transactions, args.streamed_every
    import pgoutput_codec.changes.chunks as W
    cases = {"array walk": (True, W.WALK_CHUNK, 0), "Python walk": (False, W.WALK_CHUNK, 0),
             "Python walk, one chunk": (False, 1 << 62, 0),
             "v2+ streams, cut walk": (True, W.WALK_CHUNK, every),
             "v2+ streams, Python walk": (False, W.WALK_CHUNK, every)}
    res = {}
    for name, (vec, chunk, streams) in cases.items():
        runs = [run(n, vec, chunk, streams) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        res[name] = {"seconds": best["seconds"], "us_per_txn": best["seconds"] / n * 1e6,
                     "peak_bytes_per_txn": max(r["peak_bytes"] for r in runs) / n}
    print(f"ControlPlan.build, {n} one-row transactions ({2 * n + 1} control rows), best of {args.repeat}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'walk':26} {'seconds':>8} {'µs/txn':>8} {'peak B/txn':>11}")
    for name, r in res.items():
        print(f"{name:26} {r['seconds']:8.2f} {r['us_per_txn']:8.2f} {r['peak_bytes_per_txn']:11.0f}")
    ratio = res["Python walk"]["seconds"] / res["array walk"]["seconds"]
    streams = res["v2+ streams, Python walk"]["seconds"] / res["v2+ streams, cut walk"]["seconds"]
    print(f"Python walk / array walk: {ratio:.1f}x; with a streamed transaction every {every}: {streams:.1f}x")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "plan.json").write_text(json.dumps({
        "transactions": n, "streamed_every": every, "results": res, "python_over_array": ratio,
        "streams_python_over_cut": streams,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
