"""A Delta Lake copy of every table of an archive, kept current by one MERGE per table per
run, exactly once.

Each table's copy is a Delta table (written by ``deltalake``) under ``target``, in a
directory named for the table. A run takes the table's :func:`net_changes` after the last
commit the copy holds and MERGEs them in on the replica-identity key: an upsert keeps the
target's value of a column sent as unchanged TOAST, a delete removes the key, a truncate
(or another relation under the name) empties the copy first.

Exactly once: the commit that applies a batch records, in the same Delta commit, the
commit LSN of the last source transaction it holds as the Delta application transaction
of ``app_id`` (``DeltaTable.transaction_version``). A run takes only the changes
committed after it, so a run that crashed anywhere is simply run again, and a batch
already applied is never applied twice; a run with nothing new writes no version."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import threading
import warnings
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..changes.decoder import FEED_ROWS, ChangeDecoder
from ..changes.parallel import decode_changes
from ..arrays import largest
from ..archive import archive_catalog, inside_dir, read_archive_parts, same_file
from ..changes.checkpoint import Checkpoint
from ..errors import first_line
from ..runs import IncrementalRun, replace_durably
from ..selection import parse_table_list, table_selected
from ..idents import free_name, parse_name, qualified_name, resolve_name
from ..tables.rules import KNOWN, IncompleteTableWarning, alike_rows, base_for, start_unknown
from ..tables.net import net_of_rows, truncate_row
from ..tables.rows import as_change_rows, column_set_ids, resolve, split_tables
from ..threads import worker_count
from ..typecatalog.catalog import with_catalog
from ..typecatalog.companions import COMPANIONS, column_of
from .deltatypes import delta_type, to_delta
from .reading import read_copy
from .names import column_names, copy_dir, lake_dir

__all__ = ["mirror", "mirror_version_at", "table_path", "held_lsn", "apply_batch", "widens", "MirrorRun", "APP_ID",
           "MirrorWarning", "target_locked", "mirror_table", "refuse_inside", "LSN_KEY", "COMMIT_AT_KEY", "RELATION_KEY"]

#: the Delta application transaction that records what a copy holds
APP_ID = "pgoutput_codec.mirror"
#: commit metadata: the commit LSN (decimal text) and time (ISO 8601) the version reached,
#: and the relation the copy is of
LSN_KEY = "pgoutput_codec.commit_lsn"
COMMIT_AT_KEY = "pgoutput_codec.commit_at"
RELATION_KEY = "pgoutput_codec.relation_id"
#: the creation commit's metadata: the table the copy is of (a copy is known by it
#: before its first batch lands)
TABLE_KEY = "pgoutput_codec.table"
#: net_changes' columns that say what to do, not what a row holds
_CONTROL = ("__OP", "__UNCHANGED", "__UNCHANGED_FROM", "__COMMIT_LSN", "__COMMIT_AT", "__RELATION_ID")


class MirrorRun(NamedTuple):
    """What one run did to one table's copy."""

    table: str
    version: int | None      # the Delta version written last (None: nothing new)
    commit_lsn: int | None   # the last source commit the copy holds now
    upserts: int
    deletes: int
    truncated: bool


def table_path(target, name) -> str:
    """The directory of table ``name``'s copy under ``target`` (``name`` as
    :func:`~pgoutput_codec.idents.parse_name` reads it; an unquoted name with several
    dots is the copy there is of the tables it may name, a ValueError when there are
    several, a directory that holds none when there is none): one directory per table,
    named by :func:`~pgoutput_codec.lake.names.dir_name`."""
    cands = parse_name(name)
    there = [c for c in cands if os.path.isdir(copy_dir(target, *c))] if len(cands) > 1 else cands
    if len(there) > 1:
        resolve_name(name, set(there))
    return copy_dir(target, *(there or cands)[0])


def _changes_of(source, registry, options) -> pa.Table:
    """Change rows of ``source``: given as such, or decoded from an archive table."""
    if isinstance(source, pa.Table) and "op" in source.column_names and "after" in source.column_names:
        return as_change_rows(source)
    return decode_changes(source, registry=registry, **options)


#: the file under ``target`` that says where the next run over an archive directory starts
CHECKPOINT = ".pgoutput_codec.mirror.json"
#: the file under ``target`` a run holds locked (``flock``) from start to end: runs into
#: one target take turns
LOCK = ".pgoutput_codec.mirror.lock"


class MirrorWarning(UserWarning):
    """A warning of the mirror's own (a checkpoint set aside, an archive it cannot resume
    over): what the command line prints as ``mirror: warning:`` lines."""


_HELD = threading.local()      # the targets this thread holds locked


