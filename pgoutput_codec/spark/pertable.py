"""Every table of a change DataFrame at once, each on an executor: the rows split into one
group per table (:func:`table_groups`, one small job), then one shuffle by table and a
``mapInArrow`` whose tasks hand each group whole to a Python body (:func:`over_tables`).

A table's group is the change rows of every relation ever sent under its name
(:func:`pgoutput_codec.tables.rows.relations_named`): the one-process table functions give
the same result over it as over every table's rows, so a body runs the one-process code
(``mirror_table``, ``snapshot``) on it and the result is one process's, whatever the
number of tables. A run costs one pass (and one small job over change rows not straight
from ``decode_changes``), never a job per table; a group is held by one
Python worker, never by the driver or the JVM."""

from __future__ import annotations

import contextlib
import importlib
import warnings
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .._native.gather import split_at
from ..arrays import one_array
from ..idents import parse_name, qualified_name
from ..selection import parse_table_list, table_selected
from ..tables.rows import as_change_rows, relations_named
from ..tables.rules import IncompleteTableWarning
from . import types as ST
from .changerows import pass2_of
from .modes import MalformedPayloadError
from .shipping import is_connect, local_frame
from .tablerows import SHIFTED, flip, from_python, to_python

__all__ = ["TABLE", "table_groups", "over_tables", "group_partitions", "write_for_workers", "based",
           "bases_for_workers", "CARRIED", "SPARK_CARRIED", "carried", "settled", "reissue"]

#: the column naming the group (a table's qualified name) a row is in
TABLE = "__table"
_HELD = "__held"


def table_groups(changes: DataFrame, tables=None, held: dict | None = None,
                 extra: list | None = None) -> tuple[DataFrame, list[str]]:
    """``changes``' rows tagged with :data:`TABLE`, the qualified name of each group a row
    is in (a row of a relation renamed across names is in each: one row per group), and
    the sorted names: from the Relations ``decode_changes``' plan walked (its DataFrame as
    it gave it), or one small job, the distinct (relation, schema, table) of the rows (a
    name whose Relation no change row followed has an empty group).
    ``tables``: patterns (:func:`~pgoutput_codec.selection.parse_table_list`; None: all).
    ``held``: {name: commit LSN} (or a function of the names giving it): a group's rows
    committed at or below it are left out before the shuffle. ``extra``: names to give a group though no row names them (a
    table with a base and no change): their group is one row of nulls but
    :data:`TABLE`, which :func:`over_tables` drops."""
    spark = changes.sparkSession
    pass2 = pass2_of(changes)
    if pass2 is not None:   # straight from decode_changes: its plan walked every Relation, no job
        # (a table the decoding's own ``tables`` leaves out gives no row: no group, as in one process)
        chosen = getattr(pass2.plan, "patterns", None)
        triples = {(v["relation_id"], v["schema"], v["table"]) for v in pass2.plan.versions
                   if chosen is None or table_selected(chosen, v["schema"], v["table"])}
    else:
        triples = [(r["relation_id"], r["schema"], r["table"]) for r in changes.where(F.col("table").isNotNull())
                   .select("relation_id", "schema", "table").distinct().collect()]
    groups = relations_named(triples, parse_table_list(tables))
    held = (held(sorted(set(groups) | set(extra or ()))) if callable(held) else held) or {}
    rel_rows, name_rows = [], []
    for name, rels in groups.items():
        lsn = held.get(name)
        lsn = Decimal(lsn) if lsn is not None else None
        for r in rels:
            if r is None:
                name_rows.append((*parse_name(name)[0], name, lsn))
            else:
                rel_rows.append((int(r), name, lsn))
    rel_type = changes.schema["relation_id"].dataType
    parts = []
    if rel_rows:
        by_rel = local_frame(spark, rel_rows, T.StructType([
            T.StructField("relation_id", rel_type), T.StructField(TABLE, T.StringType()),
            T.StructField(_HELD, ST.LSN_TYPE)]))
        parts.append(changes.join(F.broadcast(by_rel), "relation_id"))
    if name_rows:
        by_name = local_frame(spark, name_rows, T.StructType([
            T.StructField("schema", T.StringType()), T.StructField("table", T.StringType()),
            T.StructField(TABLE, T.StringType()), T.StructField(_HELD, ST.LSN_TYPE)]))
        parts.append(changes.where(F.col("relation_id").isNull()).join(F.broadcast(by_name), ["schema", "table"]))
    cols = [*changes.columns, TABLE]
    out = None
    for p in parts:
        p = p.where(F.col(_HELD).isNull() | F.coalesce(F.col("commit_lsn") > F.col(_HELD), F.lit(False)))
        p = p.select(*[F.col(f"`{c}`") for c in cols])
        out = p if out is None else out.unionByName(p)
    names = sorted(groups)
    more = sorted(set(extra or ()) - set(names))
    if more:
        none = local_frame(spark, [(n,) for n in more], T.StructType([T.StructField(TABLE, T.StringType())]))
        base = out if out is not None else changes.where(F.lit(False)).withColumn(TABLE, F.lit(None).cast("string"))
        out = base.unionByName(none, allowMissingColumns=True)
        names = sorted(names + more)
    if out is None:
        out = changes.where(F.lit(False)).withColumn(TABLE, F.lit(None).cast("string"))
    return out, names


