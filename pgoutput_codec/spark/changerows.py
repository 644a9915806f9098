"""Change rows on Spark: their schema (:func:`change_type`, for both sources; the error
columns PERMISSIVE adds; :func:`mapper_schema`, what the change mappers write before
the last steps: the hidden sub-order and count columns), the Python bodies the workers
run to make them from pgoutput payloads (picklable; the plan comes as a broadcast or
:mod:`.shipping`'s copy), and what a change decoder knows about a DataFrame it returned.

The workers' bodies: the change rows of a batch of payloads (``mapInArrow``,
:class:`ChangeMapper`), one change field of a batch (a scalar Arrow UDF per field,
:class:`ChangeField` over :class:`ChangeRows`), one table's typed rows
(:class:`TypedRows`, :class:`TypedMapper`), and the facts of a batch's payload heads
(:class:`HeadFacts`).

What a decoder knows about a DataFrame it returned, beyond its rows
(:class:`DecodedChanges`): :func:`.changes.decode_changes` returns a lazy DataFrame
whose pass 1 already ran on the driver: the control plan it built says where the next
run resumes (``checkpoint_of``) and which transactions came twice (``replayed_of``), and
what it kept of pass 2 lets the table functions decode one table's rows again, chosen
before decoding, instead of reading the decoded rows (:class:`.changes.Pass2`). These
facts are held here, one :class:`DecodedChanges` per DataFrame, in a registry keyed by
the DataFrame object itself (weakly: an entry goes with its DataFrame). Any
transformation gives a new DataFrame, which has none: the facts are those of the
rows exactly as returned. Classic and Spark Connect DataFrames alike are
weak-referenceable and hash by identity, and no attribute is set on them (a Spark
Connect DataFrame answers any unknown attribute with a column of that name).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import lsn_array, one_array
from ..opengauss.columns import OPENGAUSS_CHANGE_SCHEMA
from ..changes import spread_rows
from ..schema import CHANGE_FIELDS, CHANGE_OPTIONAL
from . import types as ST
from .messages import check_source, once_per_batch
from .modes import COUNT_FIELDS, DROPMALFORMED, FAILFAST, PERMISSIVE, failfast_errors, with_count_row

__all__ = ["ERROR_FIELDS", "SUB", "LSN", "change_type", "opengauss_change_type", "dropped_columns",
           "drop_malformed", "mapper_schema",
           "DecodedChanges", "record", "facts_of", "pass2_of",
           "as_binary", "sub_order", "ChangeMapper", "ChangeRows", "TypedRows", "typed_rows", "ChangeField",
           "HEAD_FACTS", "HEAD_FACTS_ROW", "HeadFacts", "TypedMapper"]


# --------------------------------------------------------------------------- the schema

#: the hidden column of a row's place among the rows of its message (a Truncate's rows
#: share a ``seq``): the last sort key
SUB = "__sub"
#: the hidden column pass 2 gives the archive's lsn column
LSN = "__lsn"

#: the columns PERMISSIVE mode adds to change rows: the error text and the raw payload
ERROR_FIELDS = [T.StructField("error", T.StringType()), T.StructField(ST.CORRUPT_RECORD, T.BinaryType())]


def drop_malformed(out: DataFrame) -> DataFrame:
    """DROPMALFORMED: the PERMISSIVE rows less those in error and the two error columns."""
    return out.filter(F.col("error").isNull()).drop(*[f.name for f in ERROR_FIELDS])


def dropped_columns(include_xids=True, include_timestamp=True, include_origin=True) -> list:
    """The optional change columns (``schema.CHANGE_OPTIONAL``) the include options switch off."""
    opts = dict(include_xids=include_xids, include_timestamp=include_timestamp, include_origin=include_origin)
    return [col for opt, col in CHANGE_OPTIONAL.items() if not opts[opt]]


def change_type(*, source: str = "pgoutput", include_xids=True, include_timestamp=True, include_origin=True,
                mode: str = FAILFAST) -> T.StructType:
    """Spark schema of :func:`.changes.decode_changes` rows of ``source``: for "pgoutput",
    ``schema.CHANGE_SCHEMA`` (minus the optional columns switched off) + ``commit_rank``;
    for "opengauss", ``OPENGAUSS_CHANGE_SCHEMA`` less those columns. PERMISSIVE adds
    ``error`` and ``_corrupt_record``."""
    drop = set(dropped_columns(include_xids, include_timestamp, include_origin))
    if check_source(source) == "opengauss":
        st = ST.spark_type(pa.struct([f for f in OPENGAUSS_CHANGE_SCHEMA if f.name not in drop]))
        return T.StructType(list(st.fields) + (ERROR_FIELDS if mode == PERMISSIVE else []))
    fields = [ST.spark_field(f) for f in CHANGE_FIELDS if f.name not in drop]
    fields.append(T.StructField("commit_rank", T.LongType()))
    if mode == PERMISSIVE:
        fields += ERROR_FIELDS
    return T.StructType(fields)


def opengauss_change_type(*, include_xids=True, include_timestamp=True, include_origin=True,
                          mode: str = FAILFAST) -> T.StructType:
    """``change_type(source="opengauss", ...)``: the Spark schema of openGauss change rows
    (``OPENGAUSS_CHANGE_SCHEMA`` less the columns the include options drop); PERMISSIVE
    adds ``error`` and ``_corrupt_record``."""
    return change_type(source="opengauss", include_xids=include_xids, include_timestamp=include_timestamp,
                       include_origin=include_origin, mode=mode)


def mapper_schema(options: dict, mode: str, count_rows: bool = False) -> T.StructType:
    """What :class:`.changerows.ChangeMapper` writes: the change rows (``change_type`` under
    ``options``' include_*; with the error columns unless FAILFAST, DROPMALFORMED
    filtering them later), the sub-order of a Truncate's rows, and the count columns
    when asked."""
    out_type = change_type(include_xids=options.get("include_xids", True),
                           include_timestamp=options.get("include_timestamp", True),
                           include_origin=options.get("include_origin", True),
                           mode=PERMISSIVE if mode != FAILFAST else FAILFAST)
    return T.StructType(list(out_type.fields) + [T.StructField(SUB, T.LongType())]
                        + (COUNT_FIELDS if count_rows else []))


# --------------------------------------------------------------------------- what a decoder knows of its DataFrame

@dataclass(frozen=True)
class DecodedChanges:
    """The facts of one DataFrame a change decoder returned.

    ``plan``: the pgoutput control plan (``ControlPlan``: its checkpoint and replays);
    None for openGauss rows. ``replayed``: the transactions given once because the
    archive held them twice (xid, commit LSN, seq of the second Commit), for openGauss
    rows (pgoutput's are the plan's). ``pass2``: the :class:`.changes.Pass2` behind the
    rows (the archive, the plan and its shipped copy), when the table functions may
    decode again (FAILFAST, no observation); else None."""

    plan: object | None = None
    replayed: list = field(default_factory=list)
    pass2: object | None = None


#: DataFrame -> its DecodedChanges
_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record(df: DataFrame, facts: DecodedChanges) -> DataFrame:
    """``df``, with ``facts`` known for it."""
    _FACTS[df] = facts
    return df


def facts_of(df: DataFrame) -> DecodedChanges | None:
    """The facts of ``df`` (None: not a DataFrame a change decoder returned)."""
    try:
        return _FACTS.get(df)
    except TypeError:   # not weak-referenceable: not one of ours
        return None


def pass2_of(df: DataFrame):
    """The :class:`.changes.Pass2` a DataFrame comes straight from (None: another
    DataFrame, or one cached: then its rows are read as they are)."""
    facts = facts_of(df)
    if facts is None or facts.pass2 is None or getattr(df, "is_cached", False):
        return None
    return facts.pass2


# --------------------------------------------------------------------------- the workers' bodies

def as_binary(arr) -> pa.Array:
    """One ``binary`` array (not ``large_binary``) of payloads."""
    arr = one_array(arr)
    if pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.binary())
    return arr


def sub_order(seq) -> np.ndarray:
    """The place of each row among the rows of its message: rows of one Truncate share a
    ``seq`` (one per relation) and keep the message's relation order by it."""
    seq = one_array(seq).to_numpy(zero_copy_only=False)
    sub = np.zeros(len(seq), dtype=np.int64)
    if len(seq) > 1:
        start = np.r_[0, np.flatnonzero(np.diff(seq) != 0) + 1]
        run = np.repeat(start, np.diff(np.r_[start, len(seq)]))
        sub = np.arange(len(seq), dtype=np.int64) - run
    return sub


