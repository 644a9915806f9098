"""Archives as Spark reads them: :func:`read_archive` (Spark's own Parquet/CSV readers),
``spark.read.format("pgoutput")`` and ``spark.readStream.format("pgoutput")`` (Python
data sources, PySpark >= 4.0), and :func:`register`, which gives the decoders their SQL
names in a session.

``read_archive``: archive files through Spark's own Parquet/CSV readers (splits,
pushdown, any Hadoop filesystem), decoded as messages (:func:`.messages.decode_messages`)
or change rows (:func:`.changes.decode_changes`); on PySpark 3.5 as on 4.x.

``register``: the column functions as SQL functions (``pgoutput_decode``,
``pgoutput_decode_permissive``, ``opengauss_decode``) and, on PySpark >= 4.0, the
``pgoutput`` data source.

The data sources read an archive's files in one Python process, with pyarrow: the
options checked once (:class:`Config`), the files of a path (:func:`list_files`), and
the rows of a partition decoded as messages or change rows (:class:`ArchiveRows`, what
the batch reader and the stream reader share).

``spark.read.format("pgoutput")``: a Python Data Source (PySpark >= 4.0) over archive
files of replication payloads (layouts: :mod:`pgoutput_codec.archive`; read with pyarrow).

    spark.read.format("pgoutput").option("format", "csv").load("/archive/slot1/")

Options:
- ``format``: "parquet" (default) or "csv";
- ``payload``: the payload column (default "data");
- ``keep``: comma-separated columns to keep (default: every other column of the archive;
  names that clash with a message field get ``source_``, e.g. ``source_lsn``);
- ``fields``: comma-separated message fields to give (default: all of them, as
  ``decode_messages(fields=)``). Spark never prunes a Python data source's columns, so a
  query that reads three fields should name them (docs/benchmarks.md: the data source,
  three fields against every field);
- ``output``: "messages" (default, one row per payload, the columns of
  ``decode_messages``) or "changes" (the committed change rows of
  ``pgoutput_codec.spark.decode_changes``: ``change_type()`` columns with
  ``commit_rank``; order by ``commit_rank``, ``seq`` for commit order). Arrival order is
  file order (sorted paths) then row index: ``seq`` = file index << 40 | row index, as
  ``decode_changes(df)`` without ``order_by`` — or, with option ``order_by`` (one
  integral column of the archive, e.g. ``seq`` as ``capture`` writes it), that column:
  the files' names then do not matter (a lake written by repeated Spark appends, whose
  part-file names sort in no useful order). An archive read out of order is refused
  (``ArchiveOrderError``, see ``replays``). The control plan (PROTOCOL's control
  messages, ~1% of rows, found by their tag byte) is built when the reader is created,
  on the driver, which reads the payload column of every file once for it (each
  partition then carries its own key range's part of it: ``ControlPlan.for_keys``): for
  lake-scale archives prefer ``decode_changes`` on the DataFrame, whose first pass runs
  on the executors. Change options: ``lsn`` (the lsn column, default "lsn" when present),
  ``tables``, ``after_lsn``/``until_lsn`` (commit-LSN window, ``X/Y`` or decimal),
  ``replays`` ("drop", default: a transaction received twice is given once and a file
  listed out of order raises ``ArchiveOrderError``; "keep": every commit as it comes),
  ``include_xids``/``include_timestamp``/``include_origin`` ("true"/"false");
  ``keep`` does not apply;
- ``encoding``: the client encoding the archive was captured under, when not UTF-8
  (``LATIN1``, ``EUC_JP``…): the payloads are rewritten as a UTF-8 session receives them
  (:mod:`pgoutput_codec.transcode`) before decoding; the driver reads the archive's
  state rows once for it (with the control plan's pass for ``changes``), and each
  partition carries the state for its key range (``Timeline.for_keys``); not for streams;
- ``mode``: FAILFAST (default) / PERMISSIVE / DROPMALFORMED; ``envelope``: auto/none/xlogdata;
- ``in_stream``: "true"/"false" state before each partition's first row (default: inferred);
- ``header`` (csv, default true; without one the columns are lsn, xid, data), ``sep`` (csv,
  default ","; "\t" for COPY text format);
- ``max_rows_per_trigger``: streams only (``spark.readStream.format("pgoutput")``, whose
  offsets are checkpoints: below).

Partitions: one per Parquet row group, one per CSV file; the stream state is inferred at
the start of each and carried through it. The path is a file, a directory (every file in
it not starting with '.' or '_', recursively) or a glob; any pyarrow filesystem URI.

Why a data source and not only ``read_archive``: it is the reader users know
(``spark.read.format``), usable from SQL and any language binding, and it owns the
schema, so nothing of Spark's CSV/Parquet options leaks in. On PySpark 3.5 (no Python
data sources) ``read_archive`` gives the same rows.

``spark.readStream.format("pgoutput")``: the data source as a stream over a lake that
grows (PySpark >= 4.0).

    (spark.readStream.format("pgoutput")
        .options(output="changes", order_by="seq")
        .load("/lake/slot1/")
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", "/chk/slot1")
        .toTable("cdc.slot1_changes"))

Why a stream: a lake of archived payloads grows by files every day, and each day's run
must give the changes not given before — exactly once, even when a run fails half way.
The batch API does it with a :class:`~pgoutput_codec.changes.checkpoint.Checkpoint` the user
keeps (``decode_changes(resume=)``, ``checkpoint_of``); here Spark keeps it: a stream
offset *is* a checkpoint, written to the query's offset log before the micro-batch runs
and committed with its sink, so a failed run is redone from the same offset and a
finished one is never read again.

The contract:

- ``order_by`` (required): an integral column of the archive that keeps rising as the
  lake grows (``capture``'s ``seq``). Offsets are its values; file names and listing
  order do not matter. Parquet archives only (a CSV export has no such column: read it
  with ``spark.read``).
- Files land with keys above every key already read. A file that lands with keys at or
  below what an earlier micro-batch read past would be lost: the stream counts the rows
  at or below its offset and fails on a rise (``ArchiveOrderError``) instead. Deleting
  old files (retention) is fine; rewriting files in place (compaction) is not.
- ``output="changes"``: each micro-batch gives the changes of the transactions committed
  in its rows, none twice (the offset's checkpoint: rows are read from the first row of
  a transaction still open, e.g. a big streamed one, and the Relations in force come
  with it). ``commit_rank`` rises across micro-batches (each offset's checkpoint carries
  where the next one's ranks start): ``(commit_rank, seq)`` orders the whole stream.
  ``output="messages"``: the rows of each micro-batch, decoded.
- ``max_rows_per_trigger``: the most archive rows a micro-batch reads (PySpark >= 4.2;
  ``Trigger.AvailableNow`` then runs several micro-batches). Rows read again for an open
  transaction do not count.
- PERMISSIVE: a malformed row is given once, by the micro-batch that read it first.

The driver side (``latestOffset``) reads the ``order_by`` column of the row groups that
may hold new rows (their Parquet statistics say which; footers are cached) and, for
changes, builds the micro-batch's control plan from the control rows between the
checkpoint's ``from_key`` and the new offset, as ``decode_changes(resume=)`` does. The
plan travels to the executors inside the partitions (Spark creates a new reader for
them, without this one's state), each carrying its row group's key range's part of it
(``ControlPlan.for_keys``), so a micro-batch ships about one plan whatever its number of
partitions. The driver still plans each micro-batch in one process: keep micro-batches
to what it plans in seconds.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import csv as pacsv
from pyarrow import fs
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..archive import FORMATS, hex_to_binary
from ..changes.checkpoint import Checkpoint
from ..errors import ArchiveOrderError
from ..changes import ControlPlan, control_candidates
from ..transcode import Timeline, Transcoder, is_utf8
from . import types as ST
from ..typecatalog.catalog import read_catalog
from .archiverows import FILE_BITS
from .catalogs import CATALOG_FIELD, catalog_metadata, files_catalog
from .changerows import ChangeMapper, change_type, mapper_schema
from .changes import decode_changes
from .messages import MessagesMapper, decode_messages, message_fields, opengauss_udf, pgoutput_udf
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, check_mode
from .shipping import Held, check_workers

try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    HAS_DATASOURCE = True
except ImportError:  # PySpark < 4.0
    HAS_DATASOURCE = False
    DataSource = DataSourceReader = DataSourceStreamReader = InputPartition = object
try:   # PySpark >= 4.2: read limits, Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
    _AVAILABLE_NOW = (SupportsTriggerAvailableNow,)
except ImportError:
    ReadAllAvailable = ReadMaxRows = None
    _AVAILABLE_NOW = ()

__all__ = ["read_archive", "register", "HAS_DATASOURCE", "PgoutputDataSource", "PgoutputStreamReader",
           "BATCH_ROWS", "SLOT_COLUMNS", "Config", "ArchiveRows", "list_files", "filesystem_of", "check_schema"]


# --------------------------------------------------------------------------- an archive's files in one process

#: rows per Arrow batch handed to Spark
BATCH_ROWS = 8192
#: pg_logical_slot_get_binary_changes column order, for CSV files without a header
SLOT_COLUMNS = ("lsn", "xid", "data")


def filesystem_of(path):
    if "://" in path:
        return fs.FileSystem.from_uri(path)
    return fs.LocalFileSystem(), os.path.abspath(path)


def list_files(path: str):
    """(filesystem, sorted file paths) for a file, directory or glob."""
    filesystem, p = filesystem_of(path)
    if any(ch in p for ch in "*?["):
        base = p[: min(p.find(ch) for ch in "*?[" if ch in p)].rsplit("/", 1)[0] or "/"
        infos = filesystem.get_file_info(fs.FileSelector(base, recursive=True))
        files = [i.path for i in infos if i.type == fs.FileType.File and fnmatch.fnmatch(i.path, p)]
    else:
        info = filesystem.get_file_info(p)
        if info.type == fs.FileType.File:
            files = [p]
        elif info.type == fs.FileType.Directory:
            infos = filesystem.get_file_info(fs.FileSelector(p, recursive=True))
            files = [i.path for i in infos if i.type == fs.FileType.File
                     and not i.base_name.startswith((".", "_"))]
        else:
            raise FileNotFoundError(f"pgoutput data source: no such file or directory: {path}")
    if not files:
        raise FileNotFoundError(f"pgoutput data source: no files at {path}")
    return filesystem, sorted(files)


def _opt(options, name, default=None):
    v = options.get(name)
    return default if v is None else v


def _bool(v):
    return str(v).strip().lower() in ("true", "1", "yes")


class Config:
    """The options, checked once on the driver (errors surface at ``load()``)."""

    def __init__(self, options):
        if "path" not in options:
            raise ValueError("pgoutput data source: give a path, spark.read.format('pgoutput').load(path)")
        self.path = options["path"]
        self.format = _opt(options, "format", "parquet").lower()
        if self.format not in FORMATS:
            raise ValueError(f"pgoutput data source: format must be one of {FORMATS}, got {self.format!r}")
        self.payload = _opt(options, "payload", "data")
        self.output = _opt(options, "output", "messages").lower()
        if self.output not in ("messages", "changes"):
            raise ValueError(f"pgoutput data source: output must be 'messages' or 'changes', got {self.output!r}")
        self.mode = check_mode(_opt(options, "mode", FAILFAST))
        self.envelope = _opt(options, "envelope", "auto")
        st = options.get("in_stream")
        self.in_stream = None if st is None else _bool(st)
        self.header = _bool(_opt(options, "header", "true"))
        sep = _opt(options, "sep", ",")
        self.sep = "\t" if sep in ("\\t", "tab") else sep
        keep = options.get("keep")
        self.keep = None if keep is None else [k.strip() for k in keep.split(",") if k.strip()]
        if self.output == "changes" and options.get("fields") is not None:
            raise ValueError("pgoutput data source: fields applies to output='messages'; "
                             "select the change columns after load()")
        self.fields = message_fields(options.get("fields"), self.mode)
        self.lsn = options.get("lsn")
        self.order_by = options.get("order_by") or None
        self.max_rows = options.get("max_rows_per_trigger")
        if self.max_rows is not None:
            self.max_rows = int(self.max_rows)
            if self.max_rows < 1:
                raise ValueError(f"pgoutput data source: max_rows_per_trigger must be >= 1, got {self.max_rows}")
        self.change_options = {k: _bool(options[k]) for k in ("include_xids", "include_timestamp",
                                                              "include_origin") if k in options}
        for k in ("tables", "after_lsn", "until_lsn", "replays"):
            if options.get(k):
                self.change_options[k] = options[k]
        self.encoding = options.get("encoding") or None
        self.catalog_file = options.get("catalog") or None
        if self.catalog_file is not None and self.output != "changes":
            raise ValueError("pgoutput data source: catalog applies to output='changes'")
        if self.encoding is not None:
            try:
                if is_utf8(self.encoding):
                    self.encoding = None
            except ValueError as e:
                raise ValueError(f"pgoutput data source: encoding: {e}") from None
        # FAILFAST stops at a payload the transcoder cannot rewrite; the other modes leave
        # it as sent, for the decoder to judge as the malformed row it is
        self.transcode_errors = "strict" if self.mode == FAILFAST else "keep"

    def archive_schema(self):
        """Arrow schema of the archive's columns (from the first file)."""
        filesystem, files = list_files(self.path)
        if self.format == "parquet":
            return pq.read_schema(files[0], filesystem=filesystem)
        return pa.schema([(n, pa.string()) for n in self.csv_columns(filesystem, files[0])])

    def csv_columns(self, filesystem, path):
        if not self.header:
            return list(SLOT_COLUMNS)
        with filesystem.open_input_stream(path) as f:
            first = f.read(1 << 16).decode("utf-8", "replace").splitlines()[:1]
        return next(csv.reader(io.StringIO(first[0] if first else ""), delimiter=self.sep), [])

    def layout(self, catalog: bool = False):
        """(kept source columns, Spark output schema); for changes, the kept columns are
        the lsn column (or none). ``catalog``: the changes' ``columns`` field carries the
        archive's type catalog (:meth:`catalog`)."""
        schema = self.archive_schema()
        if self.payload not in schema.names:
            raise ValueError(f"pgoutput data source: payload column {self.payload!r} not in the archive "
                             f"(columns: {schema.names})")
        self.check_order_by(schema)
        if self.output == "changes":
            lsn = self.lsn if self.lsn is not None else ("lsn" if "lsn" in schema.names else None)
            if lsn is not None and lsn not in schema.names:
                raise ValueError(f"pgoutput data source: lsn column {lsn!r} not in the archive "
                                 f"(columns: {schema.names})")
            opts = {k: v for k, v in self.change_options.items() if k.startswith("include_")}
            out = change_type(mode=self.mode if self.mode == PERMISSIVE else FAILFAST, **opts)
            cat = self.catalog() if catalog else None
            if cat is not None:
                out = T.StructType([T.StructField(f.name, f.dataType, f.nullable, catalog_metadata(cat, f.metadata))
                                    if f.name == CATALOG_FIELD else f for f in out.fields])
            return ([lsn] if lsn else []), out
        keep = self.keep if self.keep is not None else [n for n in schema.names if n != self.payload]
        missing = [k for k in keep if k not in schema.names]
        if missing:
            raise ValueError(f"pgoutput data source: keep: no column {missing} (columns: {schema.names})")
        reserved = set(ST.MESSAGE_FIELDS) | {ST.CORRUPT_RECORD}
        kept = [T.StructField(f"source_{k}" if k in reserved else k,
                              ST.spark_type(schema.field(k).type), True) for k in keep]
        return keep, T.StructType(kept + [ST.MESSAGE_TYPE[f] for f in self.fields])

    def catalog(self):
        """The archive's type catalog: its Parquet files' footers merged, and option
        ``catalog``'s file (footers only, read on the driver); None when neither has one."""
        found = None
        if self.format == "parquet":
            filesystem, files = list_files(self.path)
            found = files_catalog(files, filesystem)
        if self.catalog_file is not None:
            given = read_catalog(self.catalog_file)
            found = given if found is None else found.merge(given)
        return found

    def check_order_by(self, schema):
        if self.order_by is None:
            return
        if self.order_by not in schema.names:
            raise ValueError(f"pgoutput data source: order_by column {self.order_by!r} not in the "
                             f"archive (columns: {schema.names})")
        t = schema.field(self.order_by).type
        if not (pa.types.is_integer(t) or pa.types.is_string(t) and self.format == "csv"):
            raise ValueError(f"pgoutput data source: order_by column {self.order_by!r} must be "
                             f"integral, not {t}")


