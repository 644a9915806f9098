"""Every table's snapshot (or history, or net changes) of a change DataFrame, written in
one Spark pass: each table's group of change rows goes to one executor
(:mod:`.pertable`), which rebuilds the table with the one-process function
(:func:`pgoutput_codec.tables.snapshot`, :func:`~pgoutput_codec.tables.history`,
:func:`~pgoutput_codec.tables.net_changes`: a table's group alone gives what every
table's rows give) and writes it, as Parquet or as a Delta table, to a directory of its
own. The driver plans and collects one small row per table; it never holds a table's rows.

A table's directory is replaced whole: its files are written to a hidden directory beside
it, then renamed into place (the old one renamed away first, then removed). A task run
again (a retry, a speculative copy) writes its own hidden directory and renames it in
the same way, so one complete copy is left; hidden directories that a killed run left
behind are removed by the next run (readers skip them: their names begin with ``.``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..lake.deltatypes import to_delta
from ..lake.names import column_names, dir_name, lake_dir
from ..tables import history, net_changes, snapshot
from ..tables.rows import split_tables
from ..tables.replay import HISTORY_COLUMNS
from ..idents import parse_name
from ..lake import target_locked
from ..selection import parse_table_list, table_selected
from .catalogs import spark_registry
from .pertable import (CARRIED, SPARK_CARRIED, based, bases_for_workers, carried, group_partitions, over_tables,
                       settled, table_groups)
from .shipping import check_workers
from .tables import NET_COLUMNS

__all__ = ["write_snapshots", "write_tables", "TableWriter", "WrittenTable", "WHATS", "FORMATS",
           "OWN_COLUMNS", "as_written", "replace_dir", "leftovers", "RESULT_SCHEMA", "SPARK_RESULT"]

#: what a table is written as, by name: the one-process function that rebuilds it
WHATS = {"snapshot": snapshot, "history": history, "net_changes": net_changes}
#: the columns of its own each one adds after the table's columns
OWN_COLUMNS = {"snapshot": (), "history": HISTORY_COLUMNS, "net_changes": NET_COLUMNS}
FORMATS = ("parquet", "delta")

#: the Parquet file of a table's directory
PARQUET_FILE = "part-00000.parquet"
#: marks the hidden directories of a table's directory being written or replaced
_SCRATCH, _OLD = "~scratch~", "~old~"


class WrittenTable(NamedTuple):
    """One table written by :func:`write_snapshots`: its qualified name, its number of
    rows, and the directory holding it (None: the name bears no table at the end of the
    changes, its table renamed away; no directory is left for it)."""

    table: str
    rows: int
    path: str | None


#: what the pass gives back per table (Arrow, and the Spark schema built from it)
RESULT_SCHEMA = pa.schema([pa.field("table", pa.string()), pa.field("rows", pa.int64()),
                           pa.field("path", pa.string()), *CARRIED])


def as_written(table: pa.Table) -> pa.Table:
    """A rebuilt table as both formats hold it: the Delta types of
    :mod:`pgoutput_codec.lake.deltatypes` (no unsigned integer, time of day or interval
    type, which Parquet readers such as PySpark 3.5 read otherwise or not at all) and
    column names distinct without regard to case
    (:func:`~pgoutput_codec.lake.names.column_names`), as a Delta copy of the mirror has them."""
    names = column_names(table.column_names, [])
    arrays = [to_delta(table.column(j)) for j in range(table.num_columns)]
    return pa.Table.from_arrays(arrays, names=[names[c] for c in table.column_names])


def leftovers(path: str, run: str | None = None) -> None:
    """Remove the hidden directories under ``path`` that tables were written to or moved
    aside to (a killed run's, a failed attempt's; ``run``: that run's alone)."""
    try:
        entries = os.listdir(path)
    except FileNotFoundError:
        return
    marks = (_SCRATCH, _OLD) if run is None else (f"{_SCRATCH}{run}~", f"{_OLD}{run}~")
    for e in entries:
        if e.startswith(".") and any(m in e for m in marks):
            shutil.rmtree(os.path.join(path, e), ignore_errors=True)


def replace_dir(final: str, write, run: str) -> None:
    """Fill a new directory by ``write(directory)``, beside ``final``, then put it in
    ``final``'s place: the old directory renamed away, the new one renamed in, the old
    one removed. Hidden (its name begins with ``.``) until it is renamed in.
    ``write`` None: ``final`` is removed (renamed away, then removed)."""
    parent, base = os.path.split(final)
    os.makedirs(parent, exist_ok=True)
    attempt = uuid.uuid4().hex[:12]
    scratch = os.path.join(parent, f".{base}{_SCRATCH}{run}~{attempt}")
    old = os.path.join(parent, f".{base}{_OLD}{run}~{attempt}")
    try:
        if write is None:
            with contextlib.suppress(FileNotFoundError):
                os.rename(final, old)
            return
        write(scratch)
        for _ in range(8):    # another attempt at the same table may rename its copy in meanwhile
            with contextlib.suppress(FileNotFoundError):
                os.rename(final, old)
            try:
                os.rename(scratch, final)
                break
            except OSError:
                if not os.path.exists(final):
                    raise
        else:
            raise OSError(f"{final}: could not put the new copy in place (another writer keeps replacing it)")
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _write_parquet(table: pa.Table):
    def write(d):
        os.makedirs(d)
        pq.write_table(table, os.path.join(d, PARQUET_FILE))
    return write


def _write_delta(table: pa.Table):
    def write(d):
        from deltalake import write_deltalake
        # no column statistics: deltalake's reader cannot parse some values in them (a
        # date before year 1), and a table's one file needs none to be skipped
        write_deltalake(d, table, mode="error", configuration={"delta.dataSkippingNumIndexedCols": "0"})
    return write


class TableWriter:
    """What an executor does with a table's group of change rows (:mod:`.pertable`'s
    body): rebuild the table with the one-process function ``what``, write it under
    ``path`` (:func:`replace_dir`), and give back one row of :data:`RESULT_SCHEMA`, with
    the warnings the rebuild raised. Called in one process as well (:func:`write_tables`)."""

    def __init__(self, path: str, run: str, what: str = "snapshot", as_of_lsn: int | None = None,
                 format: str = "parquet", registry=None, missing: dict | None = None, base=None, base_lsn=None):
        self.path, self.run, self.what, self.as_of_lsn, self.format = path, run, what, as_of_lsn, format
        self.registry, self.missing, self.base, self.base_lsn = registry, missing, base, base_lsn

    def table(self, name: str, rows: pa.Table) -> pa.Table:
        """Table ``name`` rebuilt from ``rows`` (its group, or every table's change rows)."""
        kw = dict(registry=self.registry, base=self.base, base_lsn=self.base_lsn)
        if self.what != "history":
            kw["missing"] = (self.missing or {}).get(name)
        if self.what == "snapshot":
            kw["as_of_lsn"] = self.as_of_lsn
        return WHATS[self.what](rows, name, **kw)

    def write(self, name: str, table: pa.Table) -> str | None:
        """``table`` written as table ``name``'s directory under the path; that directory.
        A table of no column (the name bears no relation at the end of the changes: its
        table was renamed away) has none: a directory of it is removed."""
        final = os.path.join(self.path, dir_name(name))
        if table.num_columns <= len(OWN_COLUMNS[self.what]):
            replace_dir(final, None, self.run)
            return None
        out = as_written(table)
        replace_dir(final, _write_delta(out) if self.format == "delta" else _write_parquet(out), self.run)
        return final

    def __call__(self, name: str, rows: pa.Table):
        if "__table" in rows.column_names:
            rows = rows.drop_columns(["__table"])

        def rebuilt():
            table = self.table(name, rows)
            return len(table), self.write(name, table)
        done, said = carried(rebuilt)
        n, final = done or (0, None)
        yield pa.RecordBatch.from_pylist([{"table": name, "rows": n, "path": final, **said}], schema=RESULT_SCHEMA)


def _checked(path, what: str, as_of_lsn, format: str, missing) -> str:
    if what not in WHATS:
        raise ValueError(f"what={what!r}: one of {', '.join(map(repr, WHATS))}")
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: one of {', '.join(map(repr, FORMATS))}")
    if as_of_lsn is not None and what != "snapshot":
        raise ValueError(f"as_of_lsn is a snapshot's cut: {what} takes every change")
    if missing and what == "history":
        raise ValueError("missing= fills a snapshot's or net changes' images: history takes none")
    p = os.fspath(path)
    if not isinstance(p, str):
        p = os.fsdecode(p)
    if p.startswith("file://"):
        p = p[len("file://"):]
    elif "://" in p:
        raise ValueError(f"path {p!r}: a directory every executor writes (a local or mounted file system); "
                         "a table's copy is put in place by renaming a directory, which object stores do not do")
    return os.path.abspath(lake_dir(p) if format == "delta" else p)


def write_tables(changes: pa.Table, path, *, tables=None, what: str = "snapshot", as_of_lsn: int | None = None,
                 format: str = "parquet", registry=None, missing: dict | None = None, base=None,
                 base_lsn=None) -> list[WrittenTable]:
    """:func:`write_snapshots` in one process, over change rows as an Arrow table: the
    same directories, written one table after another by the same :class:`TableWriter`."""
    path = _checked(path, what, as_of_lsn, format, missing)
    with target_locked(path):
        leftovers(path)
        writer = TableWriter(path, uuid.uuid4().hex[:12], what, as_of_lsn, format, registry, missing, base, base_lsn)
        groups = split_tables(changes, parse_table_list(tables))
        for name in based(base, tables):
            groups.setdefault(name, changes.slice(0, 0))
        return _results([r for name, rows in groups.items() for batch in writer(name, rows)
                         for r in batch.to_pylist()])


def _results(rows) -> list[WrittenTable]:
    """The rows of :data:`RESULT_SCHEMA` as :class:`WrittenTable` rows, by name, their
    warnings raised again, the first table's error raised once all are read
    (:func:`~.pertable.settled`)."""
    return [WrittenTable(r["table"], r["rows"], r["path"]) for r in settled(rows, stacklevel=3)]


#: :data:`RESULT_SCHEMA` as Spark's
SPARK_RESULT = T.StructType([T.StructField("table", T.StringType()), T.StructField("rows", T.LongType()),
                             T.StructField("path", T.StringType()), *SPARK_CARRIED])


def write_snapshots(changes: DataFrame, path, *, tables=None, what: str = "snapshot", as_of_lsn: int | None = None,
                    format: str = "parquet", registry=None, missing: dict | None = None, base=None,
                    base_lsn=None) -> list[WrittenTable]:
    """Write every table of ``changes`` (change rows:
    :func:`~pgoutput_codec.spark.decode_changes`' DataFrame, or change rows read back
    from a lake) that ``tables`` selects (patterns, as for :func:`pgoutput_codec.mirror`;
    None: all) under ``path``, one directory per table, named as the mirror names its
    copies (:func:`pgoutput_codec.lake.names.dir_name`: ``public.orders`` as it is).

    ``what``: ``"snapshot"`` (the table as of ``as_of_lsn``; default: every change),
    ``"history"`` or ``"net_changes"``. Each table is what the one-process
    :func:`pgoutput_codec.tables.snapshot` / ``history`` / ``net_changes`` gives over
    ``changes`` (a table's change rows alone give the same), in the Delta types of
    :mod:`pgoutput_codec.lake.deltatypes`, computed and written by the executor that
    holds the table's change rows. ``format``: ``"parquet"`` (one file,
    ``part-00000.parquet``) or ``"delta"`` (a Delta table of one version, by
    deltalake). ``registry``; ``missing`` ({table: {column: value}});
    ``base``/``base_lsn`` (a Parquet path, a DataFrame, or a mapping of them by table
    name): as for the one-process functions; a DataFrame base is first written by Spark
    to a hidden Parquet directory under ``path`` (one query each), removed at the end.

    Two Spark queries, whatever the number of tables (under adaptive execution, a job per
    shuffle stage of each): the tables' names, and the pass that groups the change rows
    by table and writes each table (:mod:`.pertable`). A table's
    largest group of change rows is held by one Python worker. Each table's directory is
    replaced whole; a directory of a table this run does not write is left as it is. A
    table with a base and no change row is its base. An error of one table is raised
    (as the first table's, in name order) once every other table is written.
    ``path``: a directory the driver and every executor can write (local, or a shared
    file system mounted on each); runs into one path take turns
    (:func:`~pgoutput_codec.lake.target_locked`). The change rows are cached for the
    run. Warnings the rebuilds raise (``IncompleteTableWarning``) are raised again here.
    Gives one :class:`WrittenTable` (table, rows, path) per table written, by name."""
    path = _checked(path, what, as_of_lsn, format, missing)
    check_workers(changes.sparkSession)
    registry = spark_registry(changes, registry)   # the archive's type catalog under the caller's
    with target_locked(path):
        leftovers(path)
        run = uuid.uuid4().hex[:12]
        cached = not changes.is_cached
        if cached:
            changes = changes.persist()
        made = []
        try:
            patterns = parse_table_list(tables)
            base, made = bases_for_workers(
                base, lambda i: os.path.join(path, f".base{_SCRATCH}{run}~{i}"),
                lambda k: k is None or any(table_selected(patterns, *p) for p in parse_name(k)))
            groups, names = table_groups(changes, tables, extra=based(base, tables))
            if not names:
                return []
            writer = TableWriter(path, run, what, as_of_lsn, format, registry, missing, base, base_lsn)
            n = group_partitions(changes.sparkSession, names)
            done = [r.asDict(recursive=True) for r in over_tables(groups, writer, SPARK_RESULT, n).collect()]
        finally:
            if cached:
                changes.unpersist()
            for d in made:
                shutil.rmtree(d, ignore_errors=True)
            leftovers(path, run)
        return _results(done)
