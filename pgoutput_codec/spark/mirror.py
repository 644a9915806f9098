"""Delta Lake copies kept from change rows on Spark, every table in two jobs: the rows are
split into one group per table (:mod:`.pertable`) and each group is handed, on an
executor, to the per-table step of :func:`pgoutput_codec.mirror`
(:func:`pgoutput_codec.lake.mirror_table`: the table's net changes after what its copy
holds, applied by the one writer, exactly once). A copy written from Spark and one written
in one process are the same copy; the driver plans and collects one
:class:`~pgoutput_codec.lake.MirrorRun` per table, never a table's rows."""

from __future__ import annotations

import os
import shutil
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..idents import parse_name, qualified_name
from ..lake import APP_ID, MirrorRun, MirrorWarning, held_lsn, mirror_table, target_locked
from ..lake.names import dir_name
from ..selection import parse_table_list, table_selected
from ..tables.rules import IncompleteTableWarning, pick_base
from . import types as ST
from .catalogs import spark_registry
from .pertable import group_partitions, over_tables, table_groups, write_for_workers

__all__ = ["mirror"]

#: what an executor gives back per table: its MirrorRun, the warnings it raised, its error
RUN_SCHEMA = T.StructType([
    T.StructField("table", T.StringType()), T.StructField("version", T.LongType()),
    T.StructField("commit_lsn", ST.LSN_TYPE), T.StructField("upserts", T.LongType()),
    T.StructField("deletes", T.LongType()), T.StructField("truncated", T.BooleanType()),
    T.StructField("warnings", T.ArrayType(T.StructType([T.StructField("category", T.StringType()),
                                                        T.StructField("message", T.StringType())]))),
    T.StructField("error_type", T.StringType()), T.StructField("error", T.StringType())])
#: the warnings and errors an executor's table may give, raised again on the driver as such
_WARNINGS = {c.__name__: c for c in (IncompleteTableWarning, MirrorWarning)}
_ERRORS = {c.__name__: c for c in (ValueError, TypeError, OverflowError)}
#: where the driver writes a DataFrame base for the executors to read, under the target
_BASES = ".pgoutput_codec.bases"


def mirror(changes: DataFrame, target, *, tables=None, registry=None, missing: dict | None = None,
           app_id: str = APP_ID, file_size: int | None = None, base=None, base_lsn=None,
           partitions: int | None = None) -> list[MirrorRun]:
    """Bring the Delta copy under ``target`` of every table of ``changes`` (change rows:
    :func:`~pgoutput_codec.spark.decode_changes`' DataFrame, or change rows read back
    from a lake) current, as :func:`pgoutput_codec.mirror` does, in two Spark jobs
    whatever the number of tables: one lists the tables, one shuffles the rows by table
    and has each table's copy written by the executor that holds its rows, with the
    one-process per-table step (:func:`pgoutput_codec.lake.mirror_table`). The driver reads
    what each copy holds (its rows committed at or before are left out before the
    shuffle) and collects one :class:`~pgoutput_codec.lake.MirrorRun` per table.

    ``target``: a directory every executor and the driver reach under the same path (a
    local directory on one machine, a shared mount on a cluster). The change rows are not
    cached: over ``decode_changes``' DataFrame the tables come from its plan, and the pass
    decodes the rows once. The driver holds the target's lock
    (:func:`~pgoutput_codec.lake.target_locked`) from start to end, so runs into one
    target, from Spark or one process, take turns. A table's change rows are held
    whole by one Python worker (docs/limits.md). ``tables``, ``missing``, ``app_id``,
    ``file_size``: as for :func:`pgoutput_codec.mirror`. ``base``/``base_lsn``: as there
    (a mapping ``{"schema.table": DataFrame or Parquet path}``): a copy created by the
    run starts from its base (a DataFrame is written to Parquet under the target for the
    executors, and removed after the run). Warnings an executor raises
    (``IncompleteTableWarning``) are raised again here; a table whose copy cannot be
    written is named in the error raised after every other table's copy is current.
    ``partitions``: the tasks of the pass (default: twice the cores, at most one a
    table)."""
    registry = spark_registry(changes, registry)   # the archive's type catalog under the caller's
    with target_locked(target):
        return _mirror(changes, os.path.abspath(os.fspath(target)), tables, registry, missing, app_id, file_size,
                       base, base_lsn, partitions)


