"""The replay rules: how a table's change rows replay into its rows, each rule named once.

Every rule is a function of this module, its Arrow (single-process) implementation, and
a function of the same name in :mod:`pgoutput_codec.spark.rules`, its Spark one; the
tests hold the two to the same results, one parity test per rule (``tests/spark``,
tests named ``test_<rule>_…``). :data:`RULES` lists them in the order a change meets
them. :mod:`.replay` (snapshot, history), :mod:`.net` (net changes) and :mod:`.base`
apply them; the Spark layer's ``snapshot``/``history``/``net_changes`` too.

- :func:`identity_key` — the columns a change names its row by: its Relation's replica
  identity (the key columns flagged; none or all flagged: the whole row).
- :func:`row_key` — a row's key: its values of the key columns, a column the image lacks
  as NULL.
- :func:`unknown_key_error` — an Update that names no old key on a table with no key
  column is refused.
- :func:`found_keys` — a table whose identity changed: every row held is named again by
  the key of the change being applied, as a subscriber finds a row.
- :func:`key_move` — an Update whose key changed removes the row under its old key and
  sets it under the new one.
- :func:`carry_toast` — an unchanged TOAST value ('u') is the old image's (FULL identity
  sends it inline), else the row's previous image's, along key moves.
- :func:`count_alike` — a table whose rows are named by the whole row
  (:func:`alike_rows`) is a multiset: each row added or removed counts one.
- :func:`same_copy` — a copied row ('R') replaces the row of its key; one equal to it (a
  copy taken again) makes no new version.
- :func:`base_for` — a base (rows as of an LSN, from outside the archive) acts as copied
  rows committed then.
- :func:`after_truncate` — a Truncate empties the table: only the changes after the last
  one make its rows.
- :func:`end_versions` — a version of a row is valid from its change's commit to the
  commit of the next change of its key or the next Truncate (history).
- :func:`gone` — the image of a row a change removed: the one held, with the key values
  its old image sends (a row never seen: the key alone).
- :func:`as_added` — a column added to the table is not in the rows sent before it; one
  dropped and added again by its name is a new column.
- :func:`columns_in_force` — the snapshot has the columns of the Relation in force at its
  cut.
- :func:`missing_values` — the value an ``ADD COLUMN … DEFAULT`` gave rows older than the
  column, named by ``missing=``.
- :func:`net_key` — net changes name rows by the columns every identity over the changes
  held.
- :func:`warn_incomplete` — a table rebuilt from changes that hold no copy of it, no
  Truncate and no base warns: its rows from before capture are missing.
"""

from __future__ import annotations

import os
import warnings
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..typecatalog.casts import BOOL as BOOL_OID
from ..typecatalog.casts import to_bool as bool_text
from ..arrays import kind_bytes, one_array
from ..idents import parse_name, qualified_name
from ..typecatalog.columns import convert_column
from ..typecatalog.errors import ConversionError

__all__ = ["RULES", "identity_key", "row_key", "unsaid", "NULL", "unknown_key_error", "found_keys", "key_move",
           "carry_toast", "count_alike", "alike_rows", "whole_row", "same_copy", "base_for", "pick_base", "KNOWN",
           "after_truncate", "end_versions", "gone", "as_added", "added_columns", "columns_in_force", "Missing",
           "missing_values", "filled", "net_key", "warn_incomplete", "start_unknown", "incomplete_text",
           "IncompleteTableWarning"]

#: the replay rules, each a function here and one of the same name in ``spark.rules``
RULES = ("identity_key", "row_key", "unknown_key_error", "found_keys", "key_move", "carry_toast", "count_alike",
         "same_copy", "base_for", "after_truncate", "end_versions", "gone", "as_added", "columns_in_force",
         "missing_values", "net_key", "warn_incomplete")


# --------------------------------------------------------------------------- keys

NULL = ("n", None)


def identity_key(cols: list) -> tuple:
    """The columns a change names its row by, in its Relation's order: the replica
    identity's key columns (flagged), or, where none is flagged (FULL's old row names
    every column; NOTHING, or DEFAULT without a primary key, names none), every column."""
    return tuple(c["name"] for c in cols if c["flags"] & 1) or tuple(c["name"] for c in cols)


def row_key(row: dict, keycols) -> tuple:
    """A row's key: its values of ``keycols``, a column the image lacks (added to the
    table after it was written) as NULL, which is what the server sends for it."""
    return tuple(row.get(k, NULL)[:2] for k in keycols)


