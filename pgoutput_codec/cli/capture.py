"""``capture``: a live server's logical replication slot landed into a Parquet archive of
rolling files, at-least-once and resumable (see :func:`capture` for the protocol with the
slot); :mod:`pgoutput_codec.archive` reads it.

Archive layout written by ``capture`` (one Parquet file per poll that found complete
transactions, ``part-<index>.parquet``):

=============== ========= ==================================================================
column          type      meaning
=============== ========= ==================================================================
``seq``         int64     arrival order over the whole archive (continues across files/restarts)
``lsn``         string    the row's LSN as ``X/Y`` (what the SQL decoding functions return)
``lsn_ordinal`` int32     position among the file's rows with the same ``lsn`` (0, 1, …)
``xid``         int64     the row's xid column (0 for non-transactional rows)
``data``        binary    the pgoutput payload
=============== ========= ==================================================================

File metadata (key ``pgoutput_codec.capture``, ``archive.META_KEY``; JSON): slot,
publication, the plugin options used, server version, ``seq_start``/``seq_end``,
``start_lsn`` (the slot's confirmed flush position the rows were peeked from) and
``end_lsn`` (the position the slot was advanced to after the file was durably written).

Type catalog (key ``pgoutput_codec.catalog``, ``archive.CATALOG_KEY``; JSON, see
:mod:`pgoutput_codec.typecatalog.catalog`): the versions of the catalog of the types the
published tables use (transitively) in force over the file's rows: the one in force at its
first row and any taken while its rows were read. Capture takes a version when it starts
(at the slot's position), when a Type message or a Relation naming a type OID the catalog
lacks arrives (at that message's LSN), and when the digest of the recorded types' catalog
rows, checked once per poll that found rows, changed (at the LSN of the poll's last row:
a composite gaining an attribute sends no message). A version is what the server's
catalog says when capture reads it, which may be later than its LSN when the slot lags.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import glob
import itertools
import json
import os
import queue
import re
import sys
import tempfile
import threading
import time

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from ..archive import CATALOG_KEY, META_KEY, parquet_part
from ..changes.boundaries import Boundaries
from ..pgoutput.encode import encode_message
from ..pgoutput.messages import Relation, Truncate, Type, datetime_to_pg_timestamp, format_lsn, parse_lsn
from ..typecatalog.catalog import Catalog, catalog_from_connection
from ..typecatalog.facts import ARRAY_ELEM, BY_OID
from ..typecatalog.serverdefs import types_digest
from . import watermarks as wm
from .console import PROG, CliError, first_line, progress
from ..runs import fsync_path
from .tablecopy import copy_rows, copy_transaction_messages, published_tables

__all__ = ["capture", "CRASH_ENV", "CHUNK_CRASH_ENV", "STAGING_NAME", "COPY_KEY"]

#: test hook: exit (status 75) right after writing file number N, before advancing the slot
CRASH_ENV = "PGOUTPUT_CODEC_CAPTURE_CRASH_AFTER_FILE"
#: test hook: exit (status 75) right after taking chunk number N of this run (both
#: watermarks emitted, its rows spilled), before the stream places it
CHUNK_CRASH_ENV = "PGOUTPUT_CODEC_CAPTURE_CRASH_AFTER_CHUNK"

#: the file in the archive directory that holds a peek's rows beyond what it keeps in memory
STAGING_NAME = ".peek.parquet.tmp"

#: the columns of a captured file (the table above)
_SCHEMA = pa.schema([
    pa.field("seq", pa.int64()), pa.field("lsn", pa.string()), pa.field("lsn_ordinal", pa.int32()),
    pa.field("xid", pa.int64()), pa.field("data", pa.binary()),
])


def _table_record(table, rows: int, last_key, complete: bool) -> dict:
    """What a file's ``copy`` metadata says of one table it holds rows of."""
    return {"relid": table.relid, "schema": table.schema, "table": table.table, "rows": rows,
            "last_key": _json_key(last_key), "complete": complete}


def table_head(table, opens: bool) -> list:
    """The messages before a table's copied rows in a COPY transaction: the Type and
    Relation messages pgoutput sends before its rows, and, where the copy of the table
    ``opens`` (its first rows), a Truncate of it: the copy replaces whatever the archive
    held of the table, and says so even when the table is empty (a reader then knows
    where the table starts, with no copied row to tell it)."""
    head = list(table.schema_messages)
    if opens:
        head.append(encode_message(Truncate(options=0, relation_ids=(table.relid,))))
    return head


_PART = re.compile(r"part-([0-9]+)\.parquet\Z")


def _existing_files(out):
    """The archive's files in index order: as numbers, so part-1000000 follows part-999999."""
    found = [(int(m[1]), name) for name in os.listdir(out) if (m := _PART.match(name))]
    return [os.path.join(out, name) for _, name in sorted(found)]


