"""Large output buffers are mapped with huge pages where the system offers them
(``_memory``): a first decode of a large input does not fault its output in 4 KiB at a
time. Counted in a process of its own, on its first decode (no block cached yet)."""

from __future__ import annotations

import json
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
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["rows"] == 400_000 and got["last"] == "value-09-abcdefgh"
    # the values alone fill 68 MB: 16,600 pages of 4 KiB, 33 of 2 MiB (the smaller
    # buffers, from malloc, fault by 4 KiB: a few thousand faults)
    assert got["value_bytes"] > 64 << 20
    assert got["faults"] < got["value_bytes"] // 4096 // 4, got
