"""Rewriting an archive captured in LATIN1 or EUC_JP as UTF-8 (transcode.py), against
decoding the result, in one run.

    .venv/bin/python bench/transcode_bench.py [-n 500000] [--repeat 3] [--plain-n 20000]

The archive: 10-column Inserts (text values, a third of them not ASCII) in transactions
of 100, with a Relation per transaction, as the encoder writes them in the capture's
encoding. Timed: the compiled loop (``_transcode.pyx``) over the whole archive; the
plain-Python path (decode, convert, encode: what the loop replaces) on a slice, scaled;
``decode_batch`` and ``decode_changes`` of the UTF-8 result. Writes
bench/results/transcode.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pgoutput_codec import (Begin, Commit, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            decode_batch, decode_changes, encode_message, transcode, transcode_payloads)
from pgoutput_codec.testing import best  # noqa: E402

RESULTS = Path(__file__).parent / "results"
WORDS = {"latin-1": ["caf\u00e9 cr\u00e8me", "plain words", "na\u00efve r\u00e9sum\u00e9", "order 42"],
         "euc_jp": ["\u65e5\u672c\u8a9e\u306e\u6587", "plain words", "\u30c6\u30b9\u30c8", "order 42"]}


def build(n, codec):
    rel = encode_message(Relation(xid=None, relation_id=16384, namespace="public", relation_name="bench",
                                  replica_identity="d",
                                  columns=tuple(RelationColumn(int(i == 0), f"c{i}", 25, -1) for i in range(10))))
    words = [w.encode(codec) for w in WORDS[codec]]
    out, k, lsn = [], 0, 1000
    while k < n:
        out.append(encode_message(Begin(final_lsn=lsn + 100, commit_ts=0, xid=k)))
        out.append(rel)
        for _ in range(100):
            out.append(encode_message(Insert(xid=None, relation_id=16384, new_tuple=tuple(
                TupleColumn("t", b"%d" % k if i == 0 else words[(k + i) % 4]) for i in range(10)))))
            k += 1
        out.append(encode_message(Commit(flags=0, commit_lsn=lsn + 100, end_lsn=lsn + 101, commit_ts=0)))
        lsn += 1000
    return pa.array(out, pa.binary())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=500_000, help="Inserts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plain-n", type=int, default=20_000, help="Inserts for the plain-Python path")
    args = ap.parse_args(argv)
    results = {"n": args.n, "when": time.strftime("%Y-%m-%d %H:%M:%S"), "encodings": {}}
    print(f"{'encoding':10} {'what':34} {'seconds':>8} {'k msg/s':>9} {'x decode_batch':>15}")
    for codec, pg in (("latin-1", "LATIN1"), ("euc_jp", "EUC_JP")):
        arr = build(args.n, codec)
        small = arr.slice(0, args.plain_n * 103 // 100)
        t_fast = best(lambda a=arr, e=pg: transcode_payloads(a, e), args.repeat)
        saved = transcode._rewrite_batch
        transcode._rewrite_batch = None
        try:
            t_plain = best(lambda a=small, e=pg: transcode_payloads(a, e), 1, warmup=False) * len(arr) / len(small)
        finally:
            transcode._rewrite_batch = saved
        utf8, _ = transcode_payloads(arr, pg)
        t_batch = best(lambda a=utf8: decode_batch(a), args.repeat)
        t_changes = best(lambda a=utf8: decode_changes(a), args.repeat)
        row = {"messages": len(arr), "transcode_s": t_fast, "transcode_plain_s_scaled": t_plain,
               "decode_batch_s": t_batch, "decode_changes_s": t_changes}
        results["encodings"][pg] = row
        for what, t in (("transcode (compiled loop)", t_fast), ("transcode (plain path, scaled)", t_plain),
                        ("decode_batch of the UTF-8 result", t_batch), ("decode_changes of it", t_changes)):
            print(f"{pg:10} {what:34} {t:8.3f} {len(arr) / t / 1e3:9.0f} {t / t_batch:15.1f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "transcode.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
