"""What :func:`.changes.decode_changes` keeps of its pass 2 for the table functions
(FAILFAST, no observation): the archive's rows (payload, order key, lsn), the control
plan and its shipped copy, and pass 1's rows with the Truncates. From them
``table_changes``, ``snapshot`` and ``history`` choose one table's rows before any
decoding (Spark drops the other tables' rows by their relation id bytes,
:mod:`.rowfilter`) and type them in the Python step that decodes them, and the versions
job reads the payload heads instead of decoded rows (:meth:`Pass2.table_info`).

:class:`FieldChanges` (``impl="fields"``) builds the change rows as one scalar Arrow UDF
per field; :class:`MapChanges` (``impl="map"``) types one table's rows in the
``mapInArrow`` that decodes them.
"""

from __future__ import annotations

import decimal
import uuid

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import one_array
from ..batch import message_tags
from ..plan import HEAD_BYTES
from . import rowfilter as RF
from . import types as ST
from .changetype import LSN, SUB, mapper_schema
from .mappers import (HEAD_FACTS_ROW, ChangeField, ChangeRows, HeadFacts, TypedMapper, TypedRows, as_binary,
                      sub_order, typed_rows)
from .modes import FAILFAST, failfast_errors
from .rowfilter import KEY, PAYLOAD
from .shipping import to_workers
from .tableinfo import TableInfo

__all__ = ["Pass2", "MapChanges", "FieldChanges"]


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
        """:func:`.tableinfo.table_info` of the relation that bears the name (as of
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
        """:func:`.tableinfo.table_info` without decoding: each row's Relation version and
        commit rank from its 35-byte head (one small job, one Python node: :class:`HeadFacts`), the
        column lists from the plan, the truncates from pass 1's rows on the driver. The job
        is Spark's own (``rowfilter.given``), no row crosses into Python, for a table with
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
    typing (1 M rows, ``table_changes`` written out whole: 14.5 s against 30.9 s)."""

    def typed(self, schema: str, table: str, mapper, until_lsn=None) -> DataFrame:
        """``table_changes``' rows (``mapper``: a :class:`.typedrows.TableMapper`), typed in
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
        """``table_changes``' rows (``mapper``: a :class:`.typedrows.TableMapper`), typed in
        the same Python step that decodes them."""
        plan, bc = self._narrowed(schema, table, until_lsn)
        trunc = self._truncates(plan)
        out_type = T.StructType(list(mapper.out_schema.fields) + [T.StructField(SUB, T.LongType())])
        if trunc is not None:
            trunc = typed_rows(mapper, trunc).append_column(SUB, pa.array(sub_order(trunc.column("seq")), pa.int64()))
        # not deterministic, so that Spark keeps a query's filters on the typed columns
        # (snapshot's, history's) above them instead of decoding every row twice
        return self._frame(plan, bc, TypedRows(bc, mapper), out_type, trunc, deterministic=False)

