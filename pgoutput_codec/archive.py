"""Archive files of replication payloads: the layouts the CLI, ``read_archive`` and the
``pgoutput`` data source read.

Two layouts:

- Parquet with a binary payload column (and any other columns: lsn, xid, seq, ...);
- CSV/COPY exports of ``pg_logical_slot_get_binary_changes`` (columns lsn, xid, data):
  ``\\copy (...) TO 'f.csv' WITH (FORMAT csv, HEADER)`` writes bytea as ``\\x<hex>``;
  COPY's text format (tab-separated) doubles the backslash (``\\\\x<hex>``): both are
  accepted. CSV has no types: every other column stays a string.

The hex text is decoded vectorized over the Arrow string buffers (numpy lookup table):
no Python per row. A value that is not bytea hex text becomes a null payload, and the
table read gets a ``payload_error`` column (``batch.PAYLOAD_ERROR``) holding ``HEX_ERROR``
there: the decoders make it that row's error, so the parse modes apply to it as to a
malformed payload.

Reading an archive: :func:`read_archive_parts` lists its files (a Parquet file, a
directory of them, or a CSV/COPY export) in ``seq`` order as :class:`ArchivePart`
objects, and :func:`iter_archive` reads them, dropping the rows a resumed capture wrote
twice. A path that is missing, unreadable or not an archive raises :class:`ArchiveError`.

The files ``pgoutput-codec capture`` writes (their layout: :mod:`pgoutput_codec.cli.capture`)
carry JSON metadata under :data:`META_KEY`: ``seq_start`` orders a directory's files, and
``start_lsn``/``end_lsn`` (the slot's position before the file's rows and after them) locate
the rows of a file that the file before it already holds. Under :data:`CATALOG_KEY` they
carry the type catalog in force over their rows (:mod:`pgoutput_codec.typecatalog.catalog`):
:func:`archive_catalog` merges every file's.
"""

from __future__ import annotations

import json
import logging
import os
import stat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from .arrays import one_array
from .pgoutput.batch import PAYLOAD_ERROR
from .errors import PgoutputCodecError, first_line
from .pgoutput.messages import LSN_PATTERN, parse_lsn
from .typecatalog.catalog import CATALOG_KEY, Catalog

__all__ = ["hex_to_binary", "HEX_ERROR", "FORMATS", "META_KEY", "ArchiveError", "ArchivePart",
           "read_archive_parts", "iter_archive", "archive_row", "parquet_part", "capture_meta", "last_seq", "seq_stats",
           "check_seq", "same_file", "inside_dir", "CATALOG_KEY", "archive_catalog", "file_catalog"]

FORMATS = ("parquet", "csv")
HEX_ERROR = "payload is not bytea hex text ('\\x' followed by an even number of hex digits)"


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file or directory, as the system resolves
    them: symbolic links and relative paths followed, hard links by inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:        # (one of them does not exist yet)
        return False


def inside_dir(path, directory) -> bool:
    """Whether ``path`` lies in ``directory`` (an existing directory), as resolved: a
    file there would be read as a file of an archive in that directory."""
    d = os.path.realpath(directory)
    if not os.path.isdir(d):
        return False
    return os.path.commonpath([os.path.realpath(path), d]) == d


