#!/usr/bin/env python
"""atheris fuzz harness for the compiled decoder (``_decode.decode_message`` and
``batch.decode_batch``), seeded from the hand-written vectors of tests/vectors.py.

A crash is: any exception other than ``PgoutputDecodeError`` from ``decode_message``,
any exception at all from ``decode_batch`` (bad rows become error rows), an Arrow
result that fails ``validate(full=True)``, a wrong row count, a segfault — and, unless
``PGOUTPUT_FUZZ_NO_DIFF=1``, any difference from the plain-Python twin (same message,
or same error type, offset and message type).

    python tests/fuzz/fuzz_decode.py -max_total_time=60 [corpus_dir ...] [libFuzzer flags]

Without a corpus directory the persistent ``fuzz_corpus/decode`` (git-ignored) is used;
the seeds are (re)written into the first corpus directory on every start. Crash inputs
go to ``fuzz_corpus/`` unless ``-artifact_prefix=`` is given.

Input layout: byte 0 is a control byte (bits 0-1 in_stream None/True/False, bit 2:
batch mode, bits 3-4 envelope auto/none/xlogdata, bit 5: chunked input); the rest is
one payload (message mode) or rows separated by ``SEP`` (batch mode).
"""

from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the import paths)

with atheris.instrument_imports(include=["pgoutput_codec"]):
    import pgoutput_codec.pgoutput._decode_py as twin
    import pyarrow as pa

    import pgoutput_codec.pgoutput._decode as compiled
    import pgoutput_codec.pgoutput.batch as compiled_batch
    from pgoutput_codec.errors import PgoutputDecodeError
    from pgoutput_codec.schema import MESSAGE_STRUCT, TS

import vectors  # noqa: E402  (after sys.path set-up)

SEP = b"\xfe\xfd\xfc"
IN_STREAM = (None, True, False, None)
ENVELOPES = ("auto", "none", "xlogdata", "auto")
DIFF = not os.environ.get("PGOUTPUT_FUZZ_NO_DIFF")
TS_FIELDS = [f.name for f in MESSAGE_STRUCT if f.type == TS]


def _outcome(decode, payload, in_stream):
    try:
        return ("ok", decode(payload, in_stream=in_stream))
    except PgoutputDecodeError as e:
        if not (isinstance(e.offset, int) and 0 <= e.offset <= len(payload)):
            raise AssertionError(f"offset {e.offset!r} outside the payload: {e}") from e
        return (type(e).__name__, e.offset, e.message_type)


def _rows(arr):
    cols = {}
    for f in MESSAGE_STRUCT:
        col = arr.field(f.name)
        cols[f.name] = (col.cast(pa.int64()) if f.name in TS_FIELDS else col).to_pylist()
    out = []
    for i in range(len(arr)):
        row = {k: v[i] for k, v in cols.items()}
        row["error"] = row["error"] is not None  # texts may differ, error-ness may not
        out.append(row)
    return out


def check_message(payload, in_stream):
    got = _outcome(compiled.decode_message, payload, in_stream)
    if DIFF:
        want = _outcome(twin.decode_message, payload, in_stream)
        if got != want:
            raise AssertionError(f"compiled {got!r} != python {want!r} for {payload.hex()} in_stream={in_stream}")


def check_batch(rows, envelope, in_stream, chunked):
    if chunked and rows:
        half = len(rows) // 2
        values = pa.chunked_array([pa.array(rows[:half], pa.binary()), pa.array(rows[half:], pa.binary())])
    else:
        values = rows
    out = compiled_batch.decode_batch(values, envelope=envelope, in_stream=in_stream)
    out.validate(full=True)
    if len(out) != len(rows) or out.type != MESSAGE_STRUCT:
        raise AssertionError(f"{len(rows)} rows in, {len(out)} rows of {out.type} out")
    if DIFF:
        want = _rows(twin.decode_batch(rows, envelope=envelope, in_stream=in_stream))
        got = _rows(out)
        if got != want:
            raise AssertionError(f"decode_batch differs from the twin for {[r.hex() for r in rows]}")


def TestOneInput(data: bytes) -> None:
    if not data:
        check_message(b"", None)
        return
    ctl, body = data[0], data[1:]
    in_stream = IN_STREAM[ctl & 3]
    if ctl & 4:
        rows = [r if r != b"\x00" else None for r in body.split(SEP)]
        check_batch(rows, ENVELOPES[(ctl >> 3) & 3], in_stream, bool(ctl & 32))
    else:
        check_message(body, in_stream)


def seeds():
    """Control byte + payload for each vector; a few whole streams in batch mode."""
    ctl_of = {None: 0, True: 1, False: 2}
    out = [bytes([ctl_of[v.in_stream]]) + v.data for v in vectors.VECTORS]
    plain = [v.data for v in vectors.VECTORS if v.in_stream is not True]
    streamed = [vectors.BY_NAME["stream_start_first"].data] + [
        v.data for v in vectors.VECTORS if v.in_stream is True] + [vectors.BY_NAME["stream_stop"].data]
    out.append(bytes([4 | 2]) + SEP.join(plain + streamed + plain[:3]))
    out.append(bytes([4 | 2 | 32]) + SEP.join(streamed + [b"\x00", b""] + plain[:5]))
    out.append(bytes([4 | 16 | 1]) + SEP.join(v.data for v in vectors.VECTORS if v.message.type in "wk"))
    return out


if __name__ == "__main__":
    harness.main(sys.argv, "decode", seeds, TestOneInput)
