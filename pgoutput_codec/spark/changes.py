"""Change rows at cluster scale: ``decode_changes`` (its tables: :mod:`.tables`).

The single-process API (:mod:`pgoutput_codec.changes`) on
Spark DataFrames, correct across partitions and files, and parallel.

How (two passes over the archive, no per-partition state threaded through one task):

1. A filter keeps the *control candidates* (rows whose message tag byte is a
   control/Relation tag, read by Spark without decoding: ≈1% of an archive) with their
   order key; they are collected to the driver, where ``ControlPlan.build`` decodes them
   in arrival order and resolves every transaction (commit rank, xid, commit LSN/time,
   origin, aborted subtransactions, rolled-back prepares), the stream state in force
   between any two control rows and every Relation version. The plan is broadcast.
2. Every partition decodes its rows with ``plan.changes`` — each row is placed by its
   order key alone, so any partitioning and any row order within a partition gives the
   same rows. ``sort=True`` then orders them by (``commit_rank``, ``seq``): exactly the
   rows and order of the single-process ``decode_changes``. Two implementations:

   - ``impl="fields"`` (the default on PySpark >= 4.1 in FAILFAST without
     ``observation``): one scalar ``arrow_udf`` per change field, sharing one decode per
     Arrow batch, so Spark evaluates only the fields a query reads. The rows are chosen
     before any decoding: Spark's filter on the tag byte drops control rows, Truncates,
     logical messages and keepalives; whole transactions not given (uncommitted, or
     outside ``after_lsn``/``until_lsn``) are dropped by order-key range, the tables
     ``tables`` leaves out by relation id (and key range), aborted subtransactions by
     key range and xid (``ControlPlan.row_drops``): Spark filters on payload bytes, no
     Python (:mod:`.rowfilter`). Only a plan too long to say so (``ROW_DROP_LIMIT``) is judged on the first
     35 payload bytes in Python (``ControlPlan.keep_mask``). Truncates (one row per
     relation) come with pass 1 and are decoded on the driver. A count therefore
     decodes nothing — like Spark's own ``from_avro`` or CSV reader with column
     pruning, a FAILFAST query raises on a malformed change payload only when it reads
     a decoded field (a malformed row the filters keep is counted). ``observation``
     counts every row after decoding it.
     A query's own filter on a decoded field (``where(op == 'I')``) is evaluated by Spark
     next to the row filters, in a Python node of its own, on rows they would drop (the
     field UDFs give those null rows): the payloads cross twice. For one table use
     ``table_changes``, which chooses it before decoding; for several queries, cache.
   - ``impl="map"``: ``mapInArrow`` (PERMISSIVE, DROPMALFORMED, ``observation``, and
     PySpark 3.5/4.0): every field of every change row is turned into Spark rows,
     whatever the query reads. In FAILFAST without ``observation`` it too drops the
     rows the plan leaves out by those Spark filters before the payloads cross into
     Python (their malformed rows are then not reported); the other modes and
     ``observation`` see every row, so that rows in = rows decoded + rows in error.

   ``table_changes``/``snapshot``/``history`` over a ``decode_changes`` DataFrame of
   ``impl="fields"`` choose the table the same way, before decoding (a filter on the
   decoded ``table`` would be pushed below the field UDFs and decode every payload twice).
   Over one of ``impl="map"`` in FAILFAST without ``observation`` they type the table's
   rows in the ``mapInArrow`` that decodes them (``_MapChanges``), not in a second one
   over the change rows.

Ordering contract (what "arrival order" means here; never the ``lsn`` column — a
change's LSN is its own WAL position and goes backwards when transactions interleave):

- ``order_by="seq"`` (what ``capture`` writes) or any integral column: that column is
  the arrival order. Values must be unique across the archive (a duplicate among the
  control rows is an error; among change rows it makes their relative order within a
  transaction undefined). ``order_by=[c1, c2, ...]``: integral columns compared left to
  right; they are packed into one int64 from their min/max (one aggregate job), and an
  error is raised when the ranges need more than 63 bits.
- Either way the order is checked where it can be: commit LSNs rise in arrival order
  (PostgreSQL sends transactions in commit order), so a commit below an earlier one that
  is not a replay of it raises ``ArchiveOrderError`` (the files listed out of order, a
  wrong ``order_by``) instead of giving rows in a wrong commit order.
- ``order_by=None``: the order of the Parquet files by their path (lexicographic order
  of ``_metadata.file_path``, whatever order the paths were given to the reader: name
  archive files so that this is their time order), then the row's position in its file
  (``_metadata.row_index``, Spark ≥ 3.5 Parquet hidden metadata). The key is
  ``file_rank << 40 | row_index`` (≤ 2^23 files of ≤ 2^40 rows). The row index is
  computed by the scan, so it survives a repartition of the DataFrame (checked on
  PySpark 3.5.9 and 4.x). Without row-index metadata (a union of scans, a non-Parquet
  file source): ``input_file_name()`` order, then ``monotonically_increasing_id()`` —
  guaranteed only when each file is read as one split and nothing shuffled the rows
  (a plan with an exchange is refused with a ValueError): keep files smaller than
  ``spark.sql.files.maxPartitionBytes`` (or raise it), since Spark packs the splits of
  one file into partitions largest first; at most 4096 partitions of < 2^28 rows.
  With ``order_by=None`` the ``seq`` column of the change rows holds this packed key,
  not 0, 1, 2, ….

Incremental runs (:mod:`pgoutput_codec.checkpoint`): ``checkpoint_of(changes)`` says
where the next run starts — after the largest commit LSN given, from the first control
row of the earliest transaction not given — and ``decode_changes(..., resume=)`` reads
only the rows from there on (a ``>=`` filter on the ``order_by`` column, pushed to the
Parquet scan) with the Relation definitions the checkpoint carries. Rows of transactions
still open are read again next time rather than carried, so a checkpoint stays a few KB.

``commit_rank`` (kept as a column) is the rank of the transaction's commit in arrival
order; (``commit_rank``, ``seq``) is a total order of the change rows except for the
rows of one Truncate message (one per relation, same ``seq``), which keep the
message's relation order through a hidden tiebreak when ``sort=True``. A run resumed
from a checkpoint ranks its commits past the run before's (``Checkpoint.rank_base``),
so the runs' rows appended to one table keep that order, and so do the table functions
over it.

Modes (:mod:`.modes`): FAILFAST raises on the first malformed row (naming its order key,
message type and byte offset); PERMISSIVE adds ``error`` and ``_corrupt_record`` columns
and one row per malformed payload (``op`` null, ``seq``/``lsn`` of the row, the error
text and the raw bytes); DROPMALFORMED drops them. With ``observation`` (a
``pyspark.sql.Observation``) the first action also reports ``rows_in``,
``rows_decoded`` and ``rows_in_error`` over the archive's rows (rows in = rows decoded +
rows in error, in every mode). A malformed *control* row in PERMISSIVE mode is skipped
by the plan, like the single-process ``errors="collect"``.

Tables: :mod:`.tables` (``table_changes``, ``snapshot``, ``history``, ``net_changes``).
"""