_NIBBLE = np.full(256, 0, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _NIBBLE[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _NIBBLE[_c] = 10 + _i


def hex_to_binary(text: pa.Array):
    """``\\x<hex>`` / ``\\\\x<hex>`` strings → (``pa.binary()`` array, bad mask).

    ``bad`` (a ``pa.BooleanArray``) is true where the value was present but not hex text;
    those rows and null rows are null in the result."""
    text = one_array(text)
    if pa.types.is_binary(text.type) or pa.types.is_large_binary(text.type):
        text = text.cast(pa.large_string() if pa.types.is_large_binary(text.type) else pa.string())
    if not pa.types.is_string(text.type):
        text = text.cast(pa.string())
    double = pc.starts_with(text, "\\\\x")
    single = pc.starts_with(text, "\\x")
    digits = pc.if_else(double, pc.utf8_slice_codeunits(text, 3),
                        pc.if_else(single, pc.utf8_slice_codeunits(text, 2), pa.scalar(None, pa.string())))
    good = pc.and_(pc.match_substring_regex(digits, "^([0-9a-fA-F]{2})*$"), pc.is_valid(digits))
    good = pc.fill_null(good, False)
    bad = pc.and_(pc.is_valid(text), pc.invert(good))
    digits = pc.if_else(good, digits, "")
    digits = digits.cast(pa.string()) if digits.type != pa.string() else digits
    # Every value now has even length and only hex digits (invalid ones are "").
    _, off_buf, data_buf = digits.buffers()
    n = len(digits)
    offsets = np.frombuffer(off_buf, dtype=np.int32)[digits.offset:digits.offset + n + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    chars = np.frombuffer(data_buf, dtype=np.uint8)[start:end] if data_buf is not None else np.zeros(0, np.uint8)
    raw = (_NIBBLE[chars[0::2]] << 4) | _NIBBLE[chars[1::2]]
    new_offsets = ((offsets - start) // 2).astype(np.int32)
    validity = pc.and_(good, pc.is_valid(text))
    mask = pc.invert(validity).to_numpy(zero_copy_only=False)
    out = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(raw.tobytes())])
    if mask.any():
        out = pc.if_else(pa.array(~mask), out, pa.scalar(None, pa.binary()))
    return out, bad


# ====================================================================== reading archives
#: the key of a captured file's metadata (JSON) in its Parquet schema
META_KEY = b"pgoutput_codec.capture"

#: tags of the rows that end a transaction (or stand alone): a captured file ends at one
_BOUNDARY_TAGS = (b"C", b"P", b"c", b"p", b"K", b"r", b"M")

_log = logging.getLogger(__name__)


class ArchiveError(PgoutputCodecError, ValueError):
    """A path that is not a readable archive: missing, unreadable, corrupt, or files
    without a binary payload column. The message names the path and says why, in one line."""


class ArchivePart:
    """One file of an archive: path, its capture metadata (or None) and how to read it."""

    def __init__(self, path: str, kind: str, meta=None, num_rows=None, data_bytes=None):
        self.path, self.kind, self.meta, self.num_rows = path, kind, meta, num_rows
        #: the ``data`` column's bytes as its footer gives them (uncompressed; None: not known)
        self.data_bytes = data_bytes
        self._seq_stats = None
        #: the file's type catalog JSON (:data:`CATALOG_KEY`): None not read yet, b"" none
        self.catalog_json = None

    def seq_stats(self) -> list:
        """:func:`seq_stats` of the file, its footer read once ([] for a CSV export)."""
        if self._seq_stats is None:
            self._seq_stats = seq_stats(self.path) if self.kind == "parquet" else []
        return self._seq_stats

    def read(self, payload="data"):
        """pa.Table with ``data`` (binary), and ``seq``/``lsn``/``xid`` when the file has
        them, rows in ``seq`` order."""
        t = _read_parquet(self.path) if self.kind == "parquet" else _read_csv(self.path)
        t = self._checked(t, payload)
        if "seq" in t.column_names and not _rising(t.column("seq")):
            t = t.take(pc.sort_indices(t, [("seq", "ascending")]))
        return t

    def read_batches(self, payload="data", rows=1 << 18):
        """:meth:`read` as tables of at most ``rows`` rows, read one after the other (so
        what is in memory follows ``rows``, not the file). A Parquet file whose ``seq``
        does not rise row by row (read first, alone) and a CSV export are read whole, and
        then cut."""
        if self.kind != "parquet" or not self._in_seq_order():
            whole = self.read(payload)
            for at in range(0, len(whole), rows):
                yield whole.slice(at, rows)
            return
        try:
            # without pre-buffering: it would read every row group's columns at the start
            f = pq.ParquetFile(self.path, pre_buffer=False)
            for batch in f.iter_batches(batch_size=rows):
                yield self._checked(pa.Table.from_batches([batch]), payload)
        except (pa.ArrowException, OSError) as e:
            raise ArchiveError(f"{self.path}: corrupt or unreadable Parquet file ({first_line(e)})") from None

    def _in_seq_order(self) -> bool:
        try:
            f = pq.ParquetFile(self.path)
            if "seq" not in f.schema_arrow.names:
                return True
            seq = f.read(columns=["seq"]).column("seq")
        except (pa.ArrowException, OSError) as e:
            raise ArchiveError(f"{self.path}: corrupt or unreadable Parquet file ({first_line(e)})") from None
        return _rising(seq)

    def _checked(self, t, payload):
        """``t`` with its payload column as ``data``, refused unless binary."""
        if payload not in t.column_names:
            raise ArchiveError(f"{self.path}: no payload column {payload!r} (columns: {', '.join(t.column_names)})")
        if payload != "data":
            t = t.drop_columns([c for c in ("data",) if c in t.column_names]).rename_columns(
                ["data" if c == payload else c for c in t.column_names])
        typ = t.schema.field("data").type
        if not (pa.types.is_binary(typ) or pa.types.is_large_binary(typ)):
            raise ArchiveError(f"{self.path}: payload column {payload!r} is {typ}, not binary")
        if "seq" in t.column_names:
            check_seq(self.path, t.schema.field("seq").type, t.column("seq").null_count)
        return t


def check_seq(path, typ, nulls=0) -> None:
    """ArchiveError unless a ``seq`` column (the arrival order: rows are read, and
    incremental runs resume, by it) is of an integer type and has no nulls."""
    if not pa.types.is_integer(typ):
        raise ArchiveError(f"{path}: column seq is {typ}, not an integer type (seq orders the rows as numbers)")
    if nulls:
        raise ArchiveError(f"{path}: column seq has {nulls} null value(s): every row needs its place in "
                           "the arrival order")


def _rising(seq) -> bool:
    """Whether ``seq`` rises row by row (the order a file is read in)."""
    return len(seq) < 2 or pc.all(pc.greater(seq.slice(1), seq.slice(0, len(seq) - 1))).as_py()


def _read_parquet(path):
    try:
        # (not pq.read_table: its dataset layer costs a module load and more a file)
        with pq.ParquetFile(path) as f:
            return f.read()
    except (pa.ArrowException, OSError) as e:
        raise ArchiveError(f"{path}: corrupt or unreadable Parquet file ({first_line(e)})") from None


def _read_csv(path):
    """A CSV (``\\copy ... WITH (FORMAT csv, HEADER)``) or COPY text export (tab-separated,
    no header) of ``pg_logical_slot_get_binary_changes``: lsn, xid, data as bytea hex."""
    with open(path, "rb") as f:
        head = f.readline()
    if not head.strip():
        raise ArchiveError(f"{path}: empty file, not an archive")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        raise ArchiveError(f"{path}: not an archive (its first line is not UTF-8 text)") from None
    delim = "\t" if b"\t" in head else ","
    fields = [x.strip().strip(b'"').lower() for x in head.rstrip(b"\r\n").split(delim.encode())]
    header = b"data" in fields
    if not header and not (len(fields) == 3 and fields[2].lstrip(b"\\").startswith(b"x")):
        raise ArchiveError(f"{path}: not an archive (neither Parquet nor a CSV/COPY export with lsn, xid, data)")
    names = None if header else ["lsn", "xid", "data"]
    try:
        t = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=names, autogenerate_column_names=False),
            parse_options=pcsv.ParseOptions(delimiter=delim, quote_char='"' if delim == "," else False),
            convert_options=pcsv.ConvertOptions(column_types={"data": pa.string(), "lsn": pa.string()},
                                                strings_can_be_null=False))
    except pa.ArrowException as e:
        raise ArchiveError(f"{path}: not a readable CSV/COPY export ({first_line(e)})") from None
    if "data" not in t.column_names:
        raise ArchiveError(f"{path}: the CSV has no 'data' column (columns: {', '.join(t.column_names)})")
    twice = sorted({c for c in ("data", "lsn", "xid") if t.column_names.count(c) > 1})
    if twice:
        raise ArchiveError(f"{path}: the CSV header names column '{twice[0]}' more than once")
    if "lsn" in t.column_names:   # the server wrote X/Y: anything else is a broken export
        lsn = t.column("lsn")
        ok = pc.fill_null(pc.match_substring_regex(lsn, f"^{LSN_PATTERN}$"), True)
        if len(lsn) and not pc.all(ok).as_py():     # (all of no rows is null)
            i = pc.index(ok, False).as_py()
            raise ArchiveError(f"{path}: data row {i + 1}: lsn {lsn[i].as_py()!r} is not an LSN (X/Y hex)")
    data, bad = hex_to_binary(t.column("data"))
    i = t.column_names.index("data")
    t = t.set_column(i, "data", data)
    if bad.true_count:       # decoders then name the row's error (batch.PAYLOAD_ERROR)
        t = t.append_column(PAYLOAD_ERROR, pc.if_else(bad, HEX_ERROR, pa.scalar(None, pa.string())))
    return t


