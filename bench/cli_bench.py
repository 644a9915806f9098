"""``pgoutput-codec decode`` on an archive of Parquet files: threads, the floor, memory.

Writes N ten-column Insert messages (as changes_bench.py, 100 per transaction; the first
1 M encoded, then repeated with ``seq`` running on: ``--replays keep``, as their commit
LSNs repeat) as 8 and as 48 Parquet files, and runs, each in a fresh process, one run
each after a warm-up of the page cache:
  (1) ``decode`` (one row per message) with ``--jobs 1`` and ``--jobs W``;
  (2) ``decode --changes`` with ``--jobs 1`` and ``--jobs W``;
  (3) the floor of each: pyarrow alone reading the archive and writing the same output
      table (loaded before the clock starts), no decoding.
Prints wall seconds, ``--jobs W`` against ``--jobs 1`` and against the floor, the floor's
writing alone (one thread's work, that bounds every run) and each run's peak RSS.
Writes bench/results/cli.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from changes_bench import build  # noqa: E402

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]

# peak RSS: the process's own high-water mark (VmHWM). ru_maxrss would not do: Linux
# carries the forking parent's figure into the child, and this parent holds the archive.
_HWM = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) * 1024"

_RUN = r"""
import json, sys, time
from pgoutput_codec.cli import main
t = time.perf_counter()
code = main(sys.argv[1:])
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "peak_rss": HWM, "code": code}))
""".replace("HWM", _HWM)

_FLOOR = r"""
import glob, json, sys, time
import pyarrow as pa, pyarrow.parquet as pq
src, out_table, dest = sys.argv[1:4]
table = pq.read_table(out_table)
t = time.perf_counter()
rows = 0
for path in sorted(glob.glob(src + "/*.parquet")):
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1 << 18):
        rows += batch.num_rows
read = time.perf_counter() - t
with pq.ParquetWriter(dest, table.schema, compression="zstd") as w:
    for batch in table.to_batches(max_chunksize=1 << 18):
        w.write_batch(batch)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "read_seconds": read, "write_seconds": dt - read, "peak_rss": HWM, "rows": rows}))
""".replace("HWM", _HWM)


def child(code: str, *args) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_archive(arr: pa.Array, files: int, path: Path) -> None:
    path.mkdir(parents=True)
    n = len(arr)
    seq = pa.array(np.arange(n, dtype=np.int64))
    cuts = np.linspace(0, n, files + 1, dtype=np.int64)
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        t = pa.table({"seq": seq.slice(a, b - a), "data": arr.slice(a, b - a)})
        pq.write_table(t, path / f"part-{k:06d}.parquet", row_group_size=1 << 17)


def warm(path: Path) -> None:
    for p in sorted(path.glob("*.parquet")):
        p.read_bytes()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--files", default="8,48")
    args = ap.parse_args(argv)
    w = args.workers
    one = build(min(args.n, 1_000_000))
    arr = pa.concat_arrays([one] * -(-args.n // len(one))).slice(0, args.n)
    arr = pa.concat_arrays([arr])
    res = {"messages": len(arr), "workers": w, "cores": os.cpu_count(), "python": platform.python_version(),
           "runs": []}
    work = Path(tempfile.mkdtemp(prefix="pgoutput-cli-bench-"))
    try:
        print(f"{len(arr):,} messages, --jobs {w} against --jobs 1 and against the floor "
              "(pyarrow reading the archive and writing the same output, no decoding)")
        print(f"{'':28} {'files':>5} {'jobs 1':>8} {f'jobs {w}':>8} {'ratio':>6} {'floor':>7} {'/floor':>7}"
              f" {'write':>6} {'RSS jobs 1':>11} {f'RSS jobs {w}':>11}")
        for files in [int(f) for f in args.files.split(",")]:
            src = work / f"archive-{files}"
            write_archive(arr, files, src)
            for what, extra in (("decode", []), ("decode --changes", ["--changes", "--replays", "keep"])):
                warm(src)
                runs = {}
                for jobs in (1, w):
                    out = work / f"out-{jobs}.parquet"
                    runs[jobs] = child(_RUN, "decode", str(src), str(out), "--jobs", str(jobs), *extra)
                warm(src)
                floor = child(_FLOOR, str(src), str(work / f"out-{w}.parquet"), str(work / "floor.parquet"))
                row = {"what": what, "files": files, "jobs_1": runs[1], f"jobs_{w}": runs[w], "floor": floor}
                res["runs"].append(row)
                t1, tw, tf = runs[1]["seconds"], runs[w]["seconds"], floor["seconds"]
                print(f"{what:28} {files:5} {t1:8.2f} {tw:8.2f} {t1 / tw:6.2f} {tf:7.2f} {tw / tf:7.2f}"
                      f" {floor['write_seconds']:6.2f} {runs[1]['peak_rss'] / 2**20:8.0f} MB"
                      f" {runs[w]['peak_rss'] / 2**20:8.0f} MB")
            shutil.rmtree(src)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cli.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
