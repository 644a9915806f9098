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
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import glob
import json
import os
import re
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

from ..archive import META_KEY, parquet_part
from ..messages import parse_lsn
from .errors import PROG, CliError, first_line
from ..runs import fsync_path

__all__ = ["capture", "CRASH_ENV", "STAGING_NAME"]

#: test hook: exit (status 75) right after writing file number N, before advancing the slot
CRASH_ENV = "PGOUTPUT_CODEC_CAPTURE_CRASH_AFTER_FILE"

#: the file in the archive directory that holds a peek's rows beyond what it keeps in memory
STAGING_NAME = ".peek.parquet.tmp"

#: the columns of a captured file (the table above)
_SCHEMA = pa.schema([
    pa.field("seq", pa.int64()), pa.field("lsn", pa.string()), pa.field("lsn_ordinal", pa.int32()),
    pa.field("xid", pa.int64()), pa.field("data", pa.binary()),
])


class _Boundaries:
    """The transaction boundaries of a slot's rows, fed one row at a time in the order
    peeked: :meth:`closes` tells whether no transaction is open after a row whose LSN is
    the end of a WAL record, so that advancing the slot to it re-sends nothing of what
    precedes it (a Commit, Prepare, Commit/Rollback Prepared, Stream Commit/Prepare, or a
    non-transactional message)."""

    def __init__(self):
        self.in_tx = False
        self.streams = set()

    def closes(self, data) -> bool:
        """Take the next row's payload; true when the slot may be advanced to its LSN."""
        tag = data[:1]
        closes = False
        if tag in (b"B", b"b"):
            self.in_tx = True
        elif tag in (b"C", b"P"):
            self.in_tx, closes = False, True
        elif tag == b"S":
            self.streams.add(int.from_bytes(data[1:5], "big"))
        elif tag in (b"c", b"p"):
            self.streams.discard(int.from_bytes(data[1:5], "big"))
            closes = True
        elif tag == b"A":
            xid, sub = int.from_bytes(data[1:5], "big"), int.from_bytes(data[5:9], "big")
            if xid == sub:
                self.streams.discard(xid)
            # not a cut point: the row's LSN is where the abort record starts
        elif tag in (b"K", b"r"):
            closes = True
        elif tag == b"M":
            closes = True   # non-transactional outside a transaction; its LSN is the record end
        return closes and not self.in_tx and not self.streams


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

    def read(self, batches):
        """Take a peek's rows, lists of (lsn, xid, data) in the order peeked."""
        bounds = _Boundaries()
        for rows in batches:
            if self.first_lsn is None:
                self.first_lsn = rows[0][0]
            for i, (lsn, _xid, data) in enumerate(rows, self.rows + 1):
                if bounds.closes(data):
                    self.kept, self.end_lsn = i, lsn
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