def unsaid(key: tuple) -> bool:
    """Whether a key holds a value no change said (unchanged TOAST, 'u'): the row's
    value there is unknown, so the key cannot name it exactly."""
    return any(v[0] == "u" for v in key)


def unknown_key_error(name: str, commit_lsn) -> str:
    """The refusal of an Update that names no old key on a table with no key column: its
    row cannot be found (PostgreSQL never sends one; an openGauss archive may, when its
    records never name the table's key)."""
    return (f"{name}: an Update committed at {commit_lsn} carries no old key and no column of the table is a "
            "key, so the row it changed cannot be found; openGauss records name a key only in old tuples "
            f"(key changes, Deletes): declare it, decode_changes(..., keys={{'{name}': [...]}})")


def found_keys(held, keycols: tuple) -> None:
    """Rows keyed by the replica identity of the change being applied: when its key
    columns (``keycols``) are not the ones the rows ``held`` (a :class:`.replay.HeldRows`)
    are keyed by (``ALTER TABLE … REPLICA IDENTITY`` while the archive runs), every key
    held is made again from the images, as a subscriber looks rows up by the key each
    change sends. Rows that a dropped column told apart are alike after it."""
    if held.keycols is not None and keycols != held.keycols:
        live = {k: row_key(row, keycols) for k, row in held.store.items()}
        if held.alike:   # rows that a dropped column told apart are alike now
            count: dict = {}
            for k in held.store:
                count[live[k]] = count.get(live[k], 0) + held.count.get(k, 1)
            held.count = {k: n for k, n in count.items() if n > 1}
        held.store = {live[k]: row for k, row in held.store.items()}
        held.vague = {k for k in held.store if unsaid(k)}
        opened: dict = {}
        for k, v in held.open_ver.items():
            opened.setdefault(live[k], []).extend(v)
        held.open_ver = {k: sorted(v) for k, v in opened.items()}
        if held.net is not None:
            left = {k: row_key(row, keycols) for k, row in held.net["deleted"].items()}
            new_live = set(live.values())
            held.net["deleted"] = {left[k]: row for k, row in held.net["deleted"].items()
                                   if left[k] not in new_live}   # a live row of that key wins
            held.net["stamp"] = {live.get(k) or left.get(k): s for k, s in held.net["stamp"].items()
                                 if k in live or k in left}
            held.net["src"] = {live[k]: s for k, s in held.net["src"].items() if k in live}
    if keycols != held.keycols and held.net is not None:
        held.hides = not set(held.net["keycols"]) <= set(keycols)
    held.keycols = keycols


def key_move(old_key: tuple, new_key: tuple) -> bool:
    """Whether an Update moved its row to another key (its old image names another key
    than its new one): the old key's row is removed (a ``delete`` in net changes, its
    versions ended) and the new key's set. Where rows may repeat (:func:`count_alike`)
    every Update removes one row and adds one."""
    return old_key != new_key


# --------------------------------------------------------------------------- values

def carry_toast(after: dict, before: dict | None, old: dict | None) -> dict:
    """An Update's new image with its unchanged TOAST values ('u': not in the message)
    filled: from its old image (``before``: under REPLICA IDENTITY FULL PostgreSQL sends
    the old row with its TOAST values inline), else from the row's earlier image
    (``old``, held under the old key: the value follows the row through key changes);
    'u' where neither has it (a row older than the changes)."""
    new = dict(after)
    for k, v in after.items():
        if v[0] == "u":
            b = (before or {}).get(k)
            new[k] = b if b is not None and b[0] in ("t", "b") else (old or {}).get(k, v)
    return new


def gone(held: dict | None, before: dict, keycols) -> dict:
    """The image of a row a change removed: the one held (None: a row older than the
    changes, never seen), with the values of the key columns its old image sends over
    it (the server's, at that time; under FULL every column, TOASTed values inline; a
    key-only image's other columns are nulls it does not send)."""
    return {**(held or {}), **{k: v for k, v in before.items() if k in keycols and v[0] != "u"}}


def same_copy(op: str, held: dict | None, image: dict, alike: bool) -> bool:
    """Whether a copied row ('R', from a COPY transaction) is the row its key holds
    (``held``), a copy taken again: it makes no new version. A copied row is otherwise an
    Insert that replaces the row of its key; where rows may repeat (``alike``) it adds a
    row, as an Insert does."""
    return op == "R" and not alike and held == image