@contextlib.contextmanager
def target_locked(target):
    """Held while a run reads and writes ``target``: a run in another process or thread
    waits for it (``flock`` on :data:`LOCK` under ``target``); the thread that holds it
    takes it again at once. The system lets go of it when the process ends, however it
    ends."""
    import fcntl
    key = os.path.realpath(os.fspath(target))
    held = _HELD.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    os.makedirs(os.fspath(target), exist_ok=True)
    fd = os.open(os.path.join(os.fspath(target), LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.add(key)
        yield
    finally:
        held.discard(key)
        os.close(fd)


def refuse_inside(source, target) -> None:
    """ValueError when ``target`` is the archive ``source`` or a directory inside the
    archive's directory: the copies would overwrite it, or be read as part of it."""
    if same_file(target, source):
        raise ValueError(f"target {os.fspath(target)} is the archive {os.fspath(source)}: it would be overwritten; "
                         "mirror into another directory")
    if inside_dir(target, source):
        raise ValueError(f"target {os.fspath(target)} is inside the archive {os.fspath(source)}: its files would be "
                         "read as part of the archive; mirror into a directory outside it")


def _seq_range(part) -> tuple | None:
    """(smallest, largest) ``seq`` of a Parquet archive file, from its statistics (its
    footer as listed); () for a file of no rows; None: not known."""
    try:
        if part.num_rows == 0:
            return ()
        stats = part.seq_stats()
    except (OSError, pa.ArrowException):
        return None
    if not stats or None in stats:
        return None
    return min(lo for lo, _ in stats), max(hi for _, hi in stats)


def _archive_of(source, parts) -> tuple[dict, list]:
    """What the checkpoint says of the archive it was made over: its path, each file's
    size, and the largest ``seq`` in it (files of no rows hold none); and each file's
    :func:`_seq_range`, in the order of ``parts``."""
    spans = [_seq_range(p) for p in parts]
    ends = [span[1] for span in spans if span]
    root = os.path.realpath(os.fspath(source))
    in_dir = os.path.isdir(root)
    return {"path": root, "files": {os.path.relpath(os.path.realpath(p.path), root) if in_dir else
                                    os.path.basename(p.path): os.path.getsize(p.path) for p in parts},
            "seq_end": None if None in spans else max(ends, default=-1)}, spans


def _same_archive(held: dict, now: dict, spans: list) -> bool:
    """Whether the archive of ``now`` and ``spans`` (:func:`_archive_of`) goes on the one
    ``held`` describes: the same path, each file it had the same size (or removed), and
    each new file wholly after its last ``seq`` (or of no rows). A new capture (``seq``
    from 0 again), in a new directory or the same one, is another archive."""
    if held["path"] != now["path"] or held["seq_end"] is None:
        return False
    for (name, size), span in zip(now["files"].items(), spans, strict=True):
        if name in held["files"]:
            if held["files"][name] != size:
                return False
            continue
        if span is None or (span and span[0] <= held["seq_end"]):
            return False
    return True


def _record_read(record_path) -> dict | None:
    """The checkpoint file's record, checked whole; None when there is none. One of
    another shape (edited, written by hand, cut short) is set aside with a warning: the
    run reads the archive from its start and each copy's held commit LSN says what it
    lacks."""
    if not os.path.exists(record_path):
        return None
    try:
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
        if not isinstance(record, dict):
            raise ValueError(f"a JSON {type(record).__name__}, not an object")
        missing = [k for k in ("checkpoint", "tables", "copies") if k not in record]
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
        if not isinstance(record["copies"], list) or not all(isinstance(c, str) for c in record["copies"]):
            raise ValueError("copies is not a list of table names")
        if record["tables"] is not None and not isinstance(record["tables"], (str, list)):
            raise ValueError("tables is not a table list")
        if not isinstance(record["checkpoint"], str):
            raise ValueError("checkpoint is not a checkpoint's JSON text")
        record["checkpoint"] = Checkpoint.from_json(record["checkpoint"])
        arc = record.get("archive")
        if arc is not None and not (isinstance(arc, dict) and isinstance(arc.get("path"), str)
                                    and isinstance(arc.get("files"), dict)
                                    and all(isinstance(v, int) for v in arc["files"].values())
                                    and (arc.get("seq_end") is None or isinstance(arc["seq_end"], int))):
            raise ValueError("archive is not an archive's description")
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as e:
        warnings.warn(f"{record_path}: not a mirror checkpoint ({first_line(e)}): the run reads the archive "
                      "from its start", MirrorWarning, stacklevel=4)
        return None
    return record


def _archive_run(source, target, tables, registry, options):
    """(change rows, the run, the record to leave) of an archive file or directory: from
    the checkpoint the last complete run left, where it still holds (made over this
    archive, every copy it brought current is there, the same tables are asked for),
    else from the start."""
    record_path = os.path.join(os.fspath(target), CHECKPOINT)
    record = _record_read(record_path)
    parts = read_archive_parts(os.fspath(source))
    now, spans = _archive_of(source, parts)
    unknown = [p.path for p, span in zip(parts, spans, strict=True) if span is None]
    if unknown:
        more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
        warnings.warn(f"{unknown[0]}{more}: no seq statistics (Parquet min/max of column seq), so the run cannot "
                      "tell where the last one ended and reads the archive from its start each run; write the "
                      "files with statistics", MirrorWarning, stacklevel=4)
    resume = None
    if record is not None and record.get("archive") is not None and record["tables"] == tables \
            and _same_archive(record["archive"], now, spans) \
            and all(os.path.isdir(table_path(target, n)) for n in record["copies"]):
        resume = record["checkpoint"]
    run = IncrementalRun(source, resume, parts=parts)
    if options.get("workers") is not None:
        # up to ``workers`` threads, as many as the largest file's payload pays for (as
        # with None: a small payload decodes faster on one thread). A feed is one file, or
        # small files joined up to FEED_ROWS rows, whose payload passes the largest file's
        # only where their messages are large (16 KB each on average for 1 GiB)
        options = {**options, "workers": min(options["workers"], max(
            worker_count(None, p.data_bytes) for p in parts))}
    with ChangeDecoder(registry=registry, resume=resume, **options) as dec:
        pieces = [dec.feed(t) for t in run.feeds(FEED_ROWS)]
        changes = pa.concat_tables(pieces) if pieces else dec.output_schema.empty_table()
    return with_catalog(changes, archive_catalog(parts)), run, record_path, (record or {}).get("copies", []), now


def _leave_record(record_path, run, tables, copies, archive, options) -> None:
    """After every copy is current: where the next run starts, and the archive that is
    so of, written durably."""
    cp = run.next_checkpoint(**options)
    os.makedirs(os.path.dirname(record_path), exist_ok=True)
    tmp = record_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"checkpoint": cp.to_json(), "tables": tables, "copies": sorted(copies), "archive": archive}, f)
    replace_durably(tmp, record_path)


