"""``spark.read.format("pgoutput")``: a Python Data Source (PySpark >= 4.0) over archive
files of replication payloads (layouts: :mod:`.archive`).

    spark.read.format("pgoutput").option("format", "csv").load("/archive/slot1/")

Options:
- ``format``: "parquet" (default) or "csv";
- ``payload``: the payload column (default "data");
- ``keep``: comma-separated columns to keep (default: every other column of the archive;
  names that clash with a message field get ``source_``, e.g. ``source_lsn``);
- ``output``: "messages" (default, one row per payload, the columns of
  ``decode_messages``); "changes" raises NotImplementedError pointing to
  ``read_archive(..., output="changes")``: the change decoder plans over the control rows
  of the whole archive on the driver first, which a data source reader cannot do;
- ``mode``: FAILFAST (default) / PERMISSIVE / DROPMALFORMED; ``envelope``: auto/none/xlogdata;
- ``in_stream``: "true"/"false" state before each partition's first row (default: inferred);
- ``header`` (csv, default true; without one the columns are lsn, xid, data), ``sep`` (csv,
  default ","; "\\t" for COPY text format).

Partitions: one per Parquet row group, one per CSV file; the stream state is inferred at
the start of each and carried through it. The path is a file, a directory (every file in
it not starting with '.' or '_', recursively) or a glob; any pyarrow filesystem URI.

Why a data source and not only ``read_archive``: it is the reader users know
(``spark.read.format``), usable from SQL and any language binding, and it owns the
schema, so nothing of Spark's CSV/Parquet options leaks in. On PySpark 3.5 (no Python
data sources) ``read_archive`` gives the same rows.
"""

from __future__ import annotations

import csv
import fnmatch
import io

import pyarrow as pa
from pyspark.sql import types as T

from . import types as ST
from .archive import FORMATS
from .modes import FAILFAST, check_mode

try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    HAS_DATASOURCE = True
except ImportError:  # PySpark < 4.0
    HAS_DATASOURCE = False
    DataSource = DataSourceReader = InputPartition = object

__all__ = ["HAS_DATASOURCE", "PgoutputDataSource", "list_files", "BATCH_ROWS"]

#: rows per Arrow batch handed to Spark
BATCH_ROWS = 8192
#: pg_logical_slot_get_binary_changes column order, for CSV files without a header
SLOT_COLUMNS = ("lsn", "xid", "data")


def _fs(path):
    from pyarrow import fs
    if "://" in path:
        return fs.FileSystem.from_uri(path)
    import os
    return fs.LocalFileSystem(), os.path.abspath(path)


def list_files(path: str):
    """(filesystem, sorted file paths) for a file, directory or glob."""
    from pyarrow import fs
    filesystem, p = _fs(path)
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


class _Partition(InputPartition):
    def __init__(self, path, row_group=None):
        self.path, self.row_group = path, row_group


def _opt(options, name, default=None):
    v = options.get(name)
    return default if v is None else v


def _bool(v):
    return str(v).strip().lower() in ("true", "1", "yes")


class _Config:
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
        if self.output == "changes":
            # The change decoder needs a plan built on the driver from the control rows of
            # the whole archive before any partition is decoded: a second pass that a
            # DataSourceReader cannot make.
            raise NotImplementedError(
                "pgoutput data source: output='changes' is not available from the data source "
                "(the change decoder plans over the whole archive first); use "
                "pgoutput_codec.spark.read_archive(spark, path, output='changes') or "
                "pgoutput_codec.spark.changes.decode_changes on the archive DataFrame")
        if self.output != "messages":
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

    def archive_schema(self):
        """Arrow schema of the archive's columns (from the first file)."""
        filesystem, files = list_files(self.path)
        if self.format == "parquet":
            import pyarrow.parquet as pq
            return pq.read_schema(files[0], filesystem=filesystem)
        return pa.schema([(n, pa.string()) for n in self.csv_columns(filesystem, files[0])])

    def csv_columns(self, filesystem, path):
        if not self.header:
            return list(SLOT_COLUMNS)
        with filesystem.open_input_stream(path) as f:
            first = f.read(1 << 16).decode("utf-8", "replace").splitlines()[:1]
        return next(csv.reader(io.StringIO(first[0] if first else ""), delimiter=self.sep), [])

    def layout(self):
        """(kept source columns, Spark output schema)."""
        schema = self.archive_schema()
        if self.payload not in schema.names:
            raise ValueError(f"pgoutput data source: payload column {self.payload!r} not in the archive "
                             f"(columns: {schema.names})")
        keep = self.keep if self.keep is not None else [n for n in schema.names if n != self.payload]
        missing = [k for k in keep if k not in schema.names]
        if missing:
            raise ValueError(f"pgoutput data source: keep: no column {missing} (columns: {schema.names})")
        reserved = set(ST.MESSAGE_FIELDS) | {ST.CORRUPT_RECORD}
        kept = [T.StructField(f"source_{k}" if k in reserved else k,
                              ST.spark_type(schema.field(k).type), True) for k in keep]
        return keep, T.StructType(kept + list(ST.MESSAGE_TYPE.fields))


class PgoutputDataSource(DataSource):
    """``spark.read.format("pgoutput")``; see the module docstring for options."""

    @classmethod
    def name(cls):
        return "pgoutput"

    def schema(self):
        return _Config(self.options).layout()[1]

    def reader(self, schema):
        return _PgoutputReader(_Config(self.options), schema)


class _PgoutputReader(DataSourceReader):
    def __init__(self, config, schema):
        self.config = config
        self.keep, self.out_schema = config.layout()
        if [f.name for f in schema.fields] != [f.name for f in self.out_schema.fields]:
            raise ValueError("pgoutput data source: a user-given schema is not supported; "
                             "select the columns you need after load()")

    def partitions(self):
        filesystem, files = list_files(self.config.path)
        if self.config.format == "csv":
            return [_Partition(f) for f in files]
        import pyarrow.parquet as pq
        parts = []
        for f in files:
            n = pq.ParquetFile(f, filesystem=filesystem).metadata.num_row_groups
            parts.extend(_Partition(f, rg) for rg in range(n))
        return parts or [_Partition(files[0], None)]

    def _batches(self, partition):
        cfg = self.config
        filesystem, _ = _fs(cfg.path)
        columns = [cfg.payload, *self.keep]
        if cfg.format == "parquet":
            import pyarrow.parquet as pq
            pf = pq.ParquetFile(partition.path, filesystem=filesystem)
            rgs = None if partition.row_group is None else [partition.row_group]
            for b in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=rgs, columns=columns):
                yield pa.RecordBatch.from_arrays([b.column(c) for c in columns], names=columns)
            return
        from pyarrow import csv as pacsv
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

    def read(self, partition):
        from .functions import _MessagesMapper
        cfg = self.config
        keep_names = [f.name for f in self.out_schema.fields[: len(self.keep)]]
        mapper = _MessagesMapper(self.out_schema, keep_names, cfg.envelope, cfg.in_stream,
                                 cfg.mode, cfg.format == "csv")
        yield from mapper(self._batches(partition))
