#!/usr/bin/env python
"""atheris fuzz harness for the openGauss decoders (docs/opengauss.md).

Feeds arbitrary bytes to the compiled 'b' batch decoder, checks it against the Python
twin (same table), that the Arrow output is valid, and that the 't'/'j' decoders only
ever raise PgoutputDecodeError. Seeded with valid frames of each style.

    python tests/fuzz/fuzz_opengauss.py -max_total_time=60 [corpus_dir ...] [libFuzzer flags]
"""

from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the import paths)

with atheris.instrument_imports(include=["pgoutput_codec"]):
    from pgoutput_codec.errors import PgoutputDecodeError
    from pgoutput_codec.opengauss import decode_batch, decode_frame
    from pgoutput_codec.opengauss.batch import decode_batch_py
    from pgoutput_codec.opengauss.encode import encode_frame, encode_text_frame, xlogdata

sys.path.insert(0, os.path.join(harness.TESTS, "opengauss"))
from ogdata import sample_records  # noqa: E402  (after sys.path set-up)


def test_one_input(data: bytes):
    t = decode_batch([data, data[:len(data) // 2]])
    t.validate(full=True)
    assert t.equals(decode_batch_py([data, data[:len(data) // 2]])), data
    for style in ("t", "j"):
        decode_batch([data], style).validate(full=True)
        try:
            decode_frame(data, style)
        except PgoutputDecodeError:
            pass
    try:
        decode_frame(data)
    except PgoutputDecodeError:
        pass


def seeds() -> list:
    recs = sample_records()
    return [encode_frame(recs), encode_frame(recs, end="P0", xlog=(1, 2, 3)), xlogdata(encode_frame(recs[:1])),
            encode_text_frame([recs[0], recs[-1]], style="t"),
            b"table public t1 UPDATE: old-key: a[integer]:3 new-tuple: a[integer]:4 b[text]:'it''s' c[text]:null"]


if __name__ == "__main__":
    harness.main(sys.argv, "opengauss", seeds, test_one_input)
