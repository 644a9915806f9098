"""An archive's files read in one Python process, with pyarrow: the options of the
``pgoutput`` data source checked once (:class:`Config`), the files of a path
(:func:`list_files`), and the rows of a partition decoded as messages or change rows
(:class:`ArchiveRows`, what the batch reader of :mod:`.datasource` and the stream
reader of :mod:`.streamsource` share)."""

from __future__ import annotations

import csv
import fnmatch
import io
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import csv as pacsv
from pyarrow import fs
from pyspark.sql import types as T

from ..archive import FORMATS, hex_to_binary
from ..plan import ControlPlan, control_candidates
from ..transcode import Timeline, Transcoder, is_utf8
from . import types as ST
from .changetype import change_type, mapper_schema
from .functions import MessagesMapper, message_fields
from .mappers import ChangeMapper
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, check_mode
from .shipping import Held

__all__ = ["BATCH_ROWS", "SLOT_COLUMNS", "Config", "ArchiveRows", "list_files", "filesystem_of", "check_schema"]

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

    def layout(self):
        """(kept source columns, Spark output schema); for changes, the kept columns are
        the lsn column (or none)."""
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
            return ([lsn] if lsn else []), change_type(mode=self.mode if self.mode == PERMISSIVE else FAILFAST,
                                                       **opts)
        keep = self.keep if self.keep is not None else [n for n in schema.names if n != self.payload]
        missing = [k for k in keep if k not in schema.names]
        if missing:
            raise ValueError(f"pgoutput data source: keep: no column {missing} (columns: {schema.names})")
        reserved = set(ST.MESSAGE_FIELDS) | {ST.CORRUPT_RECORD}
        kept = [T.StructField(f"source_{k}" if k in reserved else k,
                              ST.spark_type(schema.field(k).type), True) for k in keep]
        return keep, T.StructType(kept + [ST.MESSAGE_TYPE[f] for f in self.fields])

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