from __future__ import annotations

import decimal
import logging
import uuid
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..batch import message_tags
from ..checkpoint import Checkpoint
from ..plan import CONTROL_TAGS, HEAD_BYTES, ControlPlan, spread_rows
from ..schema import CHANGE_FIELDS, CHANGE_OPTIONAL
from . import rowfilter as RF
from . import types as ST
from .batchcache import once_per_batch
from .functions import HAS_ARROW_UDF
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, check_mode, failfast_errors
from .rowfilter import KEY as _KEY
from .rowfilter import PAYLOAD as _PAYLOAD
from .shipping import is_connect, ship

if TYPE_CHECKING:
    from .tables import _TableMapper


__all__ = ["decode_changes", "checkpoint_of", "replayed_of", "change_type"]

_LSN = "__lsn"
_SUB = "__sub"
_ROWS_IN, _ROWS_ERR = "__rows_in", "__rows_err"
_FILE_BITS = 40
_log = logging.getLogger("pgoutput_codec")


# --------------------------------------------------------------------------- helpers

def _collect_arrow(df: DataFrame) -> pa.Table:
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()   # PySpark 3.5
    if batches:
        return pa.Table.from_batches(batches)
    return ST.arrow_schema_for(df.schema).empty_table()


def _binary(arr):
    arr = ST.one_array(arr)
    if pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.binary())
    return arr


def _col(name: str) -> Column:
    return F.col(f"`{name}`")


#: the columns PERMISSIVE mode adds to change rows: the error text and the raw payload
ERROR_FIELDS = [T.StructField("error", T.StringType()), T.StructField(ST.CORRUPT_RECORD, T.BinaryType())]


def drop_malformed(out: DataFrame) -> DataFrame:
    """DROPMALFORMED: the PERMISSIVE rows less those in error and the two error columns."""
    return out.filter(F.col("error").isNull()).drop(*[f.name for f in ERROR_FIELDS])


def change_type(*, include_xids=True, include_timestamp=True, include_origin=True,
                mode: str = FAILFAST) -> T.StructType:
    """Spark schema of :func:`decode_changes` rows: ``schema.CHANGE_SCHEMA`` (minus the
    optional columns switched off) + ``commit_rank``; PERMISSIVE adds ``error`` and
    ``_corrupt_record``."""
    opts = dict(include_xids=include_xids, include_timestamp=include_timestamp, include_origin=include_origin)
    drop = {col for opt, col in CHANGE_OPTIONAL.items() if not opts[opt]}
    fields = [ST.spark_field(f) for f in CHANGE_FIELDS if f.name not in drop]
    fields.append(T.StructField("commit_rank", T.LongType()))
    if mode == PERMISSIVE:
        fields += ERROR_FIELDS
    return T.StructType(fields)


# --------------------------------------------------------------------------- order key

def physical_plan(df: DataFrame) -> str:
    """The physical plan Spark runs for ``df``, as text (classic or Spark Connect)."""
    if is_connect(df.sparkSession):
        return df._explain_string(mode="simple")
    return df._jdf.queryExecution().executedPlan().toString()


def _order_key(df: DataFrame, order_by) -> Column:
    """An int64 column of arrival order (see the module docstring)."""
    if order_by is None:
        return _default_order(df)
    cols = [order_by] if isinstance(order_by, str) else list(order_by)
    for c in cols:
        dt = df.schema[c].dataType
        if not isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)) or \
                (isinstance(dt, T.DecimalType) and dt.scale):
            raise TypeError(f"order_by column {c!r} must be integral, not {dt.simpleString()}")
    if len(cols) == 1:
        return _col(cols[0]).cast("long")
    aggs = []
    for c in cols:
        aggs += [F.min(_col(c)).cast("decimal(38,0)"), F.max(_col(c)).cast("decimal(38,0)")]
    row = df.agg(*aggs).first()
    key, bits = None, 0
    for k in reversed(range(len(cols))):
        lo, hi = int(row[2 * k] or 0), int(row[2 * k + 1] or 0)
        width = max(1, (hi - lo).bit_length())
        part = (_col(cols[k]).cast("decimal(38,0)") - F.lit(lo)).cast("long")
        part = F.shiftleft(part, bits) if bits else part
        key = part if key is None else key.bitwiseOR(part)
        bits += width
    if bits > 63:
        raise ValueError(f"order_by {cols}: the columns' ranges need {bits} bits, more than an int64 holds; "
                         "add one integral arrival-order column (capture writes `seq`)")
    return key


