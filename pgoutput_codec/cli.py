"""The ``pgoutput-codec`` command: capture, decode, inspect, bench.

- ``capture``: a live server's slot → a Parquet archive of rolling files (at-least-once,
  resumable; see :func:`capture` for the protocol with the slot);
- ``decode``: an archive (Parquet file or directory, or a CSV/COPY export of
  ``pg_logical_slot_get_binary_changes``) → Parquet of decoded messages or change rows,
  locally (no Spark);
- ``inspect``: what an archive holds (message types, tables, LSN/xid ranges, protocol
  features, errors);
- ``bench``: the benchmarks of ``bench/`` and their tables.

Every failure the user can cause (bad arguments, a missing, unreadable, non-archive or
corrupt file, a refused connection, a malformed payload under FAILFAST) ends as one line
on stderr and a non-zero exit status — never a traceback.

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

File metadata (key ``pgoutput_codec.capture``, JSON): slot, publication, the plugin
options used, server version, ``seq_start``/``seq_end``, ``start_lsn`` (the slot's
confirmed flush position the rows were peeked from) and ``end_lsn`` (the position the
slot was advanced to after the file was durably written).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

__all__ = ["main", "capture", "read_archive_parts", "ArchivePart", "CliError", "sample_archive_path"]

PROG = "pgoutput-codec"
META_KEY = b"pgoutput_codec.capture"
MODES = ("FAILFAST", "PERMISSIVE", "DROPMALFORMED")
ENVELOPES = ("auto", "none", "xlogdata")
#: test hook: exit (status 75) right after writing file number N, before advancing the slot
CRASH_ENV = "PGOUTPUT_CODEC_CAPTURE_CRASH_AFTER_FILE"


class CliError(Exception):
    """A failure to report as one line (no traceback)."""


def sample_archive_path() -> str:
    """The small archive shipped with the package (captured from the demo workload)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample_archive.parquet")


def _archive_schema():
    import pyarrow as pa

    return pa.schema([
        pa.field("seq", pa.int64()), pa.field("lsn", pa.string()), pa.field("lsn_ordinal", pa.int32()),
        pa.field("xid", pa.int64()), pa.field("data", pa.binary()),
    ])


# ====================================================================== reading archives
class ArchivePart:
    """One file of an archive: path, its capture metadata (or None) and how to read it."""

    def __init__(self, path: str, kind: str, meta=None, num_rows=None):
        self.path, self.kind, self.meta, self.num_rows = path, kind, meta, num_rows

    def read(self, payload="data"):
        """pa.Table with ``data`` (binary), and ``seq``/``lsn``/``xid`` when the file has
        them, rows in ``seq`` order."""
        import pyarrow as pa
        import pyarrow.compute as pc

        t = _read_parquet(self.path) if self.kind == "parquet" else _read_csv(self.path)
        if payload not in t.column_names:
            raise CliError(f"{self.path}: no payload column {payload!r} (columns: {', '.join(t.column_names)})")
        if payload != "data":
            t = t.drop_columns([c for c in ("data",) if c in t.column_names]).rename_columns(
                ["data" if c == payload else c for c in t.column_names])
        typ = t.schema.field("data").type
        if not (pa.types.is_binary(typ) or pa.types.is_large_binary(typ)):
            raise CliError(f"{self.path}: payload column {payload!r} is {typ}, not binary")
        if "seq" in t.column_names and len(t) > 1:
            seq = t.column("seq")
            if not pc.all(pc.greater(seq.slice(1), seq.slice(0, len(t) - 1))).as_py():
                t = t.take(pc.sort_indices(t, [("seq", "ascending")]))
        return t


