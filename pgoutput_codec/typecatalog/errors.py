"""What a value that is no plain Arrow value becomes: :class:`ConversionError` (it does
not convert), :class:`Special` (``infinity``, ``-infinity``, ``NaN``: Arrow holds a null
plus the marker) with the names of the compiled converters' special codes and the
:data:`REFUSED` marker, and :class:`Physical` (a date or timestamp Python's datetime
cannot hold), :class:`Noted` (a value kept with a marker beside it: a geometry's SRID
its column's type contradicts), :class:`Sited` (a geometry with the SRID its column's
``__srid`` companion carries)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import PgoutputCodecError

__all__ = ["ConversionError", "Special", "Physical", "Noted", "Sited", "SPECIAL_NAMES", "REFUSED"]


class ConversionError(PgoutputCodecError, ValueError):
    """A column value could not be converted. ``index`` is the value's position in the
    column, ``type_oid``/``type_name`` the column type, ``value`` (a bytes prefix) and
    ``kind`` ('t'/'b') what was being converted."""

    def __init__(self, message, index=None, type_oid=None, type_name=None, kind=None, value=None):
        super().__init__(message)
        self.index = index
        self.type_oid = type_oid
        self.type_name = type_name
        self.kind = kind
        self.value = value

    def __reduce__(self):
        return (type(self), (self.args[0], self.index, self.type_oid, self.type_name, self.kind, self.value))


class Special(str):
    """What :func:`convert_value` returns for a value Arrow holds as null plus a marker:
    ``Special('infinity')``, ``Special('-infinity')``, ``Special('NaN')``."""

    def __repr__(self):
        return f"Special({str(self)!r})"


class Physical(int):
    """The Arrow storage value (days or µs since 1970-01-01) of a date/timestamp that
    Python's datetime cannot hold (BC, or after 9999)."""

    def __repr__(self):
        return f"Physical({int(self)})"


class Noted(NamedTuple):
    """What a parser gives for a value Arrow holds with a marker the column's specials
    carry beside it (``srid=3857``: a geometry whose SRID is not the one its column's
    typmod fixes)."""

    value: Any
    note: str


class Sited(NamedTuple):
    """What a geometry parser gives in a column whose typmod fixes no SRID: the value and
    its SRID (0: none), which the column's ``<column>__srid`` companion carries."""

    value: Any
    srid: int


#: names of the special codes of ``_convert`` (code 0 = not special)
SPECIAL_NAMES = (None, "infinity", "-infinity", "NaN")

#: the start of the special of a value a converter refused (out of range, malformed):
#: the reason follows
REFUSED = "refused: "