def _default_order(df: DataFrame) -> Column:
    from pyspark.errors import AnalysisException
    try:
        meta = df.select(F.col("_metadata.file_path").alias("f"), F.col("_metadata.row_index").alias("r"))
        _ = meta.schema   # resolves now: AnalysisException without row-index metadata
        files = sorted(r.f for r in meta.select("f").distinct().collect())
        rank = F.create_map(*[x for i, p in enumerate(files) for x in (F.lit(p), F.lit(i))])
        return F.shiftleft(F.element_at(rank, F.col("_metadata.file_path")).cast("long"), _FILE_BITS) \
            .bitwiseOR(F.col("_metadata.row_index").cast("long"))
    except AnalysisException:
        pass
    # No row-index metadata: input_file_name() order, then the row's place in its partition,
    # which means something only when the rows come straight from the file scan.
    plan = physical_plan(df)
    if "Exchange" in plan or not df.inputFiles():
        raise ValueError("order_by=None needs the archive's file order: pass the DataFrame of "
                         "spark.read.parquet(...) itself (no repartition, join or union before), or give "
                         "order_by (the archive's arrival-order column, e.g. seq)")
    files = sorted(r.f for r in df.select(F.input_file_name().alias("f")).distinct().collect())
    rank = F.create_map(*[x for i, p in enumerate(files) for x in (F.lit(p), F.lit(i))])
    mid = F.monotonically_increasing_id()
    pid = F.shiftright(mid, 33)
    within = mid.bitwiseAND(F.lit((1 << 33) - 1))
    return (F.shiftleft(F.element_at(rank, F.input_file_name()).cast("long"), _FILE_BITS)
            .bitwiseOR(F.shiftleft(pid, 28)).bitwiseOR(within))


# --------------------------------------------------------------------------- pass 2

def _sub_order(seq) -> np.ndarray:
    """The place of each row among the rows of its message: rows of one Truncate share a
    ``seq`` (one per relation) and keep the message's relation order by it."""
    seq = ST.one_array(seq).to_numpy(zero_copy_only=False)
    sub = np.zeros(len(seq), dtype=np.int64)
    if len(seq) > 1:
        start = np.r_[0, np.flatnonzero(np.diff(seq) != 0) + 1]
        run = np.repeat(start, np.diff(np.r_[start, len(seq)]))
        sub = np.arange(len(seq), dtype=np.int64) - run
    return sub


class _ChangeMapper:
    def __init__(self, plan_bc, out_schema, mode, has_lsn, count_rows):
        self.plan_bc, self.out_schema, self.mode = plan_bc, out_schema, mode
        self.has_lsn, self.count_rows = has_lsn, count_rows

    def __call__(self, batches):
        plan = self.plan_bc.value
        target = ST.arrow_schema_for(self.out_schema)
        errors = "raise" if self.mode == FAILFAST else "collect"
        for b in batches:
            payload, keys = _binary(b.column(0)), b.column(1)
            lsn = b.column(2) if self.has_lsn else None
            with failfast_errors():
                t = plan.changes(payload, keys, lsn, errors=errors)
            sub = _sub_order(t.column("seq"))
            cols = {f.name: t.column(f.name) for f in t.schema}
            n = len(t)
            if self.mode in (PERMISSIVE, DROPMALFORMED):
                bad = plan.last_errors
                cols["error"] = pa.nulls(n, pa.string())
                cols[ST.CORRUPT_RECORD] = pa.nulls(n, pa.binary())
                if bad:
                    bad_keys = np.array([e["seq"] for e in bad], dtype=np.int64)
                    knp = keys.to_numpy(zero_copy_only=False)
                    o = np.argsort(knp, kind="stable")
                    rows = o[np.searchsorted(knp[o], bad_keys)]
                    extra = {name: pa.nulls(len(bad), t.schema.field(name).type) for name in t.schema.names}
                    extra["seq"] = pa.array(bad_keys, pa.int64())
                    if lsn is not None:
                        from ..changes import _lsn_array
                        extra["lsn"] = _lsn_array(lsn, len(payload)).take(pa.array(rows))
                    extra["error"] = pa.array([e["error"] for e in bad], pa.string())
                    extra[ST.CORRUPT_RECORD] = payload.take(pa.array(rows))
                    cols = {k: pa.concat_arrays([ST.one_array(v), ST.one_array(extra[k])]) for k, v in cols.items()}
                    sub = np.r_[sub, np.zeros(len(bad), np.int64)]
                    n += len(bad)
            cols[_SUB] = pa.array(sub, pa.int64())
            if self.count_rows:
                c = plan.last_counts
                cols = with_count_row(cols, n, c["rows_in"], c["rows_in_error"])
            arrays = [ST.to_spark_arrow(ST.one_array(cols[f.name]), f.type) for f in target]
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


# ---- pass 2 as one scalar Arrow UDF per field (PySpark >= 4.1, FAILFAST) ------------------
# A mapInArrow's output is converted into Spark rows whole, whatever the query reads: a
# count of 5 M change rows spent 10 s there, 7 s of it turning `columns` and `after`
# into rows. Every change row is decoded from its own payload and order key (the plan
# says the rest), so each field can be its own UDF, like ``from_pgoutput``: Spark keeps
# only the calls a query reads, in one Python node (the payload crosses once), and a
# count needs none. The rows themselves are chosen before any decoding: Spark's filter
# on the tag byte, and when the plan can drop changes (uncommitted transactions,
# aborted subtransactions, ``tables``) on the order key, relation id and xid bytes
# (``ControlPlan.row_drops``; ``keep_mask`` on 35 payload bytes in Python past its limit).
# Truncates (one row per relation: not one row per payload) are rare and come with
# pass 1's rows, so the driver decodes them and they join as a small local DataFrame.