def _read_parquet(path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise CliError(f"{path}: corrupt or unreadable Parquet file ({_first_line(e)})") from None


def _read_csv(path):
    """A CSV (``\\copy ... WITH (FORMAT csv, HEADER)``) or COPY text export (tab-separated,
    no header) of ``pg_logical_slot_get_binary_changes``: lsn, xid, data as bytea hex."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    with open(path, "rb") as f:
        head = f.readline()
    if not head.strip():
        raise CliError(f"{path}: empty file, not an archive")
    delim = "\t" if b"\t" in head else ","
    fields = [x.strip().strip(b'"').lower() for x in head.rstrip(b"\r\n").split(delim.encode())]
    header = b"data" in fields
    if not header and not (len(fields) == 3 and fields[2].lstrip(b"\\").startswith(b"x")):
        raise CliError(f"{path}: not an archive (neither Parquet nor a CSV/COPY export with lsn, xid, data)")
    names = None if header else ["lsn", "xid", "data"]
    try:
        t = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=names, autogenerate_column_names=False),
            parse_options=pcsv.ParseOptions(delimiter=delim, quote_char='"' if delim == "," else False),
            convert_options=pcsv.ConvertOptions(column_types={"data": pa.string(), "lsn": pa.string()},
                                                strings_can_be_null=False))
    except pa.ArrowException as e:
        raise CliError(f"{path}: not a readable CSV/COPY export ({_first_line(e)})") from None
    if "data" not in t.column_names:
        raise CliError(f"{path}: the CSV has no 'data' column (columns: {', '.join(t.column_names)})")
    data, bad = _hex_to_binary(t.column("data"))
    i = t.column_names.index("data")
    return t.set_column(i, "data", data)


def _hex_to_binary(col):
    try:
        from .spark.archive import hex_to_binary   # the one vectorized implementation
    except ImportError:   # PySpark missing: the package's __init__ imports it
        import pyarrow as pa

        vals = []
        for v in col.to_pylist():
            s = v[2:] if v and v.startswith("\\\\x") else v
            try:
                vals.append(bytes.fromhex(s[2:]) if s and s.startswith("\\x") else None)
            except ValueError:
                vals.append(None)
        return pa.array(vals, pa.binary()), None
    return hex_to_binary(col)


def _first_line(e) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


def _capture_meta(md):
    if md is None:
        return None
    raw = md.metadata.get(META_KEY) if md.metadata else None
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _parquet_part(path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        md = pq.read_schema(path)
        n = pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as e:
        raise CliError(f"{path}: corrupt or unreadable Parquet file ({_first_line(e)})") from None
    meta = _capture_meta(md)
    if "data" not in md.names:
        raise CliError(f"{path}: not a pgoutput archive (no 'data' column; columns: {', '.join(md.names)})")
    return ArchivePart(path, "parquet", meta, n)


def _is_parquet(path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


def read_archive_parts(path: str) -> list:
    """The files of an archive in ``seq`` order: a Parquet file, a directory of Parquet
    files (ordered by their capture metadata ``seq_start``, else by the first ``seq``,
    else by name), or a CSV/COPY export."""
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        files = sorted(f for f in glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True)
                       if not os.path.basename(f).startswith("."))
        if not files:
            raise CliError(f"{path}: no Parquet files in this directory")
        parts = [_parquet_part(f) for f in files]

        def key(p):
            if p.meta and "seq_start" in p.meta:
                return (0, p.meta["seq_start"], p.path)
            return (1, _first_seq(p.path), p.path)

        return sorted(parts, key=key)
    if not os.access(path, os.R_OK):
        raise CliError(f"{path}: permission denied")
    try:
        if _is_parquet(path):
            return [_parquet_part(path)]
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}") from None
    return [ArchivePart(path, "csv")]


def _seq_stats(path):
    """The ``seq`` column's statistics of a Parquet file, one (min, max) per row group
    (None for a row group without them); [] without a ``seq`` column."""
    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    if "seq" not in md.schema.names:
        return []
    i = md.schema.names.index("seq")
    stats = [md.row_group(g).column(i).statistics for g in range(md.num_row_groups)]
    return [(st.min, st.max) if st is not None and st.has_min_max else None for st in stats]


def _first_seq(path):
    stats = _seq_stats(path)
    return stats[0][0] if stats and stats[0] is not None else 0


def _last_seq(path):
    """The largest ``seq`` of a Parquet file from its statistics (None: not known)."""
    stats = _seq_stats(path)
    return None if not stats or None in stats else max(hi for _, hi in stats)


def _load_checkpoint(path):
    from .checkpoint import Checkpoint

    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return Checkpoint.from_json(f.read())
    except (OSError, ValueError, TypeError) as e:
        raise CliError(f"{path}: not a checkpoint ({_first_line(e)})") from None


def _save_checkpoint(path, cp):
    """Atomically, after the run's output: a crash leaves the previous checkpoint."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(cp.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _overlap_prefix(part, table, covered_lsn):
    """Rows of a file that an earlier file already holds: only possible when a capture was
    resumed without completing the slot advance of its last file (the file's
    ``start_lsn`` is below the end of the archive so far). They are exactly the prefix up
    to the row at the earlier file's ``end_lsn`` (files end at transaction boundaries)."""
    from .messages import parse_lsn

    if covered_lsn is None or not part.meta or "start_lsn" not in part.meta:
        return 0
    if parse_lsn(part.meta["start_lsn"]) >= covered_lsn or "lsn" not in table.column_names:
        return 0
    # the earlier file ended at a transaction boundary row whose LSN is covered_lsn: the
    # first such boundary row here ends the repeated prefix
    lsns = table.column("lsn").to_pylist()
    data = table.column("data")
    for i, v in enumerate(lsns):
        if v is not None and parse_lsn(v) == covered_lsn and data[i].as_py()[:1] in _BOUNDARY_TAGS:
            return i + 1
    return 0


_BOUNDARY_TAGS = (b"C", b"P", b"c", b"p", b"K", b"r", b"M")


def iter_archive(parts, payload="data", dedupe=True, skip=None):
    """Yield (part, table) with re-captured rows (see :func:`_overlap_prefix`) removed;
    parts for which ``skip(part)`` is true are not read (their metadata still counts)."""
    from .messages import parse_lsn

    covered = None
    for part in parts:
        t = None if skip is not None and skip(part) else part.read(payload)
        if t is not None and dedupe:
            k = _overlap_prefix(part, t, covered)
            if k:
                print(f"{PROG}: {os.path.basename(part.path)}: skipping {k} rows re-captured after an "
                      "interrupted slot advance", file=sys.stderr)
                t = t.slice(k)
        if part.meta and part.meta.get("end_lsn"):
            end = parse_lsn(part.meta["end_lsn"])
            covered = end if covered is None else max(covered, end)
        if t is not None:
            yield part, t


# ====================================================================== capture
def _lsn_int(text):
    from .messages import parse_lsn

    return parse_lsn(text)


def _cut(rows):
    """Index of the last row after which no transaction is open (a transaction boundary
    whose LSN is the end of a WAL record, so advancing the slot to it re-sends nothing
    of what precedes it), or -1. ``rows``: (lsn, xid, data) as peeked."""
    in_tx = False
    streams = set()
    cut = -1
    for i, (_lsn, _xid, data) in enumerate(rows):
        tag = data[:1]
        closes = False
        if tag in (b"B", b"b"):
            in_tx = True
        elif tag in (b"C", b"P"):
            in_tx, closes = False, True
        elif tag == b"S":
            streams.add(int.from_bytes(data[1:5], "big"))
        elif tag in (b"c", b"p"):
            streams.discard(int.from_bytes(data[1:5], "big"))
            closes = True
        elif tag == b"A":
            xid, sub = int.from_bytes(data[1:5], "big"), int.from_bytes(data[5:9], "big")
            if xid == sub:
                streams.discard(xid)
            # not a cut point: the row's LSN is where the abort record starts
        elif tag in (b"K", b"r"):
            closes = True
        elif tag == b"M":
            closes = True   # non-transactional outside a transaction; its LSN is the record end
        if closes and not in_tx and not streams:
            cut = i
    return cut


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _existing_files(out):
    return sorted(glob.glob(os.path.join(out, "part-*.parquet")))


def _peek(conn, sql, params, client_encoding):
    """The slot's rows (lsn text, xid, data) under ``client_encoding``; text comes back
    as str whatever it is (psycopg gives bytes under SQL_ASCII)."""
    if client_encoding == "UTF8":
        return conn.execute(sql, params).fetchall()
    conn.execute(f"SET client_encoding = '{client_encoding}'")
    try:
        rows = conn.execute(sql, params).fetchall()
    finally:
        conn.execute("SET client_encoding = 'UTF8'")
    return [(lsn.decode() if isinstance(lsn, bytes) else lsn, xid, data) for lsn, xid, data in rows]


def capture(dsn, slot, publication, out, *, proto=1, binary=False, streaming=False, messages=False,
            two_phase=False, create_slot=False, max_files=0, poll_interval=1.0, stop_after=0,
            rows_per_file=10000, log=None) -> dict:
    """Land a slot's changes into a Parquet archive under ``out``; returns counters.

    The protocol with the slot (at-least-once, resumable, nothing lost between files):

    1. peek (``pg_logical_slot_peek_binary_changes``, which does not consume) up to
       ``rows_per_file`` rows from the slot's confirmed position;
    2. keep the rows up to the last transaction boundary with no transaction open
       (:func:`_cut`: a Commit, Prepare, Commit/Rollback Prepared, Stream Commit/Prepare
       or a non-transactional message); the rest (an open streamed transaction) is
       peeked again next time — if no boundary is in reach, the limit doubles;
    3. write them to ``.part-N.parquet.tmp``, fsync, rename to ``part-N.parquet``, fsync
       the directory; the file records ``end_lsn`` = the boundary row's LSN;
    4. only then ``pg_replication_slot_advance(slot, end_lsn)``.

    A crash before 4 leaves a durable file whose rows the slot would send again. On
    restart, the last file's ``end_lsn`` is compared with the slot's
    ``confirmed_flush_lsn`` and the advance is completed first, so those rows are not
    captured twice; ``seq`` continues from the last file's ``seq_end``. Should an archive
    still hold re-captured rows (an advance never completed, e.g. files copied from an
    interrupted run into another directory), every file records ``start_lsn``, and
    readers (``decode``, ``inspect``) drop the prefix of a file lying below the end of
    the files before it (:func:`iter_archive`); (``lsn``, ``lsn_ordinal``) identifies a
    row within a poll for audits.
    """
    import psycopg
    import pyarrow as pa
    import pyarrow.parquet as pq

    say = log or (lambda msg: print(msg, flush=True))
    if proto < 1 or proto > 4:
        raise CliError(f"--proto must be 1..4, got {proto}")
    if streaming and proto < 2:
        raise CliError("--streaming needs --proto 2 or later")
    if two_phase and proto < 3:
        raise CliError("--two-phase needs --proto 3 or later")
    os.makedirs(out, exist_ok=True)
    for tmp in glob.glob(os.path.join(out, ".part-*.tmp")):
        os.unlink(tmp)   # a write that never reached its rename: its rows are still in the slot
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
        last = _parquet_part(files[-1])
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
        raise CliError(f"cannot connect ({_first_line(e)})") from None
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
            confirmed, end = _lsn_int(row[1]), _lsn_int(last_meta["end_lsn"])
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
            rows = _peek(conn, peek, (slot, limit, options), client_encoding)
            stats["polls"] += 1
            cut = _cut(rows)
            if cut < 0:
                if len(rows) >= limit:
                    limit *= 2          # an open (streamed) transaction larger than the limit
                    continue
                idle += 1
                if stop_after and idle >= stop_after:
                    break
                time.sleep(poll_interval)
                continue
            idle = 0
            limit = rows_per_file
            rows = rows[:cut + 1]
            lsns = [r[0] for r in rows]
            ordinal, prev, k = [], None, 0
            for v in lsns:
                k = k + 1 if v == prev else 0
                prev = v
                ordinal.append(k)
            meta = {
                "format": 1, "slot": slot, "publication": publication, "options": options,
                "proto_version": proto, "binary": binary, "streaming": streaming, "messages": messages,
                "two_phase": two_phase, "server_version": server_version, "server_encoding": server_encoding,
                "client_encoding": client_encoding, "file_index": next_index,
                "seq_start": next_seq, "seq_end": next_seq + len(rows) - 1, "rows": len(rows),
                "start_lsn": start_lsn, "end_lsn": lsns[-1],
                "captured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            }
            schema = _archive_schema().with_metadata({META_KEY: json.dumps(meta).encode()})
            table = pa.table([
                pa.array(range(next_seq, next_seq + len(rows)), pa.int64()), pa.array(lsns, pa.string()),
                pa.array(ordinal, pa.int32()), pa.array([r[1] for r in rows], pa.int64()),
                pa.array([bytes(r[2]) for r in rows], pa.binary()),
            ], schema=schema)
            name = f"part-{next_index:06d}.parquet"
            tmp = os.path.join(out, f".{name}.tmp")
            with open(tmp, "wb") as f:
                pq.write_table(table, f, compression="zstd")
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, os.path.join(out, name))
            _fsync_dir(out)
            if os.environ.get(CRASH_ENV) and int(os.environ[CRASH_ENV]) == next_index:
                os._exit(75)
            conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, lsns[-1]))
            say(f"{name}: {len(rows)} messages, seq {next_seq}..{meta['seq_end']}, lsn {lsns[0]}..{lsns[-1]}")
            stats["files"] += 1
            stats["messages"] += len(rows)
            next_seq += len(rows)
            next_index += 1
            if max_files and stats["files"] >= max_files:
                break
    return stats


