"""Decoding on several threads of one process, against one thread, in one run.

Builds N ten-column Insert messages (100 per transaction, as changes_bench.py; the
first 1 M encoded, then repeated: ``replays="keep"``, as their commit LSNs repeat) and
times, best of ``--repeat``:
  (1) decode_batch, 1 worker and W workers, and the join of W pieces' outputs alone
      (``pa.concat_arrays``: the serial part of a one-array result);
  (2) decode_changes, 1 worker (the ``ChangeDecoder``), the pieces path on 1 worker,
      and W workers; the plan over the control rows alone (its serial part);
  (3) openGauss 'b' frames (opengauss_bench.py's, 100 Insert records each), 1 worker and
      W workers.
Prints seconds, ratios, the serial fraction the two runs imply (Karp-Flatt) and what
Amdahl's law gives for 16 and 64 cores from it, beside the serial parts measured alone. Writes bench/results/parallel.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from changes_bench import build  # noqa: E402
from opengauss_bench import og_batches  # noqa: E402

from pgoutput_codec import decode_batch, decode_changes  # noqa: E402
from pgoutput_codec.opengauss import decode_batch as og_decode_batch  # noqa: E402
from pgoutput_codec.parallel import changes_by_pieces  # noqa: E402
from pgoutput_codec.plan import ControlPlan, control_candidates  # noqa: E402
from pgoutput_codec.testing.timing import best  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def amdahl(serial: float, cores: int) -> float:
    return 1 / (serial + (1 - serial) / cores)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    w = args.workers
    one = build(min(args.n, 1_000_000))
    arr = pa.concat_arrays([one] * -(-args.n // len(one))).slice(0, args.n)
    arr = pa.concat_arrays([arr])
    n = len(arr)
    res = {"messages": n, "workers": w, "cores": os.cpu_count(), "python": platform.python_version()}

    res["batch_1"] = best(lambda: decode_batch(arr, workers=1), args.repeat)
    res["batch_w"] = best(lambda: decode_batch(arr, workers=w), args.repeat)
    pieces = [decode_batch(arr.slice(k * n // w, (k + 1) * n // w - k * n // w), workers=1) for k in range(w)]
    res["batch_join"] = best(lambda: pa.concat_arrays(pieces), args.repeat)
    pieces.clear()

    opts = {"replays": "keep"}
    res["changes_1"] = best(lambda: decode_changes(arr, workers=1, **opts), args.repeat)
    res["changes_pieces_1"] = best(lambda: changes_by_pieces(arr, 1, opts), args.repeat)
    res["changes_w"] = best(lambda: decode_changes(arr, workers=w, **opts), args.repeat)
    keys = np.arange(n, dtype=np.int64)
    mask = control_candidates(arr)
    res["changes_plan"] = best(lambda: ControlPlan.build(arr.filter(pa.array(mask)), keys[mask], **opts),
                               args.repeat)

    frames = og_batches(min(args.n, 200_000), 100)
    frames = pa.concat_arrays([frames] * max(1, args.n // 500_000))      # (2 M records for 5 M messages)
    res["og_records"] = len(frames) * 100
    res["og_1"] = best(lambda: og_decode_batch(frames, workers=1), args.repeat)
    res["og_w"] = best(lambda: og_decode_batch(frames, workers=w), args.repeat)

    rows = [
        ("batch", "decode_batch", res["batch_1"], res["batch_w"], res["batch_join"], "the join of the pieces"),
        ("changes", "decode_changes, pieces path", res["changes_pieces_1"], res["changes_w"], res["changes_plan"],
         "the plan over the control rows"),
        ("og", f"openGauss 'b', {res['og_records'] / 1e6:g} M records", res["og_1"], res["og_w"], 0.0,
         "(record batches put together, no copy)"),
    ]
    print(f"{n:,} messages, {w} workers against 1, best of {args.repeat}")
    print(f"{'':28} {'1 worker':>9} {f'{w} workers':>10} {'ratio':>6} {'serial':>7} {'16 cores':>9} {'64 cores':>9}"
          f"  {'serial part measured':>22}")
    for key, name, t1, tw, part, what in rows:
        # the serial fraction the two runs imply (Karp-Flatt): what did not get faster,
        # the serial code and what the threads contend for (memory bandwidth, the GIL)
        frac = min(1.0, max(0.0, (tw / t1 - 1 / w) / (1 - 1 / w))) if w > 1 else 1.0   # (noise: within 0..1)
        res[f"{key}_serial_fraction"] = frac
        print(f"{name:28} {t1:9.3f} {tw:10.3f} {t1 / tw:6.2f} {100 * frac:6.1f}% {amdahl(frac, 16):8.1f}x"
              f" {amdahl(frac, 64):8.1f}x  {part:.3f} s, {what}")
    print(f"decode_changes on 1 worker takes the ChangeDecoder: {res['changes_1']:.3f} s; {w} workers "
          f"{res['changes_1'] / res['changes_w']:.2f}x that")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "parallel.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
