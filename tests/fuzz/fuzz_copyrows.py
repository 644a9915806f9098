#!/usr/bin/env python
"""atheris fuzz harness for the compiled COPY stream reader (``_copyrows.CopyInserts``),
seeded from text and binary COPY streams of rows with every escape, NULLs and empty values.

A crash is: any exception but ``CopyStreamError``, an error whose offset lies outside the
stream, a payload array that fails ``validate(full=True)``, a payload that does not hold
its row's field count, a segfault, and any difference between the stream fed whole and
fed in pieces (the same payloads, or an error at the same offset).

    python tests/fuzz/fuzz_copyrows.py -max_total_time=60 [corpus_dir ...] [libFuzzer flags]

Input layout: byte 0 is a control byte (bit 0: binary; bits 1-3: fields per row - 1;
bits 4-7: the size of the pieces, 1 + 3 * that); the rest is the stream.
"""

from __future__ import annotations

import os
import struct
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the import paths)

with atheris.instrument_imports(include=["pgoutput_codec"]):
    from pgoutput_codec.pgoutput._copyrows import CopyInserts
    from pgoutput_codec.errors import CopyStreamError

_ESCAPES = {0x5C: b"\\\\", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x0B: b"\\v"}


# the reader is compiled (instrumented only in tools/sanitize.sh's fuzzer build): the
# harness's own branches (rows or error, which error) give the fuzzer something to follow
@atheris.instrument_func
def _whole(binary, n, data):
    try:
        arr, used = CopyInserts(5, binary, n, b"t" * (n - 1) + (b"b" if binary else b"t"), (0,)).feed(
            data, final=True)
    except CopyStreamError as e:
        return ("error", e.offset, str(e))
    return ("rows", arr, used)


@atheris.instrument_func
def _pieces(binary, n, data, size):
    dec = CopyInserts(5, binary, n, b"t" * (n - 1) + (b"b" if binary else b"t"), (0,))
    out, rest = [], b""
    try:
        for i in range(0, len(data), size):
            arr, used = dec.feed(rest + data[i:i + size])
            rest = (rest + data[i:i + size])[used:]
            out += arr.to_pylist()
        arr, _ = dec.feed(rest, final=True)
    except CopyStreamError as e:
        return ("error", e.offset, str(e))
    return ("rows", out + arr.to_pylist(), dec.offset)


@atheris.instrument_func
def TestOneInput(data: bytes) -> None:
    if not data:
        return
    ctl, body = data[0], data[1:]
    binary, n, size = bool(ctl & 1), ((ctl >> 1) & 7) + 1, 1 + 3 * (ctl >> 4)
    whole = _whole(binary, n, body)
    if whole[0] == "error":
        if not 0 <= whole[1] <= len(body):
            raise AssertionError(f"error offset {whole[1]} outside the {len(body)}-byte stream: {whole[2]}")
    else:
        arr = whole[1]
        arr.validate(full=True)
        if whole[2] != len(body):
            raise AssertionError(f"a final feed took {whole[2]} of {len(body)} bytes")
        for p in arr.to_pylist():
            if p[:1] != b"I" or struct.unpack("!H", p[6:8])[0] != n:
                raise AssertionError(f"payload {p[:8].hex()} does not hold {n} fields")
        whole = ("rows", arr.to_pylist(), whole[2])
    got = _pieces(binary, n, body, size)
    if got[:2] != whole[:2] or got[0] == "rows" and got != whole:   # (an error's text may quote fewer bytes)
        raise AssertionError(f"fed in pieces of {size}: {got!r:.300} != whole {whole!r:.300}")


def _text(rows):
    return b"".join(b"\t".join(b"\\N" if v is None else b"".join(_ESCAPES.get(c, bytes((c,))) for c in v)
                               for v in row) + b"\n" for row in rows)


def _binary(rows):
    out = [b"PGCOPY\n\xff\r\n\x00", struct.pack("!ii", 0, 0)]
    for row in rows:
        out.append(struct.pack("!h", len(row)))
        out += [struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v for v in row]
    return b"".join(out + [struct.pack("!h", -1)])


def seeds():
    values = [b"plain", None, b"", b"tab\there", b"new\nline", b"back\\slash", b"\\N", b"\x00\xff\x08\x0b",
              "h\u00e9llo \U0001d11e".encode()]
    out = []
    for n in (1, 2, 3):
        rows = [[values[(r * n + k) % len(values)] for k in range(n)] for r in range(6)]
        for binary in (False, True):
            for size in (0, 5, 15):
                out.append(bytes([int(binary) | (n - 1) << 1 | size << 4]) + (_binary if binary else _text)(rows))
    out.append(bytes([2]) + b"1\\101\\x41\\q\t\\\n")     # octal, hex, any char, a backslash ending the row
    return out


if __name__ == "__main__":
    harness.main(sys.argv, "copyrows", seeds, TestOneInput)