class _ChangeRows:
    """Picklable: the change rows of one Arrow batch of payloads (one per payload)."""

    def __init__(self, plan_bc):
        self.plan_bc = plan_bc

    def __call__(self, payload, key, lsn=None) -> pa.Table:
        with failfast_errors():
            return self.plan_bc.value.change_rows(_binary(payload), key, lsn)


class _TypedRows(_ChangeRows):
    """Picklable: the typed rows of one table (``_TableMapper``) of one Arrow batch,
    straight from its change rows (never turned into Spark rows in between)."""

    def __init__(self, plan_bc, mapper):
        super().__init__(plan_bc)
        self.mapper = mapper

    def __call__(self, payload, key, lsn=None) -> pa.Table:
        t = super().__call__(payload, key, lsn)
        has = pc.is_valid(t.column("op")).to_numpy(zero_copy_only=False)
        if has.all():
            return _typed(self.mapper, t)
        # rows a query's own filter sees before the row filters (``change_rows``): typed
        # rows for the changes, null rows for the others
        return spread_rows(_typed(self.mapper, t.filter(pa.array(has))), np.flatnonzero(has), len(t))


def _typed(mapper, changes: pa.Table) -> pa.Table:
    return pa.Table.from_batches(list(mapper(iter(changes.combine_chunks().to_batches()))),
                                 schema=ST.arrow_schema_for(mapper.out_schema))


class _ChangeField:
    """Picklable scalar Arrow UDF body: column ``name`` of ``rows_of``'s table of one Arrow
    batch, computed once for every field UDF (same ``token``) evaluated on the batch."""

    def __init__(self, rows_of, token, name, target):
        self.rows_of, self.token, self.name, self.target = rows_of, token, name, target

    def __call__(self, payload, key, lsn=None):
        t = once_per_batch(self.token, (payload, key, lsn), lambda: self.rows_of(payload, key, lsn))
        return ST.to_spark_arrow(ST.one_array(t.column(self.name)), self.target)


#: what ``_HeadFacts`` gives per row: ``f``, the facts, and ``s``, the order key
HEAD_FACTS = T.StructType([T.StructField("version", T.LongType()), T.StructField("rank", T.LongType()),
                           T.StructField("old", T.BooleanType()), T.StructField("del", T.BooleanType())])
HEAD_FACTS_ROW = T.StructType([T.StructField("f", HEAD_FACTS), T.StructField("s", T.LongType())])


class _HeadFacts:
    """Picklable ``mapInArrow`` body over (order key, head) batches: ``ControlPlan.head_facts``
    as a struct of (``version`` index, ``rank``, ``old``, ``del``), -1, -1, false, false for
    rows not given. For a table whose column lists differ over an archive where some
    transaction committed after a later one's rows (streamed, prepared: the versions
    are ordered by their last change, which then needs each row's commit rank) or a plan
    Spark cannot judge by itself; else ``rowfilter.given`` answers without Python. A
    ``mapInArrow``, not a scalar ``arrow_udf``, on every PySpark: 1 M rows, alternating
    in one session, 1.34 s against 1.88 s (a scalar UDF's node keeps its input rows to
    join them with its results)."""

    def __init__(self, plan_bc):
        self.plan_bc = plan_bc

    def __call__(self, batches):
        plan, schema = self.plan_bc.value, ST.arrow_schema_for(HEAD_FACTS_ROW)
        for b in batches:
            key = b.column(0)
            facts = plan.head_facts(b.column(1), key)
            yield pa.RecordBatch.from_arrays(
                [pa.StructArray.from_arrays([pa.array(a) for a in facts], names=HEAD_FACTS.names), key],
                schema=schema)


class _TableInfo(NamedTuple):
    """What :func:`_table_info`'s job finds about one table."""

    versions: list       # the Relation versions in use: column lists, ordered by their last change
    truncates: list      # (rank, seq, commit_lsn, commit_ts), in order
    sends_old: bool      # some Update sends its old key or row ('K'/'O'): it may move a row to a new key
    deletes: bool        # some Delete is given: with sends_old, whether any row leaves its key
    fingerprints: list = []   # each version's relation_version (its definition's fingerprint)
    relation_id: int | None = None   # the relation that bears the name (tables.bearer; None: by name)
    replaced: bool = False    # another relation bore the name before it
    found: bool = True        # some relation bears it (False: renamed away, none does)
    # each version's first and last change (rank, seq), as ``versions``: rank None where the
    # key alone orders commits (GivenHeads.serial); as of the cut asked for, ``upto``:
    # (column list, fingerprint, first, last change) of the versions used up to it (change
    # rows read back)
    firsts: list = []
    lasts: list = []
    upto: list | None = None


