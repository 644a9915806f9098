"""An archive's rows on Spark before any decoding: their arrival order (:func:`order_key`:
one int64 column, from the ``order_by`` column(s) or, without them, from the files'
order and each row's place in its file; the ordering contract: :mod:`.changes`), and
Spark's own tests on their payload bytes, which choose the rows that go on, before any
Python.

A binary column costs Spark per row to hand to a Python worker, whatever the row holds,
so every row left out here is a row never sent: ``decode_changes``' pass 1 keeps the
control candidates by their tag byte (≈1% of an archive); pass 2 and the table functions
keep the rows that can make change rows, and drop the rows a ``ControlPlan`` leaves out —
whole transactions by order-key range, the tables not chosen by relation id, aborted
subtransactions by key and xid (``ControlPlan.row_drops``) — as Column expressions on
the payload's first bytes and the order key. Past ``ROW_DROP_LIMIT`` a plan is judged
by ``ControlPlan.keep_mask`` over the payload heads in Python (:class:`KeepRows`).

Every OR here is a balanced tree (:func:`any_of`): Spark Connect refuses deep expressions.
"""

from __future__ import annotations

import math

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..changes import CONTROL_TAGS, ENVELOPE_INERT_TAGS, HEAD_BYTES, INERT_TAGS, ControlPlan, GivenHeads, RowDrops
from ..pgoutput.facts import ROW_CHANGE_TAGS
from .shipping import col, physical_plan

__all__ = ["order_key", "FILE_BITS", "PAYLOAD", "KEY", "ROW_DROP_LIMIT", "tag_in", "is_control",
           "may_be_row_change", "KeepRows", "any_of", "in_ranges", "outside", "be32", "past_first", "dropped",
           "given", "version_of", "given_heads", "kept"]


# --------------------------------------------------------------------------- arrival order

#: the bits of the row index in a default order key: ``file_rank << FILE_BITS | row_index``
FILE_BITS = 40


def order_key(df: DataFrame, order_by) -> Column:
    """An int64 column of arrival order (see :mod:`.changes`: the ordering contract)."""
    if order_by is None:
        return _default_order(df)
    cols = [order_by] if isinstance(order_by, str) else list(order_by)
    for c in cols:
        dt = df.schema[c].dataType
        if not isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)) or \
                (isinstance(dt, T.DecimalType) and dt.scale):
            raise TypeError(f"order_by column {c!r} must be integral, not {dt.simpleString()}")
    if len(cols) == 1:
        return col(cols[0]).cast("long")
    aggs = []
    for c in cols:
        aggs += [F.min(col(c)).cast("decimal(38,0)"), F.max(col(c)).cast("decimal(38,0)")]
    row = df.agg(*aggs).first()
    key, bits = None, 0
    for k in reversed(range(len(cols))):
        lo, hi = int(row[2 * k] or 0), int(row[2 * k + 1] or 0)
        width = max(1, (hi - lo).bit_length())
        part = (col(cols[k]).cast("decimal(38,0)") - F.lit(lo)).cast("long")
        part = F.shiftleft(part, bits) if bits else part
        key = part if key is None else key.bitwiseOR(part)
        bits += width
    if bits > 63:
        raise ValueError(f"order_by {cols}: the columns' ranges need {bits} bits, more than an int64 holds; "
                         "add one integral arrival-order column (capture writes `seq`)")
    return key


def _default_order(df: DataFrame) -> Column:
    try:
        meta = df.select(F.col("_metadata.file_path").alias("f"), F.col("_metadata.row_index").alias("r"))
        _ = meta.schema   # resolves now: AnalysisException without row-index metadata
        files = sorted(r.f for r in meta.select("f").distinct().collect())
        rank = F.create_map(*[x for i, p in enumerate(files) for x in (F.lit(p), F.lit(i))])
        return F.shiftleft(F.element_at(rank, F.col("_metadata.file_path")).cast("long"), FILE_BITS) \
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
    return (F.shiftleft(F.element_at(rank, F.input_file_name()).cast("long"), FILE_BITS)
            .bitwiseOR(F.shiftleft(pid, 28)).bitwiseOR(within))