def mirror(source, target, *, tables=None, registry=None, missing: dict | None = None, app_id: str = APP_ID,
           file_size: int | None = None, base=None, base_lsn=None, workers: int | None = None,
           **options) -> list[MirrorRun]:
    """Bring the Delta copy of every table of ``source`` (an archive, as
    :func:`~pgoutput_codec.decode_changes` takes it with ``options``, or its
    change rows) under directory ``target`` current: a copy is created on first sight,
    with the Delta types of ``lake.deltatypes``. ``tables``: the tables to keep
    (``'public.t1,*.t3'``, as ``decode --changes --tables``); ``missing``:
    {table: {column: default}} for columns added with a default (:func:`snapshot`'s
    ``missing``). ``file_size``: the bytes a copy created by this run aims its data files
    at (Delta's ``delta.targetFileSize``; None: deltalake's default, 100 MB). Gives one
    :class:`MirrorRun` per table.

    ``base``/``base_lsn``: tables' rows as of an LSN (:mod:`pgoutput_codec.tables.base`:
    a mapping ``{"schema.table": Arrow table or Parquet path}`` and an LSN or a mapping
    of them): a copy created by this run starts from its base, as copied rows ('R')
    committed at ``base_lsn``; the changes at or below it are in the base and skipped.
    A copy that exists already holds its start: its base is not read again. A copy
    created from changes with no copied row of its table and no base warns
    (:class:`~pgoutput_codec.tables.IncompleteTableWarning`): the rows the table held
    before capture began are not in it.

    ``workers``: the threads the run uses, to decode the archive and to bring the copies
    current (up to ``workers`` tables at once, each its net changes then its write;
    deltalake writes with Python's lock let go); 1: this thread only; None:
    :data:`WORKERS`, or fewer when there are fewer cores. The copies, the runs and the
    warnings (raised in this thread, in table order) are the same for any number."""
    _writers_for(workers)
    lake_dir(target)
    if isinstance(source, (str, os.PathLike)):
        refuse_inside(source, target)
    with target_locked(target):
        return _mirror(source, target, tables, registry, missing, app_id, file_size, options, base, base_lsn,
                       workers)


def _mirror(source, target, tables, registry, missing, app_id, file_size, options, base=None,
            base_lsn=None, workers=None) -> list[MirrorRun]:
    from deltalake import DeltaTable
    record = None
    if isinstance(source, (str, os.PathLike)):
        changes, run, record_path, copies, archive = _archive_run(source, target, tables, registry,
                                                                  {**options, "workers": workers})
        record = (record_path, run, copies, archive)
    else:
        changes = _changes_of(source, registry, {**options, "workers": workers})
    patterns = parse_table_list(tables)
    groups = split_tables(changes, patterns)     # one sort, not one scan of every row per table
    names = sorted(groups)
    if isinstance(base, dict):  # a table with a base and no change yet: its copy is the base
        names = sorted(set(names) | {qualified_name(*parse_name(k)[0]) for k in base
                                     if any(table_selected(patterns, *p) for p in parse_name(k))})
    paths = {name: table_path(target, name) for name in names}
    copies = {name: _own_copy(target, name, app_id, paths[name]) for name in names}   # every copy checked first
    none = changes.schema.empty_table()
    del changes                 # (the groups are slices of one copy of the rows, held until the last table)
    with _Writers(min(_writers_for(workers), max(1, len(names)))) as writers:
        for name in names:
            # each table's net changes and write on the threads; its warning, that the
            # copy made lacks the rows held before capture, raised here in table order
            writers.submit(_table_step, target, name, paths.pop(name), groups.pop(name, none), copies.pop(name),
                           registry, (missing or {}).get(name), app_id, file_size, base, base_lsn)
        runs = []
        for run, incomplete in writers.results():
            if incomplete:
                warnings.warn(IncompleteTableWarning(run.table), stacklevel=3)
            runs.append(run)
    if record is not None:
        record_path, run, copies, archive = record
        named = {r.table for r in runs}
        for name in sorted(set(copies) - named):     # copies this run's rows did not touch: nothing new
            if any(table_selected(patterns, *p) for p in parse_name(name)) and \
                    os.path.isdir(table_path(target, name)):
                held = DeltaTable(table_path(target, name)).transaction_version(app_id)
                runs.append(MirrorRun(name, None, held, 0, 0, False))
        _leave_record(record_path, run, tables, set(copies) | {r.table for r in runs if r.commit_lsn is not None},
                      archive, options)
    return sorted(runs, key=lambda r: r.table)


#: the copies :func:`mirror` writes at once by default (bench/tables_bench.py)
WORKERS = 2


def _writers_for(workers) -> int:
    if workers is None:
        return max(1, min(WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else os.cpu_count() or 1))
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be None or a positive integer, not {workers!r}")
    return int(workers)


class _Writers:
    """Calls run on up to ``workers`` threads (1: in the calling thread, at once), their
    results in the order they were given; the first error, in that order, raised once
    every call begun has ended (none is begun after one failed)."""

    def __init__(self, workers: int):
        self.workers = workers
        self.pool = None
        self.done: list = []
        self.pending: list = []       # the calls not yet seen ended without an error

    def __enter__(self):
        if self.workers > 1:
            from concurrent.futures import ThreadPoolExecutor
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="pgoutput_codec-mirror")
        return self

    def submit(self, fn, *args) -> None:
        if self.pool is None:
            self.done.append(fn(*args))
            return
        # only the calls not yet seen ended are looked at (a run submits one a table: a
        # look at every call made would grow with the square of the tables); each ended
        # call is looked at once, so one that ends between two looks is not passed over
        ended = [f for f in self.pending if f.done()]
        failed = next((f for f in ended if f.exception() is not None), None)
        if failed is not None:
            raise failed.exception()
        self.pending = [f for f in self.pending if not any(f is e for e in ended)]
        if len(self.pending) >= 2 * self.workers:     # the batches held waiting stay few
            self.pending[0].result()
        self.done.append(self.pool.submit(fn, *args))
        self.pending.append(self.done[-1])

    def results(self):
        """The calls' results in the order they were given, each as it comes (an error
        raised in its place)."""
        for f in self.done:
            yield f.result() if self.pool is not None else f

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        return False


