"""The default number of threads against one and two, for every decoder, at every size.

Builds ten-column Insert messages (100 per transaction, as changes_bench.py; the first
1 M encoded, then repeated: ``replays="keep"``, as their commit LSNs repeat) and, for
each size of ``--sizes``, times every decoder whose ``workers`` defaults to "every core"
with ``workers=None`` (the default: as many as the input's size pays for, see
``threads.worker_count``), ``workers=1`` and ``workers=2``, best of ``--repeat``, the
three in turn. openGauss 'b' frames (opengauss_bench.py's, 100 Insert records each) are
sized to the same payload bytes. Beside ``decode_batch`` on two workers it prints the
floor: the same pieces with the decoding taken out (two threads copying each piece's
output buffers, then the same join), the least two workers can take.

Prints, per decoder and size, the seconds and the ratios default / one worker (never
above 1 is the aim: the default is never slower) and one / two workers (the gain of a
second core). A size whose input and output would not fit in the memory available is
skipped, and says so. Writes bench/results/parallel.json.

    .venv/bin/python bench/parallel_bench.py --sizes 10000,200000,2000000,20000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from changes_bench import build  # noqa: E402
from opengauss_bench import og_batches  # noqa: E402

from pgoutput_codec import ChangeDecoder, decode_batch, decode_changes, threads  # noqa: E402
from pgoutput_codec.pgoutput.batch import _join, decode_batch_pieces  # noqa: E402
from pgoutput_codec.opengauss import decode_batch as og_decode_batch  # noqa: E402
from pgoutput_codec.tables import decode_table_changes  # noqa: E402

RESULTS = Path(__file__).parent / "results"

#: peak memory per payload byte, roughly (input, output and the join's copy), to skip a
#: size the machine cannot hold rather than push it into swap or the OOM killer
PEAK_PER_BYTE = {"decode_batch": 5, "decode_batch_pieces": 4, "decode_changes": 10, "ChangeDecoder": 10,
                 "decode_table_changes": 12, "opengauss decode_batch": 6, "opengauss decode_changes": 10}

OPTS = {"replays": "keep"}

#: the decoders that hand back their pieces' outputs as they are (no join): their
#: default follows ``threads.PIECES_WORKER_MIN_BYTES``
UNJOINED = {"decode_batch_pieces", "opengauss decode_batch"}

DECODERS = {
    "decode_batch": lambda v, w: decode_batch(v, workers=w),
    "decode_batch_pieces": lambda v, w: decode_batch_pieces(v, workers=w),
    "decode_changes": lambda v, w: decode_changes(v, workers=w, **OPTS),
    "ChangeDecoder": lambda v, w: ChangeDecoder(workers=w, **OPTS).feed(v),
    "decode_table_changes": lambda v, w: decode_table_changes(v, "public.bench", workers=w, **OPTS),
    "opengauss decode_batch": lambda v, w: og_decode_batch(v, workers=w),
    "opengauss decode_changes": lambda v, w: decode_changes(v, source="opengauss", workers=w, **OPTS),
}


def mem_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) << 10
    except OSError:
        pass
    return 1 << 62


def payload_bytes(values) -> int:
    return threads.payload_bytes(values)


def messages(one: pa.Array, n: int) -> pa.Array:
    """``n`` messages: a slice of the built ones, or them repeated (large_binary past 2 GiB)."""
    if n <= len(one):
        return pa.concat_arrays([one.slice(0, n)])
    reps = -(-n // len(one))
    big = payload_bytes(one) * reps >= 1 << 31
    part = one.cast(pa.large_binary()) if big else one
    return pa.concat_arrays([part] * reps).slice(0, n)


def frames_like(nbytes: int) -> pa.Array:
    """openGauss 'b' frames of 100 Insert records, about ``nbytes`` payload bytes."""
    unit = og_batches(100 * 1000, 100)
    reps = max(1, round(nbytes / payload_bytes(unit)))
    if reps <= 1:
        frames = max(1, round(len(unit) * nbytes / payload_bytes(unit)))
        return pa.concat_arrays([unit.slice(0, frames)])
    big = payload_bytes(unit) * reps >= 1 << 31
    return pa.concat_arrays([unit.cast(pa.large_binary()) if big else unit] * reps)


def interleaved(calls: dict, repeat: int) -> dict:
    """Best seconds of each call, the calls taken in turn (A B C A B C …) after a warm-up of
    each: a machine whose speed drifts slows them alike."""
    for fn in calls.values():
        fn()
    best = {k: float("inf") for k in calls}
    for _ in range(repeat):
        for k, fn in calls.items():
            t = time.perf_counter()
            out = fn()
            best[k] = min(best[k], time.perf_counter() - t)
            del out
    return best


def _copy_buffers(arr) -> int:
    """Copy every buffer of ``arr`` (each once: shared ones are the decoder's too) into
    fresh memory: what writing the output costs, without the decoding."""
    seen, total = set(), 0
    stack = [arr]
    while stack:
        a = stack.pop()
        for b in a.buffers():
            if b is not None and b.address not in seen:
                seen.add(b.address)
                total += np.frombuffer(b, np.uint8).copy().size
    return total


def floor(values, workers: int, repeat: int) -> float:
    """Seconds of ``decode_batch(values, workers=workers)`` with the decoding taken out:
    its pieces' outputs copied on ``workers`` threads, then joined as it joins them."""
    pieces = [out for _, out in decode_batch_pieces(values, workers=workers)[0]]

    def run():
        threads.run_pieces(_copy_buffers, pieces, workers)
        return _join(pieces, workers)
    return interleaved({"floor": run}, repeat)["floor"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,200000,2000000",
                    help="messages per input, comma-separated (20000000 takes ~12 GB and minutes)")
    ap.add_argument("--repeat", type=int, default=0, help="runs of each (0: 7 up to 200 k, 3 above)")
    ap.add_argument("--decoders", default=",".join(DECODERS), help="which, comma-separated")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [d.strip() for d in args.decoders.split(",")]
    one = build(min(max(sizes), 1_000_000))
    res = {"cores": threads.worker_count(None), "worker_min_bytes": threads.WORKER_MIN_BYTES,
           "pieces_worker_min_bytes": threads.PIECES_WORKER_MIN_BYTES,
           "python": platform.python_version(), "pyarrow": pa.__version__, "load_before": os.getloadavg()[0],
           "date": time.strftime("%Y-%m-%d %H:%M"), "runs": []}
    print(f"{res['cores']} cores, WORKER_MIN_BYTES {threads.WORKER_MIN_BYTES >> 20} MiB, PIECES_WORKER_MIN_BYTES "
          f"{threads.PIECES_WORKER_MIN_BYTES >> 20} MiB, load {res['load_before']:.2f}")
    print(f"{'decoder':26} {'messages':>10} {'MB':>7} {'default':>4} {'1 worker':>9} {'default':>9} {'2 workers':>9}"
          f" {'dflt/1':>7} {'1/2':>6} {'floor 2w':>9}")
    for n in sizes:
        values = messages(one, n)
        nbytes = payload_bytes(values)
        frames = None
        repeat = args.repeat or (7 if n <= 200_000 else 3)
        for name in names:
            if name.startswith("opengauss"):
                if frames is None:
                    frames = frames_like(nbytes)
                inp = frames
            else:
                inp = values
            need = PEAK_PER_BYTE[name] * payload_bytes(inp)
            row = {"decoder": name, "messages": n, "payload_bytes": payload_bytes(inp),
                   "default_workers": threads.worker_count(None, payload_bytes(inp), joined=name not in UNJOINED)}
            if need > mem_available():
                row["skipped"] = f"needs ~{need / 1e9:.0f} GB, {mem_available() / 1e9:.0f} GB available"
                print(f"{name:26} {n:>10,} {payload_bytes(inp) / 1e6:7.0f}  skipped: {row['skipped']}")
                res["runs"].append(row)
                continue
            t = interleaved({k: lambda fn=DECODERS[name], v=inp, w=w: fn(v, w)
                             for k, w in (("1", 1), ("default", None), ("2", 2))}, repeat)
            row.update(one_worker=t["1"], default=t["default"], two_workers=t["2"],
                       default_over_one=t["default"] / t["1"], one_over_two=t["1"] / t["2"])
            fl = ""
            if name == "decode_batch":
                row["floor_two_workers"] = floor(inp, 2, repeat)
                fl = f"{row['floor_two_workers']:9.4f}"
            res["runs"].append(row)
            print(f"{name:26} {n:>10,} {payload_bytes(inp) / 1e6:7.0f} {row['default_workers']:>4} {t['1']:9.4f}"
                  f" {t['default']:9.4f} {t['2']:9.4f} {row['default_over_one']:7.2f} {row['one_over_two']:6.2f} {fl}",
                  flush=True)
        del values, frames
    res["load_after"] = os.getloadavg()[0]
    print(f"load {res['load_after']:.2f}; dflt/1: default time over one worker's (≤ 1: never slower); "
          f"1/2: one worker's time over two's; floor 2w: two workers with the decoding taken out")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "parallel.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
