#!/usr/bin/env python
"""Capture real pgoutput bytes from PostgreSQL 15, 16 and 18 into ``tests/data/`` (``make corpus``).

Runs the conformance scenario catalog (``tests/conformance/scenarios.py``) on every server
that can be had (see ``tests/conformance/servers.py``) and writes:

- ``corpus.parquet``: one row per message, columns ``server_version`` (e.g. "16.14"),
  ``option_set``, ``seq`` (arrival order within server+option set), ``lsn`` ("X/Y"),
  ``xid``, ``data`` (the payload) — exactly what ``pg_logical_slot_peek_binary_changes``
  returned;
- ``tables.parquet``: the final contents of every scenario table per server: ``schema``,
  ``table``, ``relid``, column names / type OIDs / typmods / generated flags, and ``rows``
  as text exactly as the type output functions write it (what pgoutput sends in 't'
  columns; NULL is null);
- ``ground_truth.json``: the rest the conformance checks need without a server (catalog,
  user types, all_types text and send-function bytes, xids of the scenario transactions,
  refused option sets).

``tests/conformance/test_corpus.py`` holds the committed files to the same checks as the
live servers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
sys.path.insert(0, ROOT)

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import scenarios  # noqa: E402
import servers  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data")

CORPUS_SCHEMA = pa.schema([
    ("server_version", pa.string()),
    ("option_set", pa.string()),
    ("seq", pa.int64()),
    ("lsn", pa.string()),
    ("xid", pa.int64()),
    ("data", pa.binary()),
])

TABLES_SCHEMA = pa.schema([
    ("server_version", pa.string()),
    ("schema", pa.string()),
    ("table", pa.string()),
    ("relid", pa.int64()),
    ("relkind", pa.string()),
    ("replica_identity", pa.string()),
    ("is_partition", pa.bool_()),
    ("column_names", pa.list_(pa.string())),
    ("column_type_oids", pa.list_(pa.int64())),
    ("column_type_modifiers", pa.list_(pa.int32())),
    ("column_generated", pa.list_(pa.string())),
    ("rows", pa.list_(pa.list_(pa.string()))),
])


def short_version(version: str) -> str:
    return version.split()[0]


def capture_all(majors=None):
    caps = []
    for spec in servers.server_specs():
        if majors and spec.major not in majors:
            continue
        if spec.bindir is None:
            print(f"pg{spec.major}: skipped: {spec.missing_reason}", file=sys.stderr)
            continue
        t0 = time.monotonic()
        with servers.PgServer(spec) as srv:
            cap = scenarios.run_all(srv)
        n = sum(len(r) for r in cap.rows.values())
        print(f"pg{spec.major}: PostgreSQL {cap.version}: {n} messages in {len(cap.rows)} option sets "
              f"({time.monotonic() - t0:.1f}s)", file=sys.stderr)
        caps.append(cap)
    return caps


def write(caps, outdir=DATA):
    os.makedirs(outdir, exist_ok=True)
    corpus = {name: [] for name in CORPUS_SCHEMA.names}
    tables = {name: [] for name in TABLES_SCHEMA.names}
    truth = []
    for cap in caps:
        ver = short_version(cap.version)
        for opt in scenarios.OPTION_SETS:
            for seq, (lsn, xid, data) in enumerate(cap.rows.get(opt.name, [])):
                for k, v in zip(CORPUS_SCHEMA.names, (ver, opt.name, seq, lsn, xid, data), strict=True):
                    corpus[k].append(v)
        for t in cap.tables:
            cols = t["columns"]
            vals = (ver, t["schema"], t["table"], t["relid"], t["relkind"], t["replident"], t["ispartition"],
                    [c["name"] for c in cols], [c["type_oid"] for c in cols], [c["type_modifier"] for c in cols],
                    [c["generated"] for c in cols], t["rows"])
            for k, v in zip(TABLES_SCHEMA.names, vals, strict=True):
                tables[k].append(v)
        truth.append(cap.to_json())
    pq.write_table(pa.table(corpus, schema=CORPUS_SCHEMA), os.path.join(outdir, "corpus.parquet"),
                   compression="zstd", compression_level=19)
    pq.write_table(pa.table(tables, schema=TABLES_SCHEMA), os.path.join(outdir, "tables.parquet"),
                   compression="zstd", compression_level=19)
    with open(os.path.join(outdir, "ground_truth.json"), "w", encoding="utf-8") as fh:
        json.dump({"servers": truth}, fh, indent=1, ensure_ascii=False, sort_keys=True)
        fh.write("\n")
    for name in ("corpus.parquet", "tables.parquet", "ground_truth.json"):
        path = os.path.join(outdir, name)
        print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path) // 1024} KiB)", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DATA, help="output directory (default tests/data)")
    ap.add_argument("--major", type=int, action="append", help="only this server version (repeatable)")
    args = ap.parse_args(argv)
    caps = capture_all(args.major)
    if not caps:
        print("no PostgreSQL server available: nothing written", file=sys.stderr)
        return 1
    write(caps, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