def mirror_table(target, name: str, changes: pa.Table, *, registry=None, missing: dict | None = None,
                 app_id: str = APP_ID, file_size: int | None = None, base=None, base_lsn=None,
                 locked: bool = True) -> MirrorRun:
    """Bring table ``name``'s copy under ``target`` current with ``changes`` (change rows
    holding the table's: every table's, or its group of
    :func:`~pgoutput_codec.tables.rows.split_tables`, which gives the same copy): its
    :func:`net_changes` after :func:`held_lsn`, read here (the copy's log opened once),
    applied by :func:`apply_batch`'s writer. ``missing``: the table's {column: default};
    ``base``/``base_lsn``: as for :func:`mirror` (read only when the copy is created).
    What :func:`mirror` does per table, and what Spark's executors do per table. It holds
    :func:`target_locked` from the read to the write; ``locked=False``: the caller's
    process holds it for the run (a Spark driver, while its executors write)."""
    with target_locked(target) if locked else contextlib.nullcontext():
        dt = _open_copy(target, name)
        net, lists, incomplete = _batch_of(name, changes, dt, registry, missing, app_id, base, base_lsn)
        if incomplete:
            warnings.warn(IncompleteTableWarning(name), stacklevel=2)
        return _apply_batch(target, name, net, lists, app_id, file_size, _owned(dt, target, name, app_id))


def _table_step(target, name, path, changes, dt, registry, missing, app_id, file_size, base, base_lsn) -> tuple:
    """(the :class:`MirrorRun` of table ``name``'s copy ``dt`` (:func:`_own_copy`'s) brought
    current with ``changes``, whether the copy it made lacks the rows the table held
    before capture: its start unknown, no base; ``path``: its :func:`table_path`):
    :func:`mirror`'s step of a table, on its threads."""
    net, lists, incomplete = _batch_of(name, changes, dt, registry, missing, app_id, base, base_lsn)
    return _apply_batch(target, name, net, lists, app_id, file_size, dt, path), incomplete


def _batch_of(name, changes, dt, registry, missing, app_id, base, base_lsn):
    """(the :func:`net_changes` of table ``name`` in ``changes`` after what its copy
    ``dt`` holds (None: no copy yet), the column lists of its Relations, whether a copy
    made now lacks the rows held before capture): what :func:`apply_batch` takes, and
    what the caller warns."""
    done = dt.transaction_version(app_id) if dt is not None else None
    later = changes if done is None else changes.filter(
        pc.fill_null(pc.greater(changes.column("commit_lsn"), pa.scalar(done, pa.uint64())), False))
    b, b_lsn = base_for(base, base_lsn, name) if done is None else (None, None)
    rows, replaced = resolve(later, name)      # (once: the net changes take them resolved)
    incomplete = done is None and b is None and start_unknown(rows)
    sets = column_set_ids(rows)
    net = net_of_rows(rows, replaced, name, registry=registry, missing=missing, sets=sets,
                      **(dict(base=b, base_lsn=b_lsn) if b is not None else dict(base=KNOWN)))
    lists = [c for c in sets[1] if c is not None] if len(rows) else []
    return net, lists, incomplete


def _own_copy(target, name: str, app_id: str = APP_ID, path=None):
    """The Delta table at table ``name``'s place under ``target``, when the mirror wrote
    it (its log holds the ``app_id`` transaction, or a commit with the mirror's
    metadata, its creation's too); None when there is none. Any other Delta table there
    is refused, naming the table and the path: a MERGE into it would keep its rows.
    ``path``: its :func:`table_path`, when known."""
    return _owned(_open_copy(target, name, path), target, name, app_id)


def _open_copy(target, name: str, path=None):
    """The Delta table at table ``name``'s place under ``target`` (None: none)."""
    from deltalake import DeltaTable
    if path is None:
        path = table_path(target, name)
    return DeltaTable(path) if os.path.isdir(os.path.join(path, "_delta_log")) else None


def _owned(dt, target, name: str, app_id: str):
    """``dt`` (:func:`_open_copy`), refused unless the mirror wrote it (:func:`_own_copy`)."""
    if dt is not None and dt.transaction_version(app_id) is None and not any(
            h.get(LSN_KEY) is not None or h.get(TABLE_KEY) is not None for h in dt.history()):
        raise ValueError(f"{name}: {table_path(target, name)} is a Delta table the mirror did not write (no {app_id} "
                         "transaction or pgoutput_codec commit in its log): move it away, or mirror into another "
                         "target")
    return dt


def held_lsn(target, name: str, app_id: str = APP_ID) -> int | None:
    """The commit LSN of the last source transaction table ``name``'s copy under
    ``target`` holds (None: no copy yet). A batch for :func:`apply_batch` holds the
    changes committed after it."""
    from deltalake import DeltaTable
    path = table_path(target, name)
    return DeltaTable(path).transaction_version(app_id) if os.path.isdir(os.path.join(path, "_delta_log")) else None


def apply_batch(target, name: str, net: pa.Table, column_lists: list, *, app_id: str = APP_ID,
                file_size: int | None = None) -> MirrorRun:
    """Bring table ``name``'s copy under ``target`` current with ``net``, its
    :func:`net_changes` of the transactions committed after :func:`held_lsn`, whose
    Relations sent ``column_lists`` (one list of column dicts per definition): one MERGE,
    and the commit LSN it reaches recorded in the same Delta commit. The one writer of
    :func:`mirror` and of ``pgoutput_codec.spark.mirror``; it holds :func:`target_locked`
    while it writes."""
    with target_locked(target):
        return _apply_batch(target, name, net, column_lists, app_id, file_size)


#: _apply_batch's copy not given: it reads it
_READ = object()


def _apply_batch(target, name, net, column_lists, app_id, file_size, dt=_READ, path=None) -> MirrorRun:
    if path is None:
        path = table_path(target, name)
    if dt is _READ:
        dt = _own_copy(target, name, app_id, path)
    names = net.schema.names
    if "__UNCHANGED_FROM" not in names and tuple(names[-5:]) == _CONTROL[:2] + _CONTROL[3:]:
        # Spark's batch of no row change (a truncate at most) names no key
        net = net.add_column(len(names) - 3, "__UNCHANGED_FROM", pa.nulls(len(net), pa.struct([])))
    done = dt.transaction_version(app_id) if dt is not None else None
    held = []
    if dt is not None and len(net):
        controls = _controls(net)
        if done is not None:
            reached = controls[3]
            if pc.max(reached).as_py() <= done:      # the copy holds it already: applied by another run
                return MirrorRun(name, None, done, 0, 0, False)
            if pc.min(reached).as_py() <= done:
                raise ValueError(f"{name}: the batch holds commits up to {pc.min(reached).as_py()}, which the "
                                 f"copy holds already (up to {done}): compute it from held_lsn() again")
        if controls[0][0].as_py() != "truncate":
            if _relation_of(dt) not in (None, controls[5][0].as_py()):
                # the copy is of a relation that no longer bears the name (the table dropped
                # and created again, or another renamed in, between runs): start it again
                net = pa.concat_tables([_truncate_row(net), net])
            else:
                held = _held(dt).names
    alike = alike_rows(column_lists)
    net, ctl, column_lists = _named_apart(net, column_lists, held)
    if held:
        _drop_columns(dt, column_lists)
        dt = _widened(dt, path, net, name, ctl)
    return _apply(dt, path, name, net, app_id, done, file_size, ctl, alike)


