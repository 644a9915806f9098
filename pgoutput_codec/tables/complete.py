"""Whether the change rows hold a table whole: its rows from before capture began come as
copied rows ('R', a COPY transaction), a base, or not at all. A table rebuilt from
changes alone misses every row that existed before capture and was never changed since:
it is warned about, never silently given short."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["IncompleteTableWarning", "start_unknown", "warn_incomplete", "incomplete_text"]


class IncompleteTableWarning(UserWarning):
    """A table rebuilt (snapshot, history, net changes, mirror) from changes that hold no
    copy of it and no base: the rows that existed before capture began are missing.
    ``table``: the table's name."""

    def __init__(self, table: str):
        super().__init__(incomplete_text(table))
        self.table = table


def incomplete_text(table: str) -> str:
    """The warning's words, shared with the Spark path and ``inspect``."""
    return (f"{table}: rows that existed before capture began are not in the archive; capture with --snapshot "
            "or pass base=")


def start_unknown(rows: pa.Table) -> bool:
    """Whether a table's change rows say nothing of the rows it held before them: no
    copied row ('R') and no Truncate (after which it held none)."""
    if not len(rows):
        return False
    return not pc.any(pc.is_in(rows.column("op"), value_set=pa.array(["R", "T"]))).as_py()


def warn_incomplete(rows: pa.Table, name: str, base=None, stacklevel: int = 3) -> None:
    """Warn (:class:`IncompleteTableWarning`) when ``rows``, a table's change rows, leave
    its start unknown and no ``base`` stands for it."""
    if base is None and start_unknown(rows):
        warnings.warn(IncompleteTableWarning(name), stacklevel=stacklevel + 1)
