"""``decode``: a pgoutput archive to Parquet, one row per message or, with ``--changes``,
one row per committed row change (single process, no Spark); incremental ``--changes``
runs resume from a checkpoint file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..archive import archive_catalog, archive_row, iter_archive, read_archive_parts
from ..typecatalog.catalog import read_catalog, with_catalog
from ..arrays import plain_list_columns, plain_list_schema
from ..pgoutput.batch import PAYLOAD_ERROR, decode_batch_pieces, with_payload_errors
from ..changes.decoder import ChangeDecoder
from ..errors import ArchiveOrderError, PgoutputDecodeError
from .console import PROG, CliError, first_line, note_recaptured, progress
from ..runs import IncrementalRun, load_checkpoint, save_checkpoint
from ..threads import prefetch, worker_count
from .output import ParquetOut
from .transcode import transcoded, transcoder

__all__ = ["decode_archive"]

#: archive rows read, decoded and written at a time: what is in memory follows this, not
#: the size of a file (about 40 MB of payloads for 130-byte messages)
BATCH_ROWS = 1 << 18

#: the rows of the errors file of ``decode --changes --mode PERMISSIVE``
_ERRORS_SCHEMA = pa.schema([pa.field("seq", pa.int64()), pa.field("lsn", pa.uint64()), pa.field("error", pa.string())])


def _message_table(part_table, msgs, mode):
    """The decoded struct flattened to columns, with the archive's seq/lsn/xid kept (as
    ``seq``, ``source_lsn``, ``source_xid`` — Spark's ``decode_messages`` naming)."""
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


def _fail_first_error(table, errors):
    i = int(np.flatnonzero(errors.is_valid().to_numpy(zero_copy_only=False))[0])
    raise CliError(f"malformed payload at archive {archive_row(table, i)}: {errors[i].as_py()}"
                   " (--mode PERMISSIVE keeps error rows, DROPMALFORMED drops them)")


def _load_checkpoint(path):
    try:
        return load_checkpoint(path)
    except ValueError as e:
        raise CliError(first_line(e)) from None


