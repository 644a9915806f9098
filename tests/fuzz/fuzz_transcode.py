#!/usr/bin/env python
"""atheris fuzz harness for the compiled transcoding loop (``_transcode.rewrite_batch``),
seeded from archives in LATIN1, EUC_JP and binary mode (tests/test_transcode.py) and the
decoder's vectors.

A crash is: any exception from ``transcode_payloads(errors="keep")`` (a payload it
cannot rewrite is left as sent, never raised), a result that fails
``validate(full=True)``, a wrong row count, a report whose counts do not add up, a
segfault, and any difference from the plain path (the whole walk in Python).

    python tests/fuzz/fuzz_transcode.py -max_total_time=60 [corpus_dir ...] [libFuzzer flags]

Input layout: byte 0 is a control byte (bits 0-1: the encoding, LATIN1 / EUC_JP /
WIN1252 / SJIS; bit 2: in_stream at the start; bits 3-4: envelope auto/none/xlogdata);
the rest is rows separated by ``SEP`` (a row ``b"\\x00"`` is a null).
"""

from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the import paths)

with atheris.instrument_imports(include=["pgoutput_codec"]):
    import pyarrow as pa

    from pgoutput_codec import transcode

import test_transcode  # noqa: E402  (after sys.path set-up)
import vectors  # noqa: E402

SEP = b"\xfe\xfd\xfc"
ENCODINGS = ("LATIN1", "EUC_JP", "WIN1252", "SJIS")
ENVELOPES = ("auto", "none", "xlogdata", "auto")


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    ctl, body = data[0], data[1:]
    enc, in_stream, envelope = ENCODINGS[ctl & 3], bool(ctl & 4), ENVELOPES[(ctl >> 3) & 3]
    rows = pa.array([r if r != b"\x00" else None for r in body.split(SEP)], pa.binary())
    got, report = transcode.transcode_payloads(rows, enc, errors="keep", in_stream=in_stream, envelope=envelope)
    got.validate(full=True)
    if len(got) != len(rows) or report.rows != len(rows) or report.rewritten + report.kept != len(rows):
        raise AssertionError(f"{len(rows)} rows in, {len(got)} out, report {report}")
    saved = transcode._rewrite_batch
    transcode._rewrite_batch = None
    try:
        want, want_report = transcode.transcode_payloads(rows, enc, errors="keep", in_stream=in_stream,
                                                         envelope=envelope)
    finally:
        transcode._rewrite_batch = saved
    if got.to_pylist() != want.to_pylist() or report != want_report:
        raise AssertionError(f"compiled loop != plain path for {body.hex()} ({enc}, in_stream={in_stream}, "
                             f"{envelope}): {report} vs {want_report}")


def seeds():
    out = []
    for k, enc in enumerate(("latin-1", "euc_jp")):
        for binary in (False, True):
            s = "caf\u00e9" if enc == "latin-1" else "\u65e5\u672c"
            out.append(bytes([k]) + SEP.join(test_transcode._session(enc, binary, s)))
    plain = [v.data for v in vectors.VECTORS if v.in_stream is not True]
    out.append(bytes([0]) + SEP.join(plain + [b"\x00", b""]))
    out.append(bytes([16]) + SEP.join(v.data for v in vectors.VECTORS if v.message.type in "wk"))
    return out


if __name__ == "__main__":
    harness.main(sys.argv, "transcode", seeds, TestOneInput)