class _Pass2:
    """What ``decode_changes`` keeps of its pass 2 for the table functions: the archive
    (``src``: payload, order key, lsn), the plan and its shipped copy, pass 1's rows
    (with the Truncates) and the plan narrowed to each table asked for."""

    def __init__(self, src, plan, plan_bc, pass1: pa.Table, has_lsn: bool, envelope: str, sort: bool):
        self.src, self.plan, self.plan_bc, self.pass1 = src, plan, plan_bc, pass1
        self.has_lsn, self.envelope, self.sort = has_lsn, envelope, sort
        self.spark = src.sparkSession
        self._tables = {}

    def _narrowed(self, schema: str, table: str, until_lsn=None, *, all_changes=False):
        """The plan (and its broadcast) narrowed to the relation that bears the name as
        of ``until_lsn`` (``snapshot``'s ``as_of_lsn``) and to the transactions committed
        up to it — or, ``all_changes``, to every change of that relation."""
        narrow = until_lsn is not None and not all_changes
        key = (schema, table, until_lsn, narrow)
        if key not in self._tables:
            p = self.plan.for_table(schema, table, until_lsn)
            if narrow:
                p = p.between(until_lsn=until_lsn)
            self._tables[key] = (p, ship(self.spark, p))
        return self._tables[key]

    def table_info(self, schema: str, table: str, as_of_lsn=None):
        """:meth:`_table_info` of the relation that bears the name (as of ``as_of_lsn``:
        ``snapshot``'s), its facts over all its changes."""
        plan, bc = self._narrowed(schema, table, as_of_lsn, all_changes=True)
        _, holder, replaced = plan._chosen
        return self._table_info(plan, bc)._replace(relation_id=holder, replaced=replaced, found=holder is not None)

    def _table_info(self, plan, bc):
        """``_table_info`` without decoding: each row's Relation version and commit rank
        from its 35-byte head (one small job, one Python node: :class:`_HeadFacts`), the
        column lists from the plan, the truncates from pass 1's rows on the driver. The job
        is Spark's own (``rowfilter.given``), no row crosses into Python, for a table with
        one column list in the whole archive (however often its Relation was sent: no
        order among versions to find) and, when commits come in the order of their
        transactions' rows (``GivenHeads.serial``: no streamed or prepared transaction
        committed late), for one with several: then the last change of each version is
        its greatest order key."""
        rows = RF.kept(self.src.where(RF.may_be_row_change(F.col(_PAYLOAD), self.envelope)), plan)
        heads = RF.given_heads(plan)
        if heads is not None and len(heads.fingerprints) <= 1:
            used = [False, False, False, None, None]
            if heads.fingerprints and heads.firsts:
                given = RF.given(heads)
                used = list(rows.agg(*[F.max(c) for c in given], F.min(F.when(given[0], F.col(_KEY))),
                                     F.max(F.when(given[0], F.col(_KEY)))).collect()[0])
            fps = [heads.fingerprints[0]] if used[0] else []
            versions = [plan.columns_by_version()[fp] for fp in fps]
            return _TableInfo(versions, self._truncate_facts(plan), bool(used[1]), bool(used[2]), fps,
                              firsts=[(None, used[3])] if fps else [], lasts=[(None, used[4])] if fps else [])
        if heads is not None and heads.serial and sum(map(len, heads.versions.values())) <= RF.ROW_DROP_LIMIT:
            given, old, dels = RF.given(heads)
            used = (rows.where(given).groupBy(RF.version_of(heads).alias("v"))
                    .agg(F.max(_KEY).alias("last"), F.min(_KEY).alias("first"), F.max(old).alias("old"),
                         F.max(dels).alias("dels")).collect())
            by_version = plan.columns_by_version()
            used = sorted(used, key=lambda r: r["last"])
            fps = [heads.fingerprints[r["v"]] for r in used]
            return _TableInfo([by_version[fp] for fp in fps], self._truncate_facts(plan),
                              any(r["old"] for r in used), any(r["dels"] for r in used), fps,
                              firsts=[(None, r["first"]) for r in used], lasts=[(None, r["last"]) for r in used])
        # the Delete fact from the heads too, where the tag byte is read anyway: only the
        # heads cross into Python, and no whole payload is kept beside them
        f = (rows.select(_KEY, F.substring(F.col(_PAYLOAD), 1, HEAD_BYTES).alias("h"))
             .mapInArrow(_HeadFacts(bc), HEAD_FACTS_ROW))
        used = (f.where(F.col("f.rank") >= 0).groupBy(F.col("f.version").alias("v"))
                .agg(F.max(F.struct(F.col("f.rank").alias("r"), "s")).alias("last"),
                     F.min(F.struct(F.col("f.rank").alias("r"), "s")).alias("first"),
                     F.max("f.old").alias("old"), F.max("f.del").alias("dels")).collect())
        # one entry per definition (the same definition sent again is one version)
        fingerprint = plan.version_table.column("relation_version").to_pylist()
        last, first = {}, {}
        for r in used:
            fp, pos, at = fingerprint[r["v"]], (r["last"]["r"], r["last"]["s"]), (r["first"]["r"], r["first"]["s"])
            last[fp], first[fp] = max(last.get(fp, pos), pos), min(first.get(fp, at), at)
        by_version = plan.columns_by_version()
        fps = [fp for fp, _ in sorted(last.items(), key=lambda kv: kv[1])]
        return _TableInfo([by_version[fp] for fp in fps], self._truncate_facts(plan), any(r["old"] for r in used),
                          any(r["dels"] for r in used), fps, firsts=[first[fp] for fp in fps],
                          lasts=[last[fp] for fp in fps])

    def _truncate_facts(self, plan) -> list:
        """``_TableInfo.truncates``: (rank, seq, commit_lsn, commit_ts) of each Truncate."""
        trunc = self._truncates(plan)
        # commit_lsn as Spark gives it back (decimal(20,0)): history puts it in literals
        return [] if trunc is None else sorted(
            (r["commit_rank"], r["seq"], None if r["commit_lsn"] is None else decimal.Decimal(r["commit_lsn"]),
             r.get("commit_ts")) for r in trunc.to_pylist())

    def _truncates(self, plan) -> pa.Table | None:
        """The change rows of the Truncates among pass 1's rows, in order (None: none)."""
        payload = _binary(self.pass1.column(_PAYLOAD))
        is_t = message_tags(payload, envelope=plan.envelope) == ord("T")
        if not is_t.any():
            return None
        sel = pa.array(is_t)
        lsn = self.pass1.column(_LSN).combine_chunks().filter(sel) if self.has_lsn else None
        with failfast_errors():
            t = plan.changes(payload.filter(sel), self.pass1.column(_KEY).combine_chunks().filter(sel), lsn,
                             errors="raise")
        return t.sort_by([("seq", "ascending")]) if len(t) else None

    def _sorted(self, out: DataFrame) -> DataFrame:
        """``out`` ordered like ``decode_changes``' rows when they are, without ``__sub``."""
        if self.sort:
            out = out.orderBy(F.col("commit_rank").asc_nulls_first(), "seq", _SUB)
        return out.drop(_SUB)


