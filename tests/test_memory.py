"""The memory bound of the change decoder (docs/limits.md), held over crafted inputs,
each decoded in a process of its own (``memory_probe.py``): peak RSS grows by at most
``PER_BYTE`` × the input's bytes + ``FIXED``, and with a large transaction by at most
the decoder's budget + ``PER_FED_BYTE`` × the bytes fed at once + ``FIXED``."""

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
#: what a byte fed at once costs while it is decoded: the payloads, their decoded
#: messages, the change rows taken from them, a held transaction's copy of those
PER_FED_BYTE = 8
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


@pytest.mark.parametrize("case, rows", [("open_transaction", 0), ("spilled_commit", 120_000)])
def test_a_large_transaction_stays_within_the_budget(case, rows):
    """A transaction of 120 MB of values fed 10,000 rows at a time: its rows spill past
    the decoder's budget while it is open, and when it commits ``feed_parts`` reads them
    back a fed chunk at a time; memory stays within the budget and what one chunk costs
    (read back whole at its commit, it grew by 243 MB)."""
    got = _probe(case)
    assert got["rows"] == rows
    assert got["rss_peak"] - got["rss_before"] <= memory_probe.BUDGET_MB * MB + PER_FED_BYTE * got["fed_bytes"] + FIXED, got