def capture_meta(schema):
    """The capture metadata (a dict) of a Parquet file's ``schema``, or None."""
    if schema is None:
        return None
    raw = schema.metadata.get(META_KEY) if schema.metadata else None
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def file_catalog(schema, path="") -> Catalog | None:
    """The type catalog a Parquet file's ``schema`` carries (:data:`CATALOG_KEY`), or None;
    ArchiveError when it is there and not one."""
    raw = schema.metadata.get(CATALOG_KEY) if schema is not None and schema.metadata else None
    return None if raw is None else _parsed_catalog(raw, path)


def archive_catalog(path_or_parts) -> Catalog | None:
    """The type catalog of an archive (a path, or its :class:`ArchivePart` list): every
    file's footer catalog merged (footers only, no row data read); None when no file has
    one (an archive not captured by ``pgoutput-codec capture``, a CSV export)."""
    parts = read_archive_parts(os.fspath(path_or_parts)) if isinstance(path_or_parts, (str, os.PathLike)) \
        else path_or_parts
    raws = _catalog_raws(parts)
    return _merged(raws) if raws else None


def _merged(raws) -> Catalog:
    return Catalog([v for raw, path in raws.items() for v in _parsed_catalog(raw, path).versions])


def _catalog_raws(parts) -> dict:
    """{catalog JSON: the first file carrying it} over ``parts``' footers (files of one
    capture mostly carry the same JSON: each is parsed once)."""
    raws = {}
    for p in parts:
        if p.kind != "parquet":
            continue
        if p.catalog_json is None:
            try:
                schema = pq.read_schema(p.path)
            except (pa.ArrowException, OSError) as e:
                raise ArchiveError(f"{p.path}: corrupt or unreadable Parquet file ({first_line(e)})") from None
            p.catalog_json = schema.metadata.get(CATALOG_KEY, b"") if schema.metadata else b""
        if p.catalog_json:
            raws.setdefault(p.catalog_json, p.path)
    return raws


