"""A table's column lists over time: the columns a Relation added (a column dropped and added
again is a new column), the values of columns added with a DEFAULT (``missing=``), the
columns in force at a cut, and the key a copy of the table is merged on."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

from ..casts import BOOL as BOOL_OID
from ..casts import to_bool as bool_text
from ..typecatalog.columns import convert_column
from ..typecatalog.errors import ConversionError

__all__ = ["Missing", "missing_values", "filled", "added_columns", "columns_in_force", "net_key", "whole_row",
           "alike_rows"]


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
    again since: :func:`replay` took the dropped one's value out)."""
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
    newest identity's. Shared with the Spark path."""
    def ident(cols):
        return [c["name"] for c in cols if c["flags"] & 1] or [c["name"] for c in cols]
    common = set(ident(newest))
    for cols in column_lists:
        common &= set(ident(cols))
    return [n for n in ident(newest) if n in common] or ident(newest)


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
    them unique, and rows are named by key throughout. Shared with the Spark path."""
    lists = [c for c in column_lists if c]
    return bool(lists) and all(whole_row(c) for c in lists)