def _lock(out):
    """An exclusive lock on the archive for this process's lifetime (released by the
    kernel when it exits, however it exits): two captures into one directory would
    write the same file names and advance one slot twice."""
    fd = os.open(os.path.join(out, ".capture.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise CliError(f"{out}: another capture is writing to this archive") from None
    return fd


def _write_new(path, schema, pieces):
    """Write the tables ``pieces`` (each a row group or more) to ``path`` as one file of
    ``schema`` durably and never over an existing file: a hidden temporary file (0600),
    fsync, a hard link to the final name (which fails if the name is taken), the
    directory fsynced."""
    out = os.path.dirname(path)
    tmp = os.path.join(out, f".{os.path.basename(path)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        with pq.ParquetWriter(f, schema, compression="zstd") as writer:
            for piece in pieces:
                writer.write_table(piece)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        os.unlink(tmp)
        raise CliError(f"{path} exists: the archive holds a file this capture did not expect; "
                       "nothing was overwritten") from None
    os.unlink(tmp)
    fsync_path(out)


#: rows of a peek's first fetch; later fetches take as many rows as fill about _FETCH_BYTES
_FETCH_ROWS = 1000
_FETCH_MAX_ROWS = 10000
_FETCH_BYTES = 1 << 20
#: a peek's rows held in memory (Arrow) before they go to the staging file as a row group
_STAGE_BYTES = 2 << 20


def _peek(conn, sql, params, client_encoding):
    """The slot's rows (lsn text, xid, data) under ``client_encoding``, in lists of a
    bounded number of rows: read through a server-side cursor, whose transaction lasts
    as long as the iteration (close the generator to end it early). Text comes back as
    str whatever it is (psycopg gives bytes under SQL_ASCII)."""
    if client_encoding != "UTF8":
        conn.execute(f"SET client_encoding = '{client_encoding}'")
    try:
        with conn.transaction(), conn.cursor("pgoutput_codec_peek") as cur:
            cur.execute(sql, params)
            n = _FETCH_ROWS
            while rows := cur.fetchmany(n):
                if client_encoding != "UTF8":
                    rows = [(lsn.decode() if isinstance(lsn, bytes) else lsn, xid, data) for lsn, xid, data in rows]
                yield rows
                size = sum(len(r[2]) + 64 for r in rows)
                n = max(1, min(_FETCH_MAX_ROWS, _FETCH_BYTES * len(rows) // size))
    finally:
        if client_encoding != "UTF8":
            conn.execute("SET client_encoding = 'UTF8'")


class _Staging:
    """The rows of one peek in the columns of a captured file (``seq`` numbered from
    ``next_seq``, ``lsn_ordinal`` counted across batches) and where its last transaction
    boundary is: ``kept`` rows end at it (0: none), the last of them at ``end_lsn``.

    The rows take bounded memory whatever their number: about ``_STAGE_BYTES`` of them
    in memory, the earlier ones appended in row groups of that size to
    :data:`STAGING_NAME` in the archive directory (hidden, 0600). :meth:`head` reads the
    first rows back a row group at a time; :meth:`close` removes the file."""

    def __init__(self, out, next_seq):
        self.path = os.path.join(out, STAGING_NAME)
        self.next_seq = next_seq
        self.rows = self.kept = 0
        self.first_lsn = self.end_lsn = None
        self.staged = 0           # rows in the file
        self.file = self.writer = None
        self.pending, self.pending_bytes = [], 0
        self.prev_lsn, self.ordinal = None, 0
        #: (row number from 1, lsn, payload, in a stream block) of the Type and Relation rows
        self.schema_rows = []

    def read(self, batches, scanner=None):
        """Take a peek's rows, lists of (lsn, xid, data) in the order peeked; a
        :class:`~.watermarks.Scanner` is fed them too (row numbers from 0)."""
        bounds = Boundaries()
        in_stream = False       # (a peek starts where no transaction is open)
        for rows in batches:
            if self.first_lsn is None:
                self.first_lsn = rows[0][0]
            for i, (lsn, _xid, data) in enumerate(rows, self.rows + 1):
                if bounds.closes(data):
                    self.kept, self.end_lsn = i, lsn
                if scanner is not None:
                    scanner.feed(i - 1, data)
                tag = data[:1]
                if tag in (b"Y", b"R"):
                    self.schema_rows.append((i, lsn, bytes(data), in_stream))
                elif tag == b"S":
                    in_stream = True
                elif tag == b"E":
                    in_stream = False
            self._add(rows)

    def _add(self, rows):
        lsns, ordinals = [], []
        prev, k = self.prev_lsn, self.ordinal
        for r in rows:
            k = k + 1 if r[0] == prev else 0
            prev = r[0]
            lsns.append(prev)
            ordinals.append(k)
        self.prev_lsn, self.ordinal = prev, k
        start = self.next_seq + self.rows
        table = pa.table([
            pa.array(range(start, start + len(rows)), pa.int64()), pa.array(lsns, pa.string()),
            pa.array(ordinals, pa.int32()), pa.array([r[1] for r in rows], pa.int64()),
            pa.array([bytes(r[2]) for r in rows], pa.binary()),
        ], schema=_SCHEMA)
        self.rows += len(rows)
        self.pending.append(table)
        self.pending_bytes += table.nbytes
        if self.pending_bytes >= _STAGE_BYTES:
            if self.file is None:
                self.file = os.fdopen(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
                self.writer = pq.ParquetWriter(self.file, _SCHEMA, compression="zstd")
            table = pa.concat_tables(self.pending)
            self.writer.write_table(table)
            self.staged += len(table)
            self.pending, self.pending_bytes = [], 0

    def head(self, n):
        """The first ``n`` rows, as tables of a row group or less each."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.staged:
            self.file.close()
            staged = pq.ParquetFile(self.path)
            for i in range(staged.num_row_groups):
                if n <= 0:
                    return
                table = staged.read_row_group(i, use_threads=False)
                yield table.slice(0, n)
                n -= len(table)
        for table in self.pending:
            if n <= 0:
                return
            yield table.slice(0, n)
            n -= len(table)

    def close(self):
        """Remove the file: its rows are in the slot still, or in the file written from them."""
        if self.file is None:
            return
        if self.writer is not None:
            with contextlib.suppress(OSError, pa.ArrowException):   # its file goes anyway
                self.writer.close()
            self.writer = None
        self.file.close()
        self.file = None
        os.unlink(self.path)


#: copy files' metadata key (inside the capture metadata): see :func:`capture`
COPY_KEY = "copy"


class _Spill:
    """Copied payloads on their way to an archive file: a hidden temporary Parquet file
    (``.copy-*.tmp``, 0600) in the archive directory holding a ``data`` column, so that a
    chunk or a table takes bounded memory whatever its size. :meth:`tables` reads it back
    a row group at a time; :meth:`close` removes it."""

    def __init__(self, out):
        fd, self.path = tempfile.mkstemp(prefix=".copy-", suffix=".tmp", dir=out)
        self.file = os.fdopen(fd, "wb")
        self.writer = pq.ParquetWriter(self.file, _DATA_SCHEMA, compression="lz4")
        self.rows = 0

    def add(self, payloads):
        if len(payloads):
            self.writer.write_table(pa.table([payloads.cast(pa.binary())], schema=_DATA_SCHEMA))
            self.rows += len(payloads)

    def finish(self):
        if self.writer is not None:
            self.writer.close()
            self.file.close()
            self.writer = None

    def tables(self):
        self.finish()
        f = pq.ParquetFile(self.path, pre_buffer=False)    # (pre-buffering reads every row group first)
        for i in range(f.num_row_groups):
            yield f.read_row_group(i, use_threads=False)

    def close(self):
        with contextlib.suppress(OSError, pa.ArrowException):
            self.finish()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


_DATA_SCHEMA = pa.schema([pa.field("data", pa.binary())])


def _rows(payloads, lsn):
    """Copied payloads (a binary array or list) as rows of a captured file: ``lsn`` the
    copy's LSN text, xid 0; ``seq`` and ``lsn_ordinal`` are numbered by :func:`_numbered`."""
    data = payloads if isinstance(payloads, pa.Array) else pa.array(payloads, pa.binary())
    n = len(data)
    return pa.table([pa.array([0] * n, pa.int64()), pa.array([lsn] * n, pa.string()),
                     pa.array([0] * n, pa.int32()), pa.array([0] * n, pa.int64()), data.cast(pa.binary())],
                    schema=_SCHEMA)


def _numbered(pieces, first_seq):
    """``pieces`` with ``seq`` numbered from ``first_seq`` and ``lsn_ordinal`` counted
    over equal consecutive ``lsn`` values."""
    at, prev, k = first_seq, None, 0
    for piece in pieces:
        n = len(piece)
        if not n:
            continue
        ordinals = []
        for lsn in piece.column("lsn").to_pylist():
            k = k + 1 if lsn == prev else 0
            prev = lsn
            ordinals.append(k)
        piece = piece.set_column(0, "seq", pa.array(range(at, at + n), pa.int64()))
        piece = piece.set_column(2, "lsn_ordinal", pa.array(ordinals, pa.int32()))
        at += n
        yield piece


def _json_key(key):
    return None if key is None else [str(v) for v in key]


class _Request:
    """A copy of tables the archive records (its files' ``copy.request``): its id, the
    names asked for (``"*"``: every published table), the tables it resolved to, and each
    table's progress as the files hold it."""

    def __init__(self, rid, names, tables):
        self.id, self.names, self.tables = rid, names, [tuple(t) for t in tables]
        self.progress = {}          # (schema, table) -> {"last_key": .., "complete": ..}

    def record(self):
        return {"id": self.id, "names": self.names, "tables": [list(t) for t in self.tables]}

    def done(self):
        return all(self.progress.get(t, {}).get("complete") for t in self.tables)


def _copy_state(files):
    """What the archive's copy files say: the requests in order, and the initial copy's
    (LSN, request) when its transaction was opened and never committed (else None)."""
    requests, initial_open = {}, None
    for f in files:
        meta = parquet_part(f).meta or {}
        c = meta.get(COPY_KEY)
        if not c:
            continue
        try:
            r = c["request"]
            req = requests.get(r["id"])
            if req is None:
                req = requests[r["id"]] = _Request(r["id"], r["names"], r["tables"])
            for t in c.get("tables", ()):
                req.progress[(t["schema"], t["table"])] = {"last_key": t["last_key"], "complete": t["complete"]}
            if c["kind"] == "initial":
                initial_open = None if c.get("commit") else (c["lsn"], req)
        except (KeyError, TypeError, ValueError):
            raise CliError(f"{f}: its copy metadata is not what capture writes ({json.dumps(c)[:200]}); "
                           "use another --out") from None
    return list(requests.values()), initial_open


class _Chunk:
    """A chunk taken between two watermarks, its rows spilled, waiting to be placed."""

    def __init__(self, job, cid, request, table, snapshot, spill, last_key, complete):
        self.job = job
        self.id, self.request, self.table, self.snapshot = cid, request, table, snapshot
        self.spill, self.last_key, self.complete = spill, last_key, complete
        self.placed = None          # the (chunk, mark) of the watermark it goes into


def _last_file_transactions(out, relid):
    """The transactions of the archive's last file that touch ``relid``, as
    :class:`~.watermarks.Tx` whose rows count below 0: they committed before the rows
    peeked now, so before a low watermark found there, and a chunk's snapshot must see
    them too (one still in progress for it though its commit was decoded, as under
    synchronous replication's wait, is rare but possible)."""
    files = _existing_files(out)
    if not files:
        return []
    scanner = wm.Scanner({relid})
    f = pq.ParquetFile(files[-1], pre_buffer=False)
    n = f.metadata.num_rows
    i = 0
    for batch in f.iter_batches(columns=["data"], batch_size=4096):
        for data in batch.column(0).to_pylist():
            scanner.feed(i - n, data)
            i += 1
    return [t for t in scanner.committed if t.mark is None]


def _landed_in_progress(conn, out):
    """{xid: None} for the transactions in progress now that the archive already holds:
    committed in the WAL, decoded and landed by an earlier run, but still in progress for
    every snapshot while their backend waits (for a synchronous standby, or simply not
    yet out of the proc array). A chunk whose snapshot still counts one in progress must
    be taken again; which tables they touched is not looked up (any)."""
    xip = [x & 0xFFFFFFFF for (x,) in conn.execute(
        "SELECT x::text::bigint FROM pg_snapshot_xip(pg_current_snapshot()) x")]
    files = _existing_files(out)
    if not xip or not files:
        return {}
    # the xid column's row group statistics skip nearly every row group; only a commit
    # counts (a streamed or prepared transaction's changes land before it commits)
    found = pads.dataset(files, format="parquet").to_table(
        columns=["xid", "data"], filter=pads.field("xid").isin(xip))
    pairs = zip(found.column("xid").to_pylist(), found.column("data").to_pylist(), strict=True)
    return dict.fromkeys({x for x, d in pairs if d[:1] in (b"C", b"c", b"K")})


def _decode_message(data, in_stream):
    """One payload decoded by the package's decoder (compiled, or its plain-Python twin)."""
    import pgoutput_codec
    return pgoutput_codec.decode_message(data, in_stream=in_stream)


def _slot_ident(slot):
    return '"' + slot.replace('"', '""') + '"'


def capture(dsn, slot, publication, out, *, proto=1, binary=False, streaming=False, messages=False,
            two_phase=False, create_slot=False, snapshot=False, snapshot_tables=None, jobs=0,
            chunk_rows=None, max_files=0, poll_interval=1.0, stop_after=0, rows_per_file=10000,
            log=None) -> dict:
    """Land a slot's changes into a Parquet archive under ``out``; returns counters.

    The protocol with the slot (at-least-once, resumable, nothing lost between files):

    1. peek (``pg_logical_slot_peek_binary_changes``, which does not consume) up to
       ``rows_per_file`` rows from the slot's confirmed position, read through a
       server-side cursor about 1 MB at a time and held in memory about 2 MB at a time,
       each 2 MB appended as a row group to the hidden staging file :data:`STAGING_NAME`
       (:class:`_Staging`): the process takes bounded memory whatever the size of a
       transaction;
    2. keep the rows up to the last transaction boundary with no transaction open
       (:class:`~pgoutput_codec.changes.boundaries.Boundaries`, tracked while reading: a Commit, Prepare, Commit/Rollback
       Prepared, Stream Commit/Prepare or a non-transactional message); the rest (an open
       streamed transaction) is peeked again next time — if no boundary is in reach, the
       limit doubles (the peek is read in batches all the same);
    3. write the kept rows, a row group at a time, to ``.part-N.parquet.tmp``, fsync,
       hard-link it to ``part-N.parquet``, fsync the directory; the file records
       ``end_lsn`` = the boundary row's LSN. The staging file goes after each peek;
    4. only then ``pg_replication_slot_advance(slot, end_lsn)``.

    A crash before 4 leaves a durable file whose rows the slot would send again. On
    restart, the last file's ``end_lsn`` is compared with the slot's
    ``confirmed_flush_lsn`` and the advance is completed first, so those rows are not
    captured twice; ``seq`` continues from the last file's ``seq_end``; a staging or
    temporary file left behind is removed (its rows are still in the slot). Should an
    archive still hold re-captured rows (an advance never completed, e.g. files copied from an
    interrupted run into another directory), every file records ``start_lsn``, and
    readers (``decode``, ``inspect``) drop the prefix of a file lying below the end of
    the files before it (:func:`pgoutput_codec.archive.iter_archive`); (``lsn``,
    ``lsn_ordinal``) identifies a row within a poll for audits.

    Complete tables (docs/cli.md, "Complete tables"):

    - ``create_slot`` and ``snapshot``: the slot is created on a replication connection
      with an exported snapshot, which ``jobs`` connections (default: one per core, at
      most one per table) use to copy every published table; the copy is one COPY
      transaction (Begin xid 0) at the slot's consistent point, over files of at most
      about ``rows_per_file`` rows (a table without primary key whole in one file), each
      written as the stream's files are. Its Commit lands before any stream file.
    - ``snapshot_tables`` (names), or ``snapshot`` on an existing slot (every published
      table): copied while the stream runs, ``chunk_rows`` rows at a time (default
      ``rows_per_file``) by primary key (a table without one whole), each chunk between two watermarks and placed by
      :func:`.watermarks.place` into one of them when the stream is landed.
    - Each copy file records ``copy`` in its metadata: ``kind`` (initial, chunk),
      ``lsn``, the tables with their rows, last key and whether complete, and the
      request it belongs to. A run finds an unfinished request there and finishes it
      first (an initial copy interrupted: its Commit, then the rest as chunks); a
      request equal to the last one completed is not taken again.
    """
    import psycopg   # optional: the [cli] extra; only capture talks to a server

    say = log or (lambda msg: print(msg, flush=True))
    if proto < 1 or proto > 4:
        raise CliError(f"--proto must be 1..4, got {proto}")
    if streaming and proto < 2:
        raise CliError("--streaming needs --proto 2 or later")
    if two_phase and proto < 3:
        raise CliError("--two-phase needs --proto 3 or later")
    if jobs < 0:
        raise CliError(f"--jobs must be positive, got {jobs}")
    chunk_rows = chunk_rows or rows_per_file
    names = None
    if snapshot_tables is not None:
        names = [n.strip() for n in (snapshot_tables.split(",") if isinstance(snapshot_tables, str)
                                     else snapshot_tables) if n.strip()]
        if not names:
            raise CliError("--snapshot-tables needs at least one table name")
    os.makedirs(out, mode=0o700, exist_ok=True)     # row data: readable by its owner only
    lock = _lock(out)
    try:
        here = glob.escape(out)     # (a path, not a pattern: 'arch[1]' is that directory)
        for tmp in glob.glob(os.path.join(here, ".part-*.tmp")) + glob.glob(os.path.join(here, STAGING_NAME)) \
                + glob.glob(os.path.join(here, ".copy-*.tmp")):
            os.unlink(tmp)   # a peek, copy or write that never reached its link: redone from the slot/server

        files = _existing_files(out)
        requests, initial_open = _copy_state(files) if files else ([], None)
        copying = bool(snapshot or names or initial_open is not None or any(not r.done() for r in requests))
        options = ["proto_version", str(proto), "publication_names", publication]
        if binary:
            options += ["binary", "true"]
        if streaming:
            options += ["streaming", "true"]
        if messages or copying:     # (the watermarks are messages)
            options += ["messages", "true"]
        if two_phase:
            options += ["two_phase", "true"]

        def base(opts):     # what must match across runs: a copy turns messages on for itself
            opts = list(opts or ())
            if "messages" in opts:
                i = opts.index("messages")
                del opts[i:i + 2]
            return opts

        next_seq, next_index, last_meta = 0, 0, None
        if files:
            last = parquet_part(files[-1])
            last_meta = last.meta
            if not last_meta:
                raise CliError(f"{files[-1]}: not written by '{PROG} capture' (no capture metadata); "
                               "use an empty --out directory")
            if last_meta.get("slot") != slot or base(last_meta.get("options")) != base(options):
                raise CliError(f"{out} holds a capture of slot {last_meta.get('slot')!r} with options "
                               f"{last_meta.get('options')}: resume it with the same --slot and options, "
                               "or use another --out")
            next_seq = last_meta["seq_end"] + 1
            next_index = last_meta["file_index"] + 1

        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as e:
            raise CliError(f"cannot connect ({first_line(e)})") from None
        stats = {"files": 0, "messages": 0, "polls": 0, "resumed_at_seq": next_seq if files else None,
                 "copied_rows": 0, "chunks": 0, "retaken": 0}
        run = _Run(psycopg, dsn, conn, out, slot, publication, options, binary, say, stats)
        run.next_seq, run.next_index = next_seq, next_index
        run.messages, run.streaming, run.two_phase, run.proto = messages, streaming, two_phase, proto
        with conn:
            # The server converts what the slot sends (names, values) into the session's
            # client_encoding, which defaults to the database's: a LATIN1 database would land
            # LATIN1 bytes, which no UTF-8 decoder reads (transcode.py). A SQL_ASCII database
            # converts nothing, and under any other client_encoding it checks each byte (a
            # non-UTF-8 byte stops the peek: "invalid byte sequence for encoding UTF8"), so
            # there the session keeps SQL_ASCII and the archive the bytes as stored.
            conn.execute("SET client_encoding = 'UTF8'")   # the peeks of a SQL_ASCII database set their own
            run.server_version = conn.execute("SHOW server_version").fetchone()[0]
            run.server_encoding = conn.execute("SHOW server_encoding").fetchone()[0]
            client_encoding = "SQL_ASCII" if run.server_encoding == "SQL_ASCII" else "UTF8"
            run.client_encoding = client_encoding
            if client_encoding == "SQL_ASCII":
                print(f"{PROG}: warning: the database's encoding is SQL_ASCII, which converts nothing: "
                      "the archive holds its text as its clients stored it; if that is not UTF-8, "
                      f"rewrite the archive with '{PROG} transcode --encoding ENC'", file=sys.stderr)
            row = conn.execute("SELECT plugin, confirmed_flush_lsn::text FROM pg_replication_slots "
                               "WHERE slot_name = %s", (slot,)).fetchone()
            run.take_catalog(row[1] if row is not None else None)
            copied_initially = False
            if row is None:
                if not create_slot:
                    raise CliError(f"replication slot {slot!r} does not exist (add --create-slot)")
                if snapshot:
                    run.initial_copy(two_phase, jobs, rows_per_file, 1 + max((r.id for r in requests), default=0))
                    copied_initially = True
                else:
                    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, %s)",
                                 (slot, two_phase))
                    say(f"created slot {slot}")
                row = conn.execute("SELECT plugin, confirmed_flush_lsn::text FROM pg_replication_slots "
                                   "WHERE slot_name = %s", (slot,)).fetchone()
            if row[0] != "pgoutput":
                raise CliError(f"slot {slot!r} uses plugin {row[0]!r}, not pgoutput")
            if last_meta is not None:
                confirmed, end = parse_lsn(row[1]), parse_lsn(last_meta["end_lsn"])
                if confirmed < end:
                    conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, last_meta["end_lsn"]))
                    say(f"resume: completed the slot advance to {last_meta['end_lsn']} of "
                        f"{os.path.basename(files[-1])} (interrupted between write and advance)")
                elif confirmed > end:
                    print(f"{PROG}: warning: slot {slot} is at {row[1]}, past the archive's end "
                          f"{last_meta['end_lsn']}: changes in between were consumed elsewhere", file=sys.stderr)
                say(f"resume: {len(files)} files, continuing at seq {next_seq}")
            if initial_open is not None:
                run.commit_initial(*initial_open)
            # the copies to make while the stream runs: unfinished requests, then the new one
            todo = [r for r in requests if not r.done()]
            if not copied_initially:
                new = run.new_request(names, snapshot, requests, 1 + max((r.id for r in requests), default=0))
                if new is not None:
                    todo.append(new)
            for r in todo:
                for t in r.tables:
                    p = r.progress.get(t, {})
                    if not p.get("complete"):
                        run.jobs.append((r, t, p.get("last_key")))
            if run.jobs:
                say(f"copying {len({(r.id, t) for r, t, _ in run.jobs})} table(s) while the stream runs, "
                    f"{chunk_rows} rows a chunk")
            run.stream(client_encoding, rows_per_file, chunk_rows, max_files, stop_after, poll_interval)
        return stats
    finally:
        os.close(lock)   # the lock goes with it


class _Run:
    """One capture run's state: the files it writes and the copies it makes."""

    def __init__(self, psycopg, dsn, conn, out, slot, publication, options, binary, say, stats):
        self.psycopg, self.dsn, self.conn, self.out, self.slot = psycopg, dsn, conn, out, slot
        self.publication, self.options, self.binary, self.say, self.stats = publication, options, binary, say, stats
        self.jobs = []              # (request, (schema, table), after key) still to copy
        self.copy_conn = None
        self.chunks_taken = 0
        self.bars = {}
        # xid -> relids touched (None: any) of the transactions landed while a chunk's
        # snapshot may still count them in progress: a chunk must see each one that touches
        # its table, or be taken again (kept only while in the last chunk snapshot's xip)
        self.unseen = {}
        self.in_force = None        # the version in force now
        self.file_versions = []     # the versions in force over the next file's rows
        self.digest = None          # types_digest of the version in force
        self.asked = set()          # type OIDs a version was taken for (not asked twice)
        self.catalog_warned = False

    # ------------------------------------------------------------------ the type catalog
    def take_catalog(self, lsn, oids=()) -> bool:
        """Read a version of the type catalog at ``lsn`` (text or int; None: the server's
        WAL position) with the types ``oids`` too; recorded (for the next file) when it
        differs from the one in force. The digest is read in the same snapshot."""
        conn = self.conn
        oids = set(oids) | self.asked
        self.asked |= oids
        lsn = parse_lsn(lsn) if isinstance(lsn, str) else lsn
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                # the catalog query is costed high enough to JIT-compile where jit is on:
                # 1.8 s of compiling for a 0.08 s read, at every version taken
                conn.execute("SET LOCAL jit = off")
                cat = catalog_from_connection(conn, self.publication, oids=oids, lsn=lsn)
                version = cat.latest
                digest = types_digest(conn, [t["oid"] for t in version.types])
        except (self.psycopg.Error, ValueError) as e:
            self.catalog_lost(e)
            return False
        self.digest = digest
        if self.in_force is not None and version.types == self.in_force.types \
                and version.timezone == self.in_force.timezone:
            return False
        self.in_force = version
        self.file_versions.append(version)
        return True

    def catalog_after_peek(self, staging, kept):
        """Take a version when the ``kept`` rows of a peek hold a Type or Relation message
        naming a type the catalog in force lacks, or else when the recorded types' digest
        changed."""
        if self.in_force is None:       # (no catalog: see catalog_lost; tried again)
            self.take_catalog(staging.end_lsn)
            return
        known = {t["oid"] for t in self.in_force.types}
        wanted, at = set(), None
        for i, lsn, data, in_stream in staging.schema_rows:
            if i > kept:
                break
            try:
                m = _decode_message(data, in_stream)
            except ValueError:
                continue        # (the decoders report it)
            oids = [m.type_oid] if isinstance(m, Type) else \
                [c.type_oid for c in m.columns] if isinstance(m, Relation) else []
            new = {o for o in oids if o not in known and o not in BY_OID and o not in ARRAY_ELEM
                   and o not in self.asked}
            if new:
                wanted |= new
                at = lsn if at is None else at
        if wanted:
            self.take_catalog(at, wanted)
            return
        try:
            digest = types_digest(self.conn, known)
        except self.psycopg.Error as e:
            self.catalog_lost(e)
            return
        if digest != self.digest:
            self.take_catalog(staging.end_lsn)

    def catalog_lost(self, e):
        """The type catalog could not be read (a SQL_ASCII database's names that are not
        UTF-8, a privilege refused): the capture goes on, its files from here on carry
        none, and the user is told once."""
        if self.in_force is not None or not self.catalog_warned:
            print(f"{PROG}: warning: cannot read the type catalog ({first_line(e)}): the files written from "
                  f"now on carry none; decode them with --catalog FILE ('{PROG} catalog')", file=sys.stderr)
        self.catalog_warned = True
        self.in_force, self.file_versions = None, []

    def footer_catalog(self) -> Catalog:
        """The versions in force over the next file's rows: the one in force at its first
        row and those taken since."""
        return Catalog(self.file_versions)

    def copied(self, table, rows):
        """Count ``rows`` copied rows of ``table`` on its progress bar (stderr, a terminal only)."""
        if table.name not in self.bars:
            self.bars[table.name] = progress(None, table.name).__enter__()
        self.bars[table.name].update(rows)

    def close_bars(self):
        for bar in self.bars.values():
            bar.__exit__(None, None, None)
        self.bars = {}

    # ------------------------------------------------------------------ files
    def meta(self, rows, start_lsn, end_lsn, copy=None):
        meta = {
            "format": 1, "slot": self.slot, "publication": self.publication, "options": self.options,
            "proto_version": self.proto, "binary": self.binary, "streaming": self.streaming,
            "messages": self.messages, "two_phase": self.two_phase, "server_version": self.server_version,
            "server_encoding": self.server_encoding, "client_encoding": self.client_encoding,
            "file_index": self.next_index, "seq_start": self.next_seq, "seq_end": self.next_seq + rows - 1,
            "rows": rows, "start_lsn": start_lsn, "end_lsn": end_lsn,
            "captured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        }
        if copy is not None:
            meta[COPY_KEY] = copy
        return meta

    def land(self, pieces, rows, start_lsn, end_lsn, copy=None):
        """Write the next file (``rows`` rows in ``pieces``, numbered here); returns its name."""
        meta = self.meta(rows, start_lsn, end_lsn, copy)
        footer = {META_KEY: json.dumps(meta).encode()}
        if self.file_versions and self.in_force is not None:
            footer[CATALOG_KEY] = self.footer_catalog().to_json().encode()
        schema = _SCHEMA.with_metadata(footer)
        name = f"part-{self.next_index:06d}.parquet"
        _write_new(os.path.join(self.out, name), schema, _numbered(pieces, self.next_seq))
        self.file_versions = [self.in_force] if self.in_force is not None else []
        return name, meta

    def landed(self, rows):
        self.stats["files"] += 1
        self.stats["messages"] += rows
        self.next_seq += rows
        self.next_index += 1

    def crash_hook(self):
        if os.environ.get(CRASH_ENV) and int(os.environ[CRASH_ENV]) == self.next_index:
            os._exit(75)

    def connect(self):
        try:
            c = self.psycopg.connect(self.dsn, autocommit=True)
        except self.psycopg.Error as e:
            raise CliError(f"cannot connect ({first_line(e)})") from None
        c.execute(f"SET client_encoding = '{self.client_encoding}'")
        return c

    # ------------------------------------------------------------------ the initial copy
    def initial_copy(self, two_phase, jobs, unit_rows, rid):
        """Create the slot with an exported snapshot and copy every published table under
        it as one COPY transaction at the consistent point (design: docs/cli.md)."""
        from psycopg import sql

        try:
            rconn = self.psycopg.connect(self.dsn, replication="database", autocommit=True)
        except self.psycopg.Error as e:
            raise CliError(f"cannot open a replication connection ({first_line(e)})") from None
        with rconn:
            cmd = f"CREATE_REPLICATION_SLOT {_slot_ident(self.slot)} LOGICAL pgoutput (SNAPSHOT 'export'" \
                  f"{', TWO_PHASE' if two_phase else ''})"
            res = rconn.pgconn.exec_(cmd.encode())
            if res.status != self.psycopg.pq.ExecStatus.TUPLES_OK:
                raise CliError(f"cannot create slot {self.slot!r}: "
                               f"{first_line(res.error_message.decode(errors='replace'))}")
            lsn, snapname = res.get_value(0, 1).decode(), res.get_value(0, 2).decode()
            self.say(f"created slot {self.slot} at {lsn}, copying the published tables under snapshot {snapname}")
            conns = []
            try:
                first = self.connect()
                conns.append(first)
                first.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                first.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapname)))
                try:
                    tables = published_tables(first, self.publication)
                except ValueError as e:
                    raise CliError(str(e)) from None
                n = jobs or min(os.cpu_count() or 1, len(tables))
                n = max(1, min(n, len(tables)))
                for _ in range(n - 1):
                    c = self.connect()
                    conns.append(c)
                    c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                    c.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapname)))
                request = _Request(rid, "*", [(t.schema, t.table) for t in tables])
                self._copy_tables(conns, tables, lsn, unit_rows, request)
            finally:
                for c in conns:
                    with contextlib.suppress(Exception):
                        c.close()
        # the replication connection (and the exported snapshot) ends here

    def _copy_tables(self, conns, tables, lsn, unit_rows, request):
        lsn_value = parse_lsn(lsn)
        ts = datetime_to_pg_timestamp(_dt.datetime.now(_dt.timezone.utc))
        begin, commit = copy_transaction_messages(lsn_value, ts)
        todo = queue.Queue()
        for t in tables:
            todo.put(t)
        units = queue.Queue(maxsize=2 * len(conns))     # spilled units waiting: bounded disk
        failed = []

        def worker(c):
            try:
                while not failed:
                    try:
                        t = todo.get_nowait()
                    except queue.Empty:
                        return
                    spill, last = _Spill(self.out), None
                    for payloads, key in copy_rows(c, t, binary=self.binary):
                        if t.primary_key is not None and spill.rows >= unit_rows:
                            spill.finish()      # (a full file goes once more rows follow it)
                            units.put((t, spill, last, False))
                            spill = _Spill(self.out)
                        spill.add(payloads)
                        last = key if key is not None else last
                    spill.finish()
                    units.put((t, spill, last, True))
            except BaseException as e:    # told to the writer, which stops the run with it
                failed.append(e)
            finally:
                units.put(None)

        threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in conns]
        for th in threads:
            th.start()
        live, first, copied, opened = len(threads), True, 0, set()
        try:
            while live:
                item = units.get()
                if item is None:
                    live -= 1
                    continue
                t, spill, last, complete = item
                try:
                    if failed:
                        continue
                    head = [_rows([begin], lsn)] if first else []
                    schema = table_head(t, t.relid not in opened)
                    opened.add(t.relid)
                    pieces = itertools.chain(head, [_rows(schema, lsn)],
                                             (_rows(x.column("data"), lsn) for x in spill.tables()))
                    rows = len(head) + len(schema) + spill.rows
                    copy = {"kind": "initial", "lsn": lsn, "request": request.record(), "commit": False,
                            "tables": [_table_record(t, spill.rows, last, complete)]}
                    self.land(pieces, rows, lsn, lsn, copy)
                    self.crash_hook()
                    first = False
                    self.landed(rows)
                    copied += spill.rows
                    self.copied(t, spill.rows)
                finally:
                    spill.close()
        finally:
            failed.append(None) if not failed else None
            while live:     # let the workers end (each puts its None)
                item = units.get()
                if item is None:
                    live -= 1
                else:
                    item[1].close()
            self.close_bars()
        errors = [e for e in failed if e is not None]
        if errors:
            e = errors[0]
            if isinstance(e, self.psycopg.Error):
                raise CliError(f"copy failed ({first_line(e)})") from None
            raise e
        if first:       # no table at all: the transaction is still written, empty
            name, _ = self.land([_rows([begin], lsn)], 1, lsn, lsn,
                                {"kind": "initial", "lsn": lsn, "request": request.record(), "commit": False,
                                 "tables": []})
            self.landed(1)
        self.land_commit(lsn, request, commit)
        self.stats["copied_rows"] += copied
        self.say(f"initial copy: {copied} rows of {len(tables)} table(s) at {lsn}")

    def land_commit(self, lsn, request, commit):
        copy = {"kind": "initial", "lsn": lsn, "request": request.record(), "commit": True, "tables": []}
        self.land([_rows([commit], lsn)], 1, lsn, lsn, copy)
        self.crash_hook()
        self.landed(1)

    def commit_initial(self, lsn, request):
        """Close the initial copy a crash interrupted: what it copied stands at ``lsn``."""
        ts = datetime_to_pg_timestamp(_dt.datetime.now(_dt.timezone.utc))
        _, commit = copy_transaction_messages(parse_lsn(lsn), ts)
        self.land_commit(lsn, request, commit)
        self.say(f"resume: closed the interrupted initial copy at {lsn}; the rest is copied while the stream runs")

    # ------------------------------------------------------------------ copies while the stream runs
    def new_request(self, names, snapshot, requests, rid):
        """The request this run's flags ask for, or None (none asked, or the archive's
        last request is the same and complete)."""
        if names is None and not snapshot:
            return None
        asked = "*" if names is None else sorted(names)
        if any(r.names == asked and not r.done() for r in requests):
            return None     # (resumed as the unfinished request it is)
        if asked == "*" and any(r.names == "*" for r in requests) or \
                requests and requests[-1].names == asked:
            self.say(f"the archive holds a complete copy of {'every published table' if asked == '*' else asked}: "
                     "not copied again")
            return None
        c = self.connect()
        try:
            with c.transaction():
                tables = published_tables(c, self.publication)
        except ValueError as e:
            raise CliError(str(e)) from None
        finally:
            c.close()
        if names is None:
            chosen = [(t.schema, t.table) for t in tables]
        else:
            by = {}
            for t in tables:
                by.setdefault(t.table, []).append(t)
                by[t.name] = [t]
            chosen = []
            for n in names:
                found = by.get(n)
                if not found:
                    raise CliError(f"--snapshot-tables: {n!r} is not a table of publication {self.publication!r}")
                if len(found) > 1:
                    raise CliError(f"--snapshot-tables: {n!r} is in several schemas; write schema.table")
                chosen.append((found[0].schema, found[0].table))
        return _Request(rid, asked, chosen)

    def take_chunk(self, job, chunk_rows):
        """Emit the low watermark, copy the next chunk of the job's table under a fresh
        snapshot (rows spilled), emit the high watermark; None if the table is no longer
        published (its copy then ends)."""
        request, name, after_key = job
        if self.copy_conn is None:
            self.copy_conn = self.connect()
        c = self.copy_conn
        cid = time.time_ns()
        from psycopg import sql

        emit = "SELECT pg_logical_emit_message(true, %s, %s)"
        spill = _Spill(self.out)
        try:
            # the low watermark commits and the chunk's snapshot is taken in one round trip
            # (one simple query): a write committing in between is seen by the chunk though
            # after the low watermark, and writes seen and not seen between the watermarks
            # make the chunk taken again
            c.execute(sql.SQL("SELECT pg_logical_emit_message(true, {}, {}); COMMIT; "
                              "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT pg_current_snapshot()").format(
                sql.Literal(wm.PREFIX), sql.Literal(wm.mark_content(cid, "low"))), prepare=False)
            with contextlib.ExitStack() as tx:
                tx.callback(c.execute, "ROLLBACK")
                # the transaction's snapshot, taken by the statement above
                snap = wm.Snapshot.parse(c.execute("SELECT pg_current_snapshot()::text").fetchone()[0])
                self.unseen = {x: r for x, r in self.unseen.items() if snap.full(x) in snap.xip}
                table = next((t for t in published_tables(c, self.publication) if (t.schema, t.table) == name), None)
                if table is None:
                    spill.close()
                    return None
                keyed = table.primary_key is not None
                last = tuple(after_key) if after_key is not None and keyed else None
                for payloads, key in copy_rows(c, table, binary=self.binary, after_key=last,
                                               max_rows=chunk_rows if keyed else None):
                    spill.add(payloads)
                    last = key if key is not None else last
                complete = not keyed or spill.rows < chunk_rows
                tx.pop_all()
                c.execute("COMMIT")
            spill.finish()
            c.execute(emit, (wm.PREFIX, wm.mark_content(cid, "high")))
        except BaseException:
            spill.close()
            raise
        self.chunks_taken += 1
        if os.environ.get(CHUNK_CRASH_ENV) and int(os.environ[CHUNK_CRASH_ENV]) == self.chunks_taken:
            os._exit(75)
        return _Chunk(job, cid, request, table, snap, spill, last, complete)

    def stream(self, client_encoding, rows_per_file, chunk_rows, max_files, stop_after, poll_interval):
        conn, slot, stats = self.conn, self.slot, self.stats
        limit = rows_per_file
        idle = 0
        chunk = None
        peek = ("SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_peek_binary_changes("
                "%s, NULL, %s, VARIADIC %s::text[])")
        if self.jobs:
            self.unseen.update(_landed_in_progress(conn, self.out))
        try:
            while True:
                while chunk is None and self.jobs:
                    job = self.jobs.pop(0)
                    chunk = self.take_chunk(job, chunk_rows)
                    if chunk is None:
                        self.say(f"{job[1][0]}.{job[1][1]}: no longer published, not copied")
                        job[0].progress[job[1]] = {"complete": True}
                start_lsn = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                         "WHERE slot_name = %s", (slot,)).fetchone()[0]
                staging = _Staging(self.out, self.next_seq)
                scanner = wm.Scanner(None) if chunk is not None else None
                into = None
                try:
                    with contextlib.closing(_peek(conn, peek, (slot, limit, self.options), client_encoding)) as rows:
                        staging.read(rows, scanner)
                    n = staging.kept
                    if chunk is not None:
                        if chunk.placed is None:
                            before = _last_file_transactions(self.out, chunk.table.relid) + \
                                [wm.Tx(-1, -1, x, r, None) for x, r in self.unseen.items()]
                            where = wm.place(before + scanner.committed, chunk.id, chunk.table.relid,
                                             chunk.snapshot)
                            if where == wm.RETAKE:
                                self.say(f"{chunk.table.name}: chunk changed while it was read: taken again")
                                stats["retaken"] += 1
                                chunk.spill.close()
                                self.jobs.insert(0, chunk.job)
                                chunk = None
                            elif where is None:
                                low = [t for t in scanner.committed if t.mark == (chunk.id, "low")]
                                if low and low[0].commit < n:
                                    n = 0   # the file holding the low watermark waits for the high one
                            else:
                                chunk.placed = where.mark
                        if chunk is not None and chunk.placed is not None:
                            into = next((t for t in scanner.committed if t.mark == chunk.placed), None)
                            if into is not None and into.commit >= n:
                                into = None
                    if n:
                        self.catalog_after_peek(staging, n)
                        pieces = staging.head(n)
                        rows_out = n
                        copy = None
                        if into is not None:
                            # a table without key is copied whole: its rows replace what the
                            # stream before gave of it, which a multiset cannot tell apart
                            head = table_head(chunk.table, chunk.table.primary_key is None or chunk.job[2] is None)
                            head = pa.table([pa.array(head, pa.binary())], schema=_DATA_SCHEMA)
                            pieces = wm.splice(pieces, 0, into, itertools.chain([head], chunk.spill.tables()))
                            rows_out += len(head) + chunk.spill.rows
                            commit_lsn = format_lsn(int.from_bytes(
                                self._payload(staging, into.commit)[2:10], "big"))
                            copy = {"kind": "chunk", "lsn": commit_lsn, "request": chunk.request.record(),
                                    "tables": [_table_record(chunk.table, chunk.spill.rows, chunk.last_key,
                                                             chunk.complete)]}
                        name, meta = self.land(pieces, rows_out, start_lsn, staging.end_lsn, copy)
                finally:
                    staging.close()
                stats["polls"] += 1
                if not n:
                    if staging.rows >= limit:
                        limit *= 2          # an open (streamed) transaction larger than the limit, or a chunk
                        continue            # whose high watermark is beyond it
                    if chunk is not None:
                        time.sleep(min(poll_interval, 0.05))
                        continue
                    idle += 1
                    if stop_after and idle >= stop_after and not self.jobs:
                        break
                    time.sleep(poll_interval)
                    continue
                idle = 0
                limit = rows_per_file
                if scanner is not None:
                    self.unseen.update((t.xid, t.touches) for t in scanner.committed if t.commit < n and t.mark is None)
                self.crash_hook()
                conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, staging.end_lsn))
                self.say(f"{name}: {rows_out} messages, seq {self.next_seq}..{meta['seq_end']}, "
                         f"lsn {staging.first_lsn}..{staging.end_lsn}")
                self.landed(rows_out)
                if into is not None:
                    key = (chunk.table.schema, chunk.table.table)
                    chunk.request.progress[key] = {"last_key": _json_key(chunk.last_key), "complete": chunk.complete}
                    stats["chunks"] += 1
                    stats["copied_rows"] += chunk.spill.rows
                    self.copied(chunk.table, chunk.spill.rows)
                    chunk.spill.close()
                    if not chunk.complete:
                        self.jobs.insert(0, (chunk.request, key, _json_key(chunk.last_key)))
                    chunk = None
                if max_files and stats["files"] >= max_files:
                    break
        finally:
            if chunk is not None:
                chunk.spill.close()
            self.close_bars()
            if self.copy_conn is not None:
                self.copy_conn.close()

    @staticmethod
    def _payload(staging, row):
        """The payload of staged row ``row``."""
        for table in staging.head(row + 1):
            if row < len(table):
                return table.column("data")[row].as_py()
            row -= len(table)
        raise IndexError(row)
