"""Message objects: one frozen dataclass per pgoutput / envelope message.

Field names are the public names of docs/protocol.md; they are the same names the
Arrow struct of ``decode_batch`` and the Spark columns use (see ``schema.py``).

Values are kept exactly as they travel on the wire so that ``encode_message`` is an
exact inverse: LSNs, xids and OIDs are non-negative ints (unsigned on the wire),
timestamps are ints of microseconds since 2000-01-01 00:00 UTC (PostgreSQL's epoch,
see :func:`pg_timestamp_to_datetime`), names are ``str`` (UTF-8), payload bytes are
``bytes``.

``xid`` of Relation/Type/Insert/Update/Delete/Truncate/LogicalMessage is the
streaming xid: ``None`` outside a Stream Start/Stop block, an int inside one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple, Optional, Tuple, Union

from ..pgvalues import (LSN_PATTERN, PG_EPOCH, datetime_to_pg_timestamp, format_lsn, parse_lsn,
                        pg_timestamp_to_datetime)

__all__ = [
    "TupleColumn", "RelationColumn",
    "Begin", "Commit", "Origin", "Relation", "Type", "Insert", "Update", "Delete",
    "Truncate", "LogicalMessage", "StreamStart", "StreamStop", "StreamCommit",
    "StreamAbort", "BeginPrepare", "Prepare", "CommitPrepared", "RollbackPrepared",
    "StreamPrepare", "XLogData", "PrimaryKeepalive",
    "PG_EPOCH", "pg_timestamp_to_datetime", "datetime_to_pg_timestamp",
    "format_lsn", "parse_lsn", "LSN_PATTERN",
]


class TupleColumn(NamedTuple):
    """One column of a TupleData: ``kind`` is 'n' (NULL), 'u' (unchanged TOAST,
    not sent), 't' (text) or 'b' (binary); ``data`` is the raw bytes for t/b,
    ``None`` for n/u."""

    kind: str
    data: Optional[bytes]


class RelationColumn(NamedTuple):
    """One column of a Relation message. ``flags`` 1 = part of the replica identity key."""

    flags: int
    name: str
    type_oid: int
    type_modifier: int


TupleData = Tuple[TupleColumn, ...]

_DC = dict(frozen=True, slots=True, kw_only=True)
_S, _T = "streaming", "two-phase"

#: Every pgoutput message class with its facts, in the order declared below (the order of
#: docs/protocol.md); ``facts.py`` builds its table from this.
DECLARED = []


def message(**facts):
    """Declare a pgoutput message class with its facts (the fields of
    ``facts.MessageFacts``: streamable, control, ends, change, features)."""
    def declare(cls):
        DECLARED.append((cls, facts))
        return cls
    return declare



@message(control=True)
@dataclass(**_DC)
class Begin:
    type: ClassVar[str] = "B"
    final_lsn: int
    commit_ts: int
    xid: int


@message(control=True, ends=True)
@dataclass(**_DC)
class Commit:
    type: ClassVar[str] = "C"
    flags: int = 0
    commit_lsn: int
    end_lsn: int
    commit_ts: int


@message(control=True)
@dataclass(**_DC)
class Origin:
    type: ClassVar[str] = "O"
    origin_lsn: int
    origin_name: str


@message(streamable=True, control=True)
@dataclass(**_DC)
class Relation:
    type: ClassVar[str] = "R"
    xid: Optional[int] = None
    relation_id: int
    namespace: str
    relation_name: str
    replica_identity: str
    columns: Tuple[RelationColumn, ...]


@message(streamable=True, control=True)
@dataclass(**_DC)
class Type:
    type: ClassVar[str] = "Y"
    xid: Optional[int] = None
    type_oid: int
    namespace: str
    type_name: str


@message(streamable=True, change=True)
@dataclass(**_DC)
class Insert:
    type: ClassVar[str] = "I"
    xid: Optional[int] = None
    relation_id: int
    new_tuple: TupleData


@message(streamable=True, change=True)
@dataclass(**_DC)
class Update:
    type: ClassVar[str] = "U"
    xid: Optional[int] = None
    relation_id: int
    old_kind: Optional[str] = None  # 'K' (key), 'O' (whole old row), None (no old tuple)
    old_tuple: Optional[TupleData] = None
    new_tuple: TupleData


@message(streamable=True, change=True)
@dataclass(**_DC)
class Delete:
    type: ClassVar[str] = "D"
    xid: Optional[int] = None
    relation_id: int
    old_kind: str  # 'K' or 'O'
    old_tuple: TupleData


@message(streamable=True, change=True)
@dataclass(**_DC)
class Truncate:
    type: ClassVar[str] = "T"
    xid: Optional[int] = None
    options: int  # bit 1 CASCADE, bit 2 RESTART IDENTITY
    relation_ids: Tuple[int, ...]


@message(streamable=True)
@dataclass(**_DC)
class LogicalMessage:
    type: ClassVar[str] = "M"
    xid: Optional[int] = None
    flags: int  # 1 = transactional
    lsn: int
    prefix: str
    content: bytes


@message(control=True, features=(_S,))
@dataclass(**_DC)
class StreamStart:
    type: ClassVar[str] = "S"
    xid: int
    first_segment: bool


@message(control=True, features=(_S,))
@dataclass(**_DC)
class StreamStop:
    type: ClassVar[str] = "E"


@message(control=True, ends=True, features=(_S,))
@dataclass(**_DC)
class StreamCommit:
    type: ClassVar[str] = "c"
    xid: int
    flags: int = 0
    commit_lsn: int
    end_lsn: int
    commit_ts: int


@message(control=True, ends=True, features=(_S,))
@dataclass(**_DC)
class StreamAbort:
    type: ClassVar[str] = "A"
    xid: int
    subxid: int
    # Present only with streaming=parallel (protocol 4, PG16+); both or neither.
    abort_lsn: Optional[int] = None
    abort_ts: Optional[int] = None


@message(control=True, features=(_T,))
@dataclass(**_DC)
class BeginPrepare:
    type: ClassVar[str] = "b"
    prepare_lsn: int
    end_lsn: int
    prepare_ts: int
    xid: int
    gid: str


@message(control=True, ends=True, features=(_T,))
@dataclass(**_DC)
class Prepare:
    type: ClassVar[str] = "P"
    flags: int = 0
    prepare_lsn: int
    end_lsn: int
    prepare_ts: int
    xid: int
    gid: str


@message(control=True, ends=True, features=(_T,))
@dataclass(**_DC)
class CommitPrepared:
    type: ClassVar[str] = "K"
    flags: int = 0
    commit_lsn: int
    end_lsn: int
    commit_ts: int
    xid: int
    gid: str


@message(control=True, ends=True, features=(_T,))
@dataclass(**_DC)
class RollbackPrepared:
    type: ClassVar[str] = "r"
    flags: int = 0
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_ts: int
    rollback_ts: int
    xid: int
    gid: str


@message(control=True, ends=True, features=(_S, _T))
@dataclass(**_DC)
class StreamPrepare:
    type: ClassVar[str] = "p"
    flags: int = 0
    prepare_lsn: int
    end_lsn: int
    prepare_ts: int
    xid: int
    gid: str


PgoutputMessage = Union[
    Begin, Commit, Origin, Relation, Type, Insert, Update, Delete, Truncate,
    LogicalMessage, StreamStart, StreamStop, StreamCommit, StreamAbort,
    BeginPrepare, Prepare, CommitPrepared, RollbackPrepared, StreamPrepare,
]


@dataclass(**_DC)
class XLogData:
    """Replication envelope 'w': a CopyData frame wrapping one pgoutput message."""

    type: ClassVar[str] = "w"
    wal_start: int
    wal_end: int
    send_time: int
    payload: PgoutputMessage = field()


@dataclass(**_DC)
class PrimaryKeepalive:
    """Replication envelope 'k' (server to client)."""

    type: ClassVar[str] = "k"
    wal_end: int
    send_time: int
    reply_requested: bool


#: The longest name a Relation or Type message can carry, in bytes. Servers keep
#: identifiers to NAMEDATALEN - 1 = 63 bytes of their encoding (PostgreSQL, openGauss);
#: converted to UTF-8 a character takes at most 4 bytes. A longer name is corruption, and
#: would be copied into every change row of its relation.
MAX_IDENTIFIER_BYTES = 4 * 63