class _MapChanges(_Pass2):
    """``decode_changes`` with ``impl="map"`` (FAILFAST, no observation): ``table_changes``
    types one table's rows in the ``mapInArrow`` that decodes them. Over the change rows
    it took two: theirs, turned into Spark rows, sorted, then back into Arrow for the
    typing (1 M rows, ``table_changes`` written out whole: 14.5 s against 30.9 s)."""

    def typed(self, schema: str, table: str, mapper: "_TableMapper", until_lsn=None) -> DataFrame:
        plan, bc = self._narrowed(schema, table, until_lsn)
        out_type = T.StructType(list(mapper.out_schema.fields) + [T.StructField(_SUB, T.LongType())])
        payload = F.col(_PAYLOAD)
        rows = self.src.where(RF.may_be_row_change(payload, self.envelope) | RF.tag_in(payload, self.envelope, b"T"))
        # the other tables' rows and the transactions after as_of_lsn: Spark drops them
        # where it can tell them (else the decoder leaves them out)
        rows = RF.kept(rows, plan)
        return self._sorted(rows.mapInArrow(_TypedMapper(bc, mapper, self.has_lsn, out_type), out_type))


class _TypedMapper:
    """Picklable ``mapInArrow`` body: one table's typed rows (``_TableMapper``) of each
    batch of payloads, with their ``__sub``."""

    def __init__(self, plan_bc, mapper, has_lsn, out_type):
        self.plan_bc, self.mapper, self.has_lsn, self.out_type = plan_bc, mapper, has_lsn, out_type

    def __call__(self, batches):
        plan = self.plan_bc.value
        target = ST.arrow_schema_for(self.out_type)
        for b in batches:
            with failfast_errors():
                t = plan.changes(_binary(b.column(0)), b.column(1), b.column(2) if self.has_lsn else None,
                                 errors="raise")
            typed = _typed(self.mapper, t)
            yield pa.RecordBatch.from_arrays(
                [ST.one_array(typed.column(f.name)) for f in target if f.name != _SUB]
                + [pa.array(_sub_order(t.column("seq")), pa.int64())], schema=target)


class _FieldChanges(_Pass2):
    """``decode_changes`` with ``impl="fields"``: the archive (``src``), pass 1's rows and
    its plan; builds the change rows, one table's change rows, and one table's typed rows."""

    def __init__(self, src, plan, plan_bc, pass1: pa.Table, has_lsn: bool, options: dict, envelope: str,
                 sort: bool):
        super().__init__(src, plan, plan_bc, pass1, has_lsn, envelope, sort)
        self.options = options

    def _rows(self, plan, plan_bc) -> DataFrame:
        """The archive rows that make one change row each, chosen without decoding."""
        return RF.kept(self.src.where(RF.may_be_row_change(F.col(_PAYLOAD), self.envelope)), plan, plan_bc)

    def _frame(self, plan, plan_bc, rows_of, out_type: T.StructType, truncates: pa.Table | None,
               deterministic: bool = True) -> DataFrame:
        """One UDF per column of ``out_type`` over the chosen rows (``seq`` is the order
        key itself, ``__sub`` 0), plus the Truncates' rows as a local DataFrame; sorted
        like ``decode_changes`` when asked."""
        args = [F.col(_PAYLOAD), F.col(_KEY)] + ([F.col(_LSN)] if self.has_lsn else [])
        token = uuid.uuid4().hex   # names these rows in the worker's per-batch cache
        cols = []
        for f in out_type.fields:
            if f.name == "seq":
                cols.append(F.col(_KEY).alias("seq"))          # no decoding
            elif f.name == _SUB:
                cols.append(F.lit(0).cast(T.LongType()).alias(_SUB))
            else:
                udf = F.arrow_udf(_ChangeField(rows_of, token, f.name, ST.arrow_type_for(f.dataType)), f.dataType)
                cols.append((udf if deterministic else udf.asNondeterministic())(*args).alias(f.name))
        out = self._rows(plan, plan_bc).select(*cols)
        if truncates is not None:
            target = ST.arrow_schema_for(out_type)
            arrays = [ST.to_spark_arrow(ST.one_array(truncates.column(f.name)), f.type) if f.name != _SUB
                      else pa.array(_sub_order(truncates.column("seq")), pa.int64()) for f in target]
            local = self.spark.createDataFrame(pa.Table.from_arrays(arrays, schema=target), schema=out_type)
            out = out.unionByName(local)
        return self._sorted(out)

    def changes(self, plan=None, plan_bc=None) -> DataFrame:
        plan, plan_bc = (self.plan, self.plan_bc) if plan is None else (plan, plan_bc)
        out = self._frame(plan, plan_bc, _ChangeRows(plan_bc), mapper_schema(self.options, FAILFAST),
                          self._truncates(plan))
        out._pgoutput_fields = self   # for table_changes: see _of_table
        return out

    def of_table(self, schema: str, table: str) -> DataFrame:
        """The change rows of one table, chosen before decoding."""
        return self.changes(*self._narrowed(schema, table))

    def typed(self, schema: str, table: str, mapper: "_TableMapper", until_lsn=None) -> DataFrame:
        """``table_changes``' rows, typed in the same Python step that decodes them."""
        plan, bc = self._narrowed(schema, table, until_lsn)
        trunc = self._truncates(plan)
        out_type = T.StructType(list(mapper.out_schema.fields) + [T.StructField(_SUB, T.LongType())])
        if trunc is not None:
            trunc = _typed(mapper, trunc).append_column(_SUB, pa.array(_sub_order(trunc.column("seq")), pa.int64()))
        # not deterministic, so that Spark keeps a query's filters on the typed columns
        # (snapshot's, history's) above them instead of decoding every row twice
        return self._frame(plan, bc, _TypedRows(bc, mapper), out_type, trunc, deterministic=False)


