"""The error of a value that does not convert."""

from __future__ import annotations

from ..errors import PgoutputCodecError

__all__ = ["ConversionError"]


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
