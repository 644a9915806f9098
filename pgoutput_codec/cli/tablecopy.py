"""A live server's published tables copied as the pgoutput messages its own pgoutput would
send for their rows: per table the Type messages of its user-defined types and its Relation
message (:attr:`PublishedTable.schema_messages`), an Insert per row, framed in the
archive by a COPY transaction (a Begin with xid 0, which no server transaction has, and
its Commit; decoders give its Inserts op 'R').

- :func:`published_tables` reads, in the caller's transaction (under an exported snapshot:
  that snapshot's catalog), what a publication sends of each table: the relation OID
  pgoutput names (the partition root's with ``publish_via_partition_root``), the columns
  (column lists, generated columns as the server's version publishes them), the replica
  identity key flags, the row filter, and the Type and Relation payloads themselves.
- :func:`copy_rows` streams ``COPY (SELECT <published columns> ...) TO STDOUT`` through
  psycopg and turns it into Insert payloads with the compiled :mod:`pgoutput_codec.pgoutput._copyrows`
  (text format for text archives, the values being the types' output text; binary format
  for binary archives, the values being the send functions' bytes), a batch of a few MB
  at a time, in primary-key order and resumable after a key.

The values are those of the copying session: its ``DateStyle``, ``IntervalStyle``,
``TimeZone``, ``extra_float_digits``, ``bytea_output`` and ``client_encoding`` shape the
output text exactly as the peeking session's shape what pgoutput sends, so both sessions
must have the same settings (connections with the same connection string do).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Optional, Tuple

import pyarrow as pa

from ..pgoutput._copyrows import CopyInserts
from ..pgoutput.encode import encode_message
from ..pgoutput.messages import Begin, Commit

__all__ = ["PublishedColumn", "PublishedTable", "published_tables", "copy_rows", "copy_statement",
           "copy_transaction_messages", "relation_message", "type_message", "BATCH_BYTES"]

#: COPY stream bytes turned into one batch of Insert payloads
BATCH_BYTES = 4 << 20


class PublishedColumn(NamedTuple):
    """One published column as the Relation message lists it: ``is_key`` is pgoutput's
    flag 1 (part of the replica identity)."""

    name: str
    type_oid: int
    type_modifier: int
    is_key: bool


@dataclass(frozen=True)
class PublishedTable:
    """What a publication sends of one table (see :func:`published_tables`)."""

    relid: int
    """the relation OID pgoutput sends (the partition root's when published via the root)"""
    schema: str
    table: str
    columns: Tuple[PublishedColumn, ...]
    """the published columns in attnum order"""
    replica_identity: str
    """'d' default, 'n' nothing, 'f' full, 'i' index"""
    primary_key: Optional[Tuple[str, ...]]
    """the primary key's columns in index order (None: no primary key): copies are ordered
    and chunked by it"""
    row_filter: Optional[str]
    """the publications' row filters OR-ed, as SQL over the table's columns (None: all rows)"""
    relation_message: bytes
    """the Relation payload pgoutput sends for the table"""
    type_messages: Tuple[bytes, ...] = ()
    """the Type payloads pgoutput sends right before the Relation: one per published column
    of a type that is not built in (OID 10000 and above), in column order"""
    kind: str = "r"
    """pg_class.relkind: 'r' a table, 'p' a partitioned table (published via its root)"""
    has_send: Tuple[bool, ...] = ()
    """per column: whether its type has a binary send function (pgoutput sends the others
    as text in binary mode)"""
    output_functions: Tuple[str, ...] = ()
    """per column: its type's output function, as qualified SQL"""
    key_types: Tuple[str, ...] = ()
    """per primary-key column: its type, as SQL (no typmod)"""
    key_output_functions: Tuple[str, ...] = ()
    """per primary-key column: its type's output function, as qualified SQL"""

    @property
    def schema_messages(self) -> Tuple[bytes, ...]:
        """The Type payloads then the Relation payload, as pgoutput sends them before the
        table's first change (pgoutput.c ``send_relation_and_attrs``)."""
        return self.type_messages + (self.relation_message,)

    @property
    def name(self) -> str:
        """``schema.table`` (unquoted)."""
        return f"{self.schema}.{self.table}"


_U32 = struct.Struct("!I")
_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")


def _cstr(value, encoding) -> bytes:
    raw = value if isinstance(value, bytes) else value.encode(encoding)
    return raw + b"\0"


def relation_message(relid, schema, table, replica_identity, columns, encoding="utf-8") -> bytes:
    """The Relation payload of proto.c ``logicalrep_write_rel``: 'R', relid, namespace
    ('' for pg_catalog, ``logicalrep_write_namespace``), name, replica identity, Int16
    column count, then per column flags, name, type OID, typmod. Names are sent in the
    session's client encoding (``encoding``: its Python codec)."""
    out = [b"R", _U32.pack(relid), _cstr("" if schema == "pg_catalog" else schema, encoding),
           _cstr(table, encoding), replica_identity.encode("ascii"), _I16.pack(len(columns))]
    for c in columns:
        out += [b"\1" if c.is_key else b"\0", _cstr(c.name, encoding), _U32.pack(c.type_oid),
                _I32.pack(c.type_modifier)]
    return b"".join(out)


#: transam.h FirstGenbkiObjectId: pgoutput describes the types at and above it (Type messages)
FIRST_GENBKI_OID = 10000

_TYPE_SQL = """
SELECT t.typtype, t.typbasetype::bigint, n.nspname, t.typname
FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
WHERE t.oid = %s
"""


def type_message(conn, type_oid, encoding="utf-8") -> bytes:
    """The Type payload of proto.c ``logicalrep_write_typ``: 'Y', the type's OID, then the
    namespace ('' for pg_catalog) and name of its base type (a domain's, followed down
    through domains over domains: ``getBaseType``)."""
    oid = type_oid
    while True:
        typtype, base, nsp, name = conn.execute(_TYPE_SQL, (oid,)).fetchone()
        if _text(typtype) != "d":
            break
        oid = base
    nsp = _text(nsp)
    return b"".join([b"Y", _U32.pack(type_oid), _cstr("" if nsp == "pg_catalog" else nsp, encoding),
                     _cstr(name, encoding)])


def _text(v):
    """psycopg gives bytes for text under SQL_ASCII."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


_TABLES_SQL = """
SELECT c.oid::bigint, pt.schemaname, pt.tablename, c.relkind, c.relreplident, pt.attnames, pt.rowfilter,
       c.relispartition
FROM pg_catalog.pg_publication_tables pt
JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
WHERE pt.pubname = %s
ORDER BY pt.schemaname, pt.tablename
"""

_COLUMNS_SQL = """
SELECT a.attname, a.atttypid::bigint, a.atttypmod, a.attgenerated, t.typsend <> 0,
       quote_ident(fn.nspname) || '.' || quote_ident(f.proname)
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_proc f ON f.oid = t.typoutput
JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

# relcache.c RelationGetIndexList: the replica identity index is the primary key (identity
# 'd') or the index marked indisreplident ('i'), valid, unique, immediate, without a
# predicate; RelationGetIdentityKeyBitmap takes its key columns (not INCLUDE columns).
_IDENTITY_SQL = """
SELECT ARRAY(SELECT a.attname FROM unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) k
             JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)
FROM pg_catalog.pg_index i
WHERE i.indrelid = %s AND i.indisvalid AND i.indisunique AND i.indimmediate AND i.indpred IS NULL
  AND CASE %s WHEN 'd' THEN i.indisprimary WHEN 'i' THEN i.indisreplident ELSE false END
"""

_PKEY_SQL = """
SELECT a.attname, format_type(a.atttypid, NULL), quote_ident(fn.nspname) || '.' || quote_ident(f.proname)
FROM pg_catalog.pg_index i
CROSS JOIN LATERAL unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, pos)
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_proc f ON f.oid = t.typoutput
JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
WHERE i.indrelid = %s AND i.indisprimary
ORDER BY k.pos
"""


def published_tables(conn, publication) -> list:
    """Every table the publication(s) publish (``publication``: a name or a comma-separated
    list, as capture's option), as :class:`PublishedTable`, read in ``conn``'s current
    transaction. Needs PostgreSQL 15 or later (column lists, row filters).

    A partition published through a root that a publication publishes with
    ``publish_via_partition_root`` is left out: its rows are copied through the root.
    Raises ``ValueError`` when publications give one table different column lists (the
    server's pgoutput refuses those too)."""
    major = conn.info.server_version // 10000
    if major < 15:
        raise ValueError(f"copying tables needs PostgreSQL 15 or later (column lists and row filters "
                         f"in pg_publication_tables), the server is {conn.info.server_version}")
    encoding = conn.info.encoding
    names = [p.strip() for p in publication.split(",") if p.strip()]
    found = {}       # relid -> [schema, table, relkind, replident, attnames, filters, is_partition]
    for pub in names:
        if conn.execute("SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = %s", (pub,)).fetchone() is None:
            raise ValueError(f"publication {pub!r} does not exist")
        for relid, schema, table, kind, ident, attnames, rowfilter, is_part in conn.execute(_TABLES_SQL, (pub,)):
            attnames = tuple(_text(a) for a in attnames or ())
            entry = found.get(relid)
            if entry is None:
                found[relid] = [_text(schema), _text(table), _text(kind), _text(ident), attnames,
                                [_text(rowfilter)], is_part]
                continue
            if entry[4] != attnames:
                raise ValueError(f"table {entry[0]}.{entry[1]} has different column lists in the "
                                 f"publications {publication!r}: {list(entry[4])} and {list(attnames)}")
            entry[5].append(_text(rowfilter))
    # pgoutput sends a partition's changes as the root's when a publication publishes the
    # root via_root (pgoutput.c get_rel_sync_entry): those partitions are in the root's copy
    roots = {relid for relid, e in found.items() if e[2] == "p"}
    if roots:
        for relid in [r for r, e in found.items() if e[6]]:
            ancestors = conn.execute("SELECT relid::bigint FROM pg_catalog.pg_partition_ancestors(%s) "
                                     "WHERE relid <> %s::regclass", (relid, relid)).fetchall()
            if any(a[0] in roots for a in ancestors):
                del found[relid]
    out = []
    for relid, (schema, table, kind, ident, attnames, filters, _) in found.items():
        published = set(attnames)
        cols = []
        for name, typoid, typmod, generated, has_send, outfn in conn.execute(_COLUMNS_SQL, (relid,)):
            name, generated = _text(name), _text(generated)
            if name not in published:
                continue
            # proto.c: before 18 a generated column is never sent; 18 sends stored ones
            # that the view lists (publish_generated_columns or a column list), never virtual
            if generated and (major < 18 or generated == "v"):
                continue
            cols.append((name, typoid, typmod, has_send, _text(outfn)))
        key = set()
        if ident == "f":
            key = {c[0] for c in cols}
        elif ident in ("d", "i"):
            row = conn.execute(_IDENTITY_SQL, (relid, ident)).fetchone()
            if row is not None:
                key = {_text(a) for a in row[0]}
        columns = tuple(PublishedColumn(c[0], c[1], c[2], c[0] in key) for c in cols)
        pk = [(_text(a), _text(t), _text(f)) for a, t, f in conn.execute(_PKEY_SQL, (relid,))]
        filters = list(dict.fromkeys(filters))
        row_filter = (None if None in filters else filters[0] if len(filters) == 1
                      else " OR ".join(f"({f})" for f in filters))
        out.append(PublishedTable(
            relid=relid, schema=schema, table=table, columns=columns, replica_identity=ident,
            primary_key=tuple(p[0] for p in pk) if pk else None, row_filter=row_filter,
            relation_message=relation_message(relid, schema, table, ident, columns, encoding),
            type_messages=tuple(type_message(conn, c.type_oid, encoding) for c in columns
                                if c.type_oid >= FIRST_GENBKI_OID),
            kind=kind, has_send=tuple(c[3] for c in cols), output_functions=tuple(c[4] for c in cols),
            key_types=tuple(p[1] for p in pk), key_output_functions=tuple(p[2] for p in pk)))
    return out


def copy_statement(conn, table: PublishedTable, *, binary, after_key=None, max_rows=None):
    """The ``COPY ... TO STDOUT`` of :func:`copy_rows` and how to read it: ``(statement,
    kinds, n_fields, key_fields)`` (see ``_copyrows.CopyInserts``)."""
    from psycopg import sql

    ident = sql.Identifier
    select, kinds = [], []
    for c, has_send, outfn in zip(table.columns, table.has_send, table.output_functions, strict=True):
        if binary and not has_send:
            # pgoutput sends such a value as its output text ('t'): the output function's
            # cstring, whose send function gives the text as it is
            select.append(sql.SQL("{}({})").format(sql.SQL(outfn), ident(c.name)))
            kinds.append("t")
        else:
            select.append(ident(c.name))
            kinds.append("b" if binary else "t")
    names = [c.name for c in table.columns]
    key_fields = []
    for k, outfn in zip(table.primary_key or (), table.key_output_functions, strict=True):
        if not binary and k in names:
            key_fields.append(names.index(k))     # the published column's text is the key's
        else:
            key_fields.append(len(select))
            select.append(sql.SQL("{}({})").format(sql.SQL(outfn), ident(k)))
    where = []
    if table.row_filter is not None:
        where.append(sql.SQL("(" + table.row_filter + ")"))
    if after_key is not None:
        if not table.primary_key:
            raise ValueError(f"{table.name} has no primary key: it is copied whole, not after a key")
        if len(after_key) != len(table.primary_key):
            raise ValueError(f"after_key {tuple(after_key)!r} does not match the primary key "
                             f"{table.primary_key} of {table.name}")
        where.append(sql.SQL("({}) > ({})").format(
            sql.SQL(", ").join(ident(k) for k in table.primary_key),
            sql.SQL(", ").join(sql.SQL("{}::{}").format(sql.Literal(str(v)), sql.SQL(t))
                               for v, t in zip(after_key, table.key_types, strict=True))))
    if max_rows is not None and not table.primary_key:
        raise ValueError(f"{table.name} has no primary key: it is copied whole, not in chunks")
    query = sql.SQL("SELECT {} FROM {}{}").format(
        sql.SQL(", ").join(select), sql.SQL("" if table.kind == "p" else "ONLY "),
        sql.Identifier(table.schema, table.table))
    if where:
        query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where)
    if table.primary_key:
        query += sql.SQL(" ORDER BY ") + sql.SQL(", ").join(ident(k) for k in table.primary_key)
    if max_rows is not None:
        query += sql.SQL(" LIMIT {}").format(sql.Literal(int(max_rows)))
    stmt = sql.SQL("COPY ({}) TO STDOUT{}").format(query, sql.SQL(" (FORMAT binary)" if binary else ""))
    return stmt, "".join(kinds).encode("ascii"), len(select), tuple(key_fields)


