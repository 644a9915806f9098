#!/usr/bin/env python
"""atheris fuzz harness for change decoding: the sequential ``ChangeDecoder`` and the
parallel ``ControlPlan`` over the same damaged archive must agree.

An archive is a random replication session (tests/archive_model.py: streamed,
two-phase and aborted transactions, Relations redefined, Truncates), then damaged by
edits the input spells: rows dropped, repeated, swapped, cut short, bytes overwritten
— what a lake gets when files are lost, written twice or corrupted. Both decoders run
with ``errors="collect"``.

A crash is: any exception (but ``ArchiveOrderError`` from both: commits out of order are
refused in every mode), rows in != rows decoded + rows in error for either
decoder, change rows that differ between the two (the plan's rows put in commit
order), an Arrow result that fails ``validate(full=True)``, a segfault.

    python tests/fuzz/fuzz_changes.py -max_total_time=60 [corpus_dir ...] [libFuzzer flags]

Input layout: bytes 0-3 the session's seed (little-endian), byte 4 its length in
events (4-35); then edits of 4 bytes each: kind, row (2 bytes), argument.
"""

from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the import paths)

with atheris.instrument_imports(include=["pgoutput_codec"]):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from pgoutput_codec import ChangeDecoder
    from pgoutput_codec.errors import ArchiveOrderError
    from pgoutput_codec.changes import ControlPlan, control_candidates

import archive_model  # noqa: E402  (after sys.path set-up)

_SESSIONS = {}


def _session(seed: int, events: int) -> list:
    key = (seed, events)
    if key not in _SESSIONS:
        if len(_SESSIONS) > 256:
            _SESSIONS.clear()
        _SESSIONS[key] = archive_model.Session(seed, events=events).build(finish=seed % 2 == 0)[0]
    return list(_SESSIONS[key])


def damaged(data: bytes) -> list:
    """The session ``data`` names, with its edits applied."""
    if len(data) < 5:
        return []
    rows = _session(int.from_bytes(data[:4], "little"), 4 + data[4] % 32)
    for i in range(5, len(data) - 3, 4):
        kind, at, arg = data[i] % 6, int.from_bytes(data[i + 1:i + 3], "little"), data[i + 3]
        if not rows:
            break
        at %= len(rows)
        row = rows[at]
        if kind == 0:
            del rows[at]
        elif kind == 1:
            rows.insert(at, row)
        elif kind == 2 and at + 1 < len(rows):
            rows[at], rows[at + 1] = rows[at + 1], row
        elif kind == 3:
            rows[at] = row[:arg % (len(row) + 1)]
        elif kind == 4 and row:
            j = arg % len(row)
            rows[at] = row[:j] + bytes([data[i + 1]]) + row[j + 1:]
        elif kind == 5:
            rows[at] = row + bytes([arg]) * (arg % 7)
    return rows


def _check_counts(counts, n, who):
    if counts["rows_decoded"] + counts["rows_in_error"] != n or counts["rows_in"] != n:
        raise AssertionError(f"{who}: {n} rows in, counts {counts}")


def test_one_input(data: bytes):
    rows = damaged(data)
    if not rows:
        return
    values = pa.array(rows, pa.binary())
    keys = np.arange(len(rows), dtype=np.int64)
    dec = ChangeDecoder(errors="collect")
    mask = control_candidates(values)
    try:
        want = dec.feed(values)
    except ArchiveOrderError:   # commits out of order: refused in every mode, by both
        try:
            ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect")
        except ArchiveOrderError:
            return
        raise AssertionError("the decoder refuses the commit order, the plan does not") from None
    want.validate(full=True)
    _check_counts(dec.counts, len(rows), "ChangeDecoder")
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect")
    got = plan.changes(values, keys, pa.nulls(len(rows), pa.uint64()))
    got.validate(full=True)
    _check_counts(plan.last_counts, len(rows), "ControlPlan")
    got = got.take(pc.sort_indices(got, sort_keys=[("commit_rank", "ascending"), ("seq", "ascending")]))
    got = got.drop_columns(["commit_rank"])
    if not got.equals(want):
        raise AssertionError(f"the plan gives {len(got)} change rows, the decoder {len(want)}: "
                             f"{got.column('seq').to_pylist()[:20]} vs {want.column('seq').to_pylist()[:20]}")


def seeds() -> list:
    out = []
    for seed in range(12):
        head = seed.to_bytes(4, "little") + bytes([seed * 3])
        out.append(head)
        out.append(head + bytes([0, seed, 0, 0]))          # a row lost
        out.append(head + bytes([1, seed * 2, 0, 0]))      # a row written twice
        out.append(head + bytes([3, seed + 5, 0, 9]))      # a row cut short
        out.append(head + bytes([2, seed + 1, 0, 0, 4, seed + 2, 0, 17]))
    return out


if __name__ == "__main__":
    harness.main(sys.argv, "changes", seeds, test_one_input)