class ArchiveRows:
    """Reading an archive's rows: what the batch and the stream reader share
    (``self.config``, ``self.keep``)."""

    def _payloads(self, batch):
        """The payload column of a batch as binary (CSV: ``\\x`` hex text; bad hex: null,
        an error row later)."""
        col = batch.column(0)
        if self.config.format == "csv":
            col = hex_to_binary(col)[0]
        return col if pa.types.is_binary(col.type) else col.cast(pa.binary())

    def _keyed(self, partition, columns, recode=None):
        """(payloads, arrival-order keys, batch) of a partition's batches of ``columns``: the
        ``order_by`` column's values, or the partition's first key plus the row index.
        ``recode``: a Transcoder (option ``encoding``) the payloads go through."""
        cfg = self.config
        row = partition.base
        extra = [cfg.order_by] if cfg.order_by is not None and cfg.order_by not in columns else []
        for b in self._batches(partition, columns=[*columns, *extra]):
            p = self._payloads(b)
            if cfg.order_by is None:
                key = np.arange(row, row + len(p), dtype=np.int64)
            else:
                col = b.column(b.schema.get_field_index(cfg.order_by))
                if col.null_count:
                    raise ValueError(f"pgoutput data source: order_by column {cfg.order_by!r} is null in "
                                     f"{partition.path}")
                key = col.cast(pa.int64()).to_numpy(zero_copy_only=False)
            row += len(p)
            if recode is not None:
                p = recode.keyed(p, key)
            yield p, key, b

    def _batches(self, partition, columns=None):
        cfg = self.config
        filesystem, _ = filesystem_of(cfg.path)
        columns = columns or [cfg.payload, *self.keep]
        if cfg.format == "parquet":
            pf = pq.ParquetFile(partition.path, filesystem=filesystem)
            rgs = None if partition.row_group is None else [partition.row_group]
            for b in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=rgs, columns=columns):
                yield pa.RecordBatch.from_arrays([b.column(c) for c in columns], names=columns)
            return
        names = cfg.csv_columns(filesystem, partition.path)
        reader = pacsv.open_csv(
            filesystem.open_input_stream(partition.path),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1 if cfg.header else 0,
                                           block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter=cfg.sep, double_quote=True),
            convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                 include_columns=columns, strings_can_be_null=True,
                                                 null_values=["", "\\N"], quoted_strings_can_be_null=False))
        for b in reader:
            for i in range(0, b.num_rows, BATCH_ROWS):
                s = b.slice(i, BATCH_ROWS)
                yield pa.RecordBatch.from_arrays([s.column(c) for c in columns], names=columns)

    def _control_plan(self, keyed, resume=None, plan=True):
        """Pass 1 in this process: the control plan of the rows ``keyed`` gives
        ((payloads, keys, batch), in arrival order), from the checkpoint ``resume``.
        With option ``encoding`` the control rows are rewritten first (``self.timeline``
        is built from them: they hold every state row)."""
        cfg = self.config
        payloads, keys = [], []
        for p, key, _ in keyed:
            mask = control_candidates(p, envelope=cfg.envelope)
            if mask.any():
                payloads.append(p.filter(pa.array(mask)))
                keys.append(key[mask])
        values = pa.concat_arrays(payloads) if payloads else pa.array([], pa.binary())
        order = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        if cfg.encoding is not None:
            self.timeline = self._timeline_of(values, order)
            if not plan:          # output='messages': the timeline alone
                return None
            values = self._transcoder(self.timeline).keyed(values, order)
        return ControlPlan.build(values, order, envelope=cfg.envelope, in_stream=cfg.in_stream, resume=resume,
                                 errors="raise" if cfg.mode == FAILFAST else "collect", **cfg.change_options)

    def _timeline_of(self, values, keys):
        cfg = self.config
        return Timeline.build(values, keys, cfg.encoding, envelope=cfg.envelope, in_stream=cfg.in_stream,
                              errors=cfg.transcode_errors)

    def _transcoder(self, timeline):
        cfg = self.config
        return Transcoder(cfg.encoding, envelope=cfg.envelope, timeline=timeline, errors=cfg.transcode_errors)

    def _messages(self, batches):
        """Batches of (payload, kept columns...) decoded: the output rows."""
        cfg = self.config
        keep_names = [f.name for f in self.out_schema.fields[: len(self.keep)]]
        mapper = MessagesMapper(self.out_schema, keep_names, cfg.envelope, cfg.in_stream,
                                 cfg.mode, cfg.format == "csv", cfg.fields)
        yield from mapper(batches)

    def _changes(self, plan, keyed, after=None):
        """Pass 2 for one partition: the rows ``keyed`` gives ((payloads, keys, batch of
        payload and kept columns)), through the same mapper as ``decode_changes`` on a
        DataFrame. ``after``: an order key whose rows' errors were given before (rows
        read again for a transaction still open)."""
        cfg = self.config
        has_lsn = bool(self.keep)
        mapper = ChangeMapper(Held(plan), mapper_schema(cfg.change_options, cfg.mode), cfg.mode, has_lsn, False)

        def batches():
            for p, key, b in keyed:
                cols = [p, pa.array(key, pa.int64())] + ([b.column(self.keep[0])] if has_lsn else [])
                yield pa.RecordBatch.from_arrays(cols, names=["payload", "key"] + (["lsn"] if has_lsn else []))

        names = self.out_schema.names
        for out in mapper(batches()):
            if cfg.mode == DROPMALFORMED:
                out = out.filter(pc.is_null(out.column("error")))
            elif cfg.mode == PERMISSIVE and after is not None:
                out = out.filter(pc.or_(pc.is_null(out.column("error")),
                                        pc.greater(out.column("seq"), pa.scalar(after, pa.int64()))))
            yield pa.RecordBatch.from_arrays([out.column(n) for n in names], names=names)


