"""Plain-Python twin of the compiled decoder (``_decode.pyx`` / ``_batch.pyx``): the
differential-test oracle, selected by ``PGOUTPUT_CODEC_NO_EXTENSIONS=1``. Messages are
read by ``_parse_py``; this module builds the same Arrow rows as ``decode_batch``."""

from __future__ import annotations

import pyarrow as pa

from ..errors import PgoutputDecodeError
from ..schema import MESSAGE_STRUCT
from ._parse_py import as_bytes, decode_payload, decode_row, infer_initial_state, payload_values
from .messages import StreamStart, StreamStop, XLogData

__all__ = ["decode_message", "decode_batch"]


def decode_message(data, *, in_stream=None):
    """Decode one payload (a pgoutput message, or a 'w'/'k' replication envelope).

    ``in_stream``: True/False when the caller knows whether the payload lies inside a
    Stream Start/Stop block; None tries both readings of R/Y/I/U/D/T/M.
    """
    return decode_payload(data, in_stream=in_stream)


_PG_EPOCH_UNIX_US = 946_684_800_000_000
_TS_FIELDS = frozenset(("send_time", "commit_ts", "abort_ts", "prepare_ts", "rollback_ts"))
_ENVELOPES = ("auto", "none", "xlogdata")


def _arrow_ts(us):
    # wire µs since 2000-01-01 -> µs since 1970-01-01, modulo 2^64 as int64 (pgoutput_codec/schema.py)
    v = (us + _PG_EPOCH_UNIX_US) & 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= (1 << 63) else v


def _tuplepayload_values(tup):
    return None if tup is None else [{"kind": c.kind, "data": c.data} for c in tup]


def _fill(row, msg):
    for name in msg.__slots__:
        v = getattr(msg, name)
        if v is None:
            continue
        if name in _TS_FIELDS:
            v = _arrow_ts(v)
        elif name in ("new_tuple", "old_tuple"):
            v = _tuplepayload_values(v)
        elif name == "columns":
            v = [c._asdict() for c in v]
        elif name == "relation_ids":
            v = list(v)
        row[name] = v


def _message_row(msg):
    row = {"type": msg.type}
    if isinstance(msg, XLogData):
        row["wal_start"] = msg.wal_start
        row["wal_end"] = msg.wal_end
        row["send_time"] = _arrow_ts(msg.send_time)
        msg = msg.payload
        row["type"] = msg.type
    _fill(row, msg)
    return row


def decode_batch(values, *, envelope="auto", in_stream=None) -> pa.StructArray:
    """Decode a column of payloads into a ``StructArray`` of ``schema.MESSAGE_STRUCT``.

    One row per input row; a row that does not decode keeps only ``error`` (the
    ``PgoutputDecodeError`` text). Stream Start/Stop rows set the streaming state
    used for the following rows (``in_stream`` is the state before the first row;
    None infers it from the first row of the whole batch that decides it).
    """
    if envelope not in _ENVELOPES:
        raise ValueError(f"envelope must be one of {_ENVELOPES}, not {envelope!r}")
    payloads = list(payload_values(values))
    state = infer_initial_state(payloads, envelope) if in_stream is None else bool(in_stream)
    rows = []
    for raw in payloads:
        if raw is None:
            rows.append({"error": "null payload at byte 0"})
            continue
        try:
            msg = decode_row(as_bytes(raw), envelope, state)
        except PgoutputDecodeError as e:
            rows.append({"error": str(e)})
            continue
        inner = msg.payload if isinstance(msg, XLogData) else msg
        if isinstance(inner, StreamStart):
            state = True
        elif isinstance(inner, StreamStop):
            state = False
        rows.append(_message_row(msg))
    return pa.array(rows, type=MESSAGE_STRUCT)