# ====================================================================== decode
def _message_table(part_table, msgs, mode):
    """The decoded struct flattened to columns, with the archive's seq/lsn/xid kept (as
    ``seq``, ``source_lsn``, ``source_xid`` — Spark's ``decode_messages`` naming)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols, names = [], []
    for src, dst in (("seq", "seq"), ("lsn", "source_lsn"), ("xid", "source_xid")):
        if src in part_table.column_names:
            cols.append(part_table.column(src))
            names.append(dst)
    for f, arr in zip(msgs.type, msgs.flatten(), strict=True):
        cols.append(arr)
        names.append(f.name)
    t = pa.table(cols, names=names)
    if mode == "DROPMALFORMED":
        t = t.filter(pc.is_null(t.column("error")))
    return t


def archive_row(table, i: int) -> str:
    """The archive row ``i`` of ``table`` as a user finds it: its seq and lsn, else its index."""
    where = [f"{c} {table.column(c)[i].as_py()}" for c in ("seq", "lsn") if c in table.column_names]
    return ", ".join(where) or f"row {i}"


def _fail_first_error(table, errors):
    import numpy as np

    i = int(np.flatnonzero(errors.is_valid().to_numpy(zero_copy_only=False))[0])
    raise CliError(f"malformed payload at archive {archive_row(table, i)}: {errors[i].as_py()}"
                   " (--mode PERMISSIVE keeps error rows, DROPMALFORMED drops them)")


def _progress(total, desc):
    try:
        from tqdm import tqdm
    except ImportError:   # the bar is a convenience
        return contextlib.nullcontext(type("NoBar", (), {"update": lambda self, n: None})())
    return tqdm(total=total, unit="msg", desc=desc, disable=None, file=sys.stderr, leave=False)


class ParquetOut:
    """``decode``'s output file, written whole or not at all: into a hidden temporary file
    beside it, renamed over it by :meth:`finish`; left behind by nothing (a failed run
    removes the temporary file). ``out``: a file, or an existing directory to write
    ``default_name`` in."""

    def __init__(self, out: str, default_name: str):
        if os.path.isdir(out):
            out = os.path.join(out, default_name)
        out_dir = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(out_dir):
            raise CliError(f"{out}: directory {out_dir} does not exist")
        self.path, self.tmp, self.writer = out, os.path.join(out_dir, f".{os.path.basename(out)}.tmp"), None

    def write(self, rows, schema=None):
        """Append ``rows`` (cast to ``schema`` when given); the first call fixes the file's schema."""
        import pyarrow.parquet as pq

        schema = rows.schema if schema is None else schema
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        self.writer.write_table(rows.cast(schema) if rows.schema != schema else rows)

    def finish(self, empty_schema) -> str:
        """Close the file (of ``empty_schema`` when nothing was written) and put it in place."""
        import pyarrow.parquet as pq

        if self.writer is None:    # an archive with no rows
            self.writer = pq.ParquetWriter(self.tmp, empty_schema)
        self.writer.close()
        self.writer = None
        os.replace(self.tmp, self.path)
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.writer is not None:
            self.writer.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)
        return False


def _new_transcoder(encoding, errors, envelope):
    from .transcode import Transcoder

    try:
        return Transcoder(encoding, envelope=envelope, errors=errors)
    except ValueError as e:
        raise CliError(f"--encoding: {e}") from None


def _transcoder(encoding, mode="FAILFAST", envelope="auto"):
    """A Transcoder for an archive captured under ``encoding``, or None for UTF-8/none.
    FAILFAST stops at a payload it cannot rewrite; the other modes leave it as sent, for
    the decoder to report as the malformed row it is."""
    if not encoding:
        return None
    from .transcode import is_utf8

    recode = _new_transcoder(encoding, "strict" if mode == "FAILFAST" else "keep", envelope)
    return None if is_utf8(encoding) else recode


