"""``transcode``: an archive captured under another client encoding rewritten as UTF-8; and
the Transcoder that ``decode --encoding`` and ``inspect --encoding`` read an archive through."""

from __future__ import annotations

import json
import os
import sys

import pyarrow.parquet as pq

from ..archive import META_KEY, iter_archive, read_archive_parts
from ..transcode import TRANSCODED_FROM, TranscodeError, Transcoder, is_utf8, pg_encoding_name
from .console import PROG, CliError, first_line, note_recaptured

__all__ = ["new_transcoder", "transcoder", "transcoded", "transcode_files"]


def new_transcoder(encoding, errors, envelope):
    """A Transcoder from ``encoding``; an encoding it does not know ends the command."""
    try:
        return Transcoder(encoding, envelope=envelope, errors=errors)
    except ValueError as e:
        raise CliError(f"--encoding: {e}") from None


def transcoder(encoding, mode="FAILFAST", envelope="auto"):
    """A Transcoder for an archive captured under ``encoding``, or None for UTF-8/none.
    FAILFAST stops at a payload it cannot rewrite; the other modes leave it as sent, for
    the decoder to report as the malformed row it is."""
    if not encoding:
        return None
    recode = new_transcoder(encoding, "strict" if mode == "FAILFAST" else "keep", envelope)
    return None if is_utf8(encoding) else recode


def transcoded(recode, t, hint="--mode PERMISSIVE/DROPMALFORMED leaves it as sent", where=""):
    """(``t`` with its payloads rewritten, the TranscodeReport); a payload it cannot
    rewrite (errors='strict') ends the command, with ``hint``."""
    try:
        data, report = recode.payloads(t.column("data"))
    except TranscodeError as e:
        raise CliError(f"{where}{first_line(e)} ({hint})") from None
    return t.set_column(t.column_names.index("data"), "data", data), report


def _identity(path):
    try:
        st = os.stat(path)
        return st.st_dev, st.st_ino
    except OSError:
        return os.path.realpath(path)


def _destinations(archive, parts, out) -> dict:
    """The file written for each part: its path under ``out`` as under the archive
    directory (files of one name in two subdirectories stay two files), refused where it
    is an archive file or where two parts would share one."""
    is_dir = os.path.isdir(archive)
    sources = {_identity(p.path): p.path for p in parts}
    dests, taken = {}, {}
    for part in parts:
        rel = os.path.relpath(part.path, archive) if is_dir else os.path.basename(part.path)
        dest = os.path.join(out, os.path.splitext(rel)[0] + ".parquet")
        key = os.path.realpath(dest)
        if key in taken:
            raise CliError(f"{part.path} and {taken[key]} would both be written to {dest}; nothing written")
        taken[key] = part.path
        src = sources.get(_identity(dest)) or sources.get(key)
        if src is not None:
            raise CliError(f"OUT file {dest} is the archive file {src}: it would be overwritten; write elsewhere")
        dests[part.path] = dest
    return dests


def transcode_files(archive, out, *, encoding, errors="strict", payload="data", envelope="auto") -> dict:
    """``transcode``: the archive rewritten as a UTF-8 session would have captured it, one
    Parquet file in ``out`` per file read (re-captured rows dropped, capture metadata kept
    and marked). Returns counts."""
    recode = new_transcoder(encoding, errors, envelope)
    source = pg_encoding_name(encoding)
    parts = read_archive_parts(archive)
    dests = _destinations(archive, parts, out)
    os.makedirs(out, exist_ok=True)
    counts = {"files": 0, "rows": 0, "rewritten": 0, "left_as_sent": 0, "out": out}
    for part, t in iter_archive(parts, payload, on_recaptured=note_recaptured):
        t, report = transcoded(recode, t, "--errors keep leaves it as sent", f"{os.path.basename(part.path)}: ")
        for _, why in report.left_as_sent:
            print(f"{PROG}: {os.path.basename(part.path)}: left as sent: {why}", file=sys.stderr)
        md = dict(t.schema.metadata or {})
        md[TRANSCODED_FROM] = source.encode()
        if part.meta:   # a capture's file stays one, resumable and chained by its LSNs
            md[META_KEY] = json.dumps(dict(part.meta, client_encoding="UTF8", transcoded_from=source)).encode()
        dest = dests[part.path]
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        pq.write_table(t.replace_schema_metadata(md), dest, compression="zstd")
        counts["files"] += 1
        counts["rows"] += report.rows
        counts["rewritten"] += report.rewritten
        counts["left_as_sent"] += len(report.left_as_sent)
    return counts
