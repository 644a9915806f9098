"""Python objects for single openGauss/GaussDB records and frames (``decode_frame``).

Field names are the column names of :mod:`.schema`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional

__all__ = ["Column", "Record", "Frame"]


class Column(NamedTuple):
    """One tuple column: ``value`` is None for NULL (and for an unchanged TOAST datum)."""

    name: str
    type_oid: Optional[int] = None
    value: Optional[bytes] = None
    type_name: Optional[str] = None
    unchanged_toast: bool = False


@dataclass(frozen=True)
class Record:
    """One record. ``type`` is the tag ('B', 'C', 'I', 'U', 'D').

    ``options`` keeps the order in which the optional tagged fields of B/C arrived
    (e.g. ``"XT"``), so that encoding a decoded record gives back the same bytes; the
    encoder uses the canonical order X, T, O, N when it is None.
    """

    type: str
    lsn: Optional[int] = None
    csn: Optional[int] = None
    first_lsn: Optional[int] = None
    xid: Optional[int] = None
    commit_time: Optional[str] = None
    origin_id: Optional[int] = None
    user_name: Optional[str] = None
    schema: Optional[str] = None
    table: Optional[str] = None
    new_tuple: Optional[tuple] = None
    old_tuple: Optional[tuple] = None
    options: Optional[str] = field(default=None, compare=False)

    def to_row(self) -> dict:
        """The record as a ``schema.RECORD_FIELDS`` row (without ``row``/``error``)."""
        d = {k: getattr(self, k) for k in (
            "lsn", "type", "csn", "first_lsn", "xid", "commit_time", "origin_id",
            "user_name", "schema", "table")}
        for k in ("new_tuple", "old_tuple"):
            t = getattr(self, k)
            d[k] = None if t is None else [c._asdict() for c in t]
        return d


@dataclass(frozen=True)
class Frame:
    """One input row: a batch of records (sending-batch=1) or a single record.

    ``end`` is 'F' (finishing separator), 'P0' ('P' then UInt32 0: idle flush) or '0'
    (a frame that is only UInt32 0); for text styles 'F' means bare text (sending-batch=0)
    and '0' the UInt32 0 end of a batch. ``xlogdata`` is ``(wal_start, wal_end, send_time)``
    when the frame came in an XLogData 'w' envelope. ``heartbeats`` counts the skipped
    'H' records (they are not kept, so a frame with heartbeats does not re-encode exactly).
    """

    records: tuple
    end: str = "F"
    xlogdata: Optional[tuple] = None
    heartbeats: int = 0
