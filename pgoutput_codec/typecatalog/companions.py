"""The companion columns a typed column may have beside it in a table: ``<column>__special``
(string: what a null or a value stands for, see docs/types.md) and ``<column>__srid``
(int32: a geometry's SRID, where the column's typmod fixes none). Each is decided by the
column's type, and follows its column wherever the column goes (renamed, dropped, cut)."""

from __future__ import annotations

__all__ = ["SPECIAL", "SRID", "COMPANIONS", "column_of", "owner"]

SPECIAL = "__special"
SRID = "__srid"
COMPANIONS = (SPECIAL, SRID)


def column_of(name: str) -> str:
    """The column a companion's name names (``g__srid`` -> ``g``); another name itself."""
    for suffix in COMPANIONS:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def owner(name: str, names) -> str | None:
    """The column of ``names`` whose companion ``name`` is, or None (not a companion, or
    no such column: a column of the user's named ``x__srid``)."""
    col = column_of(name)
    return col if col != name and col in names else None
