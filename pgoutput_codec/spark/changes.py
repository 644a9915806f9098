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
   rows in the ``mapInArrow`` that decodes them (:class:`.pass2.MapChanges`), not in a second one
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

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..checkpoint import Checkpoint
from ..plan import CONTROL_TAGS, ControlPlan
from . import rowfilter as RF
from .changetype import LSN, SUB, drop_malformed, mapper_schema
from .counts import observe_counts
from .dataframes import col, collect_arrow
from .environment import check_workers
from .decoded import DecodedChanges, facts_of, record
from .functions import HAS_ARROW_UDF
from .mappers import ChangeMapper
from .modes import DROPMALFORMED, FAILFAST, check_mode, failfast_errors
from .opengauss_changes import opengauss_decode_changes
from .orderkey import order_key
from .pass2 import FieldChanges, MapChanges
from .rowfilter import KEY, PAYLOAD
from .shipping import to_workers

__all__ = ["decode_changes", "checkpoint_of", "replayed_of"]

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

    ``resume``: the :class:`~pgoutput_codec.checkpoint.Checkpoint` (or its JSON) of the
    run before, from :func:`checkpoint_of`: only rows with ``order_by`` >= its
    ``from_key`` are read (a filter on that column, which Parquet statistics turn into
    skipped files and row groups), and only transactions committed after its
    ``after_lsn`` are given. Needs ``order_by``: one integral column that keeps rising
    across runs (``capture``'s ``seq``).

    Runs one Spark job eagerly (pass 1, collecting the control rows to the driver).
    ``source="opengauss"``: openGauss/GaussDB frames instead (``style=`` 'b'/'t'/'j',
    ``exclude_users=``…), through :func:`.opengauss_changes.opengauss_decode_changes`."""
    check_workers(df.sparkSession)
    if source == "opengauss":
        if resume is not None:
            raise ValueError("resume is for pgoutput archives (openGauss frames: use after_lsn)")
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
    # functions will read them from here (pass2.Pass2: FAILFAST, no observation)
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
    if impl == "fields":
        pass2 = FieldChanges(src, plan, plan_bc, rows, has_lsn, options, envelope, sort)
        return record(pass2.changes(), DecodedChanges(plan, pass2=pass2))
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
    return record(out, DecodedChanges(plan, pass2=pass2))



def checkpoint_of(changes: DataFrame) -> Checkpoint:
    """Where the run after this one resumes (``decode_changes(..., resume=)``): the
    :class:`~pgoutput_codec.checkpoint.Checkpoint` of the plan behind a DataFrame that
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