def _merged_catalog_json(parts):
    """:func:`archive_catalog`'s JSON (bytes), a file's own when every file carries the same
    one; None when no file has one."""
    raws = _catalog_raws(parts)
    if len(raws) <= 1:
        return next(iter(raws), None)
    return _merged(raws).to_json().encode()


def _with_catalog(table, raw):
    if raw is None:
        return table
    return table.replace_schema_metadata({**(table.schema.metadata or {}), CATALOG_KEY: raw})


def _parsed_catalog(raw, path):
    try:
        return Catalog.from_json(raw)
    except ValueError as e:
        raise ArchiveError(f"{path}: its type catalog ({CATALOG_KEY.decode()}) is unreadable: {first_line(e)}") from None


def parquet_part(path) -> ArchivePart:
    """The :class:`ArchivePart` of one Parquet file, its metadata read (not its rows)."""
    try:
        pf = pq.ParquetFile(path)      # (the footer read once: schema, rows, sizes)
        schema, md = pf.schema_arrow, pf.metadata
    except (pa.ArrowException, OSError) as e:
        raise ArchiveError(f"{path}: corrupt or unreadable Parquet file ({first_line(e)})") from None
    meta = capture_meta(schema)
    if "seq" in schema.names:
        check_seq(path, schema.field("seq").type)
    if "data" not in schema.names:
        raise ArchiveError(f"{path}: not a pgoutput archive (no 'data' column; columns: {', '.join(schema.names)})")
    # the leaf column whose path is "data" (a nested column of that name has none: its
    # size is not known here, and reading it refuses it)
    i = next((j for j in range(md.num_columns) if md.schema.column(j).path == "data"), None)
    try:
        size = None if i is None else \
            sum(md.row_group(g).column(i).total_uncompressed_size for g in range(md.num_row_groups))
    except (pa.ArrowException, OSError) as e:
        raise ArchiveError(f"{path}: corrupt or unreadable Parquet file ({first_line(e)})") from None
    part = ArchivePart(path, "parquet", meta, md.num_rows, size)
    part._seq_stats = _seq_stats_of(md)
    part.catalog_json = schema.metadata.get(CATALOG_KEY, b"") if schema.metadata else b""
    return part