#: how Spark writes a timestamp to Parquet (session setting; default INT96)
_TIMESTAMPS = "spark.sql.parquet.outputTimestampType"


def write_for_workers(df: DataFrame, path: str) -> None:
    """``df`` written as Parquet under ``path`` for the workers' pyarrow to read as Arrow
    gives ``df`` (``toArrow``): a timestamp as microseconds marked UTC, an instant. Spark
    writes INT96 by default, which pyarrow reads as a timestamp with no time zone (a
    Delta ``timestamp_ntz``, no more the DataFrame's type)."""
    conf = df.sparkSession.conf
    before = conf.get(_TIMESTAMPS, None)
    conf.set(_TIMESTAMPS, "TIMESTAMP_MICROS")
    try:
        df.write.mode("overwrite").parquet(path)
    finally:
        if before is None:
            conf.unset(_TIMESTAMPS)
        else:
            conf.set(_TIMESTAMPS, before)


def based(base, tables) -> list[str]:
    """The tables ``tables`` selects that a mapping ``base`` gives a base: each is written,
    from its base alone when the changes hold no row of it (:func:`table_groups`' ``extra``)."""
    if not isinstance(base, dict):
        return []
    patterns = parse_table_list(tables)
    return sorted({qualified_name(*parse_name(k)[0]) for k in base
                   if any(table_selected(patterns, *p) for p in parse_name(k))})


def bases_for_workers(base, scratch, wanted) -> tuple:
    """``base`` (a DataFrame, or a mapping of bases by table name) with each DataFrame in
    it that ``wanted(key)`` asks for (``key`` its table name; None: the one DataFrame
    given) written by Spark as Parquet under ``scratch(i)`` (:func:`write_for_workers`:
    its rows never reach the driver), its path in its place, and a DataFrame not asked
    for left out (no executor reads it: a body ships no DataFrame); and the directories
    written, for the caller to remove."""
    if isinstance(base, DataFrame):
        base = {None: base}
    if not isinstance(base, dict):
        return base, []
    out, made = {}, []
    for k, v in base.items():
        if isinstance(v, DataFrame):
            if not wanted(k):
                continue
            d = scratch(len(made))
            write_for_workers(v, d)
            made.append(d)
            v = d
        out[k] = v
    return (out.get(None) if None in base else out), made


#: what a body gives back of a table's warnings and its error, beside its own fields
CARRIED = [
    pa.field("warnings", pa.list_(pa.struct([pa.field("category", pa.string()), pa.field("text", pa.string())]))),
    pa.field("error_type", pa.string()), pa.field("error", pa.string()),
]
#: :data:`CARRIED` as Spark's fields
SPARK_CARRIED = [
    T.StructField("warnings", T.ArrayType(T.StructType([T.StructField("category", T.StringType()),
                                                        T.StructField("text", T.StringType())]))),
    T.StructField("error_type", T.StringType()), T.StructField("error", T.StringType()),
]


