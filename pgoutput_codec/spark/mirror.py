"""Delta Lake copies kept from change rows on Spark: the cluster decodes and computes each
table's net changes, and the driver hands each table's batch to the one writer of
:func:`pgoutput_codec.mirror` (:func:`pgoutput_codec.lake.apply_batch`), so a copy
written from Spark and one written in one process are the same copy, exactly once
either way."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..idents import parse_name, qualified_name
from ..lake import APP_ID, MirrorRun, apply_batch, held_lsn, target_locked
from ..schema import TS
from ..selection import parse_table_list, table_selected
from ..tables.base import base_batch
from ..tables.rules import KNOWN, pick_base
from . import types as ST
from .shipping import collect_arrow
from .tablerows import END_OF_DAY, table_info
from .tables import net_changes

__all__ = ["mirror"]

#: net changes' control columns in the types of the one-process net_changes, which the
#: writer reads (Spark gives the LSN as a decimal, the relation id as a long)
_CONTROL_TYPES = {"__COMMIT_LSN": pa.uint64(), "__COMMIT_AT": TS, "__RELATION_ID": pa.uint32()}


def mirror(changes: DataFrame, target, *, tables=None, registry=None, missing: dict | None = None,
           app_id: str = APP_ID, file_size: int | None = None, base=None, base_lsn=None) -> list[MirrorRun]:
    """Bring the Delta copy under ``target`` of every table of ``changes`` (change rows:
    :func:`~pgoutput_codec.spark.decode_changes`' DataFrame, or change rows read back
    from a lake) current, as :func:`pgoutput_codec.mirror` does. Per table, Spark
    computes the :func:`~pgoutput_codec.spark.net_changes` of the transactions
    committed after the last one its copy holds; the driver collects that batch (one
    row per key changed) and writes it. ``target`` is a path the driver writes (a local
    or mounted directory). The change rows are cached for the run. The driver holds the
    target's lock (:func:`~pgoutput_codec.lake.target_locked`) from start to end, so runs
    into one target, from Spark or one process, take turns. ``tables``, ``missing``,
    ``app_id``, ``file_size``: as for :func:`pgoutput_codec.mirror`. ``base``/``base_lsn``:
    as there (a mapping ``{"schema.table": DataFrame or Parquet path}``): a copy created
    by the run is first written from its base (collected by the driver, as a batch of
    upserts at ``base_lsn``), then the changes after it; a copy made with no copied row
    and no base warns (``IncompleteTableWarning``), once."""
    with target_locked(target):
        return _mirror(changes, target, tables, registry, missing, app_id, file_size, base, base_lsn)


def _mirror(changes, target, tables, registry, missing, app_id, file_size, base=None,
            base_lsn=None) -> list[MirrorRun]:
    patterns = parse_table_list(tables)
    cached = not changes.is_cached
    if cached:
        changes = changes.persist()
    try:
        pairs = changes.where(F.col("table").isNotNull()).select("schema", "table").distinct().collect()
        names = {qualified_name(r["schema"], r["table"]) for r in pairs
                 if table_selected(patterns, r["schema"], r["table"])}
        if isinstance(base, dict):   # a table with a base and no change yet: its copy is the base
            names |= {qualified_name(*parse_name(k)[0]) for k in base
                      if any(table_selected(patterns, *p) for p in parse_name(k))}
        runs = []
        for name in sorted(names):
            done = held_lsn(target, name, app_id)
            b = pick_base(base, base_lsn, name) if done is None else (None, None)
            if b[0] is not None:
                rows = changes.sparkSession.read.parquet(b[0]) if isinstance(b[0], str) else b[0]
                info = table_info(changes, name)
                keys = [c["name"] for c in (info.versions[-1] if info.versions else []) if c["flags"] & 1]
                first = apply_batch(target, name, base_batch(collect_arrow(rows), b[1], name, keys,
                                                             info.relation_id),
                                    info.versions, app_id=app_id, file_size=file_size)
            # a copy made now from changes alone: net_changes warns when its start is
            # unknown (from the facts it reads anyway); a copy made before said so then
            quiet = None if done is None else KNOWN
            done = b[1] if b[0] is not None else done
            later = changes if done is None else changes.where(F.col("commit_lsn") > F.lit(done).cast(ST.LSN_TYPE))
            net = collect_arrow(net_changes(later, name, registry=registry, missing=(missing or {}).get(name),
                                            base=quiet if b[0] is None else KNOWN))
            lists = table_info(later, name).versions if len(net) else []
            run = apply_batch(target, name, _as_written(net), lists, app_id=app_id, file_size=file_size)
            runs.append(first if b[0] is not None and run.version is None else run)
        return runs
    finally:
        if cached:
            changes.unpersist()


def _as_written(net: pa.Table) -> pa.Table:
    """Spark's net changes as the one-process ones are: the control columns in their
    types, and a ``__special`` column only where some value has a note (Spark's schema
    comes before the values, so it gives one for every type that may need it). Columns
    are taken by place: a table's column may bear a control column's name."""
    ctl = 6 if len(net.column_names) >= 6 and net.column_names[-4] == "__UNCHANGED_FROM" else 5
    data = net.column_names[:len(net.column_names) - ctl]
    for j, c in enumerate(data):
        if pa.types.is_time64(net.schema.field(j).type):    # Spark's TIME arrives in ns
            net = net.set_column(j, c, net.column(j).cast(pa.time64("us")))
    for j, c in enumerate(data):
        note = f"{c}__special"
        if note not in data:
            continue
        k = data.index(note)
        eod = pc.fill_null(pc.equal(net.column(k), "24:00:00"), False)
        v = net.column(j)
        if pc.any(eod).as_py() and (pa.types.is_time64(v.type) or v.type == pa.int64()):
            # PostgreSQL's 24:00:00, past Spark's last time of day: in the copy, as one
            # process writes it, 86,400,000,000 µs
            v = pc.if_else(eod, pa.scalar(END_OF_DAY, pa.int64()), v.cast(pa.int64()))
            net = net.set_column(j, c, v)
            net = net.set_column(k, note, pc.if_else(eod, pa.scalar(None, pa.string()), net.column(k)))
    empty = [j for j, c in enumerate(data) if c.endswith("__special") and c[:-len("__special")] in data
             and net.column(j).null_count == len(net)]
    for j in reversed(empty):
        net = net.remove_column(j)
    n = len(net.column_names)
    for j, t in zip(range(n - len(_CONTROL_TYPES), n), _CONTROL_TYPES.values(), strict=True):
        if net.schema.field(j).type != t:
            net = net.set_column(j, net.column_names[j], net.column(j).cast(t))
    return net
