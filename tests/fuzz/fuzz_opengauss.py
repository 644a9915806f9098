"""atheris fuzz target for the openGauss decoders (docs/protocol.md, openGauss).

Feeds arbitrary bytes to the compiled 'b' batch decoder, checks it against the Python
twin (same table), that the Arrow output is valid, and that the 't'/'j' decoders only
ever raise PgoutputDecodeError. Run: ``python tests/fuzz/fuzz_opengauss.py -max_total_time=15``.
"""

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

with atheris.instrument_imports():
    from pgoutput_codec.errors import PgoutputDecodeError
    from pgoutput_codec.opengauss import decode_batch, decode_batch_py, decode_frame


def TestOneInput(data: bytes):
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


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