class ChangeMapper:
    """Picklable ``mapInArrow`` body (and the data source's pass 2): the change rows of
    each batch of (payload, order key[, lsn]) as ``out_schema`` (:func:`.changerows.mapper_schema`):
    in PERMISSIVE and DROPMALFORMED one error row per malformed payload, with
    ``count_rows`` one count row per batch (:mod:`.modes`)."""

    def __init__(self, plan_bc, out_schema, mode, has_lsn, count_rows):
        self.plan_bc, self.out_schema, self.mode = plan_bc, out_schema, mode
        self.has_lsn, self.count_rows = has_lsn, count_rows

    def __call__(self, batches):
        plan = self.plan_bc.value
        target = ST.arrow_schema_for(self.out_schema)
        errors = "raise" if self.mode == FAILFAST else "collect"
        for b in batches:
            payload, keys = as_binary(b.column(0)), b.column(1)
            lsn = b.column(2) if self.has_lsn else None
            with failfast_errors():
                t = plan.changes(payload, keys, lsn, errors=errors)
            sub = sub_order(t.column("seq"))
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
                        extra["lsn"] = lsn_array(lsn, len(payload)).take(pa.array(rows))
                    extra["error"] = pa.array([e["error"] for e in bad], pa.string())
                    extra[ST.CORRUPT_RECORD] = payload.take(pa.array(rows))
                    cols = {k: pa.concat_arrays([one_array(v), one_array(extra[k])]) for k, v in cols.items()}
                    sub = np.r_[sub, np.zeros(len(bad), np.int64)]
                    n += len(bad)
            cols[SUB] = pa.array(sub, pa.int64())
            if self.count_rows:
                c = plan.last_counts
                cols = with_count_row(cols, n, c["rows_in"], c["rows_in_error"])
            arrays = [ST.to_spark_arrow(one_array(cols[f.name]), f.type) for f in target]
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


