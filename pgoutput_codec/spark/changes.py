"""Change rows at cluster scale: ``decode_changes`` (its tables: :mod:`.tables`).

The single-process API (:mod:`pgoutput_codec.changes`) on Spark DataFrames, correct
across partitions and files, and parallel, for both sources: pgoutput archives (here)
and openGauss frames (``source="opengauss"``, :mod:`.opengauss`).

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
     Python (:mod:`.archiverows`). Only a plan too long to say so (``ROW_DROP_LIMIT``) is judged on the first
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
   rows in the ``mapInArrow`` that decodes them (:class:`.changes.MapChanges`), not in a second one
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

Incremental runs (:mod:`pgoutput_codec.changes.checkpoint`): ``checkpoint_of(changes)`` says
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

What ``decode_changes`` keeps of its pass 2 for the table functions (FAILFAST, no
observation; :class:`Pass2`): the archive's rows (payload, order key, lsn), the control
plan and its shipped copy, and pass 1's rows with the Truncates. From them
``table_changes``, ``snapshot`` and ``history`` choose one table's rows before any
decoding (Spark drops the other tables' rows by their relation id bytes,
:mod:`.archiverows`) and type them in the Python step that decodes them, and the versions
job reads the payload heads instead of decoded rows (:meth:`Pass2.table_info`).
:class:`FieldChanges` (``impl="fields"``) builds the change rows as one scalar Arrow UDF
per field; :class:`MapChanges` (``impl="map"``) types one table's rows in the
``mapInArrow`` that decodes them.
"""

from __future__ import annotations

import decimal
import logging
import uuid

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import one_array
from ..pgoutput.batch import message_tags
from ..changes.checkpoint import Checkpoint
from ..changes import CONTROL_TAGS, HEAD_BYTES, ControlPlan
from . import archiverows as RF
from . import types as ST
from .archiverows import KEY, PAYLOAD, order_key
from .catalogs import files_catalog, with_catalog
from .changerows import (HEAD_FACTS_ROW, LSN, SUB, ChangeField, ChangeMapper, ChangeRows, DecodedChanges, HeadFacts,
                         TypedMapper, TypedRows, as_binary, drop_malformed, facts_of, mapper_schema, record,
                         sub_order, typed_rows)
from .messages import HAS_ARROW_UDF, check_source
from .modes import DROPMALFORMED, FAILFAST, check_mode, failfast_errors, observe_counts
from .opengauss import frame_changes
from .shipping import check_workers, col, collect_arrow, to_workers
from .tablerows import TableInfo

__all__ = ["decode_changes", "opengauss_decode_changes", "checkpoint_of", "replayed_of", "Pass2", "MapChanges",
           "FieldChanges"]


