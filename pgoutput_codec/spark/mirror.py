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
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..idents import parse_name, qualified_name
from ..lake import APP_ID, MirrorRun, held_lsn, mirror_table, target_locked
from ..tables.rules import pick_base
from . import types as ST
from .catalogs import spark_registry
from .pertable import SPARK_CARRIED, based, bases_for_workers, carried, group_partitions, over_tables, settled, table_groups

__all__ = ["mirror"]

#: what an executor gives back per table: its MirrorRun, the warnings it raised, its error
RUN_SCHEMA = T.StructType([
    T.StructField("table", T.StringType()), T.StructField("version", T.LongType()),
    T.StructField("commit_lsn", ST.LSN_TYPE), T.StructField("upserts", T.LongType()),
    T.StructField("deletes", T.LongType()), T.StructField("truncated", T.BooleanType()), *SPARK_CARRIED])
_RUN_ARROW = ST.arrow_schema_for(RUN_SCHEMA)
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
    extra = based(base, tables)     # a table with a base and no change yet: its copy is the base
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
        # the bases of the copies this run creates: checked here, a DataFrame written for the executors
        made = {n for n in names if held.get(n) is None and pick_base(base, base_lsn, n)[0] is not None}

        def wanted(k):
            return bool(made) if k is None else any(qualified_name(*p) in made for p in parse_name(k))
        bases, _ = bases_for_workers(base, lambda i: os.path.join(scratch, str(i)), wanted)
        if isinstance(bases, dict):     # (the executors are shipped the bases they read alone)
            bases = {k: v for k, v in bases.items() if wanted(k)}
        body = MirrorTables(target, registry, missing, app_id, file_size, bases if made else None,
                            base_lsn if made else None)
        n = partitions or group_partitions(changes.sparkSession, names)
        found = over_tables(groups, body, RUN_SCHEMA, n).collect()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ran = {r["table"] for r in found}
    # a table with nothing after what its copy holds has no row left to reach an executor
    # (a name with no row at all and no copy is no table's: none is made)
    runs = [MirrorRun(r["table"], r["version"], int(r["commit_lsn"]) if r["commit_lsn"] is not None else None,
                      r["upserts"], r["deletes"], r["truncated"]) for r in settled(found, stacklevel=3)]
    return sorted(runs + [MirrorRun(n, None, held[n], 0, 0, False) for n in names
                          if n not in ran and held.get(n) is not None], key=lambda r: r.table)


class MirrorTables:
    """Picklable body of the pass (:func:`.pertable.over_tables`): one table's copy brought
    current on the executor holding its rows, by :func:`pgoutput_codec.lake.mirror_table`
    (the driver holds the target's lock)."""

    def __init__(self, target, registry, missing, app_id, file_size, bases, base_lsn):
        self.target, self.registry, self.missing = target, registry, missing or {}
        self.app_id, self.file_size, self.bases, self.base_lsn = app_id, file_size, bases, base_lsn

    def __call__(self, name: str, rows: pa.Table):
        run, said = carried(mirror_table, self.target, name, rows, registry=self.registry,
                            missing=self.missing.get(name), app_id=self.app_id, file_size=self.file_size,
                            base=self.bases or None, base_lsn=self.base_lsn, locked=False)
        run = run or MirrorRun(name, None, None, 0, 0, False)
        yield pa.RecordBatch.from_pylist([{
            "table": name, "version": run.version,
            "commit_lsn": Decimal(run.commit_lsn) if run.commit_lsn is not None else None,
            "upserts": run.upserts, "deletes": run.deletes, "truncated": run.truncated, **said}],
            schema=_RUN_ARROW)