class _Ctl(NamedTuple):
    """The names of a batch's control columns (``_CONTROL``'s, in its order) beside its
    data columns."""

    op: str
    unchanged: str
    moved_from: str
    lsn: str
    at: str
    relation: str


def _controls(net: pa.Table) -> list:
    """The control columns of a :func:`net_changes` batch: its last six, by place (a
    table's own column may bear one of their names)."""
    names = _batch_names(net)
    return [net.column(len(names) - len(_CONTROL) + j) for j in range(len(_CONTROL))]


def _batch_names(net: pa.Table) -> list:
    """The column names of a :func:`net_changes` batch, its control columns last (else a
    ValueError)."""
    names = net.schema.names
    if tuple(names[-len(_CONTROL):]) != _CONTROL:
        raise ValueError(f"not a net_changes batch: its last columns are {names[-len(_CONTROL):]}, "
                         f"not {list(_CONTROL)}")
    return names


def _truncate_row(net: pa.Table) -> pa.Table:
    """The ``truncate`` row of the batch ``net``, at its first row's commit."""
    ctl = _controls(net)
    k = len(net.column_names) - len(_CONTROL)
    canon = pa.schema([f.with_name(n) for f, n in zip(net.schema, [f"c{j}" for j in range(k)] + list(_CONTROL),
                                                      strict=True)])
    row = truncate_row(canon, (ctl[3][0].as_py(), ctl[4][0].as_py()), ctl[5][0].as_py())
    return row.rename_columns(net.column_names)


def _named_apart(net: pa.Table, column_lists: list, held) -> tuple:
    """``net`` with its data columns named as in the copy whose columns are ``held``
    (:func:`~pgoutput_codec.lake.names.column_names`: in its unchanged-value lists and
    key structs too) and its control columns named apart from them; the names
    (:class:`_Ctl`), and ``column_lists`` so named."""
    data = _batch_names(net)[:-len(_CONTROL)]
    ren = column_names(data, held)
    taken = set(ren.values())
    ctl = _Ctl(*(free_name(c, taken) for c in _CONTROL))
    renamed = any(a != b for a, b in ren.items())
    if not renamed and ctl == _CONTROL:     # every name as it is: the batch's columns as they are
        # (its fields' nullability and metadata are not the copy's: a batch read back
        # from Parquet may hold required fields, and a copy's columns are nullable)
        return pa.Table.from_arrays(net.columns, names=net.column_names), ctl, column_lists
    controls = _controls(net)
    if renamed:
        unchanged = controls[1].combine_chunks()
        flat = pc.list_flatten(unchanged)
        controls[1] = pa.ListArray.from_arrays(
            pc.subtract(unchanged.offsets, unchanged.offsets[0]),
            pa.array([ren.get(c, c) for c in flat.to_pylist()], pa.string()), mask=unchanged.is_null())
        moved = controls[2].combine_chunks()
        controls[2] = pa.StructArray.from_arrays(
            [moved.field(j) for j in range(moved.type.num_fields)],
            names=[ren.get(f.name, f.name) for f in moved.type], mask=moved.is_null())
        column_lists = [[{**c, "name": ren.get(c["name"], c["name"])} for c in cols] for cols in column_lists]
    net = pa.Table.from_arrays([net.column(j) for j in range(len(data))] + controls,
                               names=[ren[c] for c in data] + list(ctl))
    return net, ctl, column_lists


def _column_of(name: str) -> str:
    return column_of(name)


def _drop_columns(dt, lists: list) -> None:
    """A column of the copy that a Relation of the batch (``lists``: their column lists)
    lacks was dropped at the source (and may be back, added again: a new column, null in
    the rows not changed since, as the server has it): its values in the copy are set
    null, in a commit of their own before the MERGE (a rerun after a crash between them
    does it again, to no effect)."""
    if not lists:
        return
    held = _held(dt).names
    gone = [c for c in held if any(_column_of(c) not in {x["name"] for x in cols} for cols in lists)]
    if gone:
        dt.update(updates={_q(c): "NULL" for c in gone},
                  predicate=" OR ".join(f"{_q(c)} IS NOT NULL" for c in gone))


def _held(dt) -> pa.Schema:
    """The copy's schema, as pyarrow's."""
    return pa.schema(dt.schema().to_arrow())


def _widened(dt, path, net: pa.Table, name: str, ctl):
    """The copy, with every column whose type the source widened (``ALTER COLUMN … TYPE``
    to one holding every value of the old: :func:`widens`) rewritten in the new type, in
    a commit of its own before the MERGE (a rerun finds it done). Another change of type
    is refused, naming the column and both types."""
    from deltalake import DeltaTable, write_deltalake
    held = {f.name: f.type for f in _held(dt)}
    wider = {}
    for f in net.schema:
        if f.name in ctl or f.name not in held:
            continue
        want = delta_type(f.type)
        if _same_type(held[f.name], want):
            continue
        if not widens(held[f.name], want):
            raise ValueError(f"{name}.{f.name}: the copy holds {held[f.name]}, the changes now send {want}: "
                             "a Delta column keeps its type, or widens (rebuild the copy: remove its directory and "
                             "run again)")
        wider[f.name] = want
    if not wider:
        return dt
    copy = read_copy(dt)
    write_deltalake(dt, pa.table({c: copy.column(c).cast(wider[c]) if c in wider else copy.column(c)
                                  for c in copy.column_names}), mode="overwrite", schema_mode="overwrite")
    return DeltaTable(path)