def _mirror(changes, target, tables, registry, missing, app_id, file_size, base, base_lsn,
            partitions) -> list[MirrorRun]:
    patterns = parse_table_list(tables)
    extra = []
    if isinstance(base, dict):  # a table with a base and no change yet: its copy is the base
        extra = sorted({qualified_name(*parse_name(k)[0]) for k in base
                        if any(table_selected(patterns, *p) for p in parse_name(k))})
    held: dict = {}

    def read_held(names):
        with ThreadPoolExecutor(8) as pool:
            held.update(zip(names, pool.map(lambda n: held_lsn(target, n, app_id), names), strict=True))
        return held
    scratch = os.path.join(target, _BASES, uuid.uuid4().hex)
    try:
        groups, names = table_groups(changes, tables, held=read_held, extra=extra)
        if not names:
            return []
        bases = _bases(changes.sparkSession, base, base_lsn, names, held, scratch)
        body = MirrorTables(target, registry, missing, app_id, file_size, bases, base_lsn if bases else None)
        n = partitions or group_partitions(changes.sparkSession, names)
        found = over_tables(groups, body, RUN_SCHEMA, n).collect()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ran = {r["table"] for r in found}
    # a table with nothing after what its copy holds has no row left to reach an executor
    # (a name with no row at all and no copy is no table's: none is made)
    return sorted(_runs(found, stacklevel=4) + [MirrorRun(n, None, held[n], 0, 0, False) for n in names
                                                if n not in ran and held.get(n) is not None], key=lambda r: r.table)


def _bases(spark, base, base_lsn, names, held, scratch) -> dict:
    """{name: Parquet path} of the bases of the copies this run creates: a DataFrame base
    written under ``scratch`` by Spark (its rows never reach the driver)."""
    out = {}
    for name in names:
        if held.get(name) is not None:
            continue
        b, _ = pick_base(base, base_lsn, name)
        if b is None:
            continue
        if isinstance(b, DataFrame):
            path = os.path.join(scratch, dir_name(name))
            write_for_workers(b, path)
            b = path
        out[name] = os.fspath(b) if isinstance(b, (str, os.PathLike)) else b
    return out


def _runs(found, stacklevel: int) -> list[MirrorRun]:
    """The executors' rows as MirrorRuns, their warnings raised again; the first table's
    error raised once every table is done."""
    runs, errors = [], []
    for r in sorted(found, key=lambda r: r["table"]):
        for w in r["warnings"] or ():
            cls = _WARNINGS.get(w["category"], UserWarning)
            warnings.warn(cls(r["table"]) if cls is IncompleteTableWarning else cls(w["message"]),
                          stacklevel=stacklevel)
        if r["error"] is not None:
            errors.append(r)
            continue
        runs.append(MirrorRun(r["table"], r["version"], int(r["commit_lsn"]) if r["commit_lsn"] is not None else None,
                              r["upserts"], r["deletes"], r["truncated"]))
    if errors:
        e = errors[0]
        more = f" (and {len(errors) - 1} more tables)" if len(errors) > 1 else ""
        text = e["error"] if e["error"].startswith(e["table"]) else f"{e['table']}: {e['error']}"
        raise _ERRORS.get(e["error_type"], RuntimeError)(text + more)
    return runs


class MirrorTables:
    """Picklable body of the pass (:func:`.pertable.over_tables`): one table's copy brought
    current on the executor holding its rows, by :func:`pgoutput_codec.lake.mirror_table`
    (the driver holds the target's lock)."""

    def __init__(self, target, registry, missing, app_id, file_size, bases, base_lsn):
        self.target, self.registry, self.missing = target, registry, missing or {}
        self.app_id, self.file_size, self.bases, self.base_lsn = app_id, file_size, bases, base_lsn

    def __call__(self, name: str, rows: pa.Table):
        error = None
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                run = mirror_table(self.target, name, rows, registry=self.registry, missing=self.missing.get(name),
                                   app_id=self.app_id, file_size=self.file_size, base=self.bases or None,
                                   base_lsn=self.base_lsn, locked=False)
            except Exception as e:   # noqa: BLE001  (named on the driver, after the other tables)
                run, error = MirrorRun(name, None, None, 0, 0, False), e
        said = [{"category": type(w.message).__name__, "message": str(w.message)} for w in seen]
        yield pa.RecordBatch.from_pylist([{
            "table": name, "version": run.version,
            "commit_lsn": Decimal(run.commit_lsn) if run.commit_lsn is not None else None,
            "upserts": run.upserts, "deletes": run.deletes, "truncated": run.truncated, "warnings": said,
            "error_type": type(error).__name__ if error is not None else None,
            "error": str(error) if error is not None else None}], schema=ST.arrow_schema_for(RUN_SCHEMA))