# Row counts for an ``observation``: each output batch of ``n`` rows gets one more row,
# null but for the batch's input-row counts in two hidden columns; ``observe_counts``
# sums them into the observation and drops those rows again.

COUNT_FIELDS = [T.StructField(_ROWS_IN, T.LongType()), T.StructField(_ROWS_ERR, T.LongType())]


def with_count_row(cols: dict, n: int, rows_in: int, rows_in_error: int) -> dict:
    """``cols`` (name -> array of ``n`` rows) plus the count row."""
    cols = {k: pa.concat_arrays([ST.one_array(v), pa.nulls(1, ST.one_array(v).type)]) for k, v in cols.items()}
    cols[_ROWS_IN] = pa.array([None] * n + [rows_in], pa.int64())
    cols[_ROWS_ERR] = pa.array([None] * n + [rows_in_error], pa.int64())
    return cols


def observe_counts(out: DataFrame, observation) -> DataFrame:
    """``rows_in``, ``rows_decoded``, ``rows_in_error`` into ``observation`` (rows in =
    rows decoded + rows in error); the count rows dropped. Call after any sort: the sort's
    sampling job would run the metrics a second time."""
    out = out.observe(observation, F.coalesce(F.sum(_ROWS_IN), F.lit(0)).alias("rows_in"),
                      (F.coalesce(F.sum(_ROWS_IN), F.lit(0)) - F.coalesce(F.sum(_ROWS_ERR), F.lit(0)))
                      .alias("rows_decoded"),
                      F.coalesce(F.sum(_ROWS_ERR), F.lit(0)).alias("rows_in_error"))
    return out.filter(F.col(_ROWS_IN).isNull()).drop(_ROWS_IN, _ROWS_ERR)


def mapper_schema(options: dict, mode: str, count_rows: bool = False) -> T.StructType:
    """What ``_ChangeMapper`` writes: the change rows (``change_type`` under ``options``'
    include_*; with the error columns unless FAILFAST, DROPMALFORMED filtering them
    later), the sub-order of a Truncate's rows, and the count columns when asked."""
    out_type = change_type(include_xids=options.get("include_xids", True),
                           include_timestamp=options.get("include_timestamp", True),
                           include_origin=options.get("include_origin", True),
                           mode=PERMISSIVE if mode != FAILFAST else FAILFAST)
    return T.StructType(list(out_type.fields) + [T.StructField(_SUB, T.LongType())]
                        + (COUNT_FIELDS if count_rows else []))