# --------------------------------------------------------------------------- which rows go on

#: the column names pass 2 gives the payload and the order key (``decode_changes``)
PAYLOAD, KEY = "__payload", "__order"


def tag_in(payload: Column, envelope: str, tags: bytes, bare: bytes | None = None) -> Column:
    """Spark's own test, without decoding, that the tag byte ``message_tags`` reads is one
    of ``tags``: the 26th byte of an XLogData 'w' frame (unless ``envelope="none"``); for
    any other row its first byte, tested against ``bare`` (default: ``tags``)."""
    def among(col, tag_bytes):
        return col.isin(*[F.lit(bytearray([t])) for t in tag_bytes])

    first = F.substring(payload, 1, 1)
    if envelope == "none":
        return among(first, tags)
    return F.when(first == F.lit(bytearray(b"w")), among(F.substring(payload, 26, 1), tags)) \
        .otherwise(among(first, tags if bare is None else bare))


def is_control(payload: Column, envelope: str, tags: bytes = CONTROL_TAGS) -> Column:
    """The control candidates, chosen by Spark itself by their tag byte. No Python worker
    sees the other ≈99% of the archive (a mapInArrow doing this moved every payload
    through Python)."""
    return tag_in(payload, envelope, tags)


def may_be_row_change(payload: Column, envelope: str) -> Column:
    """The rows the field UDFs decode: all but the control candidates and Truncates
    (decoded on the driver from pass 1), logical decoding messages and, in an envelope,
    keepalives (inert: no change rows; not decoded at all here). A null, empty or unknown
    row stays, to fail in the decoder; so does a bare 'M' where every row must be a frame."""
    skip = CONTROL_TAGS + b"T" + INERT_TAGS
    bare = {"none": skip, "auto": skip + ENVELOPE_INERT_TAGS,
            "xlogdata": CONTROL_TAGS + b"T" + ENVELOPE_INERT_TAGS}[envelope]
    return ~F.coalesce(tag_in(payload, envelope, skip, bare), F.lit(False))


class KeepRows:
    """Picklable scalar Arrow UDF body: ``ControlPlan.keep_mask`` of a batch of heads."""

    def __init__(self, plan_bc):
        self.plan_bc = plan_bc

    def __call__(self, key, head):
        return pa.array(self.plan_bc.value.keep_mask(head, key), pa.bool_())


def any_of(cols) -> Column:
    """``cols[0] | cols[1] | …`` as a balanced tree (False for none): hundreds of terms
    nest log₂ deep, not hundreds deep. Spark Connect's protobuf parser refuses deep
    expressions: the 256-id filter of the limits test, chained left-deep, failed with
    "Exceeded upb_DecodeOptions_MaxDepth"."""
    cols = list(cols)
    if not cols:
        return F.lit(False)
    while len(cols) > 1:
        cols = [cols[i] | cols[i + 1] if i + 1 < len(cols) else cols[i] for i in range(0, len(cols), 2)]
    return cols[0]


def in_ranges(ranges) -> Column:
    """The order key lies in one of ``ranges`` (``(lo, hi)``, bounds exclusive, None: open)."""
    key = F.col(KEY)
    return any_of((key > F.lit(lo) if lo is not None else F.lit(True))
                & (key < F.lit(hi) if hi is not None else F.lit(True)) for lo, hi in ranges)


def outside(rows: DataFrame, ranges) -> DataFrame:
    """``rows`` without those whose order key lies in one of ``ranges``
    (``ControlPlan.dropped_key_ranges``)."""
    return rows.where(~in_ranges(ranges)) if ranges else rows


def be32(n: int) -> Column:
    """A relation id or xid as the 4 payload bytes that carry it."""
    return F.lit(bytearray(n.to_bytes(4, "big")))


