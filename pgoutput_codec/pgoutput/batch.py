"""``decode_batch``: a column of payloads to a ``StructArray`` of decoded messages.

This module only normalizes the input (lists, chunked arrays, large binary) and carries
the stream state across chunks; the work is done in ``_batch.pyx`` over Arrow buffers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import threads
from .._native.builders import nulls
from ..arrays import binary_chunks, payload_sizes
from . import _batch
from ..threads import payload_bytes, piece_bounds, run_pieces, worker_count

__all__ = ["decode_batch", "decode_batch_with_state", "decode_batch_pieces", "decode_batch_rows",
           "initial_stream_state", "message_tags", "envelope_code",
           "PAYLOAD_ERROR", "with_payload_errors"]

#: An archive table's optional string column saying why a row's payload could not be read
#: (a CSV export's value that is not bytea hex): where set, it is that row's error.
PAYLOAD_ERROR = "payload_error"

_ENVELOPES = {"auto": 0, "none": 1, "xlogdata": 2}


def _join(results, workers: int = 1):
    """One StructArray when it fits 32-bit offsets, else a ChunkedArray of the pieces.

    Joined field by field, on ``workers`` threads (pyarrow's concatenation releases the
    GIL): a field null in every piece (most of them: a message type uses a few) is the
    shared all-null column, not a copy of the pieces' zeros (a quarter of the join's
    time for 2 M Inserts)."""
    if len(results) == 1:
        return results[0]
    typ, n = results[0].type, sum(len(r) for r in results)
    if any(r.null_count for r in results) or any(r.offset for r in results):
        fields = None
    else:
        fields = sorted(range(typ.num_fields), key=lambda i: -results[0].field(i).nbytes)

    def field(i):
        parts = [r.field(i) for r in results]
        if all(p.null_count == len(p) for p in parts):
            return nulls(n, typ.field(i).type)
        return pa.concat_arrays(parts)

    try:
        if fields is None:
            return pa.concat_arrays(results)
        cols = dict(zip(fields, run_pieces(field, fields, workers), strict=True))
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return pa.chunked_array(results)
    return pa.StructArray.from_arrays([cols[i] for i in range(typ.num_fields)], fields=list(typ))


def envelope_code(envelope: str) -> int:
    """The decoder's code for an ``envelope`` option (``auto``, ``none``, ``xlogdata``)."""
    try:
        return _ENVELOPES[envelope]
    except KeyError:
        raise ValueError(f"envelope must be one of {sorted(_ENVELOPES)}, got {envelope!r}") from None