def capture(dsn, slot, publication, out, *, proto=1, binary=False, streaming=False, messages=False,
            two_phase=False, create_slot=False, max_files=0, poll_interval=1.0, stop_after=0,
            rows_per_file=10000, log=None) -> dict:
    """Land a slot's changes into a Parquet archive under ``out``; returns counters.

    The protocol with the slot (at-least-once, resumable, nothing lost between files):

    1. peek (``pg_logical_slot_peek_binary_changes``, which does not consume) up to
       ``rows_per_file`` rows from the slot's confirmed position, read through a
       server-side cursor about 1 MB at a time and held in memory about 2 MB at a time,
       each 2 MB appended as a row group to the hidden staging file :data:`STAGING_NAME`
       (:class:`_Staging`): the process takes bounded memory whatever the size of a
       transaction;
    2. keep the rows up to the last transaction boundary with no transaction open
       (:class:`_Boundaries`, tracked while reading: a Commit, Prepare, Commit/Rollback
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
    """
    import psycopg   # optional: the [cli] extra; only capture talks to a server

    say = log or (lambda msg: print(msg, flush=True))
    if proto < 1 or proto > 4:
        raise CliError(f"--proto must be 1..4, got {proto}")
    if streaming and proto < 2:
        raise CliError("--streaming needs --proto 2 or later")
    if two_phase and proto < 3:
        raise CliError("--two-phase needs --proto 3 or later")
    os.makedirs(out, mode=0o700, exist_ok=True)     # row data: readable by its owner only
    lock = _lock(out)
    try:
        here = glob.escape(out)     # (a path, not a pattern: 'arch[1]' is that directory)
        for tmp in glob.glob(os.path.join(here, ".part-*.tmp")) + glob.glob(os.path.join(here, STAGING_NAME)):
            os.unlink(tmp)   # a peek or a write that never reached its link: its rows are still in the slot
        options = ["proto_version", str(proto), "publication_names", publication]
        if binary:
            options += ["binary", "true"]
        if streaming:
            options += ["streaming", "true"]
        if messages:
            options += ["messages", "true"]
        if two_phase:
            options += ["two_phase", "true"]

        files = _existing_files(out)
        next_seq, next_index, last_meta = 0, 0, None
        if files:
            last = parquet_part(files[-1])
            last_meta = last.meta
            if not last_meta:
                raise CliError(f"{files[-1]}: not written by '{PROG} capture' (no capture metadata); "
                               "use an empty --out directory")
            if last_meta.get("slot") != slot or last_meta.get("options") != options:
                raise CliError(f"{out} holds a capture of slot {last_meta.get('slot')!r} with options "
                               f"{last_meta.get('options')}: resume it with the same --slot and options, "
                               "or use another --out")
            next_seq = last_meta["seq_end"] + 1
            next_index = last_meta["file_index"] + 1

        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as e:
            raise CliError(f"cannot connect ({first_line(e)})") from None
        stats = {"files": 0, "messages": 0, "polls": 0, "resumed_at_seq": next_seq if files else None}
        with conn:
            # The server converts what the slot sends (names, values) into the session's
            # client_encoding, which defaults to the database's: a LATIN1 database would land
            # LATIN1 bytes, which no UTF-8 decoder reads (transcode.py). A SQL_ASCII database
            # converts nothing, and under any other client_encoding it checks each byte (a
            # non-UTF-8 byte stops the peek: "invalid byte sequence for encoding UTF8"), so
            # there the session keeps SQL_ASCII and the archive the bytes as stored.
            conn.execute("SET client_encoding = 'UTF8'")   # the peeks of a SQL_ASCII database set their own
            server_version = conn.execute("SHOW server_version").fetchone()[0]
            server_encoding = conn.execute("SHOW server_encoding").fetchone()[0]
            client_encoding = "SQL_ASCII" if server_encoding == "SQL_ASCII" else "UTF8"
            if client_encoding == "SQL_ASCII":
                print(f"{PROG}: warning: the database's encoding is SQL_ASCII, which converts nothing: "
                      "the archive holds its text as its clients stored it; if that is not UTF-8, "
                      f"rewrite the archive with '{PROG} transcode --encoding ENC'", file=sys.stderr)
            row = conn.execute("SELECT plugin, confirmed_flush_lsn::text FROM pg_replication_slots "
                               "WHERE slot_name = %s", (slot,)).fetchone()
            if row is None:
                if not create_slot:
                    raise CliError(f"replication slot {slot!r} does not exist (add --create-slot)")
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

            limit = rows_per_file
            idle = 0
            peek = ("SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_peek_binary_changes("
                    "%s, NULL, %s, VARIADIC %s::text[])")
            while True:
                start_lsn = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                         "WHERE slot_name = %s", (slot,)).fetchone()[0]
                staging = _Staging(out, next_seq)
                try:
                    with contextlib.closing(_peek(conn, peek, (slot, limit, options), client_encoding)) as rows:
                        staging.read(rows)
                    n = staging.kept
                    if n:
                        meta = {
                            "format": 1, "slot": slot, "publication": publication, "options": options,
                            "proto_version": proto, "binary": binary, "streaming": streaming,
                            "messages": messages, "two_phase": two_phase, "server_version": server_version,
                            "server_encoding": server_encoding, "client_encoding": client_encoding,
                            "file_index": next_index, "seq_start": next_seq, "seq_end": next_seq + n - 1,
                            "rows": n, "start_lsn": start_lsn, "end_lsn": staging.end_lsn,
                            "captured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                        }
                        schema = _SCHEMA.with_metadata({META_KEY: json.dumps(meta).encode()})
                        name = f"part-{next_index:06d}.parquet"
                        _write_new(os.path.join(out, name), schema, staging.head(n))
                finally:
                    staging.close()
                stats["polls"] += 1
                if not n:
                    if staging.rows >= limit:
                        limit *= 2          # an open (streamed) transaction larger than the limit
                        continue
                    idle += 1
                    if stop_after and idle >= stop_after:
                        break
                    time.sleep(poll_interval)
                    continue
                idle = 0
                limit = rows_per_file
                if os.environ.get(CRASH_ENV) and int(os.environ[CRASH_ENV]) == next_index:
                    os._exit(75)
                conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, staging.end_lsn))
                say(f"{name}: {n} messages, seq {next_seq}..{meta['seq_end']}, "
                    f"lsn {staging.first_lsn}..{staging.end_lsn}")
                stats["files"] += 1
                stats["messages"] += n
                next_seq += n
                next_index += 1
                if max_files and stats["files"] >= max_files:
                    break
        return stats
    finally:
        os.close(lock)   # the lock goes with it