def check_schema(schema, out_schema):
    if [f.name for f in schema.fields] != [f.name for f in out_schema.fields]:
        raise ValueError("pgoutput data source: a user-given schema is not supported; "
                         "select the columns you need after load()")


# --------------------------------------------------------------------------- the stream reader

#: The offset before any row.
_BEFORE_ALL = int(np.iinfo(np.int64).min)


class _Group:
    """A Parquet row group of the archive: its rows and the ``order_by`` range it holds."""

    __slots__ = ("path", "row_group", "rows", "lo", "hi")

    def __init__(self, path, row_group, rows, lo, hi):
        self.path, self.row_group, self.rows, self.lo, self.hi = path, row_group, rows, lo, hi


class _StreamPartition(InputPartition):
    """The rows of one row group with ``lo <= key <= hi``; ``after``: the micro-batch's
    start offset (error rows at or below it were given before); ``plan``: the control
    plan (changes) or None (messages)."""

    def __init__(self, path, row_group, lo, hi, after, plan):
        self.path, self.row_group, self.lo, self.hi, self.after, self.plan = path, row_group, lo, hi, after, plan
        self.base = 0


def _offset_key(offset) -> tuple:
    return offset["key"], json.dumps(offset.get("checkpoint"), sort_keys=True)


class PgoutputStreamReader(ArchiveRows, DataSourceStreamReader, *_AVAILABLE_NOW):
    """See the module docstring. Offsets: ``key`` (the last ``order_by`` value read),
    ``rows`` (archive rows with a key at or below it, when it was reached) and, for
    changes, ``checkpoint`` (the :class:`Checkpoint` there, as JSON)."""

    def __init__(self, config, schema):
        if config.format != "parquet":
            raise ValueError("pgoutput stream: Parquet archives only (a CSV export has no column that "
                             "keeps rising: read it with spark.read)")
        if config.order_by is None:
            raise ValueError("pgoutput stream: give order_by, an integral column that keeps rising as the "
                             "lake grows (capture's seq): offsets are its values")
        self.config = config
        self.keep, self.out_schema = config.layout()
        check_schema(schema, self.out_schema)
        self._footers = {}    # path -> (size, [_Group]): files of a lake do not change
        self._plans = {}      # (start offset, end key) -> ControlPlan, from latestOffset to partitions
        self._last = None     # the newest offset seen (latestOffset() without a start: PySpark < 4.2)
        self._target = None   # Trigger.AvailableNow: the last key this query reads

    # ---- the archive's row groups and keys ------------------------------------------

    def _groups(self) -> list:
        filesystem, files = list_files(self.config.path)
        groups = []
        for f, info in zip(files, filesystem.get_file_info(files), strict=True):
            cached = self._footers.get(f)
            if cached is None or cached[0] != info.size:
                pf = pq.ParquetFile(f, filesystem=filesystem)
                meta = pf.metadata
                col = meta.schema.to_arrow_schema().get_field_index(self.config.order_by)
                found = []
                for rg in range(meta.num_row_groups):
                    st = meta.row_group(rg).column(col).statistics
                    if st is not None and st.has_min_max and st.null_count == 0:
                        lo, hi = int(st.min), int(st.max)
                    else:   # no statistics (or nulls, refused when read): the column says
                        k = pf.read_row_group(rg, columns=[self.config.order_by]).column(0)
                        if k.null_count:
                            raise ValueError(f"pgoutput stream: order_by column {self.config.order_by!r} is "
                                             f"null in {f}")
                        lo, hi = (int(pc.min(k).as_py()), int(pc.max(k).as_py())) if len(k) else (0, -1)
                    found.append(_Group(f, rg, meta.row_group(rg).num_rows, lo, hi))
                cached = self._footers[f] = (info.size, found)
            groups.extend(g for g in cached[1] if g.rows)
        return groups

    def _keys(self, groups) -> np.ndarray:
        """The ``order_by`` values of ``groups``, one array."""
        filesystem, _ = filesystem_of(self.config.path)
        out = [pq.ParquetFile(g.path, filesystem=filesystem).read_row_group(g.row_group, columns=[self.config.order_by])
               .column(0).cast(pa.int64()).to_numpy() for g in groups]
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    # ---- offsets --------------------------------------------------------------------

    def initialOffset(self):
        off = {"key": _BEFORE_ALL, "rows": 0}
        if self.config.output == "changes":
            off["checkpoint"] = None
        return off

    def latestOffset(self, start=None, limit=None):
        start = start if start is not None else (self._last or self.initialOffset())
        groups = self._groups()
        after = start["key"]
        newer = [g for g in groups if g.hi > after]
        keys = self._keys(newer)
        # a row that lands at or below a key already read past would never be read
        now = sum(g.rows for g in groups if g.hi <= after) + int((keys <= after).sum())
        if now > start["rows"]:
            raise ArchiveOrderError(
                f"pgoutput stream: {now - start['rows']} row(s) landed with {self.config.order_by} at or below "
                f"{after}, which an earlier micro-batch read past: they would be lost (files must land with keys "
                "above every key already read; rewrite the stream's source from its start to take them)")
        new = np.sort(keys[keys > after])
        if self._target is not None:
            new = new[new <= self._target]
        max_rows = limit.max_rows if ReadMaxRows is not None and isinstance(limit, ReadMaxRows) else None
        if max_rows is not None and len(new) > max_rows:
            new = new[: np.searchsorted(new, new[max_rows - 1], side="right")]   # a key's rows stay together
        if not len(new):
            self._last = start
            return start
        end = int(new[-1])
        off = {"key": end, "rows": now + len(new)}
        if self.config.output == "changes":
            plan = self._plan(start, end, groups)
            off["checkpoint"] = json.loads(plan.checkpoint().to_json())
        self._last = off
        return off

    def getDefaultReadLimit(self):
        if self.config.max_rows is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.config.max_rows)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self):
        groups = self._groups()
        self._target = max((g.hi for g in groups), default=_BEFORE_ALL)

    def commit(self, end):
        self._last = end
        self._plans = {k: v for k, v in self._plans.items() if k[0][0] >= end["key"]}

    # ---- micro-batches --------------------------------------------------------------

    def _low(self, start) -> int:
        """The first key a micro-batch from ``start`` reads: the checkpoint's ``from_key``
        (changes: rows of transactions still open are read again) or the next key."""
        if self.config.output == "changes":
            cp = start.get("checkpoint")
            return Checkpoint.of(cp).from_key if cp is not None else _BEFORE_ALL
        return start["key"] + 1

    def _between(self, groups, start, end, plan=None) -> list:
        """The partitions of a micro-batch from offset ``start`` to key ``end``: the row
        groups holding keys from :meth:`_low` to ``end``."""
        lo = self._low(start)
        return [_StreamPartition(g.path, g.row_group, lo, end, start["key"],
                                 None if plan is None else plan.for_keys(max(lo, g.lo), min(end, g.hi)))
                for g in groups if g.hi >= lo and g.lo <= end]

    def _plan(self, start, end, groups):
        """The control plan of the rows from ``start``'s checkpoint to key ``end``."""
        got = self._plans.get((_offset_key(start), end))
        if got is None:
            payload = [self.config.payload]
            cp = start.get("checkpoint")
            rows = (r for part in self._between(groups, start, end) for r in self._window(part, payload))
            got = self._control_plan(rows, resume=None if cp is None else Checkpoint.of(cp))
            self._plans[(_offset_key(start), end)] = got
        return got

    def partitions(self, start, end):
        if start["key"] == end["key"]:
            return []
        groups = self._groups()
        plan = None
        if self.config.output == "changes":
            plan = self._plan(start, end["key"], groups)
            if json.loads(plan.checkpoint().to_json()) != end["checkpoint"]:
                # a plan rebuilt after a restart must end where the offset log says
                raise ArchiveOrderError(f"pgoutput stream: the archive's rows up to {self.config.order_by} "
                                        f"{end['key']} are not those the offset was planned from (files "
                                        "rewritten or landed late)")
        return self._between(groups, start, end["key"], plan)

    def _window(self, partition, columns):
        """(payloads, keys, batch) of the partition's rows with ``lo <= key <= hi``."""
        for p, key, b in self._keyed(partition, columns):
            inside = (key >= partition.lo) & (key <= partition.hi)
            if inside.all():
                yield p, key, b
            elif inside.any():
                m = pa.array(inside)
                yield p.filter(m), key[inside], b.filter(m)

    def read(self, partition):
        columns = [self.config.payload, *self.keep]
        rows = self._window(partition, columns)
        if partition.plan is not None:   # errors of rows read again were given before
            yield from self._changes(partition.plan, rows, after=partition.after)
        else:
            yield from self._messages(pa.RecordBatch.from_arrays([p, *[b.column(c) for c in self.keep]], names=columns)
                                      for p, _, b in rows)