def widens(held: pa.DataType, want: pa.DataType) -> bool:
    """Whether a column of type ``held`` takes type ``want`` keeping every value exactly:
    Delta's type widening (an integer to a wider one, float to double, an integer to a
    decimal of as many integer digits, a decimal to one of no fewer integer or fraction
    digits, a date to a timestamp without zone)."""
    ints = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
    digits = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 20}
    if held in ints and want in ints:
        return ints.index(want) > ints.index(held)
    if held == pa.float32() and want == pa.float64():
        return True
    if held in ints and want == pa.float64():
        return held != pa.int64()
    if held in ints and pa.types.is_decimal(want):
        return want.precision - want.scale >= digits[held]
    if pa.types.is_decimal(held) and pa.types.is_decimal(want):
        return want.scale >= held.scale and want.precision - want.scale >= held.precision - held.scale
    return pa.types.is_date(held) and pa.types.is_timestamp(want) and want.tz is None


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal, reading deltalake's view types (string_view, list_view …) as the plain ones."""
    norm = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary(), pa.large_string(): pa.string(),
            pa.large_binary(): pa.binary()}
    a, b = norm.get(a, a), norm.get(b, b)
    if pa.types.is_list(a) or pa.types.is_large_list(a) or pa.types.is_list_view(a) or \
            pa.types.is_large_list_view(a):
        return (pa.types.is_list(b) or pa.types.is_large_list(b)) and _same_type(a.value_type, b.value_type)
    if pa.types.is_struct(a):
        return pa.types.is_struct(b) and [f.name for f in a] == [f.name for f in b] and \
            all(_same_type(x.type, y.type) for x, y in zip(a, b, strict=True))
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)
    return a.equals(b)


def _relation_of(dt) -> int | None:
    """The relation the copy is of, as its newest commit that says so has it: read from
    the newest commits back, more of them each time (a batch's commit says it, so the
    newest one or two do; a copy's whole history grows with every run)."""
    limit = 4
    while True:
        seen = dt.history(limit)
        for h in sorted(seen, key=lambda h: -h["version"]):
            if h.get(RELATION_KEY) is not None:
                return int(h[RELATION_KEY])
        if len(seen) < limit:
            return None
        limit *= 8


#: compute functions called per table, looked up once (``pc.equal``'s own lookup and
#: options cost more than the kernel on a batch of a few rows)
_EQUAL = pc.get_function("equal")
_UPSERT, _DELETE = pa.scalar("upsert"), pa.scalar("delete")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _time_text(col: pa.ChunkedArray) -> str | None:
    """The latest time of timestamp column ``col`` in ISO 8601 (None: it holds none), as
    ``isoformat`` gives pyarrow's value."""
    v = largest(col)
    if v is None:
        return None
    if col.type.unit == "us" and col.type.tz == "UTC":
        with contextlib.suppress(OverflowError):
            return (_EPOCH + datetime.timedelta(microseconds=v)).isoformat()
    return pa.scalar(v, col.type).as_py().isoformat()


def _commit(app_id: str, net: pa.Table, ctl, created: str | None = None):
    from deltalake import CommitProperties, Transaction
    k = net.num_columns - len(_CONTROL)     # (the control columns by place)
    lsn = largest(net.column(k + 3))
    at = _time_text(net.column(k + 4))
    if lsn >= 1 << 63:
        raise OverflowError(f"commit LSN {lsn} is past what a Delta application transaction version holds")
    meta = {LSN_KEY: str(lsn), COMMIT_AT_KEY: at}
    rel = net.column(k + 5)[0].as_py() if len(net) else None
    if rel is not None:
        meta[RELATION_KEY] = str(rel)
    if created is not None:
        meta[TABLE_KEY] = created
    return lsn, CommitProperties(app_transactions=[Transaction(app_id, int(lsn))],
                                 custom_metadata={k: v for k, v in meta.items() if v is not None})


def _rows(net: pa.Table, ctl) -> pa.Table:
    """The data columns of ``net`` in Delta's types, and the control columns the MERGE reads."""
    cols = [c for c in net.column_names if c not in ctl]
    return pa.table({**{c: to_delta(net.column(c)) for c in cols}, ctl.op: net.column(ctl.op),
                     ctl.unchanged: net.column(ctl.unchanged), ctl.moved_from: net.column(ctl.moved_from)})


def _counts(op: pa.ChunkedArray) -> tuple:
    """(upserts, deletes, the upsert rows' mask) of a batch's ``__OP`` after its truncate."""
    up = _EQUAL.call([op, _UPSERT])
    upserts = sum(c.true_count for c in up.chunks)
    deletes = 0 if upserts == len(op) else sum(c.true_count for c in _EQUAL.call([op, _DELETE]).chunks)
    return upserts, deletes, up


