"""What a command writes: kept apart from what it reads, and written whole or not at all.

An output that is the archive, a file of it, or a file inside its directory (which every
later read would take for an archive file) is refused before anything is written. Paths
are compared as the system resolves them: symbolic links and relative paths followed, hard
links by inode. ``decode``'s output file is written into a hidden temporary file and
renamed over its name when whole."""

from __future__ import annotations

import collections
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq

from ..archive import inside_dir, same_file
from ..runs import replace_durably
from .console import CliError

__all__ = ["ParquetOut", "refuse_overwrite", "decode_output"]


def decode_output(out: str, default_name: str) -> str:
    """The file ``decode`` writes for OUT (an existing directory: ``default_name`` in it)."""
    return os.path.join(out, default_name) if os.path.isdir(out) else out


def refuse_overwrite(inputs: dict, outputs: dict) -> None:
    """CliError unless every output (``{label: path}``) is apart from every input
    (``{label: path}``: a file, or a directory whose files are read) and from the other
    outputs."""
    outs = [(k, v) for k, v in outputs.items() if v]
    for label, out in outs:
        for in_label, src in inputs.items():
            if same_file(out, src):
                raise CliError(f"{label} {out} is {in_label} {src}: it would be overwritten; write elsewhere")
            if inside_dir(out, src):
                raise CliError(f"{label} {out} is inside {in_label} {src}: it would be read as part of it; "
                               "write elsewhere")
    for i, (label, out) in enumerate(outs):
        for other_label, other in outs[i + 1:]:
            if same_file(out, other):
                raise CliError(f"{label} {out} and {other_label} {other} are the same file; give two paths")


class ParquetOut:
    """``decode``'s output file, written whole or not at all: into a hidden temporary file
    beside it, renamed over it by :meth:`finish`; left behind by nothing (a failed run
    removes the temporary file). ``out``: a file, or an existing directory to write
    ``default_name`` in. Rows are encoded and written on a thread of their own while the
    caller decodes the next ones (pyarrow releases the GIL), two tables at most waiting."""

    #: tables handed over and not yet written, at most
    PENDING = 2

    def __init__(self, out: str, default_name: str):
        if os.path.isdir(out):
            out = os.path.join(out, default_name)
        out_dir = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(out_dir):
            raise CliError(f"{out}: directory {out_dir} does not exist")
        self.path, self.tmp, self.writer = out, os.path.join(out_dir, f".{os.path.basename(out)}.tmp"), None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgoutput-codec-write")
        self._pending = collections.deque()

    def write(self, rows, schema=None):
        """Append ``rows`` (cast to ``schema`` when given); the first call fixes the file's schema."""
        schema = rows.schema if schema is None else schema
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        rows = rows.cast(schema) if rows.schema != schema else rows
        while len(self._pending) >= self.PENDING:
            self._pending.popleft().result()       # (raises what writing it raised)
        self._pending.append(self._pool.submit(self.writer.write_table, rows))

    def _drain(self):
        while self._pending:
            self._pending.popleft().result()

    def finish(self, empty_schema) -> str:
        """Close the file (of ``empty_schema`` when nothing was written) and put it in place."""
        self._drain()
        if self.writer is None:    # an archive with no rows
            self.writer = pq.ParquetWriter(self.tmp, empty_schema)
        self.writer.close()
        self.writer = None
        # in place before the caller writes its checkpoint: a power loss then keeps
        # either both or the previous run's pair
        replace_durably(self.tmp, self.path)
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for f in self._pending:
            f.cancel()
        self._pool.shutdown(wait=True)
        self._pending.clear()
        if self.writer is not None:
            self.writer.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)
        return False