def end_versions(versions: list, open_ver: dict, key: tuple, lsn, ts, one: bool = False) -> None:
    """End the versions of ``key``'s rows (history, SCD type 2: ``open_ver``, key → the
    indexes in ``versions`` of its current versions, oldest first) at commit (``lsn``,
    ``ts``): a row's version is valid until the next change of its key or a Truncate.
    ``one``: of one of several rows alike (:func:`count_alike`), the oldest."""
    if key in open_ver:
        opened = open_ver[key]
        for v in opened[:1] if one else opened:
            versions[v][5:7] = [lsn, ts]
        if one and len(opened) > 1:
            del opened[0]
        else:
            del open_ver[key]


def after_truncate(rows: pa.Table, op: np.ndarray):
    """(the change rows after the last Truncate, their ops, the Truncate's commit
    (LSN, time) or None): a Truncate empties the table, so only the changes after it
    make its rows (the replay clears the rows it holds at each). ``op``: the rows' ops
    as bytes (:func:`~pgoutput_codec.arrays.kind_bytes`)."""
    trunc = np.flatnonzero(op == ord("T"))
    if not len(trunc):
        return rows, op, None
    last = int(trunc[-1])
    truncated = (rows.column("commit_lsn")[last].as_py(), rows.column("commit_ts")[last].as_py())
    return rows.slice(last + 1), op[last + 1:], truncated


# --------------------------------------------------------------------------- rows alike

def whole_row(cols: list) -> bool:
    """Whether a Relation's replica identity is the whole row: no column flagged (REPLICA
    IDENTITY NOTHING, or DEFAULT on a table with no primary key) or every one (FULL)."""
    flags = [bool(c["flags"] & 1) for c in cols]
    return all(flags) or not any(flags)


def alike_rows(column_lists: list) -> bool:
    """Whether a table's rows may repeat, alike in every column, as far as its changes
    say: every Relation it was sent under (``column_lists``) names rows by the whole row
    (:func:`whole_row`). Its rows are then a multiset: an Insert adds a row, an Update or
    Delete changes one of the rows its old image matches, as the server's own apply
    does. One identity that names a row by fewer columns (a primary key, an index) holds
    them unique, and rows are named by key throughout."""
    lists = [c for c in column_lists if c]
    return bool(lists) and all(whole_row(c) for c in lists)


def count_alike(counted: list, keycols: list, ikey) -> list:
    """The net changes of a table whose rows may repeat (:func:`alike_rows`; ``counted``:
    each row added or removed, in order, :class:`~.replay.HeldRows`): per row, as many
    ``upsert`` entries (stamp, op, image, key moved from, unchanged columns) as it was
    added more times than removed, or ``delete`` entries as it was removed more times
    than added, at the commit of its last change. Rows alike are one to a MERGE, so each
    entry is one row: a copy adds or removes one of them."""
    net: dict = {}
    for img, n, stamp in counted:
        k = ikey(img)
        had = net.get(k)
        total = n + (had[0] if had else 0)
        net[k] = (total, img if n > 0 or had is None else had[1], stamp)
    out = []
    for total, img, stamp in net.values():
        if total > 0:
            out += [(stamp, "upsert", img, None, [])] * total
        elif total < 0:
            out += [(stamp, "delete", {c: img.get(c, NULL) for c in keycols}, None, [])] * -total
    return out


# --------------------------------------------------------------------------- bases

class _Known(dict):
    """An empty base mapping that also says the caller knows the table's start."""


#: ``base=KNOWN``: no base, and no warning of an unknown start (the caller applies the
#: result over rows it holds: a base's batch, a mirror's later run)
KNOWN = _Known()


def _lsn(value, name: str) -> int:
    if isinstance(value, str):
        hi, sep, lo = value.partition("/")
        if not sep:
            raise ValueError(f"base_lsn of {name}: {value!r} is not an LSN (X/Y)")
        return int(hi, 16) << 32 | int(lo, 16)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ValueError(f"base_lsn of {name} must be an LSN (an int or X/Y text), not {value!r}")


def _named(mapping: dict, name: str):
    """The entry of ``mapping`` for table ``name``, however either is written or quoted."""
    want = {qualified_name(s, t) for s, t in parse_name(name)}
    for k, v in mapping.items():
        if {qualified_name(s, t) for s, t in parse_name(k)} & want:
            return v
    return None