def _transcoded(recode, t, hint="--mode PERMISSIVE/DROPMALFORMED leaves it as sent", where=""):
    """(``t`` with its payloads rewritten, the TranscodeReport); a payload it cannot
    rewrite (errors='strict') ends the command, with ``hint``."""
    from .transcode import TranscodeError

    try:
        data, report = recode.payloads(t.column("data"))
    except TranscodeError as e:
        raise CliError(f"{where}{_first_line(e)} ({hint})") from None
    return t.set_column(t.column_names.index("data"), "data", data), report


def transcode_files(archive, out, *, encoding, errors="strict", payload="data", envelope="auto") -> dict:
    """``transcode``: the archive rewritten as a UTF-8 session would have captured it, one
    Parquet file in ``out`` per file read (re-captured rows dropped, capture metadata kept
    and marked). Returns counts."""
    import pyarrow.parquet as pq

    from .transcode import TRANSCODED_FROM, pg_encoding_name

    recode = _new_transcoder(encoding, errors, envelope)
    source = pg_encoding_name(encoding)
    parts = read_archive_parts(archive)
    os.makedirs(out, exist_ok=True)
    counts = {"files": 0, "rows": 0, "rewritten": 0, "left_as_sent": 0, "out": out}
    for part, t in iter_archive(parts, payload):
        t, report = _transcoded(recode, t, "--errors keep leaves it as sent", f"{os.path.basename(part.path)}: ")
        for _, why in report.left_as_sent:
            print(f"{PROG}: {os.path.basename(part.path)}: left as sent: {why}", file=sys.stderr)
        md = dict(t.schema.metadata or {})
        md[TRANSCODED_FROM] = source.encode()
        if part.meta:   # a capture's file stays one, resumable and chained by its LSNs
            md[META_KEY] = json.dumps(dict(part.meta, client_encoding="UTF8", transcoded_from=source)).encode()
        name = os.path.splitext(os.path.basename(part.path))[0] + ".parquet"
        dest = os.path.join(out, name)
        if os.path.abspath(dest) == os.path.abspath(part.path):
            raise CliError(f"{dest}: OUT must not be the archive's own directory")
        pq.write_table(t.replace_schema_metadata(md), dest, compression="zstd")
        counts["files"] += 1
        counts["rows"] += report.rows
        counts["rewritten"] += report.rewritten
        counts["left_as_sent"] += len(report.left_as_sent)
    return counts


