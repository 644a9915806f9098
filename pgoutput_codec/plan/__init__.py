"""Parallel change decoding: a control plan built once, change rows decoded anywhere.

A pgoutput archive is a sequence, but only its control messages (≈1%: Begin, Commit,
Relation, Stream Start/Stop/Commit/Abort, prepares, …) carry the state that decides
what a change row means — which transaction it belongs to, whether that transaction
committed, which Relation definition and stream state apply. So:

1. :func:`control_candidates` reads one byte per row and keeps the control rows (cheap,
   parallel, no decoding);
2. :meth:`ControlPlan.build` decodes those rows in arrival order (on one machine: they
   are few) and runs the same transaction state machine as :class:`ChangeDecoder`
   (:class:`~pgoutput_codec.walk.TransactionWalk`): every segment between two control rows gets its
   transaction and stream state, every transaction its commit facts and rank;
3. :meth:`ControlPlan.changes` decodes ANY subset of the archive's rows — any partition,
   any order — given each row's arrival-order key, and returns their committed change
   rows with ``commit_rank``: sorting by (``commit_rank``, ``seq``) gives exactly the
   rows and order of :func:`decode_changes`.

Arrival order is the ``order`` key given (an int64 per row: the archive's ``seq``, or
file index and row index combined), never the ``lsn``: a change's LSN goes backwards
when transactions interleave. Keys must be unique.

Modules: ``tags`` (what a row is by its tag byte), ``walking`` (the walk over the
control rows, in chunks), ``heads`` (the row filters a query engine can apply),
``controlplan`` (:class:`ControlPlan`).
"""

from __future__ import annotations

from .controlplan import ControlPlan, changes_of_pieces, checkpoint_after, decode_changes_parallel, spread_rows
from .heads import GivenHeads, RowDrops
from .tags import CONTROL_TAGS, ENVELOPE_INERT_TAGS, HEAD_BYTES, INERT_TAGS, control_candidates

__all__ = ["control_candidates", "ControlPlan", "checkpoint_after", "decode_changes_parallel", "changes_of_pieces",
           "CONTROL_TAGS",
           "INERT_TAGS", "ENVELOPE_INERT_TAGS", "HEAD_BYTES", "spread_rows", "RowDrops", "GivenHeads"]