_log = logging.getLogger("pgoutput_codec")


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

    ``resume``: the :class:`~pgoutput_codec.changes.checkpoint.Checkpoint` (or its JSON) of the
    run before, from :func:`checkpoint_of`: only rows with ``order_by`` >= its
    ``from_key`` are read (a filter on that column, which Parquet statistics turn into
    skipped files and row groups), and only transactions committed after its
    ``after_lsn`` are given. Needs ``order_by``: one integral column that keeps rising
    across runs (``capture``'s ``seq``).

    Runs one Spark job eagerly (pass 1, collecting the control rows to the driver).
    ``source="opengauss"``: openGauss/GaussDB frames instead (``style=`` 'b'/'t'/'j',
    ``exclude_users=``…: the options of :func:`opengauss_decode_changes`)."""
    check_workers(df.sparkSession)
    if check_source(source) == "opengauss":
        if resume is not None:
            raise ValueError("resume is for pgoutput archives (openGauss frames: use after_lsn)")
        return frame_changes(df, payload=payload, order_by=order_by, envelope=envelope, sort=sort, mode=mode,
                             observation=observation, **options)
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
        df = df.where(col(order_by) >= F.lit(resume.from_key))
    src = df.select(col(payload).alias(PAYLOAD), order_key(df, order_by).alias(KEY),
                    *([col(lsn).alias(LSN)] if has_lsn else []))

    fields_ok = HAS_ARROW_UDF and mode == FAILFAST and observation is None
    impl = impl or ("fields" if fields_ok else "map")
    if impl not in ("fields", "map"):
        raise ValueError(f"impl must be 'fields' or 'map', got {impl!r}")
    if impl == "fields" and not fields_ok:
        raise ValueError("impl='fields' needs pyspark.sql.functions.arrow_udf (PySpark >= 4.1), mode FAILFAST "
                         "and no observation")

    # pass 1: control candidates to the driver, with the Truncates where the table
    # functions will read them from here (Pass2: FAILFAST, no observation)
    keeps_pass2 = mode == FAILFAST and observation is None
    tags = CONTROL_TAGS + (b"T" if keeps_pass2 else b"")
    rows = collect_arrow(src.where(RF.is_control(F.col(PAYLOAD), envelope, tags))
                          .select(PAYLOAD, KEY, *([LSN] if has_lsn else [])))
    with failfast_errors():
        plan = ControlPlan.build(rows.column(PAYLOAD), rows.column(KEY), envelope=envelope, in_stream=in_stream,
                                 lsn=rows.column(LSN) if has_lsn else None, resume=resume,
                                 errors="raise" if mode == FAILFAST else "collect", **options)
    if plan.replayed:
        _log.warning("pgoutput_codec: %d transaction(s) received again (replays) given once, the first "
                     "at seq %s; replayed_of(changes) lists them", len(plan.replayed), plan.replayed[0]["seq"])
    spark = df.sparkSession
    plan_bc = to_workers(spark, plan)

    # pass 2: every partition
    # the archive's type catalog (the footers of the files behind df) goes with the rows
    catalog = files_catalog(df.inputFiles())
    if impl == "fields":
        pass2 = FieldChanges(src, plan, plan_bc, rows, has_lsn, options, envelope, sort)
        return record(with_catalog(pass2.changes(), catalog), DecodedChanges(plan, pass2=pass2))
    count_rows = observation is not None
    inner = mapper_schema(options, mode, count_rows)
    if mode == FAILFAST and not count_rows:
        # whole transactions not given (a commit window, ones that never committed) and
        # tables ``tables`` leaves out: their rows need not cross into Python. Not when
        # rows are counted or kept in error.
        src = RF.kept(src, plan)
    out = src.mapInArrow(ChangeMapper(plan_bc, inner, mode, has_lsn, count_rows), inner)
    if sort:   # before observe(): the sort's sampling job would run the metrics a second time
        out = out.orderBy(F.col("commit_rank").asc_nulls_first(), "seq", SUB)
    if count_rows:
        out = observe_counts(out, observation)
    if mode == DROPMALFORMED:
        out = drop_malformed(out)
    out = out.drop(SUB)
    # no error rows, no counts: the table functions may decode again
    pass2 = MapChanges(src, plan, plan_bc, rows, has_lsn, envelope, sort) if keeps_pass2 else None
    return record(with_catalog(out, catalog), DecodedChanges(plan, pass2=pass2))


def opengauss_decode_changes(df: DataFrame, payload: str = "data", order_by=None, style: str = "b", *,
                             sort: bool = False, **options) -> DataFrame:
    """``decode_changes(df, source="opengauss", ...)``, unsorted unless ``sort=True``.

    Change rows of a DataFrame of openGauss frames (one frame per row in ``payload``),
    equal to :func:`pgoutput_codec.opengauss.changes.decode_changes` over the frames in
    ``order_by`` order (how, and ``mode``, ``observation`` and ``errors``:
    :mod:`.opengauss`). Options as that decoder's: ``envelope``, ``tables``,
    ``skip_empty_xacts``, ``include_xids``/``include_timestamp``/``include_origin``,
    ``exclude_users``. ``after_lsn``/``until_lsn``: only the transactions committed in
    ``(after_lsn, until_lsn]`` — a filter on the decoded ``commit_lsn`` here (a frame
    holds many transactions: no frame is skipped); rows in error are kept. ``replays``:
    as the single-process decoder (a transaction received again is given once, a frame
    out of order refused with ``ArchiveOrderError``); the driver judges every Commit in
    pass 1, and ``replayed_of(changes)`` lists the replays dropped (seq: the order key of
    the frame holding the second Commit). ``keys``: tables' keys the records may never
    name, as the single-process decoder (``{"schema.table": [columns]}`` or the text
    ``"schema.table(col, ...), ..."``)."""
    return decode_changes(df, payload=payload, order_by=order_by, style=style, sort=sort, source="opengauss",
                          **options)


def checkpoint_of(changes: DataFrame) -> Checkpoint:
    """Where the run after this one resumes (``decode_changes(..., resume=)``): the
    :class:`~pgoutput_codec.changes.checkpoint.Checkpoint` of the plan behind a DataFrame that
    :func:`decode_changes` returned (known as soon as it returns: pass 1 is eager).
    Save its ``to_json()`` once the run's output is safely written."""
    facts = facts_of(changes)
    if facts is None or facts.plan is None:
        raise ValueError("checkpoint_of takes the DataFrame decode_changes returned itself "
                         "(before any transformation: a new DataFrame does not carry the plan)")
    return facts.plan.checkpoint()


def replayed_of(changes: DataFrame) -> list[dict]:
    """The transactions the archive behind a :func:`decode_changes` DataFrame held twice
    (a consumer that reconnected before confirming received them again), given once:
    per replay dropped, its xid, commit LSN and the seq of its second Commit. Known as
    soon as ``decode_changes`` returns (pass 1 is eager)."""
    facts = facts_of(changes)
    if facts is None:
        raise ValueError("replayed_of takes the DataFrame decode_changes returned itself")
    replayed = facts.plan.replayed if facts.plan is not None else facts.replayed   # openGauss: no plan
    return [dict(r) for r in replayed]


# --------------------------------------------------------------------------- pass 2, kept for the table functions

class Pass2:
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
            self._tables[key] = (p, to_workers(self.spark, p))
        return self._tables[key]

    def table_info(self, schema: str, table: str, as_of_lsn=None) -> TableInfo:
        """:func:`.tablerows.table_info` of the relation that bears the name (as of
        ``as_of_lsn``: ``snapshot``'s), its facts over all its changes."""
        plan, bc = self._narrowed(schema, table, as_of_lsn, all_changes=True)
        holder, replaced = self.plan.bearer(schema, table, as_of_lsn)
        return self._table_info(plan, bc)._replace(relation_id=holder, replaced=replaced, found=holder is not None,
                                                   copied=holder in self.plan.copied_relations())

    def cut_info(self, schema: str, table: str, as_of_lsn) -> TableInfo:
        """The versions, first and last changes of the table's transactions committed up to
        ``as_of_lsn`` (the cut of ``snapshot``), from the payload heads."""
        return self._table_info(*self._narrowed(schema, table, as_of_lsn))

    def _table_info(self, plan, bc) -> TableInfo:
        """:func:`.tablerows.table_info` without decoding: each row's Relation version and
        commit rank from its 35-byte head (one small job, one Python node: :class:`HeadFacts`), the
        column lists from the plan, the truncates from pass 1's rows on the driver. The job
        is Spark's own (:func:`.archiverows.given`), no row crosses into Python, for a table with
        one column list in the whole archive (however often its Relation was sent: no
        order among versions to find) and, when commits come in the order of their
        transactions' rows (``GivenHeads.serial``: no streamed or prepared transaction
        committed late), for one with several: then the last change of each version is
        its greatest order key."""
        rows = RF.kept(self.src.where(RF.may_be_row_change(F.col(PAYLOAD), self.envelope)), plan)
        heads = RF.given_heads(plan)
        if heads is not None and len(heads.fingerprints) <= 1:
            used = [False, False, False, None, None]
            if heads.fingerprints and heads.firsts:
                given = RF.given(heads)
                used = list(rows.agg(*[F.max(c) for c in given], F.min(F.when(given[0], F.col(KEY))),
                                     F.max(F.when(given[0], F.col(KEY)))).collect()[0])
            fps = [heads.fingerprints[0]] if used[0] else []
            versions = [plan.columns_by_version()[fp] for fp in fps]
            return TableInfo(versions, self._truncate_facts(plan), bool(used[1]), bool(used[2]), fps,
                              firsts=[(None, used[3])] if fps else [], lasts=[(None, used[4])] if fps else [])
        if heads is not None and heads.serial and sum(map(len, heads.versions.values())) <= RF.ROW_DROP_LIMIT:
            given, old, dels = RF.given(heads)
            used = (rows.where(given).groupBy(RF.version_of(heads).alias("v"))
                    .agg(F.max(KEY).alias("last"), F.min(KEY).alias("first"), F.max(old).alias("old"),
                         F.max(dels).alias("dels")).collect())
            by_version = plan.columns_by_version()
            used = sorted(used, key=lambda r: r["last"])
            fps = [heads.fingerprints[r["v"]] for r in used]
            return TableInfo([by_version[fp] for fp in fps], self._truncate_facts(plan),
                              any(r["old"] for r in used), any(r["dels"] for r in used), fps,
                              firsts=[(None, r["first"]) for r in used], lasts=[(None, r["last"]) for r in used])
        # the Delete fact from the heads too, where the tag byte is read anyway: only the
        # heads cross into Python, and no whole payload is kept beside them
        f = (rows.select(KEY, F.substring(F.col(PAYLOAD), 1, HEAD_BYTES).alias("h"))
             .mapInArrow(HeadFacts(bc), HEAD_FACTS_ROW))
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
        return TableInfo([by_version[fp] for fp in fps], self._truncate_facts(plan), any(r["old"] for r in used),
                          any(r["dels"] for r in used), fps, firsts=[first[fp] for fp in fps],
                          lasts=[last[fp] for fp in fps])

    def _truncate_facts(self, plan) -> list:
        """``TableInfo.truncates``: (rank, seq, commit_lsn, commit_ts) of each Truncate."""
        trunc = self._truncates(plan)
        # commit_lsn as Spark gives it back (decimal(20,0)): history puts it in literals
        return [] if trunc is None else sorted(
            (r["commit_rank"], r["seq"], None if r["commit_lsn"] is None else decimal.Decimal(r["commit_lsn"]),
             r.get("commit_ts")) for r in trunc.to_pylist())

    def _truncates(self, plan) -> pa.Table | None:
        """The change rows of the Truncates among pass 1's rows, in order (None: none)."""
        payload = as_binary(self.pass1.column(PAYLOAD))
        is_t = message_tags(payload, envelope=plan.envelope) == ord("T")
        if not is_t.any():
            return None
        sel = pa.array(is_t)
        lsn = self.pass1.column(LSN).combine_chunks().filter(sel) if self.has_lsn else None
        with failfast_errors():
            t = plan.changes(payload.filter(sel), self.pass1.column(KEY).combine_chunks().filter(sel), lsn,
                             errors="raise")
        return t.sort_by([("seq", "ascending")]) if len(t) else None

    def _sorted(self, out: DataFrame) -> DataFrame:
        """``out`` ordered like ``decode_changes``' rows when they are, without ``__sub``."""
        if self.sort:
            out = out.orderBy(F.col("commit_rank").asc_nulls_first(), "seq", SUB)
        return out.drop(SUB)


class MapChanges(Pass2):
    """``decode_changes`` with ``impl="map"`` (FAILFAST, no observation): ``table_changes``
    types one table's rows in the ``mapInArrow`` that decodes them. Typing the change rows
    takes two: theirs, turned into Spark rows, sorted, then back into Arrow for the
    typing (``table_changes`` written out whole: twice the time)."""

    def typed(self, schema: str, table: str, mapper, until_lsn=None) -> DataFrame:
        """``table_changes``' rows (``mapper``: a :class:`.tablerows.TableMapper`), typed in
        the ``mapInArrow`` that decodes them."""
        plan, bc = self._narrowed(schema, table, until_lsn)
        out_type = T.StructType(list(mapper.out_schema.fields) + [T.StructField(SUB, T.LongType())])
        payload = F.col(PAYLOAD)
        rows = self.src.where(RF.may_be_row_change(payload, self.envelope) | RF.tag_in(payload, self.envelope, b"T"))
        # the other tables' rows and the transactions after as_of_lsn: Spark drops them
        # where it can tell them (else the decoder leaves them out)
        rows = RF.kept(rows, plan)
        return self._sorted(rows.mapInArrow(TypedMapper(bc, mapper, self.has_lsn, out_type), out_type))


class FieldChanges(Pass2):
    """``decode_changes`` with ``impl="fields"``: the archive (``src``), pass 1's rows and
    its plan; builds the change rows and one table's typed rows."""

    def __init__(self, src, plan, plan_bc, pass1: pa.Table, has_lsn: bool, options: dict, envelope: str,
                 sort: bool):
        super().__init__(src, plan, plan_bc, pass1, has_lsn, envelope, sort)
        self.options = options

    def _rows(self, plan, plan_bc) -> DataFrame:
        """The archive rows that make one change row each, chosen without decoding."""
        return RF.kept(self.src.where(RF.may_be_row_change(F.col(PAYLOAD), self.envelope)), plan, plan_bc)

    def _frame(self, plan, plan_bc, rows_of, out_type: T.StructType, truncates: pa.Table | None,
               deterministic: bool = True) -> DataFrame:
        """One UDF per column of ``out_type`` over the chosen rows (``seq`` is the order
        key itself, ``__sub`` 0), plus the Truncates' rows as a local DataFrame; sorted
        like ``decode_changes`` when asked."""
        args = [F.col(PAYLOAD), F.col(KEY)] + ([F.col(LSN)] if self.has_lsn else [])
        token = uuid.uuid4().hex   # names these rows in the worker's per-batch cache
        cols = []
        for f in out_type.fields:
            if f.name == "seq":
                cols.append(F.col(KEY).alias("seq"))          # no decoding
            elif f.name == SUB:
                cols.append(F.lit(0).cast(T.LongType()).alias(SUB))
            else:
                udf = F.arrow_udf(ChangeField(rows_of, token, f.name, ST.arrow_type_for(f.dataType)), f.dataType)
                cols.append((udf if deterministic else udf.asNondeterministic())(*args).alias(f.name))
        out = self._rows(plan, plan_bc).select(*cols)
        if truncates is not None:
            target = ST.arrow_schema_for(out_type)
            arrays = [ST.to_spark_arrow(one_array(truncates.column(f.name)), f.type) if f.name != SUB
                      else pa.array(sub_order(truncates.column("seq")), pa.int64()) for f in target]
            local = self.spark.createDataFrame(pa.Table.from_arrays(arrays, schema=target), schema=out_type)
            out = out.unionByName(local)
        return self._sorted(out)

    def changes(self) -> DataFrame:
        """The change rows of ``decode_changes``."""
        return self._frame(self.plan, self.plan_bc, ChangeRows(self.plan_bc), mapper_schema(self.options, FAILFAST),
                           self._truncates(self.plan))

    def typed(self, schema: str, table: str, mapper, until_lsn=None) -> DataFrame:
        """``table_changes``' rows (``mapper``: a :class:`.tablerows.TableMapper`), typed in
        the same Python step that decodes them."""
        plan, bc = self._narrowed(schema, table, until_lsn)
        trunc = self._truncates(plan)
        out_type = T.StructType(list(mapper.out_schema.fields) + [T.StructField(SUB, T.LongType())])
        if trunc is not None:
            trunc = typed_rows(mapper, trunc).append_column(SUB, pa.array(sub_order(trunc.column("seq")), pa.int64()))
        # not deterministic, so that Spark keeps a query's filters on the typed columns
        # (snapshot's, history's) above them instead of decoding every row twice
        return self._frame(plan, bc, TypedRows(bc, mapper), out_type, trunc, deterministic=False)
