#!/usr/bin/env python
"""atheris fuzz harness for reading CSV/COPY exports of a slot (``archive.read_archive_parts``,
``hex_to_binary``) and decoding their changes.

The input is written as the export file. A crash is: any exception other than
``ArchiveError`` while reading it; a payload that differs from ``bytes.fromhex`` of its
text (or a row marked as bad hex whose text is good, or the reverse); the change
decoder (``errors="collect"``) raising anything but ``ArchiveOrderError`` (commits out of
order are refused in every mode), or its rows in != rows decoded + rows in error;
a segfault.

    python tests/fuzz/fuzz_archive.py -max_total_time=60 [corpus_dir ...] [libFuzzer flags]
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the import paths)

with atheris.instrument_imports(include=["pgoutput_codec"]):
    import pyarrow as pa

    from pgoutput_codec.archive import ArchiveError, hex_to_binary, read_archive_parts
    from pgoutput_codec.pgoutput.batch import PAYLOAD_ERROR
    from pgoutput_codec import ChangeDecoder
    from pgoutput_codec.errors import ArchiveOrderError

import vectors  # noqa: E402  (after sys.path set-up)

_DIR = tempfile.mkdtemp(prefix="fuzz_archive_")
_PATH = os.path.join(_DIR, "export.csv")
_HEX = re.compile(r"\\?\\x((?:[0-9a-fA-F]{2})*)")


def _expected(text):
    """What ``hex_to_binary`` must make of one text value: bytes, or None (bad or null)."""
    if text is None:
        return None
    m = _HEX.fullmatch(text)
    return bytes.fromhex(m.group(1)) if m else None


def _check_hex(text: pa.Array):
    data, bad = hex_to_binary(text)
    data.validate(full=True)
    for t, d, b in zip(text.to_pylist(), data.to_pylist(), bad.to_pylist(), strict=True):
        want = _expected(t)
        if d != want or b != (t is not None and want is None):
            raise AssertionError(f"hex {t!r}: got {d!r} (bad {b}), want {want!r}")


def test_one_input(data: bytes):
    _check_hex(pa.array([data.decode("utf-8", "replace")], pa.string()))
    with open(_PATH, "wb") as f:
        f.write(data)
    try:
        parts = read_archive_parts(_PATH)
        table = parts[0].read()
    except ArchiveError:
        return
    table.validate(full=True)
    dec = ChangeDecoder(errors="collect")
    try:
        dec.feed(table)
    except ArchiveOrderError:   # commits out of order: refused in every mode, by design
        return
    c = dec.counts
    if c["rows_in"] != len(table) or c["rows_decoded"] + c["rows_in_error"] != len(table):
        raise AssertionError(f"{len(table)} rows, counts {c}")
    if PAYLOAD_ERROR in table.column_names and table.column(PAYLOAD_ERROR).null_count == len(table):
        raise AssertionError("a payload_error column without an error")


def seeds() -> list:
    payloads = [v.data for v in vectors.VECTORS if v.in_stream is not True][:12]
    rows = [f"0/{16 + i:X},{700 + i},\\x{p.hex()}" for i, p in enumerate(payloads)]
    csv = ("lsn,xid,data\n" + "\n".join(rows) + "\n").encode()
    copy = "\n".join(r.replace(",", "\t").replace("\\x", "\\\\x") for r in rows).encode() + b"\n"
    return [csv, copy, b"lsn,xid,data\n0/1,1,\\x4\n0/2,2,zz\n0/3,3,\n", b"0/1\t5\t\\\\x42\n"]


if __name__ == "__main__":
    harness.main(sys.argv, "archive", seeds, test_one_input)
