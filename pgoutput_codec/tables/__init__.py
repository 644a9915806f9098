"""Tables from change rows: typed changes of one table, its snapshot, its history.

All of them take the output of ``decode_changes`` (``schema.CHANGE_SCHEMA``) in the
order it gives (commit order; arrival order inside a transaction) and never re-sort by a
change's own LSN. The outputs of several incremental runs read back together may come
in another order of their runs (a lake directory): :func:`.rows.in_commit_order` puts whole
runs back in commit order first.

A table is the relation that bears its name at the end of the changes (or as of
``as_of_lsn``), not every relation that ever bore it: see :func:`.rows.resolve`.

- :func:`table_changes` — one row per change of the table, ``before``/``after`` as
  structs of typed columns (types from ``typecatalog``), plus the commit facts and
  ``unchanged`` (columns sent as 'u': unchanged TOAST, value not in the message). A
  'u' value the message's old image holds is taken from there: under REPLICA IDENTITY
  FULL PostgreSQL sends the old row with its TOAST values inline, so those changes
  carry every value.
- :func:`snapshot` — the table's rows as of a commit LSN (default: everything), rebuilt
  by replica-identity key (FULL identity: the whole old row), deletes removing,
  truncates clearing, unchanged TOAST values taken from the message's old image or
  carried from the earlier image. A table whose rows are named by the whole row (no
  key) is a multiset: rows alike are as many as on the server
  (:func:`.rules.alike_rows`).
- :func:`history` — every version of every row with the commit range it was valid in
  (SCD type 2: ``__START_AT``/``__END_AT`` commit times, ``__START_LSN``/``__END_LSN``).
- :func:`net_changes` — one row per key changed: its last image or its deletion (and
  a truncate), the batch an incremental run applies to a copy of the table by MERGE;
  for a table with no key, one row per row added or removed.

Values that Arrow cannot hold (``infinity`` dates, ``NaN`` numerics…) are null with a
``<column>__special`` string column saying what they were (see docs/types.md).

Modules, in the order they build on each other: ``rows`` (which change rows are the
table's), ``typed`` (typed values), ``rules`` (the replay rules, each named once, with
its Spark twin of the same name in ``spark.rules``), ``base`` (a base's rows under the
changes), ``replay`` (snapshot, history), ``net`` (net changes; a snapshot over a base).
"""

from __future__ import annotations

from .net import net_changes, snapshot
from .replay import history, history_names
from .rules import (IncompleteTableWarning, Missing, added_columns, columns_in_force, missing_values, net_key,
                    unknown_key_error)
from .rows import table_columns
from .typed import decode_table_changes, table_changes, typed_changes

__all__ = ["table_changes", "decode_table_changes", "snapshot", "history", "net_changes", "table_columns",
           "typed_changes", "added_columns", "columns_in_force", "missing_values", "Missing", "net_key",
           "unknown_key_error", "history_names", "IncompleteTableWarning"]
