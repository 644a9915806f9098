"""Crafted inputs that would make a decoder's memory outgrow its input, each run in a
process of its own: ``python memory_probe.py CASE`` prints one JSON line — the input's
size in bytes, the most fed at once, the change rows decoded, the peak RSS before decoding (imports, input
built) and after, in bytes. ``tests/test_memory.py`` holds the bound over them;
``docs/limits.md`` gives the figures."""

from __future__ import annotations

import json
import resource
import sys

import numpy as np
import pyarrow as pa

from pgoutput_codec import ChangeDecoder, decode_changes
from pgoutput_codec.pgoutput.encode import encode_message
from pgoutput_codec.pgoutput.messages import (MAX_IDENTIFIER_BYTES, Begin, Commit, Insert, Relation, RelationColumn, Truncate,
                                     TupleColumn, Type)

REL = 16384
TRUNCATES = 10_000


def _relation(ncols: int, name_bytes: int) -> bytes:
    cols = tuple(RelationColumn(1 if i == 0 else 0, f"{i:05d}".ljust(name_bytes, "c"), 23, -1) for i in range(ncols))
    return encode_message(Relation(relation_id=REL, namespace="s".ljust(name_bytes, "s"),
                                   relation_name="t".ljust(name_bytes, "t"), replica_identity="d", columns=cols))


def _txn(xid: int, body: list) -> list:
    return [encode_message(Begin(final_lsn=0x1000 + xid, commit_ts=0, xid=xid)), *body,
            encode_message(Commit(flags=0, commit_lsn=0x1000 + xid, end_lsn=0x1001 + xid, commit_ts=0))]


def truncates_of_a_wide_relation() -> list:
    """A 1,600-column relation truncated 10,000 times, a Truncate message each (14 bytes):
    each change row names the relation's ~100 KB column list."""
    trunc = encode_message(Truncate(options=0, relation_ids=(REL,)))
    return _txn(1, [_relation(1600, 63)] + [trunc] * TRUNCATES)


def inserts_of_a_wide_relation() -> list:
    """1,600 columns whose names are as long as a name can be (~400 KB of column list),
    then 2,000 Inserts of all-null rows (1.6 KB each)."""
    row = encode_message(Insert(relation_id=REL, new_tuple=tuple([TupleColumn("n", None)] * 1600)))
    return _txn(1, [_relation(1600, MAX_IDENTIFIER_BYTES)] + [row] * 2000)


def repeated_types() -> list:
    """200,000 Type messages naming one type, as a capture that re-peeks may land them."""
    typ = encode_message(Type(type_oid=90000, namespace="public", type_name="mood"))
    return _txn(1, [typ] * 200_000)


def small_inserts() -> list:
    """500,000 one-column Inserts of 4 bytes: the most rows a byte of input can make."""
    row = encode_message(Insert(relation_id=REL, new_tuple=(TupleColumn("t", b"1234"),)))
    return _txn(1, [_relation(1, 1)] + [row] * 500_000)


def open_transaction() -> list:
    """One transaction that never commits, 120 MB of row values: held past the budget
    of 16 MB, spilled."""
    row = encode_message(Insert(relation_id=REL, new_tuple=(TupleColumn("t", b"v" * 1000),)))
    return [encode_message(Begin(final_lsn=0x1000, commit_ts=0, xid=1)), _relation(1, 1)] + [row] * 120_000


def spilled_commit() -> list:
    """The same transaction, committed at the end: its rows come back from the spill
    files a fed chunk at a time (``feed_parts``), each let go before the next."""
    return open_transaction() + [encode_message(Commit(flags=0, commit_lsn=0x1000, end_lsn=0x1001, commit_ts=0))]


CASES = {f.__name__: f for f in (truncates_of_a_wide_relation, inserts_of_a_wide_relation, repeated_types,
                                 small_inserts, open_transaction, spilled_commit)}
#: the decoder's budget in the open-transaction case
BUDGET_MB = 16


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _binary(payloads: list) -> pa.Array:
    """The payloads as one binary array over one buffer, built without a builder's
    doubling (whose freed half would hide the decoder's growth below the peak)."""
    offsets = np.zeros(len(payloads) + 1, np.int64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(payloads),
                                 [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(payloads))])


def main(case: str) -> None:
    payloads = CASES[case]()
    values = _binary(payloads)
    size = values.nbytes
    del payloads
    before = _peak()
    fed = size
    if case in ("open_transaction", "spilled_commit"):
        rows, fed = 0, 0
        with ChangeDecoder(max_memory_mb=BUDGET_MB) as dec:
            for at in range(0, len(values), 10_000):
                chunk = values.slice(at, 10_000)
                fed = max(fed, chunk.nbytes)
                for part in dec.feed_parts(chunk):
                    rows += len(part)
    else:
        rows = len(decode_changes(values))
    print(json.dumps({"case": case, "input_bytes": size, "fed_bytes": fed, "rows": rows, "rss_before": before, "rss_peak": _peak()}))


if __name__ == "__main__":
    main(sys.argv[1])