def _apply(dt, path, name, net: pa.Table, app_id: str, done, file_size, ctl, alike: bool = False) -> MirrorRun:
    from deltalake import DeltaTable, write_deltalake
    if not len(net):
        return MirrorRun(name, None, done, 0, 0, False)
    # the control columns are the last, by place (:func:`_named_apart`)
    schema = net.schema
    k = len(schema) - len(_CONTROL)
    op = net.column(k)
    truncated = op[0].as_py() == "truncate"
    lsn, commit = _commit(app_id, net, ctl, created=name if dt is None else None)
    body = net.slice(1) if truncated else net
    upserts, deletes, up = _counts(op.slice(1) if truncated else op)
    given = schema.types[:k]
    data_cols = schema.names[:k]
    types = [delta_type(t) for t in given]
    keys = [f.name for f in schema.types[k + 2]]      # (the key struct of __UNCHANGED_FROM)
    # statistics of the key columns alone: what a MERGE skips files by (the others'
    # would only cost, and deltalake's reader cannot parse a date before year 1 in them)
    stats = {"delta.dataSkippingStatsColumns": ",".join(_q(k) for k in keys)} if keys else \
        {"delta.dataSkippingNumIndexedCols": "0"}
    if dt is None:
        # a copy made now: created holding the batch's upserts (a delete finds no row), its
        # table named, and the batch's application transaction, all in one commit: it
        # exists whole or not at all
        config = dict(stats)
        if file_size:   # files of bounded size: a MERGE of keys in a few rewrites those alone
            config["delta.targetFileSize"] = str(int(file_size))
        if all(a.equals(b) for a, b in zip(given, types, strict=True)):    # Delta's types already
            rows = body.select(range(k))
            if any(c.num_chunks > 1 for c in rows.columns):
                rows = rows.combine_chunks()
        else:
            cols = [to_delta(body.column(j)) for j in range(k)]
            rows = pa.Table.from_arrays([c if c.type.equals(t) else c.cast(t)
                                         for c, t in zip(cols, types, strict=True)], names=data_cols)
        write_deltalake(path, rows if upserts == len(body) else rows.filter(up), mode="error",
                        configuration=config, commit_properties=commit)
        return MirrorRun(name, 0, lsn, upserts, deletes, truncated)
    schema = pa.schema([pa.field(c, t) for c, t in zip(data_cols, types, strict=True)])
    if truncated:
        # emptied, in the batch's columns and types (a table created again under the name
        # may have others); the batch is whole: run again after a crash here, it empties
        # and fills again
        write_deltalake(dt, schema.empty_table(), mode="overwrite", schema_mode="overwrite")
        dt = DeltaTable(path)
        if any(dt.metadata().configuration.get(k) != v for k, v in stats.items()):   # another key
            dt.alter.set_table_properties(stats)
            dt = DeltaTable(path)
    if not len(body):        # a truncate alone: the record of it is a commit of no rows
        write_deltalake(dt, schema.empty_table(), mode="append", schema_mode="merge", commit_properties=commit)
        return MirrorRun(name, dt.version(), lsn, 0, 0, truncated)
    rows = _fill_moved(dt, _rows(body, ctl), keys, ctl).drop_columns([ctl.moved_from])
    if alike:
        _apply_alike(dt, rows, keys, data_cols, commit, ctl)
        return MirrorRun(name, dt.version(), lsn, upserts, deletes, truncated)
    # a copy with no file (emptied by this run, or before) is written, not merged into
    if not len(dt.file_uris()) or (keys and (_touched_share(dt, rows, keys) or 0) >= REWRITE_SHARE):
        _rewrite(dt, rows, keys, data_cols, commit, ctl)
        return MirrorRun(name, dt.version(), lsn, upserts, deletes, truncated)
    on = " AND ".join(f"(t.{_q(k)} IS NOT DISTINCT FROM s.{_q(k)})" for k in keys) or "false"
    held = set(_held(dt).names)      # a column new to the copy has no value of its own to keep
    updates = {_q(c): f"CASE WHEN array_has(s.{_q(ctl.unchanged)}, '{_lit(c)}') THEN t.{_q(c)} ELSE s.{_q(c)} END"
               if c in held else f"s.{_q(c)}" for c in data_cols}
    inserts = {_q(c): f"s.{_q(c)}" for c in data_cols}
    merger = dt.merge(rows, predicate=on, source_alias="s", target_alias="t", merge_schema=True,
                      commit_properties=commit)
    op = f"s.{_q(ctl.op)}"
    (merger.when_matched_delete(predicate=f"{op} = 'delete'")
           .when_matched_update(updates=updates, predicate=f"{op} = 'upsert'")
           .when_not_matched_insert(updates=inserts, predicate=f"{op} = 'upsert'")
           .execute())     # (dt follows the commits it writes)
    if dt.transaction_version(app_id) != lsn:    # the MERGE changed no row, so wrote no commit
        write_deltalake(dt, schema.empty_table(), mode="append", schema_mode="merge", commit_properties=commit)
    return MirrorRun(name, dt.version(), lsn, upserts, deletes, truncated)


#: the share of a copy's bytes in files a batch's keys fall in, from which the copy is
#: rewritten whole rather than MERGEd: deltalake's MERGE that rewrites every file costs
#: more than writing the table afresh (bench/mirror_bench.py, docs/benchmarks.md)
REWRITE_SHARE = 0.5


def _touched_share(dt, rows: pa.Table, keys: list[str]) -> float | None:
    """The share of the copy's bytes in files whose statistics (min, max of the first key
    column, an integer) may hold a key of ``rows``: the files a MERGE rewrites. None: not
    known (no statistics, another type, a null key)."""
    first = rows.column(keys[0])
    if not pa.types.is_integer(first.type) or first.null_count or any(rows.column(k).null_count for k in keys):
        return None
    files = pa.table(dt.get_add_actions(flatten=True))
    lo, hi = f"min.{keys[0]}", f"max.{keys[0]}"
    if not len(files) or lo not in files.column_names or hi not in files.column_names \
            or files.column(lo).null_count or files.column(hi).null_count:
        return None
    batch = np.sort(first.to_numpy())
    at = np.searchsorted(batch, files.column(lo).to_numpy(), "left")
    held = at < len(batch)
    touched = held & (batch[np.minimum(at, len(batch) - 1)] <= files.column(hi).to_numpy())
    size = files.column("size_bytes").to_numpy()
    return float(size[touched].sum() / max(1, size.sum()))


