"""``decode_batch``: a column of payloads to a ``StructArray`` of decoded messages.

This module only normalizes the input (lists, chunked arrays, large binary) and carries
the stream state across chunks; the work is done in ``_batch.pyx`` over Arrow buffers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from . import _batch

__all__ = ["decode_batch", "decode_batch_with_state", "decode_batch_rows", "message_tags"]

_ENVELOPES = {"auto": 0, "none": 1, "xlogdata": 2}


def _as_binary_chunks(values):
    if isinstance(values, pa.ChunkedArray):
        chunks = values.chunks
        typ = values.type
    elif isinstance(values, pa.Array):
        chunks = [values]
        typ = values.type
    else:
        arr = pa.array(list(values), type=pa.binary())
        chunks = [arr]
        typ = arr.type
    if pa.types.is_binary(typ):
        return chunks
    if pa.types.is_large_binary(typ):
        return [part for c in chunks for part in _split_large(c)]
    if pa.types.is_null(typ):  # a list of only None
        return [pa.array([None] * len(c), type=pa.binary()) for c in chunks]
    if pa.types.is_fixed_size_binary(typ) or pa.types.is_binary_view(typ):
        return [c.cast(pa.binary()) for c in chunks]
    raise TypeError(f"decode_batch expects binary payloads, got an Arrow column of type {typ}")


#: Output columns use 32-bit offsets (what Spark and most readers expect); a LargeBinary
#: input chunk holding more payload bytes than this is decoded in slices (the result is
#: then chunked), so no output column can pass 2 GiB.
MAX_CHUNK_BYTES = 1 << 30


def _split_large(arr):
    n = len(arr)
    if n == 0:
        return [arr]
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=arr.offset + n + 1)[arr.offset:]
    if offs[-1] - offs[0] <= MAX_CHUNK_BYTES:
        return [arr]
    parts, start = [], 0
    while start < n:
        stop = int(np.searchsorted(offs, offs[start] + MAX_CHUNK_BYTES, side="right")) - 1
        stop = max(stop, start + 1)   # a single payload larger than the limit goes alone
        parts.append(arr.slice(start, stop - start))
        start = stop
    return parts


def _join(results):
    """One StructArray when it fits 32-bit offsets, else a ChunkedArray of the pieces."""
    if len(results) == 1:
        return results[0]
    try:
        return pa.concat_arrays(results)
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return pa.chunked_array(results)


def _envelope_code(envelope):
    try:
        return _ENVELOPES[envelope]
    except KeyError:
        raise ValueError(f"envelope must be one of {sorted(_ENVELOPES)}, got {envelope!r}") from None


def message_tags(values, *, envelope: str = "auto"):
    """numpy uint8 array: the tag byte of every payload (0 for null/empty), reading one
    byte per row — for cheap first passes over an archive."""
    env = _envelope_code(envelope)
    parts = [_batch.tags_of(c, env) for c in _as_binary_chunks(values)]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def decode_batch_rows(values, in_stream_rows, *, envelope: str = "auto") -> pa.StructArray:
    """``decode_batch`` with the stream state of every row given (a bool array): for
    rows that are not contiguous in arrival order (parallel decoding from a plan)."""
    env = _envelope_code(envelope)
    flags = np.asarray(in_stream_rows, dtype=np.uint8)
    results, at = [], 0
    for chunk in _as_binary_chunks(values):
        out, _ = _batch.decode_chunk(chunk, env, 0, flags[at:at + len(chunk)])
        at += len(chunk)
        results.append(out)
    if not results:
        return _batch.decode_chunk(pa.array([], type=pa.binary()), env, 0)[0]
    return _join(results)


def decode_batch_with_state(values, *, envelope: str = "auto", in_stream: bool | None = None):
    """Like :func:`decode_batch`, also returning the stream state after the last row
    (True inside a Stream Start/Stop block), to continue with the next batch."""
    env = _envelope_code(envelope)
    chunks = _as_binary_chunks(values)
    if in_stream is None:
        # The first row anywhere in the input that decides it (a Stream Start/Stop, or
        # a row that parses only one way: _batch.initial_stream_state); none: outside.
        state = 0
        for chunk in chunks:
            decided = _batch.initial_stream_state(chunk, env)
            if decided is not None:
                state = int(decided)
                break
    else:
        state = int(bool(in_stream))
    results = []
    for chunk in chunks:
        out, now = _batch.decode_chunk(chunk, env, state)
        state = int(now)
        results.append(out)
    if not results:
        return _batch.decode_chunk(pa.array([], type=pa.binary()), env, 0)[0], state == 1
    return _join(results), state == 1


def decode_batch(values, *, envelope: str = "auto", in_stream: bool | None = None) -> pa.StructArray:
    """Decode payloads in stream order into a ``StructArray`` of ``schema.MESSAGE_STRUCT``.

    ``values``: a pyarrow Binary/LargeBinary array, a ChunkedArray of those, or a list of
    ``bytes``/``None``. One output row per input row; a row that does not decode has
    ``error`` set (the ``PgoutputDecodeError`` text, with byte offset and message type)
    and its other fields null. ``envelope``: "auto" unwraps 'w'/'k' frames, "none"
    expects bare pgoutput messages, "xlogdata" requires every row to be a 'w'/'k' frame.
    ``in_stream``: whether the first row is inside a Stream Start/Stop block; None
    infers it from the first row that decides it: a Stream Start (outside), a Stream
    Stop (inside), or a R/Y/I/U/D/T/M row that parses only with the streaming xid or
    only without it (an Insert/Update/Delete does, in practice); outside when none
    does. Stream Start/Stop rows then drive the state.
    Output columns have 32-bit offsets: a result that would pass 2 GiB in one column
    (LargeBinary input of more than ``MAX_CHUNK_BYTES`` payload bytes) comes back as a
    ``pa.ChunkedArray`` of StructArrays instead.
    """
    return decode_batch_with_state(values, envelope=envelope, in_stream=in_stream)[0]