def decode_archive(archive, out, *, changes=False, tables=None, mode="FAILFAST", envelope="auto",
                   payload="data", after_lsn=None, until_lsn=None, checkpoint=None, replays="drop",
                   encoding=None) -> dict:
    """``decode``: returns the counts printed at the end. ``checkpoint``: a file to resume
    from when it exists (only the rows from its ``from_key`` on are read) and to write the
    next checkpoint to after the output (incremental ``--changes`` runs). ``encoding``: the
    client encoding the archive was captured under, when not UTF-8 (transcode.py)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .batch import decode_batch_with_state
    from .changes import ChangeDecoder
    from .errors import PgoutputDecodeError
    from .plan import checkpoint_after, control_candidates

    parts = read_archive_parts(archive)
    resume = _load_checkpoint(checkpoint) if checkpoint else None
    skip, ctrl, skipped = None, [], []
    recode = _transcoder(encoding, mode, envelope)
    if recode is not None and checkpoint:
        raise CliError(f"--encoding reads the archive from its start; for incremental runs, rewrite it "
                       f"once ('{PROG} transcode') and decode the copy with --checkpoint")
    if checkpoint and any(p.kind != "parquet" for p in parts):
        raise CliError("--checkpoint needs Parquet archive files with a seq column (capture writes them)")
    if resume is not None:
        def skip(part):   # a file wholly before the checkpoint is not read
            last = _last_seq(part.path)
            if last is not None and last < resume.from_key:
                skipped.append(part)
                return True
            return False
    dest = ParquetOut(out, "changes.parquet" if changes else "messages.parquet")
    counts = {"rows_in": 0, "rows_decoded": 0, "rows_in_error": 0, "rows_out": 0}
    total = sum(p.num_rows or 0 for p in parts) or None
    dec = ChangeDecoder(tables=tables, errors="raise" if mode == "FAILFAST" else "collect", after_lsn=after_lsn,
                        until_lsn=until_lsn, resume=resume, replays=replays) if changes else None
    if changes and envelope != "auto":
        raise CliError("--envelope applies to message decoding; change rows take plain pgoutput payloads")
    state = None
    with dest, _progress(total, "decode") as bar:
        for part, t in iter_archive(parts, payload, skip=skip):
            if recode is not None:
                t, _ = _transcoded(recode, t)
            if checkpoint:
                if "seq" not in t.column_names:
                    raise CliError(f"{part.path}: --checkpoint needs a seq column (arrival order)")
                if resume is not None:
                    t = t.filter(pc.greater_equal(t.column("seq"), resume.from_key))
                ctrl.append(t.filter(pa.array(control_candidates(t.column("data")))).select(["data", "seq"]))
            if changes:
                try:
                    rows = dec.feed(t)
                except PgoutputDecodeError as e:
                    raise CliError(f"{_first_line(e)} (--mode PERMISSIVE/DROPMALFORMED skips it)") from None
                schema = dec.output_schema
            else:
                msgs, state = decode_batch_with_state(t.column("data"), envelope=envelope, in_stream=state)
                errors = msgs.field("error")
                counts["rows_in"] += len(msgs)
                counts["rows_in_error"] += errors.null_count and len(msgs) - errors.null_count
                if mode == "FAILFAST" and errors.null_count != len(msgs):
                    _fail_first_error(t, errors)
                rows = _message_table(t, msgs, mode)
                schema = rows.schema
            dest.write(rows, schema)
            counts["rows_out"] += len(rows)
            bar.update(len(t))
        out = dest.finish(dec.output_schema if changes else pa.schema([]))
    if checkpoint:
        # the next run's start: a plan over the control rows this run fed its decoder
        c = pa.concat_tables(ctrl) if ctrl else pa.table({"data": pa.array([], pa.binary()),
                                                          "seq": pa.array([], pa.int64())})
        nxt = checkpoint_after(c.column("data"), c.column("seq"), resume=resume, tables=tables,
                               after_lsn=after_lsn, until_lsn=until_lsn, replays=replays,
                               errors="raise" if mode == "FAILFAST" else "collect")
        _save_checkpoint(checkpoint, nxt)
        counts.update(checkpoint=checkpoint, files_skipped=len(skipped), next_from_seq=nxt.from_key,
                      held_by=len(nxt.held_by))
    if changes:
        counts.update(rows_in=dec.counts["rows_in"], rows_decoded=dec.counts["rows_decoded"],
                      rows_in_error=dec.counts["rows_in_error"],
                      replayed_transactions=dec.counts["replayed_transactions"])
        counts["open_transactions"] = len(dec.open_transactions)
        if mode == "PERMISSIVE" and dec.errors:
            epath = out + ".errors.parquet"
            pq.write_table(pa.Table.from_pylist(dec.errors), epath)
            counts["errors_file"] = epath
    else:
        counts["rows_decoded"] = counts["rows_in"] - counts["rows_in_error"]
    counts["out"] = out
    return counts


# ====================================================================== inspect
_TAG_NAMES = None


def _tag_names():
    global _TAG_NAMES
    if _TAG_NAMES is None:
        from . import messages as m

        _TAG_NAMES = {}
        for name in m.__all__:
            cls = getattr(m, name)
            tag = getattr(cls, "type", None)
            if isinstance(tag, str) and len(tag) == 1:
                _TAG_NAMES[tag] = name
    return _TAG_NAMES


def inspect_archive(archive, *, payload="data", envelope="auto", encoding=None) -> dict:
    """Counts and ranges of an archive (what ``inspect`` prints); ``encoding``: the client
    encoding it was captured under, when not UTF-8 (read through a Transcoder, payloads it
    cannot rewrite counted as errors)."""
    import collections

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .batch import decode_batch_with_state
    from .messages import format_lsn, parse_lsn

    parts = read_archive_parts(archive)
    by_type = collections.Counter()
    by_rel = collections.defaultdict(collections.Counter)   # relation_id -> op counts
    rel_name = {}
    features = dict.fromkeys(["binary values", "streaming", "two-phase", "logical messages", "origins",
                              "unchanged TOAST"], False)
    lsn_lo = lsn_hi = xid_lo = xid_hi = ts_lo = ts_hi = None
    errors, first_errors = 0, []
    n = 0
    state = None
    seq_lo = seq_hi = None
    metas = []
    commit_lsns, commit_keys = [], []   # C/c/K in arrival order: the archive's order check
    recode = _transcoder(encoding, "PERMISSIVE", envelope)
    for part, t in iter_archive(parts, payload):
        if recode is not None:
            t, _ = _transcoded(recode, t)
        if part.meta:
            metas.append(part.meta)
        msgs, state = decode_batch_with_state(t.column("data"), envelope=envelope, in_stream=state)
        types = msgs.field("type")
        is_commit = pc.fill_null(pc.is_in(types, value_set=pa.array(["C", "c", "K"])), False)
        if pc.any(is_commit).as_py():
            sel = np.flatnonzero(is_commit.to_numpy(zero_copy_only=False))
            commit_lsns.append(msgs.field("commit_lsn").take(sel).fill_null(0).to_numpy().astype(np.int64))
            commit_keys.append(t.column("seq").take(sel).to_numpy() if "seq" in t.column_names else n + sel)
        n += len(msgs)
        for v in pc.value_counts(pc.drop_null(types)).to_pylist():
            by_type[v["values"]] += v["counts"]
        err = msgs.field("error")
        if err.null_count != len(err):
            bad = np.flatnonzero(err.is_valid().to_numpy(zero_copy_only=False))
            errors += len(bad)
            for i in bad[: max(0, 5 - len(first_errors))]:
                s = t.column("seq")[int(i)].as_py() if "seq" in t.column_names else None
                first_errors.append(f"seq {s}: {err[int(i)].as_py()}")
        if "seq" in t.column_names and len(t):
            mn, mx = pc.min_max(t.column("seq")).values()
            seq_lo = mn.as_py() if seq_lo is None else min(seq_lo, mn.as_py())
            seq_hi = mx.as_py() if seq_hi is None else max(seq_hi, mx.as_py())
        if "lsn" in t.column_names and len(t):
            lsns = [parse_lsn(v) for v in pc.drop_null(t.column("lsn")).to_pylist()] \
                if t.schema.field("lsn").type in (__import__("pyarrow").string(),) \
                else pc.drop_null(t.column("lsn")).to_pylist()
            if lsns:
                lsn_lo = min(lsns + ([lsn_lo] if lsn_lo is not None else []))
                lsn_hi = max(lsns + ([lsn_hi] if lsn_hi is not None else []))
        xids = pc.drop_null(msgs.field("xid"))
        if len(xids):
            mn, mx = pc.min_max(xids).values()
            xid_lo = mn.as_py() if xid_lo is None else min(xid_lo, mn.as_py())
            xid_hi = mx.as_py() if xid_hi is None else max(xid_hi, mx.as_py())
        cts = pc.drop_null(msgs.field("commit_ts"))
        if len(cts):
            mn, mx = pc.min_max(cts).values()
            ts_lo = mn.as_py() if ts_lo is None else min(ts_lo, mn.as_py())
            ts_hi = mx.as_py() if ts_hi is None else max(ts_hi, mx.as_py())
        tags = set(by_type)
        features["streaming"] |= bool(tags & set("SEcAp"))
        features["two-phase"] |= bool(tags & set("bPKrp"))
        features["logical messages"] |= "M" in tags
        features["origins"] |= "O" in tags
        for side in ("new_tuple", "old_tuple"):
            kinds = pc.list_flatten(msgs.field(side)).field("kind") if len(msgs) else None
            if kinds is not None and len(kinds):
                vc = {v["values"] for v in pc.value_counts(kinds).to_pylist()}
                features["binary values"] |= "b" in vc
                features["unchanged TOAST"] |= "u" in vc
        rel_rows = pc.equal(types, "R")
        if pc.any(rel_rows).as_py():
            for r in msgs.filter(pc.fill_null(rel_rows, False)).to_pylist():
                rel_name[r["relation_id"]] = f"{r['namespace'] or 'pg_catalog'}.{r['relation_name']}"
        iud = pc.fill_null(pc.is_in(types, value_set=__import__("pyarrow").array(["I", "U", "D"])), False)
        if pc.any(iud).as_py():
            sub = msgs.filter(iud)
            keys = pc.binary_join_element_wise(pc.cast(sub.field("relation_id"), "string"), sub.field("type"), ":")
            for v in pc.value_counts(keys).to_pylist():
                rid, op = v["values"].split(":")
                by_rel[int(rid)][op] += v["counts"]
        trunc = pc.fill_null(pc.equal(types, "T"), False)
        if pc.any(trunc).as_py():
            for r in msgs.filter(trunc).field("relation_ids").to_pylist():
                for rid in r or ():
                    by_rel[rid]["T"] += 1
    return {
        "archive": archive, "files": len(parts), "messages": n, "seq": (seq_lo, seq_hi),
        "lsn": (format_lsn(lsn_lo) if lsn_lo is not None else None,
                format_lsn(lsn_hi) if lsn_hi is not None else None),
        "xid": (xid_lo, xid_hi), "commit_ts": (ts_lo, ts_hi),
        "by_type": dict(by_type),
        "by_table": _by_table(by_rel, rel_name),
        "features": features, "errors": errors, "first_errors": first_errors,
        "captured_with": metas[-1] if metas else None,
        "commits": _commit_order(commit_lsns, commit_keys),
    }


def _by_table(by_rel: dict, rel_name: dict) -> dict:
    """Counts by table name (a relation under its last name), and by relation where one
    name was borne by several (a table dropped and created again, or swapped: the
    counts of each, ``public.t [relation 16385]``, never one overwriting the other)."""
    import collections
    names = {rid: rel_name.get(rid, f"relation {rid}") for rid in by_rel}
    shared = {n for n, k in collections.Counter(names.values()).items() if k > 1}
    return {(f"{n} [relation {rid}]" if n in shared else n): dict(by_rel[rid]) for rid, n in names.items()}


def _commit_order(lsns: list, keys: list) -> dict:
    """The archive's commits in arrival order, judged as the change decoders judge them
    (``ChangeDecoder`` ``replays``): ``replayed`` — order keys of commits whose LSN an
    earlier commit had (received again); ``out_of_order`` — the first commit below an
    earlier one that repeats none (seq, its LSN, the highest before it), or None."""
    import numpy as np

    from .messages import format_lsn
    lsn = np.concatenate(lsns) if lsns else np.zeros(0, np.int64)
    key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    out = {"count": int(len(lsn)), "replayed": [], "out_of_order": None}
    if not len(lsn):
        return out
    high = np.maximum.accumulate(lsn)
    behind = np.flatnonzero(lsn[1:] <= high[:-1]) + 1
    if len(behind):
        _, first = np.unique(lsn, return_index=True)
        first_of = dict(zip(lsn[first].tolist(), first.tolist(), strict=True))
        again = np.array([first_of[int(lsn[i])] < i for i in behind], dtype=bool)
        out["replayed"] = key[behind[again]].tolist()
        if (~again).any():
            i = int(behind[~again][0])
            out["out_of_order"] = {"seq": int(key[i]), "lsn": format_lsn(int(lsn[i])),
                                   "after": format_lsn(int(high[i - 1]))}
    return out


def _format_inspect(r) -> str:
    names = r.get("type_names") or _tag_names()
    files = f"{r['files']} file{'s' * (r['files'] != 1)}"
    if r.get("source") == "opengauss":
        lines = [f"archive   {r['archive']}  ({files}, {r['frames']} openGauss '{r['style']}' frames, "
                 f"{r['messages']} records, {r['heartbeats']} heartbeats skipped)"]
    else:
        lines = [f"archive   {r['archive']}  ({files}, {r['messages']} messages)"]
    if r["seq"][0] is not None:
        lines.append(f"seq       {r['seq'][0]} .. {r['seq'][1]}")
    if r["lsn"][0] is not None:
        lines.append(f"lsn       {r['lsn'][0]} .. {r['lsn'][1]}")
    if r["xid"][0] is not None:
        lines.append(f"xid       {r['xid'][0]} .. {r['xid'][1]}")
    if r["commit_ts"][0] is not None:
        lines.append(f"commits   {r['commit_ts'][0]:%Y-%m-%d %H:%M:%S.%f%z} .. {r['commit_ts'][1]:%Y-%m-%d %H:%M:%S.%f%z}")
    m = r["captured_with"]
    if m:
        lines.append(f"captured  slot {m.get('slot')}, publication {m.get('publication')}, PostgreSQL "
                     f"{m.get('server_version')}, options " + (" ".join(
                         f"{k}={v}" for k, v in zip(m.get("options", [])[0::2], m.get("options", [])[1::2], strict=False)
                         if k != "publication_names") or "-"))
    kind = "record type" if r.get("source") == "opengauss" else "message type"
    lines += ["", f"{kind:28} {'count':>9}", f"{'-' * 28} {'-' * 9}"]
    for tag, c in sorted(r["by_type"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"{tag} {names.get(tag, '?'):26} {c:9}")
    lines += ["", f"{'table':32} {'insert':>8} {'update':>8} {'delete':>8} {'truncate':>8}",
              f"{'-' * 32} {'-' * 8} {'-' * 8} {'-' * 8} {'-' * 8}"]
    for tbl, c in sorted(r["by_table"].items()):
        lines.append(f"{tbl:32} {c.get('I', 0):8} {c.get('U', 0):8} {c.get('D', 0):8} {c.get('T', 0):8}")
    if not r["by_table"]:
        lines.append("(no row changes)")
    c = r["commits"]
    order = f"{c['count']} commits, commit LSNs rising in arrival order"
    if c["replayed"] or c["out_of_order"]:
        order = f"{c['count']} commits"
        if c["replayed"]:
            shown = ", ".join(map(str, c["replayed"][:5])) + (", …" if len(c["replayed"]) > 5 else "")
            order += f"; {len(c['replayed'])} received again (replays, given once; seq {shown})"
        if c["out_of_order"]:
            o = c["out_of_order"]
            order += (f"; OUT OF ORDER from seq {o['seq']} (commit LSN {o['lsn']} after {o['after']}): "
                      "the change decoders refuse it (order_by=, or replays='keep')")
    lines += ["", "features  " + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in r["features"].items()),
              f"order     {order}", f"errors    {r['errors']}"]
    lines += [f"          {e}" for e in r["first_errors"]]
    return "\n".join(lines)


# ====================================================================== bench
def _bench_dir():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for cand in (os.path.join(os.getcwd(), "bench"), os.path.join(here, "bench")):
        if os.path.isfile(os.path.join(cand, "decode_bench.py")):
            return cand
    raise CliError("bench/decode_bench.py not found: run from a source checkout of pgoutput_codec")


#: small sizes for --quick (each script has its own flags)
_QUICK = {
    "decode_bench.py": ["--n", "20000", "--repeat", "2", "--pyp-n", "2000"],
    "changes_bench.py": ["-n", "20000", "--repeat", "2"],
    "convert_bench.py": ["--n", "100000", "--repeat", "2"],
    "opengauss_bench.py": ["--records", "20000", "--repeat", "2"],
    "plan_bench.py": ["--transactions", "20000", "--repeat", "1"],
    "transcode_bench.py": ["-n", "5000", "--repeat", "1", "--plain-n", "1000"],
}


def run_bench(only=None, quick=False) -> int:
    bdir = _bench_dir()
    scripts = ["decode_bench.py"] + sorted(os.path.basename(p) for p in glob.glob(os.path.join(bdir, "*_bench.py"))
                                           if os.path.basename(p) != "decode_bench.py")
    if only:
        wanted = {o if o.endswith(".py") else f"{o}_bench.py" for o in only}
        unknown = wanted - set(scripts)
        if unknown:
            raise CliError(f"no such benchmark: {', '.join(sorted(unknown))} (have: {', '.join(scripts)})")
        scripts = [s for s in scripts if s in wanted]
    env = dict(os.environ)
    root = os.path.dirname(bdir)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("MPLBACKEND", "Agg")
    work = None
    if quick:   # quick runs must not overwrite bench/results: run copies in a scratch dir
        work = tempfile.mkdtemp(prefix="pgoutput-bench-")
        os.makedirs(os.path.join(work, "results"))
    failed = []
    try:
        for s in scripts:
            path = os.path.join(bdir, s)
            args = []
            if quick:
                shutil.copy(path, work)
                path = os.path.join(work, s)
                args = _QUICK.get(s, [])
                if s in ("decode_bench.py",):
                    args += ["--out", os.path.join(work, "results")]
                if s == "opengauss_bench.py":
                    args += ["--out", os.path.join(work, "results", "opengauss.json")]
            print(f"== {s} {' '.join(args)}", flush=True)
            res = subprocess.run([sys.executable, path, *args], env=env, cwd=root)
            if res.returncode != 0:
                failed.append(f"{s} (exit {res.returncode})")
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        raise CliError(f"benchmark failed: {', '.join(failed)}")
    return 0


# ====================================================================== argparse
class _Parser(argparse.ArgumentParser):
    """Argument errors as one line (the usage is one ``--help`` away)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = _Parser(prog=PROG, description="Capture, decode and inspect archived PostgreSQL pgoutput replication "
                                       "streams (no Spark needed).")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("capture", help="land a live server's slot into a Parquet archive",
                       description="Poll a pgoutput slot (pg_logical_slot_peek_binary_changes) and write "
                                   "complete transactions to rolling Parquet files in DIR; the slot is "
                                   "advanced only after each file is durably written (fsync + rename). "
                                   "At-least-once and resumable: rerun the same command to continue.")
    c.add_argument("--dsn", required=True, help="libpq connection string or URL (psycopg)")
    c.add_argument("--slot", required=True, help="logical replication slot (plugin pgoutput)")
    c.add_argument("--publication", required=True, help="publication name(s), comma-separated")
    c.add_argument("--out", required=True, metavar="DIR", help="archive directory (created; resumed if it exists)")
    c.add_argument("--proto", type=int, default=1, choices=(1, 2, 3, 4), help="pgoutput proto_version (default 1)")
    c.add_argument("--binary", action="store_true", help="binary column values")
    c.add_argument("--streaming", action="store_true", help="stream large in-progress transactions (proto >= 2)")
    c.add_argument("--messages", action="store_true", help="include logical decoding messages (pg_logical_emit_message)")
    c.add_argument("--create-slot", action="store_true", help="create the slot if it does not exist")
    c.add_argument("--two-phase", action="store_true", help="decode prepared transactions (proto >= 3; slot created with two_phase)")
    c.add_argument("--max-files", type=int, default=0, metavar="N", help="stop after writing N files (0: no limit)")
    c.add_argument("--rows-per-file", type=int, default=10000, metavar="N",
                   help="rows peeked per poll, i.e. the size of a file (default 10000; grows while a "
                        "transaction does not fit)")
    c.add_argument("--poll-interval", type=float, default=1.0, metavar="S", help="seconds between empty polls (default 1)")
    c.add_argument("--stop-after", type=int, default=0, metavar="N",
                   help="stop after N consecutive polls found nothing new (0: run until interrupted)")

    d = sub.add_parser("decode", help="decode an archive to Parquet (local, no Spark)",
                       description="Decode a Parquet archive (file or directory, in seq order) or a CSV/COPY "
                                   "export of pg_logical_slot_get_binary_changes to Parquet: one row per "
                                   "message (default) or one row per committed row change (--changes). "
                                   "--source opengauss: openGauss/GaussDB frames, one row per record.")
    d.add_argument("archive", nargs="?", metavar="ARCHIVE", help="archive file or directory")
    d.add_argument("out", metavar="OUT", help="output Parquet file (or an existing directory)")
    d.add_argument("--sample", action="store_true", help="use the sample archive shipped with the package as ARCHIVE")
    d.add_argument("--changes", action="store_true", help="committed row changes (ChangeDecoder) instead of messages")
    d.add_argument("--tables", metavar="LIST", help="with --changes: tables to keep, e.g. 'public.t1,*.t3,s.*'")
    d.add_argument("--after-lsn", metavar="LSN",
                   help="with --changes: only transactions committed after LSN (X/Y or decimal): an incremental run")
    d.add_argument("--until-lsn", metavar="LSN",
                   help="with --changes: only transactions committed up to LSN (X/Y or decimal), inclusive")
    d.add_argument("--checkpoint", metavar="FILE",
                   help="with --changes: resume from FILE if it exists (only the rows from its seq on are "
                        "read, nothing given twice) and write the next run's checkpoint there")
    d.add_argument("--replays", default="drop", choices=("drop", "keep"),
                   help="with --changes: a transaction received twice (its commit LSN again) is given once "
                        "(drop, default; a commit LSN below an earlier one otherwise stops the run: the archive "
                        "is out of order) or every commit as it comes (keep: an archive across a timeline switch)")
    d.add_argument("--mode", default="FAILFAST", type=str.upper, choices=MODES,
                   help="malformed payloads: FAILFAST (stop, default), PERMISSIVE (keep error rows), "
                        "DROPMALFORMED (drop them)")
    d.add_argument("--envelope", default="auto", choices=ENVELOPES,
                   help="replication envelope of the payloads ('w' XLogData / 'k' keepalive): auto, none, xlogdata")
    d.add_argument("--payload", default="data", help="payload column name (default data)")
    d.add_argument("--encoding", metavar="ENC",
                   help="the client encoding the archive was captured under, when not UTF-8 (LATIN1, "
                        "WIN1252, ...): names and text are read from it (see 'transcode')")
    _source_arguments(d)
    d.add_argument("--keys", metavar="LIST",
                   help="--source opengauss with --changes: keys of tables whose records never name them, "
                        "e.g. 'public.t(id), sales.orders(region, id)'")

    t = sub.add_parser("transcode", help="rewrite an archive captured in another client encoding as UTF-8",
                       description="PostgreSQL sends names and text in the capturing session's client_encoding "
                                   "(by default the database's). Rewrite an archive captured under ENC (LATIN1, "
                                   "WIN1252, EUC_JP, ... or a Python codec name) as a UTF-8 session receives it, "
                                   "byte for byte: one Parquet file in OUT per archive file.")
    t.add_argument("archive", metavar="ARCHIVE", help="archive file or directory")
    t.add_argument("out", metavar="OUT", help="output directory (created)")
    t.add_argument("--encoding", required=True, metavar="ENC", help="the client encoding of the capture")
    t.add_argument("--errors", default="strict", choices=("strict", "keep"),
                   help="a payload that does not decode, or text that is not ENC: stop (strict, default) "
                        "or leave it as sent (keep; the decoders then report it)")
    t.add_argument("--payload", default="data", help="payload column name (default data)")
    t.add_argument("--envelope", default="auto", choices=ENVELOPES,
                   help="replication envelope of the payloads ('w' XLogData / 'k' keepalive): auto, none, xlogdata")

    i = sub.add_parser("inspect", help="what an archive holds, as a table",
                       description="Counts by message type and by table, LSN/xid/commit-time ranges, "
                                   "protocol features seen, errors.")
    i.add_argument("archive", nargs="?", metavar="ARCHIVE", help="archive file or directory")
    i.add_argument("--sample", action="store_true", help="inspect the sample archive shipped with the package")
    i.add_argument("--payload", default="data", help="payload column name (default data)")
    i.add_argument("--json", action="store_true", help="print JSON instead of the table")
    _source_arguments(i)
    i.add_argument("--envelope", default="auto", choices=ENVELOPES,
                   help="replication envelope of the payloads ('w' XLogData / 'k' keepalive): auto, none, xlogdata")
    i.add_argument("--encoding", metavar="ENC",
                   help="the client encoding the archive was captured under, when not UTF-8 (see 'transcode')")

    b = sub.add_parser("bench", help="run the benchmarks of bench/ and print their tables",
                       description="Runs bench/decode_bench.py and the other bench/*_bench.py scripts "
                                   "(from a source checkout).")
    b.add_argument("names", nargs="*", metavar="NAME", help="only these (e.g. decode changes)")
    b.add_argument("--quick", action="store_true", help="small sizes, results not saved (a smoke run)")
    return p