def decode_changes(df: DataFrame, *, payload: str = "data", lsn: str | None = "lsn", order_by=None,
                   mode: str = FAILFAST, sort: bool = True, envelope: str = "auto", observation=None,
                   source: str = "pgoutput", impl: str | None = None, resume=None, **options) -> DataFrame:
    """Committed row changes of a pgoutput archive DataFrame, as ``ChangeDecoder`` gives them.

    ``payload``: the binary column of messages; ``lsn``: the archive's lsn column (text
    ``X/Y``, integral or decimal; None or absent: null ``lsn``); ``order_by``: the
    column(s) of arrival order (module docstring: the ordering contract); ``mode``:
    FAILFAST / PERMISSIVE / DROPMALFORMED; ``sort``: order by (``commit_rank``, ``seq``)
    (a global sort; ``sort=False`` leaves rows in partition order, cheaper when only
    aggregates follow); ``observation``: receives ``rows_in``/``rows_decoded``/
    ``rows_in_error``. ``options``: those of :class:`~pgoutput_codec.changes.ChangeDecoder`
    (``tables``, ``include_xids``, ``include_timestamp``, ``include_origin``,
    ``registry``, ``after_lsn``/``until_lsn``, ``replays``); ``skip_empty_xacts=False``
    is not supported in parallel. Transactions received twice (a consumer that
    reconnected before confirming) are given once; an archive whose commit LSNs go
    down otherwise is out of order and raises ``ArchiveOrderError`` when pass 1 runs,
    in every mode (``replays="keep"``: neither; see ``ChangeDecoder``). ``after_lsn``/``until_lsn`` give only the transactions
    committed in ``(after_lsn, until_lsn]`` (an incremental run passes the largest
    ``commit_lsn`` the previous run gave): their rows are left out by order-key range
    before any decoding. Pass 1 still reads the control rows of the whole archive (a
    Relation sent before the window names the window's rows); pass 2 decodes only the
    window's rows. ``commit_rank`` stays the whole archive's.

    ``resume``: the :class:`~pgoutput_codec.checkpoint.Checkpoint` (or its JSON) of the
    run before, from :func:`checkpoint_of`: only rows with ``order_by`` >= its
    ``from_key`` are read (a filter on that column, which Parquet statistics turn into
    skipped files and row groups), and only transactions committed after its
    ``after_lsn`` are given. Needs ``order_by``: one integral column that keeps rising
    across runs (``capture``'s ``seq``).

    Runs one Spark job eagerly (pass 1, collecting the control rows to the driver).
    ``source="opengauss"``: openGauss/GaussDB frames instead (``style=`` 'b'/'t'/'j',
    ``exclude_users=``…), through :func:`.opengauss_changes.opengauss_decode_changes`."""
    if source == "opengauss":
        if resume is not None:
            raise ValueError("resume is for pgoutput archives (openGauss frames: use after_lsn)")
        from .opengauss_changes import opengauss_decode_changes
        return opengauss_decode_changes(df, payload=payload, order_by=order_by, envelope=envelope, sort=sort,
                                        mode=mode, observation=observation, **options)
    if source != "pgoutput":
        raise ValueError(f"source must be 'pgoutput' or 'opengauss', got {source!r}")
    mode = check_mode(mode)
    if not options.get("skip_empty_xacts", True):
        raise ValueError("skip_empty_xacts=False is not supported by the parallel decoder")
    options.pop("skip_empty_xacts", None)
    in_stream = options.pop("in_stream", None)
    has_lsn = lsn is not None and lsn in df.columns
    if resume is not None:
        resume = Checkpoint.of(resume)
        if not isinstance(order_by, str):
            raise ValueError("resume needs order_by: one integral column that keeps rising across runs "
                             "(capture's seq); file positions restart with every listing")
        df = df.where(_col(order_by) >= F.lit(resume.from_key))
    src = df.select(_col(payload).alias(_PAYLOAD), _order_key(df, order_by).alias(_KEY),
                    *([_col(lsn).alias(_LSN)] if has_lsn else []))

    fields_ok = HAS_ARROW_UDF and mode == FAILFAST and observation is None
    impl = impl or ("fields" if fields_ok else "map")
    if impl not in ("fields", "map"):
        raise ValueError(f"impl must be 'fields' or 'map', got {impl!r}")
    if impl == "fields" and not fields_ok:
        raise ValueError("impl='fields' needs pyspark.sql.functions.arrow_udf (PySpark >= 4.1), mode FAILFAST "
                         "and no observation")

    # pass 1: control candidates to the driver, with the Truncates where the table
    # functions will read them from here (_Pass2: FAILFAST, no observation)
    keeps_pass2 = mode == FAILFAST and observation is None
    tags = CONTROL_TAGS + (b"T" if keeps_pass2 else b"")
    rows = _collect_arrow(src.where(RF.is_control(F.col(_PAYLOAD), envelope, tags))
                          .select(_PAYLOAD, _KEY, *([_LSN] if has_lsn else [])))
    with failfast_errors():
        plan = ControlPlan.build(rows.column(_PAYLOAD), rows.column(_KEY), envelope=envelope, in_stream=in_stream,
                                 lsn=rows.column(_LSN) if has_lsn else None, resume=resume,
                                 errors="raise" if mode == FAILFAST else "collect", **options)
    if plan.replayed:
        _log.warning("pgoutput_codec: %d transaction(s) received again (replays) given once, the first "
                     "at seq %s; replayed_of(changes) lists them", len(plan.replayed), plan.replayed[0]["seq"])
    spark = df.sparkSession
    plan_bc = ship(spark, plan)

    # pass 2: every partition
    if impl == "fields":
        out = _FieldChanges(src, plan, plan_bc, rows, has_lsn, options, envelope, sort).changes()
        out._pgoutput_plan = plan
        return out
    count_rows = observation is not None
    inner = mapper_schema(options, mode, count_rows)
    if mode == FAILFAST and not count_rows:
        # whole transactions not given (a commit window, ones that never committed) and
        # tables ``tables`` leaves out: their rows need not cross into Python. Not when
        # rows are counted or kept in error.
        src = RF.kept(src, plan)
    out = src.mapInArrow(_ChangeMapper(plan_bc, inner, mode, has_lsn, count_rows), inner)
    if sort:   # before observe(): the sort's sampling job would run the metrics a second time
        out = out.orderBy(F.col("commit_rank").asc_nulls_first(), "seq", _SUB)
    if count_rows:
        out = observe_counts(out, observation)
    if mode == DROPMALFORMED:
        out = drop_malformed(out)
    out = out.drop(_SUB)
    out._pgoutput_plan = plan
    if keeps_pass2:   # no error rows, no counts: the table functions may decode again
        out._pgoutput_map = _MapChanges(src, plan, plan_bc, rows, has_lsn, envelope, sort)
    return out


def _attached(df: DataFrame, name: str):
    """What :func:`decode_changes` attached to the DataFrame it returned, or None. Read
    from the instance itself: a Spark Connect DataFrame answers any other attribute
    with a Column of that name."""
    return vars(df).get(name)


def checkpoint_of(changes: DataFrame) -> Checkpoint:
    """Where the run after this one resumes (``decode_changes(..., resume=)``): the
    :class:`~pgoutput_codec.checkpoint.Checkpoint` of the plan behind a DataFrame that
    :func:`decode_changes` returned (known as soon as it returns: pass 1 is eager).
    Save its ``to_json()`` once the run's output is safely written."""
    plan = _attached(changes, "_pgoutput_plan")
    if plan is None:
        raise ValueError("checkpoint_of takes the DataFrame decode_changes returned itself "
                         "(before any transformation: a new DataFrame does not carry the plan)")
    return plan.checkpoint()


def replayed_of(changes: DataFrame) -> list[dict]:
    """The transactions the archive behind a :func:`decode_changes` DataFrame held twice
    (a consumer that reconnected before confirming received them again), given once:
    per replay dropped, its xid, commit LSN and the seq of its second Commit. Known as
    soon as ``decode_changes`` returns (pass 1 is eager)."""
    plan = _attached(changes, "_pgoutput_plan")
    replayed = _attached(changes, "_pgoutput_replayed") if plan is None else plan.replayed   # openGauss
    if replayed is None:
        raise ValueError("replayed_of takes the DataFrame decode_changes returned itself")
    return [dict(r) for r in replayed]