def _rewrite(dt, rows: pa.Table, keys: list[str], data_cols: list[str], commit, ctl) -> None:
    """The MERGE of ``rows`` done by rewriting the copy in one overwrite commit (with the
    batch's application transaction): the copy's rows of keys the batch holds out, the
    upserts in, their unchanged TOAST values taken from the copy's row of the same key
    (only non-null keys come here, or an empty copy: pyarrow's joins match no null)."""
    from deltalake import write_deltalake
    copy = read_copy(dt)
    key_types = {k: copy.schema.field(k).type for k in keys}
    at_j, at_i = free_name("__j", keys), free_name("__i", keys)     # row numbers beside the keys
    batch = pa.table({**{k: rows.column(k).cast(key_types[k]) for k in keys},
                      at_j: pa.array(np.arange(len(rows)))})
    ids = pa.table({**{k: copy.column(k) for k in keys}, at_i: pa.array(np.arange(len(copy)))})
    pairs = ids.join(batch, keys=keys, join_type="inner", use_threads=False)
    drop = np.zeros(len(copy), bool)
    drop[pairs.column(at_i).to_numpy()] = True
    kept = copy.filter(pa.array(~drop))
    is_up = pc.equal(rows.column(ctl.op), "upsert").to_numpy(zero_copy_only=False)
    # each upsert's row in the copy (-1: none), for its unchanged values
    found = np.full(len(rows), -1, np.int64)
    found[pairs.column(at_j).to_numpy()] = pairs.column(at_i).to_numpy()
    unchanged = rows.column(ctl.unchanged).combine_chunks()
    flat = pc.list_flatten(unchanged)
    parent = pc.list_parent_indices(unchanged).to_numpy() if len(flat) else np.zeros(0, np.int64)
    up = np.flatnonzero(is_up)
    out = {}
    names = copy.column_names + [c for c in data_cols if c not in copy.column_names]
    for c in names:
        t = copy.schema.field(c).type if c in copy.column_names else delta_type(rows.schema.field(c).type)
        if c not in rows.column_names:       # a column of the copy the batch no longer sends: null
            out[c] = pa.nulls(len(up), t)
            continue
        v = rows.column(c).cast(t).take(pa.array(up))
        keep = np.zeros(len(rows), bool)
        keep[parent[pc.equal(flat, c).to_numpy(zero_copy_only=False)]] = True
        keep = keep[up] & (found[up] >= 0)
        if keep.any() and c in copy.column_names:
            held = copy.column(c).take(pa.array(np.where(keep, found[up], 0)))
            v = pc.if_else(pa.array(keep), held, v)
        out[c] = v
    new = pa.table(out)
    for c in names:
        if c not in kept.column_names:
            kept = kept.append_column(c, pa.nulls(len(kept), new.schema.field(c).type))
    write_deltalake(dt, pa.concat_tables([kept.select(names), new.select(names)]), mode="overwrite",
                    schema_mode="merge", commit_properties=commit)


def _apply_alike(dt, rows: pa.Table, keys: list[str], data_cols: list[str], commit, ctl) -> None:
    """Apply ``rows`` to the copy of a table whose rows may repeat
    (:func:`~pgoutput_codec.tables.rules.alike_rows`), in one commit with the
    batch's application transaction: each ``upsert`` row is one row more, each
    ``delete`` row one row fewer — one of the copy's rows alike it in the key columns
    (every column) and their notes. A MERGE would match every row alike, so a batch of
    upserts alone is appended, and one that removes rows rewrites the copy."""
    from deltalake import write_deltalake
    is_up = pc.equal(rows.column(ctl.op), "upsert").to_numpy(zero_copy_only=False)
    copy = read_copy(dt) if not is_up.all() else None
    names = (copy.column_names if copy is not None else _held(dt).names)
    names = names + [c for c in data_cols if c not in names]
    held = {f.name: f.type for f in _held(dt)} if copy is None else {f.name: f.type for f in copy.schema}

    def typed(c, at):
        t = held[c] if c in held else delta_type(rows.schema.field(c).type)
        return rows.column(c).take(pa.array(at)).cast(t) if c in rows.column_names else pa.nulls(len(at), t)
    up = np.flatnonzero(is_up)
    new = pa.table({c: typed(c, up) for c in names})
    if copy is None:
        write_deltalake(dt, new, mode="append", schema_mode="merge", commit_properties=commit)
        return
    match = [c for c in keys + [k + s for k in keys for s in COMPANIONS] if c in rows.column_names]
    gone = np.flatnonzero(~is_up)
    wanted = pa.table({c: typed(c, gone) for c in match})

    def row_keys(t):   # as text: NaN is alike NaN there, as the replay's bytes are
        cols = [t.column(c).to_pylist() if c in t.column_names else [None] * len(t) for c in match]
        return [repr(k) for k in zip(*cols, strict=True)] if cols else [""] * len(t)
    where: dict = {}
    for i, k in enumerate(row_keys(copy)):
        where.setdefault(k, []).append(i)
    drop = np.zeros(len(copy), bool)
    for k in row_keys(wanted):
        at = where.get(k)
        if at:            # (a row the copy does not hold: nothing to remove, as a MERGE)
            drop[at.pop()] = True
    kept = copy.filter(pa.array(~drop))
    for c in names:
        if c not in kept.column_names:
            kept = kept.append_column(c, pa.nulls(len(kept), new.schema.field(c).type))
    write_deltalake(dt, pa.concat_tables([kept.select(names), new.select(names)]), mode="overwrite",
                    schema_mode="merge", commit_properties=commit)


def _fill_moved(dt, net: pa.Table, keys: list[str], ctl) -> pa.Table:
    """Upserts whose key changed in the batch take their unchanged-TOAST values from the
    copy's row of the key they left (``__UNCHANGED_FROM``), read here, before the MERGE
    (rare: an Update that changed the key and left a TOASTed value as it was)."""
    src = net.column(ctl.moved_from)
    if src.null_count == len(src):
        return net
    copy = read_copy(dt)
    by_key = {tuple(r[k] for k in keys): r for r in copy.to_pylist()}
    rows = net.to_pylist()
    for r in rows:
        frm = r[ctl.moved_from]
        if frm is None or not r[ctl.unchanged]:
            continue
        old = by_key.get(tuple(frm[k] for k in keys))
        if old is not None:
            for c in r[ctl.unchanged]:
                r[c] = old.get(c)
            r[ctl.unchanged] = []
    return pa.Table.from_pylist(rows, schema=net.schema)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _lit(name: str) -> str:
    return name.replace("'", "''")


def mirror_version_at(target, name: str, lsn: int) -> int | None:
    """The Delta version of table ``name``'s copy that shows it as of commit LSN ``lsn``:
    the last version whose commit reached no later commit (None: none did)."""
    from deltalake import DeltaTable
    dt = DeltaTable(table_path(target, name))
    best = None
    for h in dt.history():
        at = h.get(LSN_KEY)
        if at is not None and int(at) <= lsn and (best is None or h["version"] > best):
            best = h["version"]
    return best