def past_first(relid: Column, firsts: dict) -> Column:
    """``relid`` (4 payload bytes) is one of ``firsts``' relation ids and the order key
    lies past that id's first Relation (``firsts[id]``; None: before the archive). Rows
    past every first Relation (most of an archive) cost one set lookup; a row before
    some costs one more key test per √n ids (the ids go in about √n groups of √n, by
    the key of their first Relation), not one per id."""
    key = F.col(KEY)

    def among(ids):
        return relid.isin(*[be32(r) for r in ids]) if ids else F.lit(False)

    always = [r for r, lo in firsts.items() if lo is None]
    later = sorted((lo, r) for r, lo in firsts.items() if lo is not None)
    if not later:
        return among(always)
    size = max(1, math.isqrt(len(later)))
    groups = [later[i:i + size] for i in range(0, len(later), size)]
    out = F.when(key > F.lit(groups[-1][-1][0]), among(list(firsts)))
    for g in reversed(range(len(groups))):
        # key past group g - 1's first Relations, not past all of group g's
        some = among([r for _, r in groups[g]]) & any_of((key > F.lit(lo)) & (relid == be32(r))
                                                        for lo, r in groups[g])
        col = among(always + [r for grp in groups[:g] for _, r in grp]) | some
        out = out.when(key > F.lit(groups[g - 1][-1][0]), col) if g else out.otherwise(col)
    return out


def _change_head(tag: int, streamed: Column | None):
    """A payload read as an I/U/D message whose tag byte is at offset ``tag``: (its tag
    byte, the 0-based offset of its relation id — 4 bytes later inside a stream block,
    after the xid —, whether it is an I/U/D row long enough to hold that id)."""
    p = F.col(PAYLOAD)
    tag_byte = F.substring(p, tag + 1, 1)
    rel_at = F.lit(tag + 1) if streamed is None else F.when(streamed, F.lit(tag + 5)).otherwise(F.lit(tag + 1))
    row_change = tag_byte.isin(*[F.lit(bytearray([t])) for t in ROW_CHANGE_TAGS.encode()])
    return tag_byte, rel_at, row_change & (F.length(p) >= rel_at + 4)


def _by_tag_offset(envelope: str, test, null: bool | None = False) -> Column:
    """``test(tag)`` where the tag byte lies: offset 0, or 25 in an XLogData 'w' frame
    unless ``envelope`` is "none"; ``null`` where that is null (None: null stays)."""
    if envelope == "none":
        out = test(0)
    else:
        out = F.when(F.substring(F.col(PAYLOAD), 1, 1) == F.lit(bytearray(b"w")), test(25)).otherwise(test(0))
    return out if null is None else F.coalesce(out, F.lit(null))


def dropped(d: RowDrops) -> Column:
    """Spark's own test of the rows ``ControlPlan.keep_mask`` leaves out (its data:
    ``ControlPlan.row_drops``), never null. One table of many: the other tables' rows
    never cross into Python (one table of ten: docs/benchmarks.md)."""
    p = F.col(PAYLOAD)
    # most relation ids of other tables hold one range, from their first Relation on
    firsts = {r: rs[0][0] for r, rs in d.relids.items() if len(rs) == 1 and rs[0][1] is None}
    rest = {r: rs for r, rs in d.relids.items() if r not in firsts}

    def of_table(relid: Column) -> Column:
        return any_of(([past_first(relid, firsts)] if firsts else [])
                    + [(relid == be32(r)) & in_ranges(rs) for r, rs in rest.items()])

    streamed, segments = in_ranges(d.stream), in_ranges(d.segments)   # by order key alone

    def at(tag: int) -> Column:   # the tag's byte offset
        _, rel_at, judged = _change_head(tag, streamed if d.stream else None)
        drop = segments
        if d.relids:
            drop = drop | of_table(p.substr(rel_at + 1, F.lit(4)))
        if d.aborted:   # a streamed row's xid, right after the tag
            xid = F.substring(p, tag + 2, 4)
            drop = drop | (streamed & any_of(in_ranges(ranges) & xid.isin(*[be32(x) for x in xids])
                                           for ranges, xids in d.aborted))
        return judged & drop

    return _by_tag_offset(d.envelope, at)


