"""Incremental runs over an archive that grows: each run reads the archive from where the
last one's checkpoint says (files wholly before it are not opened, by their Parquet
statistics on ``seq``) and leaves the next checkpoint, written durably after the run's
output, so a crash leaves the previous one. ``decode --changes --checkpoint`` and
``mirror`` run so."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from .archive import ArchiveError, iter_archive, last_seq, read_archive_parts
from .changes.checkpoint import Checkpoint
from .errors import first_line
from .changes import checkpoint_after, control_candidates

__all__ = ["IncrementalRun", "load_checkpoint", "save_checkpoint", "fsync_path", "replace_durably"]


def fsync_path(path):
    """fsync a file or a directory (a directory: the names in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp, path):
    """Put the written file ``tmp`` at ``path``: its data on disk first, then the rename,
    then the directory, so a crash leaves the old file or the whole new one."""
    fsync_path(tmp)
    os.replace(tmp, path)
    fsync_path(os.path.dirname(os.path.abspath(path)))


def load_checkpoint(path) -> Checkpoint | None:
    """The checkpoint in file ``path``; None when there is none yet. ValueError when the
    file is not one."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return Checkpoint.from_json(f.read())
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(f"{path}: not a checkpoint ({first_line(e)})") from None


def save_checkpoint(path, cp: Checkpoint) -> None:
    """Atomically, after the run's output: a crash leaves the previous checkpoint."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(cp.to_json())
    replace_durably(tmp, path)


class IncrementalRun:
    """One run over the archive file or directory ``archive`` from checkpoint ``resume``
    (None: from its start). :meth:`tables` gives its rows from the checkpoint's ``seq``
    on (the payload, column ``payload`` of the files, as ``data``); :meth:`next_checkpoint`,
    after them, where the next run starts. ``parts``: the archive's files, where the
    caller has listed them already (:func:`~pgoutput_codec.archive.read_archive_parts`)."""

    def __init__(self, archive, resume: Checkpoint | None = None, payload: str = "data", *, parts=None):
        self.parts = read_archive_parts(os.fspath(archive)) if parts is None else parts
        self.resume, self.payload = resume, payload
        self.skipped: list = []       # the files not read: wholly before the checkpoint
        self._ctrl: list = []
        if any(p.kind != "parquet" for p in self.parts):
            raise ArchiveError("an incremental run needs Parquet archive files with a seq column (capture writes them)")

    def _skip(self, part) -> bool:
        last = last_seq(part) if self.resume is not None else None
        if last is not None and last < self.resume.from_key:
            self.skipped.append(part)
            return True
        return False

    def tables(self, on_recaptured=None, batch_rows=None):
        """(part, rows) of the archive from the checkpoint on, a file at a time (or in
        tables of at most ``batch_rows`` rows: ``iter_archive``)."""
        for part, t in iter_archive(self.parts, self.payload, skip=self._skip, on_recaptured=on_recaptured,
                                    batch_rows=batch_rows):
            if "seq" not in t.column_names:
                raise ArchiveError(f"{part.path}: an incremental run needs a seq column (arrival order)")
            if self.resume is not None:
                t = t.filter(pc.greater_equal(t.column("seq"), self.resume.from_key))
            self._ctrl.append(t.filter(pa.array(control_candidates(t.column("data")))).select(["data", "seq"]))
            yield part, t

    def feeds(self, rows: int):
        """:meth:`tables`' tables, those of consecutive files of one schema joined into
        tables of at most ``rows`` rows (a file of more alone): a decoder fed an archive of
        many small files (capture writes one every ``rows_per_file`` rows, or less at each
        poll) pays its cost per feed once per join, not once per file."""
        held, n = [], 0
        for _, t in self.tables():
            if held and (n + len(t) > rows or not t.schema.equals(held[0].schema)):
                yield held[0] if len(held) == 1 else pa.concat_tables(held)
                held, n = [], 0
            held.append(t)
            n += len(t)
        if held:
            yield held[0] if len(held) == 1 else pa.concat_tables(held)

    def next_checkpoint(self, **options) -> Checkpoint:
        """Where the next run starts: a plan over the control rows of this run's rows
        (``options``: the change decoder's, as this run's)."""
        c = pa.concat_tables(self._ctrl) if self._ctrl else pa.table(
            {"data": pa.array([], pa.binary()), "seq": pa.array([], pa.int64())})
        return checkpoint_after(c.column("data"), c.column("seq"), resume=self.resume, **options)