def carried(fn, *args, **kwargs) -> tuple:
    """(what ``fn(*args, **kwargs)`` gives, None when it raised; :data:`CARRIED`'s fields as
    a dict: the warnings it raised and its error), for a body on an executor to give back
    to the driver, which raises them again (:func:`settled`)."""
    out, error = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn(*args, **kwargs)
        except Exception as e:   # noqa: BLE001  (raised on the driver, once every table is done)
            error = e
    said = [{"category": _class_path(w.category),
             "text": w.message.table if isinstance(w.message, IncompleteTableWarning) else str(w.message)}
            for w in caught]
    return out, {"warnings": said, "error_type": _class_path(type(error)) if error is not None else None,
                 "error": str(error) if error is not None else None}


def _class_path(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _class_of(path: str, base: type, default: type) -> type:
    """The class ``module:qualname`` names, where it is a ``base`` of this package or a
    built-in one; else ``default``."""
    module, _, qual = path.partition(":")
    if module.split(".")[0] in ("pgoutput_codec", "builtins"):
        with contextlib.suppress(ImportError, AttributeError):
            found = importlib.import_module(module)
            for part in qual.split("."):
                found = getattr(found, part)
            if isinstance(found, type) and issubclass(found, base):
                return found
    return default


def reissue(said: list, stacklevel: int = 2) -> None:
    """Warn here what a body warned on an executor (``said``: :data:`CARRIED`'s
    ``warnings``), as the same category where it is a warning class of this package.
    ``stacklevel``: as :func:`warnings.warn` takes it from the caller's place."""
    for w in said or ():
        cls = _class_of(w["category"], Warning, UserWarning)
        try:
            warning = cls(w["text"])
        except TypeError:
            warning = UserWarning(w["text"])
        warnings.warn(warning, stacklevel=stacklevel + 1)


def settled(rows, stacklevel: int = 2) -> list:
    """The rows bodies gave back (each with ``table`` and :data:`CARRIED`'s fields), by
    table, those with no error; the warnings of each raised here (:func:`reissue`), then
    the first table's error, naming how many more failed, once every row is read: a table
    that fails is named after every other table is done. ``stacklevel``: as
    :func:`warnings.warn` takes it from the caller's place."""
    out, errors = [], []
    for r in sorted(rows, key=lambda r: r["table"]):
        reissue(r["warnings"], stacklevel + 1)
        (out if r["error"] is None else errors).append(r)
    if errors:
        e = errors[0]
        more = f" (and {len(errors) - 1} more tables)" if len(errors) > 1 else ""
        text = e["error"] if e["error"].startswith(e["table"]) else f"{e['table']}: {e['error']}"
        cls = _class_of(e["error_type"], Exception, RuntimeError)
        try:
            error = cls(text + more)
        except TypeError:
            error = RuntimeError(text + more)
        raise error
    return out


def group_partitions(spark, names: list | None = None) -> int:
    """How many tasks the pass over ``names`` runs: twice the cores (a table is one task's
    whole; more tasks than that only add a task's fixed cost per table), no more than the
    tables."""
    try:
        cores = spark.sparkContext.defaultParallelism if not is_connect(spark) else \
            int(spark.conf.get("spark.sql.shuffle.partitions"))
    except Exception:   # noqa: BLE001  (a session that cannot say: its shuffle default)
        cores = 2
    n = 2 * max(1, cores)
    return max(1, min(len(names), n) if names is not None else n)


def over_tables(groups: DataFrame, body, out_schema: T.StructType, partitions: int | None = None) -> DataFrame:
    """One shuffle of :func:`table_groups`' rows by :data:`TABLE` and a ``mapInArrow``
    whose tasks call ``body(name, rows)`` once per group, ``rows`` its change rows as an
    Arrow table (``schema.CHANGE_SCHEMA``'s types, ``commit_rank`` kept) in commit order
    (``commit_rank`` or ``commit_lsn``, then ``seq``). ``body`` (picklable) yields Arrow
    tables or record batches of ``out_schema``. Lazy: the caller collects it."""
    cols = [c for c in groups.columns if c != TABLE]
    rank = "commit_rank" if "commit_rank" in cols else "commit_lsn"
    shifted = tuple(c for c in SHIFTED if c in cols and groups.schema[c].dataType == ST.LSN_TYPE)
    n = partitions or group_partitions(groups.sparkSession)
    rows = (groups.repartition(n, TABLE).sortWithinPartitions(TABLE, rank, "seq")
            .select(*to_python(groups, cols, shifted), TABLE))
    return rows.mapInArrow(PerTable(body, out_schema, shifted), out_schema)


class PerTable:
    """Picklable ``mapInArrow`` body: the rows of a task, sorted by group, cut into groups,
    each handed whole to ``body``. Each batch Spark hands over is made change rows once
    (not once per group: a task of a thousand small tables would convert a thousand
    times), then cut into its groups by :func:`~pgoutput_codec._native.gather.split_at`;
    what the bodies give back goes to Spark in batches of many groups."""

    def __init__(self, body, out_schema: T.StructType, shifted=()):
        self.body, self.out_schema, self.shifted = body, out_schema, shifted

    def __call__(self, batches):
        target = ST.arrow_schema_for(self.out_schema)
        out = _Gathered(target)
        name, parts = None, []
        for b in batches:
            at_table = b.schema.get_field_index(TABLE)
            names = one_array(b.column(at_table))
            if not len(names):
                continue
            # where the group changes, in one pass over the batch (sorted by group)
            moves = pc.not_equal(names.slice(1), names.slice(0, len(names) - 1)).to_numpy(zero_copy_only=False)
            starts = [0, *(np.flatnonzero(moves) + 1).tolist()]
            rows = pa.Table.from_batches([b]).remove_column(at_table)
            try:
                pieces = split_at(self._change_rows(rows, ""), [*starts, len(names)])
            except MalformedPayloadError:
                # the batch again, a group at a time, for the error to name the group it is in
                for at, end in zip(starts, [*starts[1:], len(names)], strict=True):
                    self._change_rows(rows.slice(at, end - at), names[at].as_py())
                raise
            for at, piece in zip(starts, pieces, strict=True):
                here = names[at].as_py()
                if here != name and parts:
                    yield from out.add(self._group(name, parts))
                    parts = []
                name = here
                parts.append(piece)
        if parts:
            yield from out.add(self._group(name, parts))
        yield from out.flush()

    def _change_rows(self, t: pa.Table, name: str) -> pa.Table:
        """Rows in :func:`.tablerows.to_python`'s shapes as change rows again."""
        t = from_python(t, name)
        for c in self.shifted:
            t = t.set_column(t.column_names.index(c), c, flip(one_array(t.column(c))))
        return as_change_rows(t)

    def _group(self, name: str, parts: list):
        t = parts[0] if len(parts) == 1 else _joined(parts)
        if t.column("seq").null_count:      # a name's stand-in row (table_groups' extra)
            t = t.filter(pc.is_valid(t.column("seq")))
        yield from self.body(name, t)


def _joined(parts: list) -> pa.Table:
    """A group's pieces from several batches as one table, its list columns in one chunk
    (as one batch's pieces are)."""
    t = pa.concat_tables(parts)
    for j, f in enumerate(t.schema):
        if pa.types.is_list(f.type) and t.column(j).num_chunks > 1:
            t = t.set_column(j, f, pa.chunked_array([t.column(j).combine_chunks()], f.type))
    return t


class _Gathered:
    """What bodies give back, in ``target``'s types, handed to Spark in batches of
    :data:`_GATHER_ROWS` rows or more (the last: what is left): a batch a group, a
    thousand groups, would cost Spark and the worker a batch's fixed toll each."""

    def __init__(self, target: pa.Schema):
        self.target, self.held, self.rows = target, [], 0

    def add(self, outs):
        for out in outs:
            for batch in (out.to_batches() if isinstance(out, pa.Table) else [out]):
                if not batch.schema.equals(self.target):
                    batch = pa.RecordBatch.from_arrays([batch.column(j).cast(self.target.field(j).type)
                                                        for j in range(len(self.target))], schema=self.target)
                self.held.append(batch)
                self.rows += batch.num_rows
                if self.rows >= _GATHER_ROWS:
                    yield from self.flush()

    def flush(self):
        if not self.held:
            return
        t = pa.Table.from_batches(self.held, schema=self.target).combine_chunks()
        self.held, self.rows = [], 0
        yield from t.to_batches()


#: the rows :class:`_Gathered` holds before it hands them to Spark
_GATHER_ROWS = 4096