def given(h: GivenHeads) -> tuple[Column, Column, Column]:
    """Spark's own reading of ``ControlPlan.head_facts`` on the rows :func:`kept` leaves
    (its data: ``ControlPlan.given_heads``): per row, whether it is an I/U/D change the
    plan gives, a given Update that sends its old key or row ('K'/'O', the byte after
    the relation id) and a given Delete; never null. What the versions job of one table
    with one column list needs, with no Python (:meth:`.changes.Pass2.table_info`)."""
    p = F.col(PAYLOAD)
    streamed = in_ranges(h.stream) if h.stream else None
    outside = ~in_ranges(h.orphans) if h.orphans else F.lit(True)

    def facts(tag: int):
        tag_byte, rel_at, judged = _change_head(tag, streamed)
        ok = judged & outside & past_first(p.substr(rel_at + 1, F.lit(4)), h.firsts)
        sends_old = (tag_byte == F.lit(bytearray(b"U"))) & p.substr(rel_at + 5, F.lit(1)).isin(
            F.lit(bytearray(b"K")), F.lit(bytearray(b"O")))
        return ok, ok & sends_old, ok & (tag_byte == F.lit(bytearray(b"D")))

    return tuple(_by_tag_offset(h.envelope, lambda tag, i=i: facts(tag)[i]) for i in range(3))


#: ``ControlPlan.row_drops``' limit: a plan that needs more key ranges of one kind to say
#: which rows it leaves out is judged by ``keep_mask`` over the payload heads instead
ROW_DROP_LIMIT = 64


def version_of(h: GivenHeads) -> Column:
    """On a row :func:`given` gives: the index into ``h.fingerprints`` of the Relation
    version in force (``GivenHeads.versions``), from its relation id and order key."""
    key, p = F.col(KEY), F.col(PAYLOAD)

    def in_force(pairs) -> Column:
        out = F.lit(pairs[0][1])
        for k, i in pairs[1:]:
            out = F.when(key > F.lit(k), F.lit(i)).otherwise(out)
        return out

    def at(tag: int) -> Column:
        _, rel_at, _ = _change_head(tag, in_ranges(h.stream) if h.stream else None)
        relid = p.substr(rel_at + 1, F.lit(4))
        out = None
        for r, pairs in h.versions.items():
            out = (F.when if out is None else out.when)(relid == be32(r), in_force(pairs))
        return F.lit(None) if out is None else out

    return _by_tag_offset(h.envelope, at, null=None)


def given_heads(plan: ControlPlan) -> GivenHeads | None:
    """``plan.given_heads`` at the limit :func:`kept` judges by (None: not in Spark)."""
    return plan.given_heads(ROW_DROP_LIMIT)


def kept(rows: DataFrame, plan: ControlPlan, plan_bc=None) -> DataFrame:
    """``rows`` without the I/U/D rows ``plan`` leaves out, judged by Spark (whole
    transactions by key range; the tables not chosen by relation id and key; aborted
    subtransactions by key and xid) or, past ``ROW_DROP_LIMIT``, by
    ``ControlPlan.keep_mask`` over the heads in Python when ``plan_bc`` is given (else
    they stay for the decoder to leave out)."""
    if not plan.drops_changes():
        return rows
    ranges = plan.dropped_key_ranges(ROW_DROP_LIMIT)
    if ranges is not None:                     # whole transactions not given
        return outside(rows, ranges)
    drops = plan.row_drops(ROW_DROP_LIMIT)
    if drops is not None:         # tables not chosen, aborted subtransactions too
        return rows.where(~dropped(drops))
    if plan_bc is None:
        return rows
    keep = F.arrow_udf(KeepRows(plan_bc), T.BooleanType())
    return rows.where(keep(F.col(KEY), F.substring(F.col(PAYLOAD), 1, HEAD_BYTES)))
