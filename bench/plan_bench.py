"""The driver's share of Spark's ``decode_changes``: ``ControlPlan.build`` over the
control rows of an archive of small transactions (one Insert each: two control rows per
transaction, the worst ratio of control rows to changes an OLTP archive has).

Times, in one run, each in a fresh process (so that its peak RSS is its own):
  (1) the array walk of plain transactions (the default);
  (2) the Python walk of the same rows (what streamed, two-phase or interleaved
      transactions take; ``_VECTORIZED_WALK`` off);
  (3) the Python walk in one chunk, never letting go of finished transactions (how the
      plan was built before the chunked walk; ``_WALK_CHUNK`` unbounded).
Prints seconds, µs and peak bytes per transaction, and (2)/(1). Writes
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
import pgoutput_codec.plan as P
from pgoutput_codec import Begin, Commit, Relation, RelationColumn, encode_message
n, vectorized, chunk = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
rel = encode_message(Relation(relation_id=1, namespace="public", relation_name="t", replica_identity="d",
                              columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1))))
rows = [rel]
for i in range(n):
    rows.append(encode_message(Begin(final_lsn=(1 << 32) + 64 * i, commit_ts=i, xid=1000 + i)))
    rows.append(encode_message(Commit(commit_lsn=(1 << 32) + 64 * i, end_lsn=(1 << 32) + 64 * i + 8, commit_ts=i)))
values = pa.array(rows, pa.binary())
del rows
# order keys as in the archive: B at 1 + 3i, its Insert at 2 + 3i (not a control row), C at 3 + 3i
keys = np.concatenate([[0], 1 + 3 * (np.arange(2 * n) // 2) + 2 * (np.arange(2 * n) % 2)]).astype(np.int64)
P._VECTORIZED_WALK, P._WALK_CHUNK = vectorized, chunk
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
plan = P.ControlPlan.build(values, keys)
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
assert len(plan.commit_slots) == n
print(json.dumps({"seconds": dt, "peak_bytes": peak * 1024}))
"""


def run(n: int, vectorized: bool, chunk: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n), "1" if vectorized else "0", str(chunk)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.transactions
    import pgoutput_codec.plan as P
    cases = {"array walk": (True, P._WALK_CHUNK), "Python walk": (False, P._WALK_CHUNK),
             "Python walk, one chunk": (False, 1 << 62)}
    res = {}
    for name, (vec, chunk) in cases.items():
        runs = [run(n, vec, chunk) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        res[name] = {"seconds": best["seconds"], "us_per_txn": best["seconds"] / n * 1e6,
                     "peak_bytes_per_txn": max(r["peak_bytes"] for r in runs) / n}
    print(f"ControlPlan.build, {n} one-row transactions ({2 * n + 1} control rows), best of {args.repeat}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'walk':26} {'seconds':>8} {'µs/txn':>8} {'peak B/txn':>11}")
    for name, r in res.items():
        print(f"{name:26} {r['seconds']:8.2f} {r['us_per_txn']:8.2f} {r['peak_bytes_per_txn']:11.0f}")
    ratio = res["Python walk"]["seconds"] / res["array walk"]["seconds"]
    print(f"Python walk / array walk: {ratio:.1f}x")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "plan.json").write_text(json.dumps({
        "transactions": n, "results": res, "python_over_array": ratio,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
