"""The openGauss batch decoder: an Arrow column of frames to a ``pyarrow.Table`` of
:data:`schema.RECORD_SCHEMA`, one row per record ('b' in the compiled ``_parse`` module or
its twin ``_parse_py``, 't'/'j' in :mod:`.text`), and one frame to a :class:`Frame`."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..arrays import payload_chunks, payload_sizes
from .._native import USING_EXTENSIONS
from ..threads import payload_bytes, piece_bounds, run_pieces, worker_count
from ._parse_py import ENVELOPES, decode_frame_items
from ._parse_py import decode_frame as _decode_frame_b
from ._parse_py import decode_record
from .messages import Frame
from .schema import HEARTBEATS_KEY, RECORD_SCHEMA
from .text import decode_text_batch, decode_text_frame

__all__ = ["decode_batch", "decode_frame", "decode_record", "decode_batch_py", "heartbeats", "record_positions",
           "STYLES"]

STYLES = ("b", "t", "j")
# the compiled 'b' decoder, unless PGOUTPUT_CODEC_NO_EXTENSIONS selects the plain-Python twin
if USING_EXTENSIONS:
    from ._parse import decode_binary_chunk


def heartbeats(table: pa.Table) -> int:
    """The number of 'H' records ``decode_batch`` skipped."""
    return int((table.schema.metadata or {}).get(HEARTBEATS_KEY, b"0"))


def record_positions(rows) -> pa.Array:
    """Each record's position in its frame (int32), from ``decode_batch``'s ``row`` values:
    a frame's records are together and rows rise, so a record's first sibling is where
    its row value first occurs."""
    rows = np.asarray(rows)
    return pa.array(np.arange(len(rows), dtype=np.int32) - np.searchsorted(rows, rows, side="left").astype(np.int32))


def _rows_to_batch(rows):
    return pa.RecordBatch.from_pylist(rows, schema=RECORD_SCHEMA)


def decode_batch_py(values, *, envelope="auto"):
    """Plain-Python twin of the 'b' path of :func:`decode_batch` (reference and oracle)."""
    batches, hb, base = [], 0, 0
    for chunk in payload_chunks(values):
        rows = []
        for i, data in enumerate(chunk.to_pylist()):
            items, h, _end, _x = decode_frame_items(data, envelope)
            hb += h
            for it in items:
                if isinstance(it, tuple):
                    text, _pos, tag, lsn, _fatal = it
                    known = tag is not None and chr(tag) in "BCIUDH"
                    rows.append({"row": base + i, "lsn": lsn, "type": chr(tag) if known else None,
                                 "error": text})
                else:
                    rows.append({"row": base + i, **it.to_row()})
        base += len(chunk)
        batches.append(_rows_to_batch(rows))
    return _table(batches, hb)


def _table(batches, hb):
    t = pa.Table.from_batches(batches, schema=RECORD_SCHEMA)
    return t.replace_schema_metadata({HEARTBEATS_KEY: str(hb).encode()})


def decode_batch(values, style: str = "b", *, envelope: str = "auto", sending_batch=None,
                 workers: int | None = None) -> pa.Table:
    """Decode frames to a ``pyarrow.Table`` (one row per record, ``row`` = input row).

    ``values``: ``pa.BinaryArray``/``pa.LargeBinaryArray``, a ``ChunkedArray`` of those, or
    a list of ``bytes``/``None``. A bad record or frame becomes a row whose ``error`` is
    set (see ``_parse_py`` for the policy); nothing raises for bad input.
    ``envelope``: "auto" (a leading 'w' is an XLogData header), "none", "xlogdata".
    ``sending_batch`` ('t'/'j' only): True/False, or None to tell by the first byte
    (a bare text frame starts with a letter or '{', a batched one with a length's 0x00).
    ``workers`` ('b' with the compiled decoder): threads decoding pieces of the input at
    once (None: one per core, as many as the input's size pays for: see
    ``threads.worker_count``; 1: this thread); frames are independent of each other, so
    the records are the same for any number.
    """
    if envelope not in ENVELOPES:
        raise ValueError(f"envelope must be one of {ENVELOPES}, not {envelope!r}")
    if style == "b":
        if not USING_EXTENSIONS:
            return decode_batch_py(values, envelope=envelope)
        chunks = payload_chunks(values)
        workers = worker_count(workers, sum(payload_bytes(c) for c in chunks), joined=False)
        pieces, base = [], 0
        for chunk in chunks:
            if pa.types.is_null(chunk.type):
                chunk = chunk.cast(pa.binary())
            bounds = piece_bounds(payload_sizes(chunk), workers) if workers > 1 else [0, len(chunk)]
            pieces += [(chunk.slice(a, b - a), base + a) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
            base += len(chunk)
        done = run_pieces(lambda p: decode_binary_chunk(p[0], p[1], envelope), pieces, workers)
        return _table([b for b, _ in done], sum(h for _, h in done))
    if style in ("t", "j"):
        return decode_text_batch(values, style, envelope=envelope, sending_batch=sending_batch)
    raise ValueError(f"style must be one of {STYLES}, not {style!r}")


def decode_frame(data, style: str = "b", *, envelope: str = "auto", sending_batch=None) -> Frame:
    """One frame to a :class:`Frame`; raises ``PgoutputDecodeError`` on bad input."""
    if style == "b":
        return _decode_frame_b(data, envelope=envelope)
    if style in ("t", "j"):
        return decode_text_frame(data, style, envelope=envelope, sending_batch=sending_batch)
    raise ValueError(f"style must be one of {STYLES}, not {style!r}")