def _is_parquet(path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


def _parquet_files(root: str) -> list:
    """The ``*.parquet`` files under directory ``root`` (names starting with '.' left out,
    and the directories so named), sorted by path, each file once: a directory reached
    again through a symbolic link is not entered again, a file of several names (links)
    is listed under its first. ``root`` is a path, never a pattern (``arch[1]`` is that
    directory). A name that is not a regular file (a pipe, a socket, a device) is left
    out with a warning: reading it could block forever."""
    found, seen_dirs = [], set()
    for top, dirs, names in os.walk(root, followlinks=True):
        st = os.stat(top)
        if (st.st_dev, st.st_ino) in seen_dirs:
            dirs[:] = []
            continue
        seen_dirs.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(top, n) for n in names if n.endswith(".parquet") and not n.startswith(".")]
    files, seen_files = [], set()
    for f in sorted(found):
        try:
            st = os.stat(f)
        except OSError as e:            # (a link to nothing)
            _log.warning("%s: skipped: %s", f, e.strerror or e)
            continue
        if not stat.S_ISREG(st.st_mode):
            _log.warning("%s: skipped: not a regular file (a pipe, socket or device is not an archive file)", f)
            continue
        if (st.st_dev, st.st_ino) not in seen_files:
            seen_files.add((st.st_dev, st.st_ino))
            files.append(f)
    return files


def read_archive_parts(path: str) -> list:
    """The files of an archive in ``seq`` order: a Parquet file, a directory of Parquet
    files (ordered by their capture metadata ``seq_start``, else by the first ``seq``,
    else by name), or a CSV/COPY export."""
    if not os.path.exists(path):
        raise ArchiveError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        files = _parquet_files(path)
        if not files:
            raise ArchiveError(f"{path}: no Parquet files in this directory")
        parts = [parquet_part(f) for f in files]

        def key(p):
            if p.meta and "seq_start" in p.meta:
                return (0, p.meta["seq_start"], p.path)
            return (1, _first_seq(p.seq_stats()), p.path)

        return sorted(parts, key=key)
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ArchiveError(f"{path}: not a regular file (a pipe, socket or device is not an archive)")
    if not os.access(path, os.R_OK):
        raise ArchiveError(f"{path}: permission denied")
    try:
        if _is_parquet(path):
            return [parquet_part(path)]
    except OSError as e:
        raise ArchiveError(f"{path}: {e.strerror or e}") from None
    return [ArchivePart(path, "csv")]


