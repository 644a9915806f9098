"""Archive files of replication payloads: what ``read_archive`` and the ``pgoutput`` data
source read.

Two layouts:
- Parquet with a binary payload column (and any other columns: lsn, xid, seq, ...);
- CSV/COPY exports of ``pg_logical_slot_get_binary_changes`` (columns lsn, xid, data):
  ``\\copy (...) TO 'f.csv' WITH (FORMAT csv, HEADER)`` writes bytea as ``\\x<hex>``;
  COPY's text format (tab-separated) doubles the backslash (``\\\\x<hex>``): both are
  accepted. CSV has no types: every other column stays a string.

The hex text is decoded vectorized over the Arrow string buffers (numpy lookup table):
no Python per row. A value that is not bytea hex text becomes a null payload and an
error row whose text says so (``HEX_ERROR``), so the parse modes apply to it as to a
malformed payload.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import types as ST

__all__ = ["hex_to_binary", "HEX_ERROR", "FORMATS"]

FORMATS = ("parquet", "csv")
HEX_ERROR = "payload is not bytea hex text ('\\x' followed by an even number of hex digits)"

_NIBBLE = np.full(256, 0, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _NIBBLE[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _NIBBLE[_c] = 10 + _i


def hex_to_binary(text: pa.Array):
    """``\\x<hex>`` / ``\\\\x<hex>`` strings → (``pa.binary()`` array, bad mask).

    ``bad`` (a ``pa.BooleanArray``) is true where the value was present but not hex text;
    those rows and null rows are null in the result."""
    text = ST.one_array(text)
    if pa.types.is_binary(text.type) or pa.types.is_large_binary(text.type):
        text = text.cast(pa.large_string() if pa.types.is_large_binary(text.type) else pa.string())
    if not pa.types.is_string(text.type):
        text = text.cast(pa.string())
    double = pc.starts_with(text, "\\\\x")
    single = pc.starts_with(text, "\\x")
    digits = pc.if_else(double, pc.utf8_slice_codeunits(text, 3),
                        pc.if_else(single, pc.utf8_slice_codeunits(text, 2), pa.scalar(None, pa.string())))
    good = pc.and_(pc.match_substring_regex(digits, "^([0-9a-fA-F]{2})*$"), pc.is_valid(digits))
    good = pc.fill_null(good, False)
    bad = pc.and_(pc.is_valid(text), pc.invert(good))
    digits = pc.if_else(good, digits, "")
    digits = digits.cast(pa.string()) if digits.type != pa.string() else digits
    # Every value now has even length and only hex digits (invalid ones are "").
    _, off_buf, data_buf = digits.buffers()
    n = len(digits)
    offsets = np.frombuffer(off_buf, dtype=np.int32)[digits.offset:digits.offset + n + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    chars = np.frombuffer(data_buf, dtype=np.uint8)[start:end] if data_buf is not None else np.zeros(0, np.uint8)
    raw = (_NIBBLE[chars[0::2]] << 4) | _NIBBLE[chars[1::2]]
    new_offsets = ((offsets - start) // 2).astype(np.int32)
    validity = pc.and_(good, pc.is_valid(text))
    mask = pc.invert(validity).to_numpy(zero_copy_only=False)
    out = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(raw.tobytes())])
    if mask.any():
        out = pc.if_else(pa.array(~mask), out, pa.scalar(None, pa.binary()))
    return out, bad