# --------------------------------------------------------------------------- the batch reader

class _Partition(InputPartition):
    def __init__(self, path, row_group=None, base=0, plan=None):
        # base: arrival-order key of the partition's first row (file index << 40 | row index);
        # plan (changes): the control plan for the partition's key range (ControlPlan.for_keys);
        # timeline (option encoding): the transcoding state for it (Timeline.for_keys)
        self.path, self.row_group, self.base, self.plan = path, row_group, base, plan
        self.timeline = None


class PgoutputDataSource(DataSource):
    """``spark.read.format("pgoutput")``; see the module docstring for options."""

    @classmethod
    def name(cls):
        return "pgoutput"

    def schema(self):
        return Config(self.options).layout(catalog=True)[1]

    def reader(self, schema):
        return _PgoutputReader(Config(self.options), schema)

    def streamReader(self, schema):
        config = Config(self.options)
        if config.encoding is not None:
            raise ValueError("pgoutput data source: encoding is for spark.read (a stream's micro-batches do not "
                             "see the state rows before them); rewrite the archive once (transcode)")
        return PgoutputStreamReader(config, schema)


class _PgoutputReader(ArchiveRows, DataSourceReader):
    def __init__(self, config, schema):
        self.config = config
        if config.order_by is not None and config.output != "changes":
            raise ValueError("pgoutput data source: order_by applies to output='changes' "
                             "(and to streams: spark.readStream)")
        self.keep, self.out_schema = config.layout()
        # one listing for the plan and the partitions: a file that lands in between
        # would have rows the plan never saw
        self.files = list_files(config.path)[1]
        check_schema(schema, self.out_schema)
        # Built here, when the reader is made (its errors surface at load()), and kept out
        # of the pickled reader (__getstate__): Spark pickles the reader for every task,
        # so each partition carries its own key range's part of the plan instead.
        self._plan_here()

    def _plan_here(self):
        """Pass 1 in this process when the partitions need it: the control plan (output
        'changes'), the transcoding timeline (option ``encoding``: output 'messages'
        needs it alone), and the order-key range each partition holds."""
        cfg = self.config
        self._ranges = {}   # (path, row group) -> (lowest, highest) order key, from pass 1
        self.timeline = self.plan = None
        if cfg.output == "changes" or cfg.encoding is not None:
            self.plan = self._build_plan(plan=cfg.output == "changes")

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("plan", "_ranges", "timeline")}

    def _parts(self):
        filesystem, files = filesystem_of(self.config.path)[0], self.files
        if self.config.format == "csv":
            return [_Partition(f, None, i << FILE_BITS) for i, f in enumerate(files)]
        parts = []
        for i, f in enumerate(files):
            meta = pq.ParquetFile(f, filesystem=filesystem).metadata
            start = 0
            for rg in range(meta.num_row_groups):
                parts.append(_Partition(f, rg, (i << FILE_BITS) + start))
                start += meta.row_group(rg).num_rows
        return parts or [_Partition(files[0], None, 0)]

    def partitions(self):
        parts = self._parts()
        cfg = self.config
        if cfg.output == "changes" or cfg.encoding is not None:
            if not hasattr(self, "_ranges"):
                self._plan_here()   # a reader unpickled: plan again
            for p in parts:
                lo, hi = self._ranges.get((p.path, p.row_group), (0, -1))
                if cfg.output == "changes":
                    p.plan = self.plan.for_keys(lo, hi)
                if cfg.encoding is not None:
                    p.timeline = self.timeline.for_keys(lo, hi)
        return parts

    def _build_plan(self, plan=True):
        """Pass 1 on the driver: the control candidates of every partition, in order; and
        the order-key range each partition holds. ``plan=False``: the transcoding timeline
        alone (option ``encoding``, output 'messages')."""
        payload = [self.config.payload]

        def rows():
            for part in self._parts():
                lo = hi = None
                for p, key, b in self._keyed(part, payload):
                    if len(key):
                        lo = int(key.min()) if lo is None else min(lo, int(key.min()))
                        hi = int(key.max()) if hi is None else max(hi, int(key.max()))
                    yield p, key, b
                self._ranges[(part.path, part.row_group)] = (0, -1) if lo is None else (lo, hi)

        return self._control_plan(rows(), plan=plan)

    def read(self, partition):
        cfg = self.config
        recode = None if cfg.encoding is None else self._transcoder(partition.timeline)
        if cfg.output == "changes":
            yield from self._changes(partition.plan, self._keyed(partition, [cfg.payload, *self.keep], recode))
        elif recode is None:
            yield from self._messages(self._batches(partition))
        else:
            columns = [cfg.payload, *self.keep]
            yield from self._messages(
                pa.RecordBatch.from_arrays([p, *[b.column(c) for c in self.keep]], names=columns)
                for p, _, b in self._keyed(partition, columns, recode))