def seq_stats(path):
    """The ``seq`` column's statistics of a Parquet file, one (min, max) per row group
    (None for a row group without them); [] without a ``seq`` column."""
    return _seq_stats_of(pq.ParquetFile(path).metadata)


def _seq_stats_of(md) -> list:
    if "seq" not in md.schema.names:
        return []
    i = md.schema.names.index("seq")
    stats = [md.row_group(g).column(i).statistics for g in range(md.num_row_groups)]
    return [(st.min, st.max) if st is not None and st.has_min_max else None for st in stats]


def _first_seq(stats):
    return stats[0][0] if stats and stats[0] is not None else 0


def last_seq(path):
    """The largest ``seq`` of a Parquet file (or :class:`ArchivePart`) from its
    statistics (None: not known)."""
    stats = path.seq_stats() if isinstance(path, ArchivePart) else seq_stats(path)
    return None if not stats or None in stats else max(hi for _, hi in stats)


def _overlap_prefix(part, table, covered_lsn):
    """Rows of a file that an earlier file already holds: only possible when a capture was
    resumed without completing the slot advance of its last file (the file's
    ``start_lsn`` is below the end of the archive so far). They are exactly the prefix up
    to the row at the earlier file's ``end_lsn`` (files end at transaction boundaries)."""
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


def _log_recaptured(part, rows):
    _log.warning("%s: skipping %d rows re-captured after an interrupted slot advance",
                 os.path.basename(part.path), rows)


def iter_archive(parts, payload="data", dedupe=True, skip=None, on_recaptured=None, batch_rows=None):
    """Yield (part, table) with re-captured rows (see :func:`_overlap_prefix`) removed;
    parts for which ``skip(part)`` is true are not read (their metadata still counts).
    ``on_recaptured(part, rows)`` is told how many leading rows of a part were dropped
    (by default a warning on this module's logger). ``batch_rows``: tables of at most
    that many rows, read one after the other (:meth:`ArchivePart.read_batches`); None:
    one table per file. Every table carries the archive's whole type catalog (every file's
    merged, :data:`CATALOG_KEY`), so that the first of them already types values sent under
    a definition a later file records, and tables put together keep it."""
    report = _log_recaptured if on_recaptured is None else on_recaptured
    covered = None
    parts = list(parts)
    merged = _merged_catalog_json(parts)
    for part in parts:
        skipped = skip is not None and skip(part)
        if skipped:
            tables = ()
        elif batch_rows is not None and not (dedupe and _may_overlap(part, covered)):
            tables = part.read_batches(payload, batch_rows)
        else:
            t = part.read(payload)
            if dedupe:
                k = _overlap_prefix(part, t, covered)
                if k:
                    report(part, k)
                    t = t.slice(k)
            tables = (t,) if batch_rows is None or len(t) == 0 else \
                (t.slice(at, batch_rows) for at in range(0, len(t), batch_rows))
        given = False
        for t in tables:
            given = True
            yield part, _with_catalog(t, merged)
        if not given and not skipped:
            yield part, _with_catalog(part.read(payload), merged)   # (a file of no rows: its columns all the same)
        if part.meta and part.meta.get("end_lsn"):
            end = parse_lsn(part.meta["end_lsn"])
            covered = end if covered is None else max(covered, end)


def _may_overlap(part, covered_lsn) -> bool:
    """Whether a file may begin with rows an earlier one holds (:func:`_overlap_prefix`)."""
    return (covered_lsn is not None and bool(part.meta) and "start_lsn" in part.meta
            and parse_lsn(part.meta["start_lsn"]) < covered_lsn)


def archive_row(table, i: int) -> str:
    """The archive row ``i`` of ``table`` as a user finds it: its seq and lsn, else its index."""
    where = [f"{c} {table.column(c)[i].as_py()}" for c in ("seq", "lsn") if c in table.column_names]
    return ", ".join(where) or f"row {i}"
