"""``spark.read.format("pgoutput")``: a Python Data Source (PySpark >= 4.0) over archive
files of replication payloads (layouts: :mod:`pgoutput_codec.archive`; read with pyarrow,
:mod:`.archivefiles`).

    spark.read.format("pgoutput").option("format", "csv").load("/archive/slot1/")

Options:
- ``format``: "parquet" (default) or "csv";
- ``payload``: the payload column (default "data");
- ``keep``: comma-separated columns to keep (default: every other column of the archive;
  names that clash with a message field get ``source_``, e.g. ``source_lsn``);
- ``fields``: comma-separated message fields to give (default: all of them, as
  ``decode_messages(fields=)``). Spark never prunes a Python data source's columns, so a
  query that reads three fields should name them: reading ``type,relation_id,commit_lsn``
  of 5 M messages took 3.0 s, every field 5.8 s (``bench/spark_bench.py``, ``c_ds``);
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
  default ","; "\\t" for COPY text format);
- ``max_rows_per_trigger``: streams only (``spark.readStream.format("pgoutput")``, whose
  offsets are checkpoints: :mod:`.streamsource`).

Partitions: one per Parquet row group, one per CSV file; the stream state is inferred at
the start of each and carried through it. The path is a file, a directory (every file in
it not starting with '.' or '_', recursively) or a glob; any pyarrow filesystem URI.

Why a data source and not only ``read_archive``: it is the reader users know
(``spark.read.format``), usable from SQL and any language binding, and it owns the
schema, so nothing of Spark's CSV/Parquet options leaks in. On PySpark 3.5 (no Python
data sources) ``read_archive`` gives the same rows.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from . import streamsource
from .archivefiles import BATCH_ROWS, ArchiveRows, Config, check_schema, filesystem_of, list_files
from .orderkey import FILE_BITS

try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    HAS_DATASOURCE = True
except ImportError:  # PySpark < 4.0
    HAS_DATASOURCE = False
    DataSource = DataSourceReader = InputPartition = object

__all__ = ["HAS_DATASOURCE", "PgoutputDataSource", "list_files", "BATCH_ROWS"]


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
        return Config(self.options).layout()[1]

    def reader(self, schema):
        return _PgoutputReader(Config(self.options), schema)

    def streamReader(self, schema):
        config = Config(self.options)
        if config.encoding is not None:
            raise ValueError("pgoutput data source: encoding is for spark.read (a stream's micro-batches do not "
                             "see the state rows before them); rewrite the archive once (transcode)")
        return streamsource.PgoutputStreamReader(config, schema)


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
