"""Changes: pgoutput messages to committed change rows, the transaction walk done once.

A pgoutput archive is a sequence, but only its control messages (≈1%: Begin, Commit,
Relation, Stream Start/Stop/Commit/Abort, prepares, …) carry the state that decides
what a change row means — which transaction it belongs to, whether that transaction
committed, which Relation definition and stream state apply. One state machine,
:class:`~pgoutput_codec.changes.walk.TransactionWalk`, walks them; two drivers run it:

- :class:`ChangeDecoder` (``decoder``): messages fed in arrival order, in chunks; the
  rows of a transaction held until it commits;
- the control plan (``plan``), for decoding anywhere:

  1. :func:`control_candidates` reads one byte per row and keeps the control rows
     (cheap, parallel, no decoding);
  2. :meth:`ControlPlan.build` decodes those rows in arrival order and runs the walk
     over them (``chunks``: in chunks, a run of plain transactions with array
     operations): every segment between two control rows gets its transaction and
     stream state, every transaction its commit facts and rank;
  3. :meth:`ControlPlan.changes` decodes ANY subset of the archive's rows — any
     partition, any order — given each row's arrival-order key, and returns their
     committed change rows with ``commit_rank``: sorting by (``commit_rank``, ``seq``)
     gives exactly the rows and order of :func:`decode_changes` (``parallel``: the
     plan's pieces on threads).

Arrival order is the ``order`` key given (an int64 per row: the archive's ``seq``, or
file index and row index combined), never the ``lsn``: a change's LSN goes backwards
when transactions interleave. Keys must be unique.

Modules, top to bottom: ``parallel`` (:func:`decode_changes`), ``plan``
(:class:`ControlPlan`), ``filters`` (the row filters a query engine can apply),
``chunks`` (the plan's walk in chunks), ``decoder`` (:class:`ChangeDecoder`),
``boundaries`` (where each transaction of a run of messages begins and ends, for the
command),
``walk`` (:class:`~pgoutput_codec.changes.walk.TransactionWalk`), ``tags`` (what a row
is by its tag byte), ``relations`` (which relation bears a table's name), ``rows``
(the columns of change rows), ``checkpoint`` (where a run resumes).
"""


from __future__ import annotations

# (the decoder stays importable from here, as it was when changes was its module; the
# API reference documents it at the package root)
from .decoder import ChangeDecoder as ChangeDecoder, LightChangeDecoder as LightChangeDecoder
from .filters import GivenHeads, RowDrops
from .plan import ControlPlan, changes_of_pieces, checkpoint_after, decode_changes_parallel, spread_rows
from .tags import CONTROL_TAGS, ENVELOPE_INERT_TAGS, HEAD_BYTES, INERT_TAGS, control_candidates

__all__ = ["control_candidates", "ControlPlan", "checkpoint_after", "decode_changes_parallel", "changes_of_pieces",
           "CONTROL_TAGS", "INERT_TAGS", "ENVELOPE_INERT_TAGS", "HEAD_BYTES", "spread_rows", "RowDrops", "GivenHeads"]