# ---- pass 2 as one scalar Arrow UDF per field (PySpark >= 4.1, FAILFAST) ------------------
# A mapInArrow's output is converted into Spark rows whole, whatever the query reads (a
# count spends most of its time turning `columns` and `after` into rows). Every change row is decoded from its own payload and order key (the plan
# says the rest), so each field can be its own UDF, like ``from_pgoutput``: Spark keeps
# only the calls a query reads, in one Python node (the payload crosses once), and a
# count needs none. The rows themselves are chosen before any decoding: Spark's filter
# on the tag byte, and when the plan can drop changes (uncommitted transactions,
# aborted subtransactions, ``tables``) on the order key, relation id and xid bytes
# (``ControlPlan.row_drops``; ``keep_mask`` on 35 payload bytes in Python past its limit).
# Truncates (one row per relation: not one row per payload) are rare and come with
# pass 1's rows, so the driver decodes them and they join as a small local DataFrame.


class ChangeRows:
    """Picklable: the change rows of one Arrow batch of payloads (one per payload)."""

    def __init__(self, plan_bc):
        self.plan_bc = plan_bc

    def __call__(self, payload, key, lsn=None) -> pa.Table:
        with failfast_errors():
            return self.plan_bc.value.change_rows(as_binary(payload), key, lsn)