def _source_arguments(p):
    p.add_argument("--source", default="pgoutput", choices=("pgoutput", "opengauss"),
                   help="what the payloads are: pgoutput messages (default) or openGauss/GaussDB "
                        "parallel-decoding frames")
    p.add_argument("--style", default="b", choices=("b", "t", "j"),
                   help="--source opengauss: the decoding-style of the frames (binary, text, json; default b)")


def _resolve_archive(args):
    if args.sample:
        if args.archive is not None:
            raise CliError("give either ARCHIVE or --sample, not both")
        if args.source != "pgoutput":
            raise CliError("the sample archive holds pgoutput payloads: --sample takes no --source opengauss")
        path = sample_archive_path()
        if not os.path.exists(path):
            raise CliError(f"sample archive missing from the installation ({path})")
        return path
    if args.archive is None:
        raise CliError("ARCHIVE is required (or --sample)")
    return args.archive


def _run(args) -> int:
    if args.command == "capture":
        for k in ("max_files", "rows_per_file", "stop_after"):
            if getattr(args, k) < 0 or (k == "rows_per_file" and args.rows_per_file < 1):
                raise CliError(f"--{k.replace('_', '-')} must be positive")
        st = capture(args.dsn, args.slot, args.publication, args.out, proto=args.proto, binary=args.binary,
                     streaming=args.streaming, messages=args.messages, two_phase=args.two_phase,
                     create_slot=args.create_slot, max_files=args.max_files, poll_interval=args.poll_interval,
                     stop_after=args.stop_after, rows_per_file=args.rows_per_file)
        print(f"captured {st['messages']} messages in {st['files']} files ({st['polls']} polls) into {args.out}")
        return 0
    if args.command == "decode":
        archive = _resolve_archive(args)
        for flag in ("tables", "after_lsn", "until_lsn", "checkpoint"):
            if getattr(args, flag) and not args.changes:
                raise CliError(f"--{flag.replace('_', '-')} needs --changes")
        if args.replays != "drop" and not args.changes:
            raise CliError("--replays needs --changes")
        if args.encoding and args.source != "pgoutput":
            raise CliError("--encoding is for pgoutput archives")
        if args.source == "opengauss":
            if args.checkpoint:
                raise CliError("--checkpoint is for pgoutput archives (an openGauss run passes --after-lsn)")
            if args.keys and not args.changes:
                raise CliError("--keys needs --changes")
        elif args.keys or args.style != "b":
            raise CliError(f"--{'keys' if args.keys else 'style'} needs --source opengauss")
        from .changes import commit_window
        try:
            commit_window(args.after_lsn, args.until_lsn)
        except ValueError as e:
            raise CliError(f"--after-lsn/--until-lsn: {e}") from None
        if args.source == "opengauss":
            from .opengauss.cli import decode_archive as og_decode
            c = og_decode(archive, args.out, style=args.style, changes=args.changes, tables=args.tables,
                          keys=args.keys, mode=args.mode, envelope=args.envelope, payload=args.payload,
                          after_lsn=args.after_lsn, until_lsn=args.until_lsn, replays=args.replays)
        else:
            c = decode_archive(archive, args.out, changes=args.changes, tables=args.tables, mode=args.mode,
                               envelope=args.envelope, payload=args.payload, after_lsn=args.after_lsn,
                               until_lsn=args.until_lsn, checkpoint=args.checkpoint, replays=args.replays,
                               encoding=args.encoding)
        what = "change rows" if args.changes else "message rows" if args.source == "pgoutput" else "record rows"
        print(f"rows in: {c['rows_in']}  rows decoded: {c['rows_decoded']}  rows in error: {c['rows_in_error']}  "
              f"{what} written: {c['rows_out']} -> {c['out']}")
        if c.get("open_transactions"):
            print(f"{c['open_transactions']} transaction(s) still open at the end of the archive (not emitted)")
        if c.get("replayed_transactions"):
            print(f"{c['replayed_transactions']} transaction(s) received again (a reconnect replayed them): "
                  "given once")
        if c.get("heartbeats"):
            print(f"{c['heartbeats']} heartbeat record(s) skipped")
        if c.get("errors_file"):
            print(f"error rows listed in {c['errors_file']}")
        if c.get("checkpoint"):
            print(f"checkpoint -> {c['checkpoint']}: the next run reads from seq {c['next_from_seq']}"
                  + (f" (held by {c['held_by']} open transaction(s))" if c["held_by"] else "")
                  + (f"; {c['files_skipped']} file(s) before this run's checkpoint not read" if c["files_skipped"]
                     else ""))
        return 0
    if args.command == "transcode":
        c = transcode_files(args.archive, args.out, encoding=args.encoding, errors=args.errors,
                            payload=args.payload, envelope=args.envelope)
        print(f"rows: {c['rows']}  rewritten: {c['rewritten']}  left as sent: {c['left_as_sent']}  "
              f"files: {c['files']} -> {c['out']}")
        return 0
    if args.command == "inspect":
        archive = _resolve_archive(args)
        if args.encoding and args.source != "pgoutput":
            raise CliError("--encoding is for pgoutput archives")
        if args.source == "opengauss":
            from .opengauss.cli import inspect_archive as og_inspect
            r = og_inspect(archive, style=args.style, envelope=args.envelope, payload=args.payload)
        elif args.style != "b":
            raise CliError("--style needs --source opengauss")
        else:
            r = inspect_archive(archive, payload=args.payload, envelope=args.envelope, encoding=args.encoding)
        print(json.dumps(r, default=str, indent=1) if args.json else _format_inspect(r))
        return 0
    if args.command == "bench":
        return run_bench(args.names, args.quick)
    raise CliError("a command is required: capture, decode, inspect or bench (see --help)")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        return _run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:   # one line, never a traceback: the cause is in the message
        name = type(e).__name__
        msg = _first_line(e)
        if not isinstance(e, CliError):
            msg = f"{name}: {msg}"
        print(f"{PROG} {args.command or ''}: error: {msg}".replace("  ", " "), file=sys.stderr)
        if os.environ.get("PGOUTPUT_CODEC_DEBUG"):
            raise
        return 1


if __name__ == "__main__":
    sys.exit(main())
