"""The memory bound of the change decoder (docs/limits.md), held over crafted inputs,
each decoded in a process of its own (``memory_probe.py``): peak RSS grows by at most
``PER_BYTE`` × the input's bytes + ``FIXED``, and with a transaction left open by at
most the decoder's budget + ``FIXED``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import memory_probe

HERE = os.path.dirname(__file__)
MB = 1 << 20
#: the most a byte of input may cost: an 11-byte Truncate naming one relation becomes a
#: change row of ~250 bytes (its schema and table names, LSNs, times), beside the decoded
#: message it came from (~250 bytes: one slot in each of the ~40 message fields)
PER_BYTE = 100
#: the interpreter's own growth while decoding (pyarrow's pools, a part's Python dicts)
FIXED = 64 * MB


def _probe(case: str) -> dict:
    res = subprocess.run([sys.executable, os.path.join(HERE, "memory_probe.py"), case], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": HERE + os.pathsep
                                                      + os.environ.get("PYTHONPATH", "")})
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["truncates_of_a_wide_relation", "inserts_of_a_wide_relation", "repeated_types",
                                  "small_inserts"])
def test_peak_memory_follows_the_input(case):
    """A column list is shared by the rows of its relation version (not copied into each:
    10,000 Truncates of a 1,600-column relation, 217 KB, made 1 GB of rows that way);
    Type messages sent again are one; control messages are walked a part at a time."""
    got = _probe(case)
    grown = got["rss_peak"] - got["rss_before"]
    assert grown <= PER_BYTE * got["input_bytes"] + FIXED, got


def test_an_open_transaction_stays_within_the_budget():
    """A transaction that never commits, 120 MB of values fed 10,000 rows at a time:
    its rows spill past the decoder's budget, and memory stays within it."""
    got = _probe("open_transaction")
    assert got["rows"] == 0
    assert got["rss_peak"] - got["rss_before"] <= memory_probe.BUDGET_MB * MB + FIXED, got