def decode_archive(archive, out, *, changes=False, tables=None, mode="FAILFAST", envelope="auto",
                   payload="data", after_lsn=None, until_lsn=None, checkpoint=None, replays="drop",
                   encoding=None, jobs=None, catalog=None) -> dict:
    """``decode``: returns the counts printed at the end. ``checkpoint``: a file to resume
    from when it exists (only the rows from its ``from_key`` on are read) and to write the
    next checkpoint to after the output (incremental ``--changes`` runs). ``encoding``: the
    client encoding the archive was captured under, when not UTF-8 (transcode.py).
    ``jobs``: threads decoding (None: as many as a batch's size pays for,
    ``threads.worker_count``). The archive is read, decoded and written in batches of
    ``BATCH_ROWS`` rows, the three at once: the next batch is read and the last one
    written while this one is decoded. The output's schema metadata carries the
    archive's type catalog (its files' footers) and the versions of the catalog file
    ``catalog`` (``--catalog``): the table functions type its change rows with it."""
    if jobs is not None:
        worker_count(jobs)          # (a bad count fails before anything is read)
    resume = _load_checkpoint(checkpoint) if checkpoint else None
    recode = transcoder(encoding, mode, envelope)
    if recode is not None and checkpoint:
        raise CliError(f"--encoding reads the archive from its start; for incremental runs, rewrite it "
                       f"once ('{PROG} transcode') and decode the copy with --checkpoint")
    run = IncrementalRun(archive, resume, payload) if checkpoint else None
    parts = run.parts if run is not None else read_archive_parts(archive)
    types = archive_catalog(parts)
    if catalog is not None:
        try:
            given = read_catalog(catalog)
        except ValueError as e:
            raise CliError(f"--catalog {first_line(e)}") from None
        types = given if types is None else types.merge(given)
    dest = ParquetOut(out, "changes.parquet" if changes else "messages.parquet")
    counts = {"rows_in": 0, "rows_decoded": 0, "rows_in_error": 0, "rows_out": 0}
    total = sum(p.num_rows or 0 for p in parts) or None
    dec = ChangeDecoder(tables=tables, errors="raise" if mode == "FAILFAST" else "collect", after_lsn=after_lsn,
                        until_lsn=until_lsn, resume=resume, replays=replays, workers=jobs) if changes else None
    known_lost = len(dec.walk.abandoned) if changes else 0      # (a checkpoint's, listed by its run)
    if changes and envelope != "auto":
        raise CliError("--envelope applies to message decoding; change rows take plain pgoutput payloads")
    state = None
    with dest, progress(total, "decode") as bar:
        rows_of = run.tables(note_recaptured, batch_rows=BATCH_ROWS) if run is not None else \
            iter_archive(parts, payload, on_recaptured=note_recaptured, batch_rows=BATCH_ROWS)
        for _part, t in prefetch(rows_of):
            if recode is not None:
                t, _ = transcoded(recode, t)
            if changes:
                try:
                    # (column lists as plain lists: pyarrow's Parquet writer expands a list
                    # view row by row, three times the time of writing everything else)
                    for rows in dec.feed_parts(t):     # a spilled transaction a piece at a time
                        dest.write(plain_list_columns(rows), with_catalog(plain_list_schema(dec.output_schema), types))
                        counts["rows_out"] += len(rows)
                except ArchiveOrderError as e:      # (no parse mode gets past the archive's order)
                    raise CliError(first_line(e)) from None
                except PgoutputDecodeError as e:
                    raise CliError(f"{first_line(e)} (--mode PERMISSIVE/DROPMALFORMED skips it)") from None
            else:
                # the pieces written one by one: no copy joining them
                pieces, state = decode_batch_pieces(t.column("data"), envelope=envelope, in_stream=state,
                                                    workers=jobs)
                for at, msgs in pieces:
                    rows = t.slice(at, len(msgs))
                    if PAYLOAD_ERROR in rows.column_names:
                        msgs = with_payload_errors(msgs, rows.column(PAYLOAD_ERROR))
                    errors = msgs.field("error")
                    counts["rows_in"] += len(msgs)
                    counts["rows_in_error"] += len(msgs) - errors.null_count
                    if mode == "FAILFAST" and errors.null_count != len(msgs):
                        _fail_first_error(rows, errors)
                    out_rows = _message_table(rows, msgs, mode)
                    dest.write(out_rows, with_catalog(out_rows.schema, types))
                    counts["rows_out"] += len(out_rows)
            bar.update(len(t))
        out = dest.finish(with_catalog(plain_list_schema(dec.output_schema) if changes else pa.schema([]), types))
    if checkpoint:
        # the next run's start: a plan over the control rows this run fed its decoder
        nxt = run.next_checkpoint(tables=tables, after_lsn=after_lsn, until_lsn=until_lsn, replays=replays,
                                  errors="raise" if mode == "FAILFAST" else "collect")
        save_checkpoint(checkpoint, nxt)
        counts.update(checkpoint=checkpoint, files_skipped=len(run.skipped), next_from_seq=nxt.from_key,
                      held_by=len(nxt.held_by))
    if changes:
        counts.update(rows_in=dec.counts["rows_in"], rows_decoded=dec.counts["rows_decoded"],
                      rows_in_error=dec.counts["rows_in_error"],
                      replayed_transactions=dec.counts["replayed_transactions"])
        counts["open_transactions"] = len(dec.open_transactions)
        # a transaction whose end never came (its Commit unreadable, or not in the archive)
        # is dropped at the next Begin: listed under that Begin's seq, not counted as a row
        # in error (a consumer that reconnected mid-transaction lands its start twice)
        lost = [dict(seq=a["seq"], lsn=None, error=f"transaction {a['xid']} has no end: this Begin came before its "
                     "Commit, and its changes are not given") for a in dec.walk.abandoned[known_lost:]]
        if mode == "PERMISSIVE" and (dec.errors or lost):
            epath = out + ".errors.parquet"
            pq.write_table(pa.Table.from_pylist(sorted(dec.errors + lost, key=lambda e: e["seq"]),
                                                schema=_ERRORS_SCHEMA), epath)
            counts["errors_file"] = epath
    else:
        counts["rows_decoded"] = counts["rows_in"] - counts["rows_in_error"]
    counts["out"] = out
    return counts
