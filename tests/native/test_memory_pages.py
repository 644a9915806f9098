"""With ``PGOUTPUT_CODEC_HUGE_PAGES=1``, large output buffers are mapped with huge pages
where the system offers them (``_memory``): a decode of a large input does not fault its
output in 4 KiB at a time. Counted in a process of its own (the setting is read at
import), on its first decode (no block cached yet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

PROBE = r"""
import json, resource
import pyarrow as pa
from pgoutput_codec import Insert, TupleColumn, decode_batch, encode_message
msg = encode_message(Insert(relation_id=16384, new_tuple=tuple(
    TupleColumn("t", b"value-%02d-abcdefgh" % i) for i in range(10))))
values = pa.array([msg] * 400_000, pa.binary())
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
out = decode_batch(values, workers=1)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
tuples = out.field("new_tuple")
print(json.dumps({"faults": faults, "value_bytes": tuples.values.field("data").buffers()[2].size,
                  "rows": len(out), "last": tuples[-1].as_py()[-1]["data"].decode()}))
"""


HUGE = {**os.environ, "PGOUTPUT_CODEC_HUGE_PAGES": "1"}


def _thp_mode() -> str | None:
    try:
        text = THP.read_text()
    except OSError:
        return None
    return text[text.index("[") + 1:text.index("]")] if "[" in text else None


def test_a_large_first_decode_faults_its_output_in_huge_pages():
    mode = _thp_mode()
    if mode not in ("madvise", "always"):
        pytest.skip(f"transparent huge pages are {mode or 'not offered'} on this system")
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                         env=HUGE)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["rows"] == 400_000 and got["last"] == "value-09-abcdefgh"
    # the values alone fill 68 MB: 16,600 pages of 4 KiB, 33 of 2 MiB (the smaller
    # buffers, from malloc, fault by 4 KiB: a few thousand faults)
    assert got["value_bytes"] > 64 << 20
    assert got["faults"] < got["value_bytes"] // 4096 // 4, got


GROWN = r"""
import pyarrow as pa
from pgoutput_codec._native.memory import mapped_blocks
from pgoutput_codec.opengauss import Column, Record, decode_batch
from pgoutput_codec.opengauss.encode import encode_frame, encode_record
assert mapped_blocks()
frames = []
for f in range(400):
    recs = [encode_record(Record("I", 0x1000 + f, schema="public", table="t", new_tuple=tuple(
        Column(f"c{i}", 25, b"v%d-%d-%d" % (f, r, i) * (1 + (r + i) % 5)) for i in range(8))))
        for r in range(100)]
    frames.append(encode_frame(recs))
values = pa.array(frames, pa.binary())
whole = decode_batch(values, workers=1)
assert whole.num_rows == 40_000 and whole.nbytes > 16 << 20
parts = pa.concat_tables([decode_batch(values.slice(k, 10), workers=1) for k in range(0, 400, 10)])
assert whole.drop_columns(["row"]).equals(parts.drop_columns(["row"]))
assert whole.column("row").to_pylist() == [k for k in range(400) for _ in range(100)]
print("same")
"""


def test_buffers_grown_past_the_mapped_size_keep_their_bytes():
    """openGauss frames hold any number of records: its builders grow, and past 4 MiB a
    mapped block grows by mremap. The whole input decoded on one thread gives what its
    frames decoded in small batches (small buffers, never mapped) give."""
    res = subprocess.run([sys.executable, "-c", GROWN], capture_output=True, text=True, timeout=300, env=HUGE)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["same"]


def test_blocks_are_mapped_only_when_asked_for():
    """The default takes blocks from malloc (a first large decode of a process pays more
    for huge pages than it saves: docs/benchmarks.md)."""
    probe = "from pgoutput_codec._native.memory import mapped_blocks; print(mapped_blocks())"
    env = {k: v for k, v in os.environ.items() if k != "PGOUTPUT_CODEC_HUGE_PAGES"}
    for extra, want in (({}, "False"), ({"PGOUTPUT_CODEC_HUGE_PAGES": "1"}, "True")):
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                             env={**env, **extra})
        assert res.stdout.split() == [want], res.stderr[-2000:]