# --------------------------------------------------------------------------- read_archive and register

def read_archive(spark, path, *, format: str = "parquet", payload: str = "data", output: str = "messages",
                 keep=None, mode: str = FAILFAST, envelope: str = "auto", in_stream=None,
                 observation=None, header: bool = True, sep: str = ",", **change_options) -> DataFrame:
    """Read archive files (layouts: :mod:`pgoutput_codec.archive`) and decode them: the
    same rows as ``spark.read.format("pgoutput")`` (PySpark >= 4.0), through Spark's own
    Parquet/CSV readers, so it works on 3.5. ``keep`` defaults to every non-payload
    column. ``output``: "messages" (``decode_messages``) or "changes"
    (``decode_changes`` with its default ordering; ``change_options`` go to it:
    ``order_by``, ``tables``, ``replays``…)."""
    if output not in ("messages", "changes"):
        raise ValueError(f"output must be 'messages' or 'changes', got {output!r}")
    if change_options and output != "changes":
        raise ValueError(f"{sorted(change_options)}: options of output='changes'")
    if format == "parquet":
        df = spark.read.parquet(*([path] if isinstance(path, str) else path))
        hex_text = False
    elif format == "csv":
        df = (spark.read.option("header", header).option("sep", sep).option("escape", '"')
              .option("inferSchema", False).csv(path))
        hex_text = True
    else:
        raise ValueError(f"format must be 'parquet' or 'csv', got {format!r}")
    if payload not in df.columns:
        raise ValueError(f"payload column {payload!r} not in the archive (columns: {df.columns})")
    if output == "changes":
        if hex_text:  # bytea hex text → binary on the JVM; bad text → null → an error row
            df = df.withColumn(payload, F.unhex(F.regexp_replace(F.col(f"`{payload}`"), r"^\\?\\x", "")))
        return decode_changes(df, payload=payload, mode=mode, envelope=envelope, observation=observation,
                              **change_options)
    if keep is None:
        keep = [c for c in df.columns if c != payload]
    return decode_messages(df, payload=payload, keep=keep, mode=mode, envelope=envelope,
                           in_stream=in_stream, observation=observation,
                           payload_format="hex" if hex_text else "binary")


def register(spark) -> None:
    """Register for SQL: ``pgoutput_decode(payload)`` (FAILFAST),
    ``pgoutput_decode_permissive(payload)``, ``opengauss_decode(payload)`` ('b' style,
    array of records), and, on PySpark >= 4.0, the ``pgoutput`` data source."""
    check_workers(spark)
    spark.udf.register("pgoutput_decode", pgoutput_udf())
    spark.udf.register("pgoutput_decode_permissive", pgoutput_udf(mode=PERMISSIVE))
    spark.udf.register("opengauss_decode", opengauss_udf())
    if HAS_DATASOURCE:
        spark.dataSource.register(PgoutputDataSource)