class TypedRows(ChangeRows):
    """Picklable: the typed rows of one table (:class:`.tablerows.TableMapper`) of one Arrow batch,
    straight from its change rows (never turned into Spark rows in between)."""

    def __init__(self, plan_bc, mapper):
        super().__init__(plan_bc)
        self.mapper = mapper

    def __call__(self, payload, key, lsn=None) -> pa.Table:
        t = super().__call__(payload, key, lsn)
        has = pc.is_valid(t.column("op")).to_numpy(zero_copy_only=False)
        if has.all():
            return typed_rows(self.mapper, t)
        # rows a query's own filter sees before the row filters (``change_rows``): typed
        # rows for the changes, null rows for the others
        return spread_rows(typed_rows(self.mapper, t.filter(pa.array(has))), np.flatnonzero(has), len(t))


def typed_rows(mapper, changes: pa.Table) -> pa.Table:
    """``mapper`` (a :class:`.tablerows.TableMapper`) over the change rows ``changes``, as one table."""
    return pa.Table.from_batches(list(mapper(iter(changes.combine_chunks().to_batches()))),
                                 schema=ST.arrow_schema_for(mapper.out_schema))


class ChangeField:
    """Picklable scalar Arrow UDF body: column ``name`` of ``rows_of``'s table of one Arrow
    batch, computed once for every field UDF (same ``token``) evaluated on the batch."""

    def __init__(self, rows_of, token, name, target):
        self.rows_of, self.token, self.name, self.target = rows_of, token, name, target

    def __call__(self, payload, key, lsn=None):
        t = once_per_batch(self.token, (payload, key, lsn), lambda: self.rows_of(payload, key, lsn))
        return ST.to_spark_arrow(one_array(t.column(self.name)), self.target)


#: what ``HeadFacts`` gives per row: ``f``, the facts, and ``s``, the order key
HEAD_FACTS = T.StructType([T.StructField("version", T.LongType()), T.StructField("rank", T.LongType()),
                           T.StructField("old", T.BooleanType()), T.StructField("del", T.BooleanType())])
HEAD_FACTS_ROW = T.StructType([T.StructField("f", HEAD_FACTS), T.StructField("s", T.LongType())])


class HeadFacts:
    """Picklable ``mapInArrow`` body over (order key, head) batches: ``ControlPlan.head_facts``
    as a struct of (``version`` index, ``rank``, ``old``, ``del``), -1, -1, false, false for
    rows not given. For a table whose column lists differ over an archive where some
    transaction committed after a later one's rows (streamed, prepared: the versions
    are ordered by their last change, which then needs each row's commit rank) or a plan
    Spark cannot judge by itself; else :func:`.archiverows.given` answers without Python. A
    ``mapInArrow``, not a scalar ``arrow_udf``, on every PySpark: the faster of the two (a
    scalar UDF's node keeps its input rows to join them with its results)."""

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


class TypedMapper:
    """Picklable ``mapInArrow`` body: one table's typed rows (:class:`.tablerows.TableMapper`) of
    each batch of payloads, with their ``__sub``."""

    def __init__(self, plan_bc, mapper, has_lsn, out_type):
        self.plan_bc, self.mapper, self.has_lsn, self.out_type = plan_bc, mapper, has_lsn, out_type

    def __call__(self, batches):
        plan = self.plan_bc.value
        target = ST.arrow_schema_for(self.out_type)
        for b in batches:
            with failfast_errors():
                t = plan.changes(as_binary(b.column(0)), b.column(1), b.column(2) if self.has_lsn else None,
                                 errors="raise")
            typed = typed_rows(self.mapper, t)
            yield pa.RecordBatch.from_arrays(
                [one_array(typed.column(f.name)) for f in target if f.name != SUB]
                + [pa.array(sub_order(t.column("seq")), pa.int64())], schema=target)
