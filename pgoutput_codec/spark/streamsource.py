"""``spark.readStream.format("pgoutput")``: the data source as a stream over a lake that
grows (PySpark >= 4.0).

    (spark.readStream.format("pgoutput")
        .options(output="changes", order_by="seq")
        .load("/lake/slot1/")
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", "/chk/slot1")
        .toTable("cdc.slot1_changes"))

Why a stream: a lake of archived payloads grows by files every day, and each day's run
must give the changes not given before — exactly once, even when a run fails half way.
The batch API does it with a :class:`~pgoutput_codec.checkpoint.Checkpoint` the user
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

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..checkpoint import Checkpoint
from ..errors import ArchiveOrderError
from .archivefiles import ArchiveRows, check_schema, filesystem_of, list_files

try:
    from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
except ImportError:  # PySpark < 4.0
    DataSourceStreamReader = InputPartition = object
try:   # PySpark >= 4.2: read limits, Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
    _AVAILABLE_NOW = (SupportsTriggerAvailableNow,)
except ImportError:
    ReadAllAvailable = ReadMaxRows = None
    _AVAILABLE_NOW = ()

__all__ = ["PgoutputStreamReader"]

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