def pick_base(base, base_lsn, name: str):
    """(table ``name``'s entry of ``base`` as given, its LSN as an int), or (None, None).
    The Spark path's bases are DataFrames: it reads them itself."""
    if isinstance(base, dict):
        base = _named(base, name)
    if base is None:
        return None, None
    if isinstance(base_lsn, dict):
        base_lsn = _named(base_lsn, name)
    if base_lsn is None:
        raise ValueError(f"a base of {name} needs base_lsn: the LSN its rows are as of")
    return base, _lsn(base_lsn, name)


def base_for(base, base_lsn, name: str):
    """(the base rows of table ``name`` as an Arrow table, its LSN), or (None, None): a
    base is the table's rows as of an LSN from outside the archive (an export, a copy made
    before capture, an earlier snapshot), ``base`` an Arrow table, a Parquet path or a
    mapping of them by table name. Its rows act as copied rows ('R') committed at its
    LSN: the changes committed at or below it are in them and are skipped, the later ones
    applied on top (an unchanged TOAST value taken from the base's row: :mod:`.base`)."""
    base, lsn = pick_base(base, base_lsn, name)
    if base is None:
        return None, None
    if isinstance(base, (str, os.PathLike)):
        table = pq.read_table(base)
    elif isinstance(base, pa.RecordBatch):
        table = pa.Table.from_batches([base])
    elif isinstance(base, pa.Table):
        table = base
    else:
        raise TypeError(f"base of {name}: an Arrow table or a Parquet file path, not {type(base).__name__}")
    return table, lsn



# --------------------------------------------------------------------------- columns

class Missing(NamedTuple):
    """:func:`missing_values`' result: ``raw`` {column: (kind, data)}, what the replay
    fills in; ``typed`` {column: the value read, a one-value Arrow array of the column's
    catalog type}, what Spark writes as a literal."""

    raw: dict
    typed: dict


def missing_values(missing: dict | None, cols: list[dict], registry=None) -> Missing:
    """``missing`` ({column: value}) as the values the replay fills in: each value as text (``str``, or a Python value written as its ``str``; a ``bool``
    column's as ``boolin`` reads it: ``True``, ``'true'``, ``'yes'``), read by the
    column's newest type (what an ``ADD COLUMN … DEFAULT 7`` gave the rows older than
    the column, ``attmissingval``). Raises ValueError for a column the table never had
    and for a value its type does not read, so no column is left raw by a typo."""
    out = Missing({}, {})
    if not missing:
        return out
    by_name = {c["name"]: c for c in cols}
    unknown = sorted(set(missing) - set(by_name))
    if unknown:
        raise ValueError(f"missing= names columns the table does not have: {', '.join(map(repr, unknown))}")
    for k, v in missing.items():
        if v is None:
            raise ValueError(f"missing={{{k!r}: None}}: a column added without a DEFAULT is null already")
        text = ("t" if v else "f") if isinstance(v, bool) else v if isinstance(v, str) else str(v)
        if by_name[k]["type_oid"] == BOOL_OID and not isinstance(v, bool):
            try:   # as boolin reads it ('true', 'yes', 'on'); pgoutput sends boolout's t/f
                text = "t" if bool_text(pa.array([text]))[0].as_py() else "f"
            except pa.ArrowInvalid as e:
                raise ValueError(f"missing={{{k!r}: {v!r}}}: {e}") from None
        try:
            got = convert_column(pa.array(["t"]), pa.array([text.encode()]), by_name[k]["type_oid"],
                                 by_name[k]["type_modifier"], registry)
        except ConversionError as e:
            raise ValueError(f"missing={{{k!r}: {v!r}}}: not a value of the column's type ({e})") from None
        if got.special is not None and got.special.null_count == 0:
            raise ValueError(f"missing={{{k!r}: {v!r}}}: a value the column's Arrow type does not hold "
                             f"({got.special[0].as_py()})")
        out.raw[k], out.typed[k] = ("t", text.encode()), got.values
    return out


def filled(images, fill: dict) -> list:
    """Row images with the ``fill`` values (:func:`missing_values`' ``raw``) in the
    columns they lack: a column added after the image was sent (or dropped and added
    again since: :func:`as_added` took the dropped one's value out)."""
    if not fill:
        return list(images)
    return [img if fill.keys() <= img.keys() else {**fill, **img} for img in images]