def copy_rows(conn, table: PublishedTable, *, binary, after_key=None, max_rows=None,
              batch_bytes=BATCH_BYTES) -> Iterator[Tuple[pa.BinaryArray, Optional[tuple]]]:
    """The Insert payloads of ``table``'s rows, as pgoutput sends them, read with ``COPY``
    in ``conn``'s current transaction: batches of ``(payloads, last_key)``, ``payloads`` a
    ``pa.BinaryArray`` of Insert messages from about ``batch_bytes`` of the COPY stream,
    ``last_key`` the primary key of the batch's last row (a tuple of the key columns'
    output text, which ``after_key`` takes back; None for a table without primary key).

    ``binary``: values as pgoutput's binary mode sends them (the send functions' bytes,
    the output text for a type without one), else as its text mode (the output text).
    ``after_key``: only rows whose primary key is above it; ``max_rows``: at most that many
    rows. A table with a primary key is copied in its order; one without is copied whole
    (``after_key`` and ``max_rows`` refused). Memory stays about two batches whatever the
    table's size (and the largest row). The COPY runs in a savepoint: closing the iterator
    early cancels it and leaves the caller's transaction usable."""
    stmt, kinds, n_fields, key_fields = copy_statement(conn, table, binary=binary, after_key=after_key,
                                                       max_rows=max_rows)
    dec = CopyInserts(table.relid, binary, n_fields, kinds, key_fields)
    encoding = conn.info.encoding

    def key():
        if not table.primary_key or dec.last_key is None:
            return None
        return tuple(v.decode(encoding) for v in dec.last_key)

    buf = bytearray()
    # a savepoint: a copy closed early is cancelled, which aborts only it, not the caller's
    # transaction (whose exported snapshot other chunks still need)
    with conn.transaction(), conn.cursor() as cur, cur.copy(stmt) as copy:
        for data in copy:
            buf += data
            if len(buf) >= batch_bytes:
                arr, used = dec.feed(buf)
                del buf[:used]
                if len(arr):
                    yield arr, key()
        arr, used = dec.feed(buf, final=True)
        if len(arr):
            yield arr, key()


def copy_transaction_messages(lsn: int, commit_ts: int) -> Tuple[bytes, bytes]:
    """The Begin and Commit payloads that frame copied rows (a COPY transaction): Begin
    with ``final_lsn`` = ``lsn`` and xid 0 (no server transaction has it), Commit with
    flags 0 and commit and end LSN ``lsn``; ``commit_ts`` in PostgreSQL microseconds."""
    return (encode_message(Begin(final_lsn=lsn, commit_ts=commit_ts, xid=0)),
            encode_message(Commit(flags=0, commit_lsn=lsn, end_lsn=lsn, commit_ts=commit_ts)))