def message_tags(values, *, envelope: str = "auto"):
    """numpy uint8 array: the tag byte of every payload (0 for null/empty), reading one
    byte per row — for cheap first passes over an archive."""
    env = envelope_code(envelope)
    parts = [_batch.tags_of(c, env) for c in binary_chunks(values)]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def decode_batch_rows(values, in_stream_rows, *, envelope: str = "auto", workers: int | None = 1) -> pa.StructArray:
    """``decode_batch`` with the stream state of every row given (a bool array): for
    rows that are not contiguous in arrival order (parallel decoding from a plan).
    ``workers``: as for :func:`decode_batch`, but one by default (the callers are
    pieces of a parallel run already)."""
    env = envelope_code(envelope)
    chunks = binary_chunks(values)
    workers = worker_count(workers, sum(payload_bytes(c) for c in chunks))
    flags = np.asarray(in_stream_rows, dtype=np.uint8)
    pieces, at = [], 0
    for chunk in chunks:
        # one worker decodes a chunk whole: pieces would cost a join for nothing
        bounds = piece_bounds(payload_sizes(chunk), workers) if workers > 1 else (0, len(chunk))
        pieces += [(chunk.slice(a, b - a), flags[at + a:at + b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        at += len(chunk)
    results = run_pieces(lambda p: _batch.decode_chunk(p[0], env, 0, p[1])[0], pieces, workers)
    if not results:
        return _batch.decode_chunk(pa.array([], type=pa.binary()), env, 0)[0]
    return _join(results, workers)


def _has_marks(msgs) -> bool:
    """Whether decoded messages hold a Stream Start or Stop (that parsed)."""
    return bool(pc.any(pc.is_in(msgs.field("type"), value_set=pa.array(["S", "E"]))).as_py())


def _decode_cuts(cuts: list, env: int, state: int, workers: int):
    """The outputs of ``[(first row, slice), …]`` decoded in order from stream state
    ``state``, on ``workers`` threads, and the state after the last.

    Every piece is decoded at once as if it began in ``state``: the state changes only at
    a Stream Start or Stop, which parse alike inside a stream and out, so a piece's end
    state is right when it holds one, and is its start state otherwise. Walking the ends
    in order then gives each piece's true start; the few begun in a wrong one (inside a
    streamed transaction's block) are decoded again. Most archives have none, and no
    pass over the input is spent finding the states first."""
    guess = state
    done = run_pieces(lambda p: _batch.decode_chunk(p[1], env, guess), cuts, workers)
    starts, again = [], []
    for k, (out, end) in enumerate(done):
        starts.append(state)
        if state != guess:
            again.append(k)
            if not _has_marks(out):
                end = state
        state = int(end)
    if again:
        redone = run_pieces(lambda k: _batch.decode_chunk(cuts[k][1], env, starts[k]), again, workers)
        for k, res in zip(again, redone, strict=True):
            done[k] = res
    return [out for out, _ in done], state


def initial_stream_state(values, *, envelope: str = "auto") -> bool:
    """Whether payloads in stream order begin inside a Stream Start/Stop block, as
    :func:`decode_batch` infers it: from the first control row anywhere in them that
    decides it, else the first other row (``_batch.initial_stream_state``); outside
    when none does."""
    return _initial_state(binary_chunks(values), envelope_code(envelope))


def _initial_state(chunks: list, env: int) -> bool:
    decided = next((d for control in (True, False) for chunk in chunks
                    if (d := _batch.initial_stream_state(chunk, env, control)) is not None), None)
    return bool(decided)


def decode_batch_pieces(values, *, envelope: str = "auto", in_stream: bool | None = None,
                        workers: int | None = None):
    """:func:`decode_batch_with_state` without joining the pieces: ``([(first row,
    StructArray), …], stream state after the last row)``, the pieces in input order —
    for a caller that writes them out one by one, sparing the copy of a join."""
    return _pieces(values, envelope, in_stream, workers, False)[:2]


def _pieces(values, envelope: str, in_stream: bool | None, workers: int | None, joined: bool):
    """(pieces, stream state after them, the threads they were decoded on)."""
    env = envelope_code(envelope)
    chunks = binary_chunks(values)
    workers = worker_count(workers, sum(payload_bytes(c) for c in chunks), joined=joined)
    state = int(_initial_state(chunks, env) if in_stream is None else bool(in_stream))
    pieces, at = [], 0
    if workers == 1:
        for chunk in chunks:
            out, now = _batch.decode_chunk(chunk, env, state)
            pieces.append((at, out))
            state = int(now)
            at += len(chunk)
    else:
        cuts = []
        for chunk in chunks:
            bounds = piece_bounds(payload_sizes(chunk), workers, piece_bytes=threads.HELD_PIECE_BYTES)
            cuts += [(at + a, chunk.slice(a, b - a)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
            at += len(chunk)
        outs, state = _decode_cuts(cuts, env, state, workers)
        pieces = [(a, out) for (a, _), out in zip(cuts, outs, strict=True)]
    if not pieces:
        pieces = [(0, _batch.decode_chunk(pa.array([], type=pa.binary()), env, 0)[0])]
    return pieces, state == 1, workers


def decode_batch_with_state(values, *, envelope: str = "auto", in_stream: bool | None = None,
                            workers: int | None = None):
    """Like :func:`decode_batch`, also returning the stream state after the last row
    (True inside a Stream Start/Stop block), to continue with the next batch."""
    pieces, state, workers = _pieces(values, envelope, in_stream, workers, True)
    return _join([out for _, out in pieces], workers), state


def decode_batch(values, *, envelope: str = "auto", in_stream: bool | None = None,
                 workers: int | None = None) -> pa.StructArray:
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
    (LargeBinary input of more than ``arrays.MAX_CHUNK_BYTES`` payload bytes) comes back as a
    ``pa.ChunkedArray`` of StructArrays instead.
    ``workers``: threads decoding pieces of the input at once (None: one per core this
    process may use, but one per ``threads.WORKER_MIN_BYTES`` of payload at most, so a
    small input stays on this thread; 1: this thread only). The result is the same for
    any number: each piece starts in the stream state the rows before it leave.
    """
    return decode_batch_with_state(values, envelope=envelope, in_stream=in_stream, workers=workers)[0]


def with_payload_errors(msgs, payload_error):
    """``msgs`` (a decoded batch) with the ``error`` of each row where ``payload_error``
    is set replaced by it: the row's payload is null because the archive reader could
    not read it, and "null payload" would hide why."""
    payload_error = payload_error.combine_chunks() if isinstance(payload_error, pa.ChunkedArray) else payload_error
    if payload_error.null_count == len(payload_error):
        return msgs
    if isinstance(msgs, pa.ChunkedArray):
        msgs = msgs.combine_chunks()
    names = [f.name for f in msgs.type]
    fields = [msgs.field(i) for i in range(len(names))]
    k = names.index("error")
    fields[k] = pc.coalesce(payload_error.cast(pa.string()), fields[k])
    return pa.StructArray.from_arrays(fields, fields=list(msgs.type))