def added_columns(before: list, after: list) -> list:
    """The names of Relation column list ``after`` that are columns added since list
    ``before`` (the same table's, the one in force before it). PostgreSQL keeps a
    table's columns in the order they were added and puts a new one last, and pgoutput
    sends no DDL, so ``after`` is the columns kept, in ``before``'s order, then those
    added: every name past the longest start of ``after`` that runs in ``before``'s
    order. A name ``before`` had among those was dropped and added again — its values
    from before are the dropped column's, not this one's (the server's rows not changed
    since hold null, or the ``DEFAULT``). A publication whose column list changed in the
    archive is read the same way (its Relation says nothing else)."""
    rest = iter(before)
    for i, name in enumerate(after):
        if name not in rest:      # consumes ``rest`` up to the name: ``after``'s start in order
            return list(after[i:])
    return []


def as_added(store: dict, before: list | None, after: list, counted: list | None = None) -> None:
    """The rows held (``store``, key → image) as a Relation listing columns ``after`` finds
    them, after one listing ``before`` (None: the first): a column added since
    (:func:`added_columns`) is not in them; where one of its name was (dropped, then added
    again), that value is the dropped column's and is taken out (the server's rows not
    changed since hold null, or the ``DEFAULT``: :func:`missing_values`). So are the rows
    ``counted`` (net changes of rows alike, :func:`count_alike`: (image, ±1, stamp) in
    order), which name those rows. History keeps its versions' images as sent (new dicts
    here)."""
    new = set(added_columns(before, after)) if before is not None and after != before else ()
    if new:
        for k, img in store.items():
            if not new.isdisjoint(img):
                store[k] = {c: v for c, v in img.items() if c not in new}
        for j, (img, n, stamp) in enumerate(counted or ()):
            if not new.isdisjoint(img):
                counted[j] = ({c: v for c, v in img.items() if c not in new}, n, stamp)


def columns_in_force(rows: pa.Table) -> set | None:
    """The column names of the Relation in force after ``rows`` (one table's changes, in
    commit order): its last change's. A column dropped (``ALTER TABLE … DROP COLUMN``)
    is not in the server's table, so not in the snapshot; ``table_changes`` and
    ``history`` keep it, with the values sent while it was there. None: keep every
    column (openGauss rows, which carry no Relation, or no change)."""
    if not len(rows) or rows.column("relation_id").null_count == len(rows):
        return None
    lists = rows.column("columns")
    for i in range(len(rows) - 1, -1, -1):
        cols = lists[i].as_py()
        if cols is not None:
            return {c["name"] for c in cols}
    return None


def net_key(column_lists: list, newest: list) -> list:
    """The key net changes name rows by: the columns every replica identity in force over
    the changes holds (``column_lists``: their Relations' columns, a Truncate's too;
    FULL identity or no key: every column), in the order of ``newest``. The identity of a table that never
    changed it; across ``ALTER TABLE … REPLICA IDENTITY`` the columns each change's key
    named (a change under the narrower identity says nothing of the others: an Update of
    ``v`` under DEFAULT does not say the row's FULL key changed). None in common: the
    newest identity's."""
    def ident(cols):
        return list(identity_key(cols))
    common = set(ident(newest))
    for cols in column_lists:
        common &= set(ident(cols))
    return [n for n in ident(newest) if n in common] or ident(newest)


# --------------------------------------------------------------------------- completeness

class IncompleteTableWarning(UserWarning):
    """A table rebuilt (snapshot, history, net changes, mirror) from changes that hold no
    copy of it and no base: the rows that existed before capture began are missing.
    ``table``: the table's name."""

    def __init__(self, table: str):
        super().__init__(incomplete_text(table))
        self.table = table


def incomplete_text(table: str) -> str:
    """The warning's words, shared with ``inspect``."""
    return (f"{table}: rows that existed before capture began are not in the archive; capture with --snapshot "
            "or pass base=")


def start_unknown(rows: pa.Table) -> bool:
    """Whether a table's change rows say nothing of the rows it held before them: no
    copied row ('R') and no Truncate (after which it held none)."""
    if not len(rows):
        return False
    op = kind_bytes(one_array(rows.column("op")))
    return not ((op == ord("R")) | (op == ord("T"))).any()


def warn_incomplete(rows: pa.Table, name: str, base=None, stacklevel: int = 3) -> None:
    """Warn (:class:`IncompleteTableWarning`) when ``rows``, a table's change rows, leave
    its start unknown and no ``base`` stands for it."""
    if base is None and start_unknown(rows):
        warnings.warn(IncompleteTableWarning(name), stacklevel=stacklevel + 1)
